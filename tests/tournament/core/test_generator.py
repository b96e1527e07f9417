import random
from collections import Counter

import pytest

from elegantpod.agents import ALGOS
from elegantpod.search.space import Bound
from elegantpod.tournament.core.exploit import should_exploit
from elegantpod.tournament.core.generator import (
    GeneratorConfig,
    choose_algo,
    choose_parent,
    mutate,
)
from elegantpod.tournament.core.leaderboard import Entry


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
    from elegantpod.search.space import Choice

    def middle(b):
        if isinstance(b, Choice):
            return b.options[0]
        return (b.low + b.high) / 2 if not b.integer else int(b.low)

    for algo, space in {a: cls.search_space for a, cls in ALGOS.items()}.items():
        hp = {name: middle(b) for name, b in space.items()}
        for _ in range(200):
            hp, _ = mutate(hp, space, rng, cfg)
            for name, b in space.items():
                if isinstance(b, Choice):
                    assert hp[name] in b.options, (algo, name, hp[name])
                    continue
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


# ---------------------------------------------------------------- categorical choices
def test_choice_checks_its_options_and_probability():
    from elegantpod.search.space import Choice

    assert Choice(["a", "b"]).options == ("a", "b")
    for bad, msg in [
        ([], "1 to 64 options"),
        (["a", "a"], "must differ"),
        ([True, False], "strings or numbers"),
        ([float("nan")], "finite"),
        ("abc", "in a list"),
    ]:
        with pytest.raises(ValueError, match=msg):
            Choice(bad)
    with pytest.raises(ValueError, match="prob must be in"):
        Choice(["a", "b"], prob=1.5)


def test_choice_mutation_switches_with_its_stated_probability_to_another_option():
    from elegantpod.search.space import Choice

    c = Choice(["gaussian", "ou", "colored"], prob=0.3)
    rng = random.Random(0)
    draws = [c.mutate("gaussian", rng) for _ in range(4000)]
    switched = [d for d in draws if d != "gaussian"]
    assert abs(len(switched) / len(draws) - 0.3) < 0.03
    assert Counter(switched).keys() == {"ou", "colored"}  # never "switches" to itself
    assert abs(Counter(switched)["ou"] / len(switched) - 0.5) < 0.05
    assert c.mutate("unknown", rng) in c.options  # not an option: always redrawn
    assert Choice(["x"], prob=1.0).mutate("x", rng) == "x"
    assert Counter(c.sample(rng) for _ in range(3000)).keys() == set(c.options)


def test_mutate_moves_a_choice_with_its_own_probability_and_records_it():
    from elegantpod.search.space import Choice

    space = {"noise": Choice(["gaussian", "ou", "colored"], prob=1.0), "lr": Bound(1e-4, 1e-2)}
    cfg = GeneratorConfig(resample_prob=0.0)
    new, change = mutate({"noise": "gaussian", "lr": 1e-3}, space, random.Random(1), cfg)
    assert new["noise"] in ("ou", "colored") and change["noise"] == ["gaussian", new["noise"]]
    space["noise"] = Choice(["gaussian", "ou", "colored"], prob=0.0)
    new, change = mutate({"noise": "ou", "lr": 1e-3}, space, random.Random(1), cfg)
    assert new["noise"] == "ou" and "noise" not in change


# ---------------------------------------------------------------- replace on evidence
def test_standard_error_takes_the_larger_of_between_and_within_segment_noise():
    from elegantpod.tournament.core.exploit import standard_error

    # between segments: s = 10 (scores 0, 10, 20), se = 10 / sqrt(3)
    assert standard_error([0.0, 10.0, 20.0], 0.0, 10) == pytest.approx(10 / 3**0.5)
    # agreeing segments, noisy episodes: std 30 over 10 episodes x 3 segments
    assert standard_error([5.0, 5.0, 5.0], 30.0, 10) == pytest.approx(30 / 30**0.5)
    assert standard_error([], 1.0, 10) == float("inf")
    assert standard_error([3.0], 0.0, 1) == float("inf")  # one episode: noise unknown
    assert standard_error([3.0, 3.0], 0.0, 1) == 0.0  # deterministic: no noise


def test_judge_replaces_only_a_lead_beyond_the_noise_and_says_so():
    from elegantpod.tournament.core.exploit import judge_scores, welch_t

    cfg = GeneratorConfig(truncation=0.5, evidence_t=2.0)
    scores = {"a": 10.0, "b": 8.0, "c": 0.0, "d": 1.0}
    quiet = {p: 0.5 for p in scores}
    v = judge_scores("c", scores, cfg, noise=quiet)
    assert v.replace and v.reason == "evidence" and v.leader == "a"
    assert v.t == pytest.approx(welch_t(10.0, 0.5, 0.0, 0.5)) == pytest.approx(10 / 0.5**0.5)
    loud = {p: 5.0 for p in scores}  # t = 10 / sqrt(50) = 1.41 < 2
    v = judge_scores("c", scores, cfg, noise=loud)
    assert not v.replace and v.reason == "within the noise" and v.t == pytest.approx(1.414, 1e-3)
    assert judge_scores("c", scores, GeneratorConfig(evidence_t=0.0), noise=loud).replace
    assert judge_scores("c", scores, cfg, noise=None).replace  # no noise known: the plain rule
    assert not judge_scores("a", scores, cfg, noise=quiet).replace  # the leader, never
    assert welch_t(1.0, 0.0, 0.0, 0.0) == float("inf") and welch_t(1.0, 0, 1.0, 0) == 0.0


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"evidence_t": -1.0}, "evidence_t"),
        ({"restart_after": -1}, "restart_after"),
        ({"restart_after": 2.5}, "restart_after"),
        ({"restart_after_seconds": 0}, "restart_after_seconds"),
        ({"restart_fraction": 2.0}, "restart_fraction"),
        ({"stuck_tolerance": "x"}, "stuck_tolerance"),
    ],
)
def test_generator_config_checks_the_new_rules(kw, msg):
    with pytest.raises(ValueError, match=msg):
        GeneratorConfig(**kw).validate()


def test_mutation_of_a_quantized_domain_moves_along_its_grid():
    from elegantpod.search.space import qrandint, quniform

    space = {"batch": qrandint(8, 64, 8), "clip": quniform(0.1, 0.3, 0.05)}
    hp = {"batch": 16, "clip": 0.2}
    rng, cfg = random.Random(0), GeneratorConfig(resample_prob=0.0)
    for _ in range(200):
        new, mutation = mutate(hp, space, rng, cfg)
        # x1.2 of 16 rounds back to 16: a step instead (an end may stay, clipped)
        assert new["batch"] != hp["batch"] or hp["batch"] in (8, 64)
        assert all(new[k] in d for k, d in space.items()) and isinstance(new["batch"], int)
        hp = new
