"""The bandit explore (PB2's): a child's setting where the population's improvements say."""

import random

import pytest

from elegantpod.search.space import Bound, Choice
from elegantpod.tournament.core import bandit
from elegantpod.tournament.core.generator import GeneratorConfig, mutate, search_space
from elegantpod.tournament.core.record import PodRecord


@pytest.mark.parametrize(
    "bound",
    [Bound(1e-5, 1e-2, log=True), Bound(0.0, 1.0), Bound(1, 10, integer=True)],
)
def test_unit_scaling_round_trips_on_the_bounds_grid(bound):
    for x in (bound.low, bound.high, bound.clip((bound.low + bound.high) / 2)):
        assert bandit.from_unit(bound, bandit.unit(bound, x)) == pytest.approx(x)
    assert bandit.unit(bound, bound.low) == 0.0 and bandit.unit(bound, bound.high) == 1.0


def pods(n_pods=4, segments=6):
    """Pods whose score rises in proportion to log(lr): the higher the lr, the better."""
    space = search_space("ppo")
    records = {}
    for i in range(n_pods):
        lr = [1e-5, 1e-4, 3e-4, 1e-3][i % 4]
        hp = {"lr": lr, "ent_coef": 0.0, "epochs": 4}
        rows, score = [], -1000.0
        for s in range(1, segments + 1):
            score += 100 * (1 + bandit.unit(space["lr"], lr) * 4)
            row = {"segment": s, "env_steps": 1000 * s, "score": score, "time": 2.0 * s + i}
            if s == 1:
                row["hparams"] = hp
            rows.append(row)
        pid = f"p{i:03d}"
        records[pid] = PodRecord(pod_id=pid, algo="ppo", hparams=hp, seed=i, history=rows)
    return records


def test_the_child_moves_towards_the_settings_that_improved_most():
    space = {"lr": Bound(1e-5, 1e-3, log=True)}
    recs = pods()
    t, h, y = bandit.intervals(recs, "ppo", ["lr"], space)
    assert len(y) == 4 * 5 and list(t) == sorted(t)
    picks = []
    for seed in range(5):
        new, change = bandit.bandit_explore(
            {"lr": 1e-5, "epochs": 4},
            space,
            random.Random(seed),
            GeneratorConfig(),
            records=recs,
            algo="ppo",
        )
        assert change == {"lr": [1e-5, new["lr"]]} and new["epochs"] == 4
        picks.append(new["lr"])
    assert min(picks) > 2e-4  # the low parent's lr left for the region that paid


def test_with_too_little_data_the_default_perturbation_explores():
    space = search_space("ppo")
    hp = {"lr": 3e-4, "epochs": 4}
    got = bandit.bandit_explore(
        hp, space, random.Random(1), GeneratorConfig(), records=pods(1, 3), algo="ppo"
    )
    assert got == mutate(hp, space, random.Random(1), GeneratorConfig())


def test_categorical_choices_are_mutated_as_the_default_does():
    space = {"lr": Bound(1e-5, 1e-3, log=True), "kind": Choice(["a", "b", "c"], prob=1.0)}
    new, change = bandit.bandit_explore(
        {"lr": 1e-4, "kind": "a"},
        space,
        random.Random(0),
        GeneratorConfig(),
        records=pods(),
        algo="ppo",
    )
    assert new["kind"] in ("b", "c") and change["kind"] == ["a", new["kind"]]


def test_a_tournament_population_breeds_children_with_the_bandit_explore():
    from elegantpod.tournament.core.population import Population
    from elegantpod.tournament.core.spec import TournamentSpec

    with pytest.raises(ValueError, match="explore must be 'perturb' or 'bandit'"):
        GeneratorConfig(explore="pb3").validate()
    g = GeneratorConfig(explore="bandit", ready_segments=1, restart_after=0)
    p = Population(TournamentSpec(env_id="Pendulum-v1", algos=("ppo",), pods=4, generator=g))
    p.fill()
    for rid, rec in pods().items():  # a past the process can read, on the live records
        p.records[rid].history = rec.history
        p.records[rid].hparams = {**p.records[rid].hparams, "lr": rec.hparams["lr"]}
        p.records[rid].recent_scores = [rec.history[-1]["score"]]
        p.records[rid].latest_checkpoint = f"pods/{rid}/seg-00006.pt"
    child = p.new_pod(origin={"kind": "child"})
    assert child.parent is not None and "lr" in child.mutation
    space = search_space("ppo")
    assert all(child.hparams[k] in space[k] for k in space if k in child.hparams)
