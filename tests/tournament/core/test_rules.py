"""Selection rules behind one protocol: the shipped line-ups and controls, a user's rule."""

import pytest

from elegantpod.tournament.core import rules, views
from elegantpod.tournament.core.generator import GeneratorConfig
from elegantpod.tournament.core.population import Population
from elegantpod.tournament.core.rules import Replacement, register_rule
from elegantpod.tournament.core.spec import TournamentSpec, make_spec, resume_changes
from elegantpod.tournament.store import state as stored_state
from elegantpod.tournament.worker.segment import SegmentResult


def pop(rules_=("restart", "exploit"), pods=4, target=90.0, **g):
    g.setdefault("ready_segments", 1)
    g.setdefault("evidence_t", 2.0)
    gen = GeneratorConfig(rules=tuple(rules_), **g)
    spec = TournamentSpec(
        env_id="MountainCarContinuous-v0",
        algos=("td3",),
        pods=pods,
        generator=gen,
        target_reward=target,
    )
    spec.validate()
    p = Population(spec)
    p.fill()
    return p


def run_segments(p, scores, std=0.05):
    made = []
    for i in range(max(len(v) for v in scores.values())):
        for pod, seq in scores.items():
            rec = p.records[pod]
            if i < len(seq) and rec.status in ("queued", "running"):
                p.submitted(rec)
                res = SegmentResult(
                    pod_id=pod,
                    segment=rec.segment + 1,
                    env_steps=1000 * (rec.segment + 1),
                    env_steps_delta=1000,
                    wall_seconds=1.0,
                    score_mean=seq[i],
                    score_std=std,
                    checkpoint=f"/x/pods/{pod}/seg-{rec.segment + 1:05d}.pt",
                    solved=False,
                    stopped=False,
                    steps_per_second=1000.0,
                    events_sent=1,
                    hparams={},
                )
                made += p.on_result(res, ending=False, stopping=False)
    return made


# two leaders far ahead and improving (no restart is due): the exploit rule replaces the
# bottom two on evidence
LEADER = {
    "p000": [50.0, 55.0, 60.0, 65.0],
    "p001": [49.0, 54.0, 59.0, 64.0],
    "p002": [0.0] * 4,
    "p003": [-1.0] * 4,
}
# every pod flat: the restart rule restarts the bottom
FLAT = {f"p00{i}": [-0.1 * i] * 4 for i in range(4)}


def test_the_default_line_up_is_the_tournament_restart_then_exploit():
    assert GeneratorConfig().rules == rules.LINEUPS["tournament"] == ("restart", "exploit")
    p = pop()
    made = run_segments(p, LEADER)
    assert made and all(r.origin["kind"] == "child" for r in made)
    assert all(r.origin["rule"] == "exploit" and r.mutation for r in made)
    assert all(r.parent in ("p000", "p001") for r in made)
    q = pop()
    restarted = run_segments(q, FLAT)
    assert restarted and all(r.origin["kind"] == "restart" for r in restarted)
    assert all(r.origin["rule"] == "restart" and r.parent is None for r in restarted)


def test_restart_only_never_copies_a_leader_but_still_restarts_when_stuck():
    p = pop(rules.LINEUPS["restart_only"])
    assert run_segments(p, LEADER) == []  # the same evidence: nobody copied
    assert p.replaced_on_evidence == 0 and p.kept_in_noise == 0
    q = pop(rules.LINEUPS["restart_only"])
    made = run_segments(q, FLAT)
    assert len(made) == 2 and {r.origin["kind"] for r in made} == {"restart"}


def test_the_copy_control_copies_weights_and_hyperparameters_as_they_are():
    p = pop(rules.LINEUPS["copy"])
    made = run_segments(p, LEADER)
    assert made
    for child in made:
        parent = p.records[child.parent]
        assert child.origin == {**child.origin, "kind": "child", "rule": "copy"}
        assert child.mutation == {} and child.hparams == parent.hparams
        assert child.parent_checkpoint.startswith(f"pods/{parent.pod_id}/seg-")
    assert p.replaced_on_evidence == len(made)  # the same evidence rule as exploit's
    lineage = {x["pod"]: x["why"] for x in views.lineage(p)}
    assert "hyperparameters kept" in lineage[made[0].pod_id]


def test_no_rule_is_a_sweep_or_random_search_nobody_is_ever_replaced():
    for scores in (LEADER, FLAT):
        p = pop(())
        assert run_segments(p, scores) == [] and p.stale == 0 and p.restart_rounds == 0
        assert all(r.status == "queued" for r in p.records.values())
    # random search is the sampled start with no rule: the base and three draws
    spec = TournamentSpec(
        env_id="MountainCarContinuous-v0",
        algos=("td3",),
        pods=4,
        init="sample",
        generator=GeneratorConfig(rules=()),
    )
    made = Population(spec).fill()
    assert made[0].mutation == {} and all(r.mutation for r in made[1:])
    assert len({r.hparams["noise"] for r in made}) > 1 or len({r.hparams["lr"] for r in made}) == 4


class AlwaysFresh:
    """A user's rule: replace every pod whose score is below zero by a fresh draw."""

    def __init__(self):
        self.seen = 0

    def observe(self, pool, pod, now):
        self.seen += 1

    def take(self, pool, pod):
        if pod.score_mean < 0:
            return Replacement(fresh=True, why={"score": pod.score_mean, "junk": "<b>"})
        return None


def test_a_users_rule_is_one_class_registered_by_name_and_its_origin_survives_the_store():
    register_rule(AlwaysFresh, "below_zero")
    p = pop(("below_zero",))
    made = run_segments(p, {"p000": [1.0], "p001": [-2.0]})
    (fresh,) = made
    assert fresh.origin == {
        "kind": "restart",
        "replaced": "p001",
        "rule": "below_zero",
        "score": -2.0,
    }
    assert p.rules[0][1].seen == 2
    state = p.to_state()
    back = {d["pod_id"]: stored_state.record(d, "pods[]") for d in state["pods"]}
    assert back[fresh.pod_id].origin == fresh.origin
    with pytest.raises(stored_state.StateError, match="rule"):
        stored_state.origin({"kind": "child", "rule": "Bad Name<"}, "pods[0].origin")


class Broken:
    def observe(self, pool, pod, now):
        pass

    def take(self, pool, pod):
        return {"kind": "restart"}  # not a Replacement


def test_a_users_rule_that_answers_badly_keeps_the_pod_and_warns():
    register_rule(Broken, "broken")
    p = pop(("broken", "exploit"))
    made = run_segments(p, LEADER)
    assert made and all(r.origin["rule"] == "exploit" for r in made)  # the next rule asked
    assert "selection rule 'broken' failed" in p.warning and "Replacement" in p.warning


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("restart", "must be a list"),
        (("restart", "nope"), "unknown selection rule 'nope'"),
        (("restart", "restart"), "named twice"),
        (("Restart",), "must match"),
        (("exp\u200bloit",), r"exp\\u200bloit"),
    ],
)
def test_bad_rules_are_refused_naming_the_bad_value(given, message):
    with pytest.raises(ValueError, match=message):
        rules.check_rules(given)
    if "unknown" not in message:  # the spec checks the names' form; the tournament theirs
        with pytest.raises(ValueError, match=message):
            GeneratorConfig(rules=given).validate()


def test_registering_a_rule_is_checked():
    with pytest.raises(ValueError, match="built-in"):
        register_rule(AlwaysFresh, "exploit")
    with pytest.raises(ValueError, match="no take"):
        register_rule(type("NoTake", (), {"observe": lambda s, a, b, c: None}), "no_take")
    with pytest.raises(ValueError, match="must match"):
        register_rule(AlwaysFresh, "bad,name")


def test_rules_round_trip_through_the_spec_and_a_resume_may_change_them():
    spec = make_spec(env="Pendulum-v1", generator={"rules": ["restart"]})
    assert spec.generator.rules == ("restart",)
    back = TournamentSpec.from_dict(spec.to_dict())
    assert back == spec and back.generator.rules == ("restart",)
    old = spec.to_dict()
    old["generator"] = {k: v for k, v in old["generator"].items() if k != "rules"}
    assert TournamentSpec.from_dict(old).generator.rules == ("restart", "exploit")
    changes = resume_changes(spec, {"generator": {"rules": ["restart", "copy"]}}, "store")
    assert changes["generator"][1].rules == ("restart", "copy")
