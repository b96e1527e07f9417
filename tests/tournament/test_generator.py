import random
from collections import Counter

import pytest

from elegantpod.tournament.generator import (
    SEARCH_SPACES,
    Bound,
    GeneratorConfig,
    choose_algo,
    choose_parent,
    mutate,
    should_exploit,
)
from elegantpod.tournament.leaderboard import Entry


def e(pod, score, algo="ppo"):
    return Entry(
        pod_id=pod,
        algo=algo,
        hparams={},
        score_mean=score,
        score_std=0.0,
        env_steps=0,
        wall_seconds=0.0,
        checkpoint="",
    )


BOARD = [e("a", 10), e("b", 8), e("c", 5), e("d", 1)]


def test_truncation_selection_draws_only_from_the_top_fraction():
    rng = random.Random(0)
    picks = Counter(
        choose_parent(BOARD, rng, GeneratorConfig(truncation=0.5)).pod_id for _ in range(2000)
    )
    assert set(picks) == {"a", "b"}
    assert abs(picks["a"] - picks["b"]) < 200


def test_softmax_selection_prefers_better_scores_and_is_seeded():
    cfg = GeneratorConfig(selection="softmax", temperature=0.5)
    picks = Counter(choose_parent(BOARD, random.Random(1), cfg).pod_id for _ in range(1))
    again = Counter(choose_parent(BOARD, random.Random(1), cfg).pod_id for _ in range(1))
    assert picks == again
    rng = random.Random(2)
    many = Counter(choose_parent(BOARD, rng, cfg).pod_id for _ in range(4000))
    assert many["a"] > many["b"] > many["c"] > many["d"] > 0
    # exact softmax weights over z-scores: mean 6, std sqrt(11.5)
    import math

    z = [(s - 6) / math.sqrt(11.5) for s in (10, 8, 5, 1)]
    w = [math.exp((zi - z[0]) / 0.5) for zi in z]
    assert many["a"] / 4000 == pytest.approx(w[0] / sum(w), abs=0.03)


def test_choose_parent_empty():
    with pytest.raises(ValueError, match="empty leaderboard"):
        choose_parent([], random.Random(0), GeneratorConfig())


def test_mutate_perturbs_within_bounds_and_records_lineage():
    space = {
        "lr": Bound(1e-4, 1e-2, log=True),
        "epochs": Bound(2, 10, integer=True),
        "gamma": Bound(0.9, 0.999),
    }
    hp = {"lr": 1e-3, "epochs": 4, "gamma": 0.99, "hidden": (64, 64)}
    cfg = GeneratorConfig(resample_prob=0.0)
    new, mutation = mutate(hp, space, random.Random(3), cfg)
    assert new["hidden"] == (64, 64)
    assert new["lr"] in (pytest.approx(8e-4), pytest.approx(1.2e-3))
    assert new["epochs"] in (3, 5) and isinstance(new["epochs"], int)
    assert new["gamma"] in (pytest.approx(0.9), pytest.approx(0.999))  # 0.99*0.8 / *1.2 clip
    assert all(mutation[k] == [hp[k], new[k]] for k in mutation)
    assert mutate(hp, space, random.Random(3), cfg) == (new, mutation)  # seeded: exact


def test_mutate_resample_stays_in_bounds_for_all_spaces():
    rng = random.Random(0)
    cfg = GeneratorConfig(resample_prob=0.5)
    for algo, space in SEARCH_SPACES.items():
        hp = {
            name: (b.low + b.high) / 2 if not b.integer else int(b.low) for name, b in space.items()
        }
        for _ in range(200):
            hp, _ = mutate(hp, space, rng, cfg)
            for name, b in space.items():
                assert b.low <= hp[name] <= b.high, (algo, name, hp[name])
                assert not b.integer or isinstance(hp[name], int)


def test_choose_algo_keeps_the_mix():
    rng = random.Random(0)
    assert choose_algo(["ppo", "sac"], Counter({"ppo": 3, "sac": 1}), rng) == "sac"
    assert choose_algo(["ppo", "sac"], Counter({"ppo": 2, "sac": 2}), random.Random(5)) in (
        "ppo",
        "sac",
    )
    assert choose_algo(["ppo"], {}, rng) == "ppo"
    with pytest.raises(ValueError):
        choose_algo([], {}, rng)


def test_should_exploit_replaces_the_bottom_fraction_of_the_live_pods():
    nan = float("nan")
    cfg = GeneratorConfig(truncation=0.5)
    live = {"p0": 10.0, "p1": 8.0, "p2": 5.0, "p3": 1.0}
    assert [p for p in live if should_exploit(p, live, cfg)] == ["p2", "p3"]
    assert [p for p in live if should_exploit(p, live, GeneratorConfig(truncation=0.25))] == ["p3"]
    # ties replace nobody: a pod is in the bottom only if enough pods are strictly better
    assert not should_exploit("p1", {"p0": 5.0, "p1": 5.0}, cfg)
    assert should_exploit("p1", {"p0": 5.0, "p1": 4.0}, cfg)
    # no score ranks last, unless nobody has one
    assert should_exploit("p1", {"p0": 5.0, "p1": nan}, cfg)
    assert not should_exploit("p1", {"p0": nan, "p1": nan}, cfg)
    # one pod alone, or a fraction that rounds down to no pod, replaces nothing
    assert not should_exploit("p0", {"p0": -1e9}, cfg)
    assert not should_exploit(
        "p2", {"p0": 3.0, "p1": 2.0, "p2": 1.0}, GeneratorConfig(truncation=0.3)
    )


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"selection": "roulette"}, "selection must be"),
        ({"truncation": 0.0}, "truncation must be in"),
        ({"temperature": 0.0}, "temperature must be > 0"),
    ],
)
def test_generator_config_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        GeneratorConfig(**kw).validate()


def test_with_a_target_only_a_gap_that_matters_replaces_a_pod():
    cfg = GeneratorConfig(truncation=0.5, min_gap=0.1)
    # an exploration trap: everyone near 0, the target 90 away; the pod still moving
    # (action cost -1.3) is not replaced by a copy of the one that stopped moving
    trapped = {"p0": -0.01, "p1": -0.05, "p2": -0.4, "p3": -1.3}
    assert not any(should_exploit(p, trapped, cfg, target=90.0) for p in trapped)
    assert should_exploit("p3", trapped, cfg)  # without a target: the plain rule
    assert should_exploit("p3", trapped, GeneratorConfig(min_gap=0.0), target=90.0)
    # one pod found the goal: 40 of the 91 still to go is a gap that matters
    found = {**trapped, "p0": 40.0}
    assert [p for p in found if should_exploit(p, found, cfg, target=90.0)] == ["p2", "p3"]
    with pytest.raises(ValueError, match="min_gap"):
        GeneratorConfig(min_gap=2.0).validate()
