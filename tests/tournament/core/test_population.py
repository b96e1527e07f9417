"""The population state machine, exactly, on fixed inputs and seeds: no cluster, no I/O."""

import math

import pytest

from elegantpod.tournament.core import exploit
from elegantpod.tournament.core.generator import GeneratorConfig
from elegantpod.tournament.core.history import recent_score
from elegantpod.tournament.core.population import Population
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store import state as stored_state
from elegantpod.tournament.store.store import needed_checkpoints
from elegantpod.tournament.worker.segment import SegmentResult


def pop(**kw):
    kw.setdefault("env_id", "Pendulum-v1")
    kw.setdefault("algos", ("ppo", "sac"))
    kw.setdefault("pods", 4)
    return Population(TournamentSpec(**kw))


def result(pod_id, segment, score, steps=None, solved=False, hparams=None):
    return SegmentResult(
        pod_id=pod_id,
        segment=segment,
        env_steps=steps if steps is not None else 1000 * segment,
        env_steps_delta=1000,
        wall_seconds=1.0,
        score_mean=score,
        score_std=1.0,
        checkpoint=f"/somewhere/pods/{pod_id}/seg-{segment:05d}.pt",
        solved=solved,
        stopped=False,
        steps_per_second=1000.0,
        events_sent=1,
        hparams=hparams or {},
    )


def finish(p, pod_id, score, **kw):
    """A segment of ``pod_id`` ran and returned ``score``; returns the new pods."""
    rec = p.records[pod_id]
    p.submitted(rec)
    return p.on_result(result(pod_id, rec.segment + 1, score, **kw), ending=False, stopping=False)


def test_the_starting_pods_keep_the_base_categories_children_may_switch_them():
    from elegantpod.tournament.core.generator import search_space

    assert "noise" in search_space("td3")
    p = pop(algos=("td3",), env_id="MountainCarContinuous-v0", pods=8)
    assert {r.hparams["noise"] for r in p.fill()} == {"gaussian"}
    kinds = {p.fresh_pod("td3", {"kind": "restart"}).hparams["noise"] for _ in range(30)}
    assert kinds == {"gaussian", "ou", "colored"}  # restarts draw from the whole space


def test_fill_mixes_algorithms_and_explores_after_the_first_of_each():
    p = pop()
    made = p.fill()
    assert [r.pod_id for r in made] == ["p000", "p001", "p002", "p003"]
    assert sorted(r.algo for r in made) == ["ppo", "ppo", "sac", "sac"]
    firsts = {}
    for r in made:
        firsts.setdefault(r.algo, r)
    assert all(r.mutation == {} and r.parent is None for r in firsts.values())
    later = [r for r in made if r not in firsts.values()]
    assert all(r.mutation and r.parent is None for r in later)  # explored around the base
    assert all(r.hparams["noise"] == "gaussian" for r in made if r.algo == "sac")  # the base's
    assert p.fill() == []  # full
    again = pop()
    assert [(r.algo, r.hparams) for r in again.fill()] == [(r.algo, r.hparams) for r in made]


def test_runnable_is_fair_share_and_skips_pods_in_flight():
    p = pop()
    p.fill()
    finish(p, "p000", 1.0)
    finish(p, "p001", 1.0)
    order = [r.pod_id for r in p.runnable(set(), 4)]
    assert order == ["p002", "p003", "p000", "p001"]  # least training time first
    assert [r.pod_id for r in p.runnable({"p002"}, 2)] == ["p003", "p000"]
    assert p.runnable(set(), 0) == []
    p.pause("p003")
    assert "p003" not in [r.pod_id for r in p.runnable(set(), 4)]


def test_a_child_queues_by_its_lineage_seconds_so_the_leader_is_not_starved():
    p = pop(algos=("ppo",), generator=GeneratorConfig(ready_segments=2, score_window=2))
    p.fill()
    for pod, score in [("p000", 10.0), ("p001", 8.0), ("p002", 5.0), ("p003", 1.0)]:
        finish(p, pod, score)  # each result: 1.0 s of training
    finish(p, "p000", 10.0)
    finish(p, "p001", 8.0)
    (child,) = finish(p, "p003", 1.0)  # the bottom pod replaced by a copy of the top
    assert child.segment == 0 and child.wall_seconds == 2.0
    finish(p, child.pod_id, 9.0)  # the child's first segment: 3.0 s of its lineage
    order = [r.pod_id for r in p.runnable(set(), 4)]
    # by the pod's own segments the child (1) would have gone before the leader (2)
    assert order == ["p002", "p000", "p001", child.pod_id]
    fresh = p.fresh_pod("ppo", {"kind": "restart"})  # a fresh pod catches up first
    assert [r.pod_id for r in p.runnable(set(), 2)] == [fresh.pod_id, "p002"]


def test_a_result_updates_record_leaderboard_and_counters():
    p = pop()
    p.fill()
    finish(p, "p000", 5.0, hparams={"lr": 0.01})
    rec = p.records["p000"]
    assert (rec.segment, rec.env_steps, rec.status) == (1, 1000, "queued")
    assert rec.latest_checkpoint == "pods/p000/seg-00001.pt"  # relative to the store
    assert rec.recent_scores == [5.0] and p.total_steps == 1000
    assert [e.pod_id for e in p.entries] == ["p000"] and p.entries[0].hparams == {"lr": 0.01}
    # a re-run that found its own checkpoint reports the same steps: counted once
    p.on_result(result("p000", 1, 5.0), ending=False, stopping=False)
    assert p.total_steps == 1000
    # NaN scores never enter the leaderboard nor the recent scores
    finish(p, "p001", math.nan)
    assert [e.pod_id for e in p.entries] == ["p000"] and p.records["p001"].recent_scores == []


def test_solved_ends_and_idles_the_pod():
    p = pop(target_reward=-200.0)
    p.fill()
    finish(p, "p000", -150.0, solved=True)
    assert p.solved and p.records["p000"].status == "idle"
    assert p.should_end(0.0, False, in_flight=3)


def test_exploit_replaces_the_bottom_of_the_live_pods_with_a_child_of_the_top():
    p = pop(algos=("ppo",), generator=GeneratorConfig(ready_segments=2, score_window=2))
    p.fill()
    for pod, score in [("p000", 10.0), ("p001", 8.0), ("p002", 5.0), ("p003", 1.0)]:
        assert finish(p, pod, score) == []  # not ready after one segment
    assert finish(p, "p000", 10.0) == []  # the top is never replaced
    assert finish(p, "p001", 8.0) == []  # 2nd of 4: not in the bottom half
    children = finish(p, "p003", 1.0)
    assert p.records["p003"].status == "replaced"
    (child,) = children
    assert child.pod_id == "p004" and child.parent in ("p000", "p001")
    parent = p.records[child.parent]
    assert child.parent_checkpoint == parent.latest_checkpoint  # its latest networks
    assert child.env_steps == parent.env_steps and child.mutation
    # the same span for both: the agent's training so far, its parent's included
    assert child.wall_seconds == parent.wall_seconds > 0
    assert child.status == "queued" and child.segment == 0
    assert {e.pod_id for e in p.entries} >= {"p000", "p003"}  # the leaderboard keeps all


def test_exploit_ranks_smoothed_scores_not_one_noisy_evaluation():
    # the smoothing alone (no evidence asked: see the evidence tests below)
    g = GeneratorConfig(ready_segments=3, score_window=3, evidence_t=0.0)
    p = pop(algos=("ppo",), pods=2, generator=g)
    p.fill()
    finish(p, "p000", 5.0)  # one segment: not ready, but ranked among the live pods
    finish(p, "p001", 9.0)
    finish(p, "p001", 9.0)
    # one bad evaluation: p001's mean of its last three (9, 9, 0) = 6 is still above 5
    assert finish(p, "p001", 0.0) == [] and p.records["p001"].status == "queued"
    assert recent_score(p.records["p001"]) == pytest.approx(6.0)
    children = finish(p, "p001", 0.0)  # (9, 0, 0) = 3 < 5: now it is replaced
    assert children and children[0].parent == "p000"


def test_failures_retry_then_fail_and_are_replaced_up_to_the_limit():
    p = pop(algos=("ppo",), pods=2, max_retries=1, failed_replacements=1)
    p.fill()
    p.submitted(p.records["p000"])
    assert p.on_failure("p000", "KilledWorker: x", retry=True, parent_broken=False) == []
    assert p.records["p000"].status == "queued" and p.records["p000"].retries == 1
    new = p.on_failure("p000", "KilledWorker: x", retry=True, parent_broken=False)
    assert p.records["p000"].status == "failed" and p.records["p000"].error == "KilledWorker: x"
    assert [r.pod_id for r in new] == ["p002"] and p.failures_replaced == 1
    assert p.on_failure("p001", "ValueError: y", retry=False, parent_broken=False) == []
    assert p.records["p001"].status == "failed"  # the limit is spent: not replaced


def test_pods_failing_alike_before_any_trained_are_not_replaced():
    """Found: every pod of a tournament on an env its workers lacked failed with the same
    "unknown env id", and was replaced until the budget was spent (14 tracebacks). From
    the third alike failure, with no pod trained, none is replaced; other reasons, or a
    pod that trained, keep replacing."""
    p = pop(algos=("ppo",), pods=4, max_retries=0, failed_replacements=100)
    p.fill()
    why = "ValueError: unknown env id 'Reach1D-v0'"
    new = [p.on_failure(f"p00{i}", f"{why}\ntraceback", retry=False, parent_broken=False)
           for i in range(3)]  # fmt: skip
    assert [len(n) for n in new] == [1, 1, 0] and p.failing_alike() == why
    other = pop(algos=("ppo",), pods=4, max_retries=0, failed_replacements=100)
    other.fill()
    reasons = ["ValueError: a", "ValueError: b", "ValueError: c"]
    assert all(
        other.on_failure(f"p00{i}", r, retry=False, parent_broken=False)
        for i, r in enumerate(reasons)
    )
    assert other.failing_alike() is None


def test_a_broken_parent_is_marked_unusable_and_never_chosen_again():
    p = pop(algos=("ppo",), pods=2, generator=GeneratorConfig(ready_segments=1))
    p.fill()
    finish(p, "p000", 10.0)
    (child,) = finish(p, "p001", 1.0)
    assert child.parent == "p000"
    p.records["p000"].status = "replaced"  # only the leaderboard entry is left as a parent
    p.on_failure(child.pod_id, "ParentCheckpointError: corrupt", retry=False, parent_broken=True)
    assert [e.usable for e in p.entries if e.pod_id == "p000"] == [False]
    with pytest.raises(ValueError, match="its checkpoint failed to load"):
        p.add_pod(parent="p000")
    fresh = p.new_pod()
    assert fresh.parent != "p000"


def test_live_control_transitions():
    p = pop(algos=("ppo",), pods=2)
    p.fill()
    assert p.pause("p000") and p.records["p000"].status == "paused"
    assert not p.pause("p000")
    assert p.unpause("p000", in_flight=True) and p.records["p000"].status == "running"
    assert p.stop_pod("p001", in_flight=False) and p.records["p001"].status == "stopped"
    assert not p.stop_pod("p001", in_flight=False)
    with pytest.raises(ValueError, match="unknown pod 'p9'"):
        p.pause("p9")
    with pytest.raises(ValueError, match="'hidden' fixes the network"):
        p.mutate("p000", hidden=(8,))
    assert p.mutate("p000", lr=1e-4).hparams["lr"] == 1e-4
    rec = p.add_pod(algo="ppo", lr=2e-3)
    assert rec.mutation == {"lr": [3e-3, 2e-3]} and rec.parent is None


def test_end_conditions_and_final_statuses():
    p = pop(algos=("ppo",), pods=2, max_steps=2000, max_seconds=10.0)
    p.fill()
    assert not p.should_end(1.0, False, in_flight=0)
    assert p.should_end(10.0, False, in_flight=0)  # time
    assert p.should_end(1.0, True, in_flight=2)  # stop()
    finish(p, "p000", 1.0)
    finish(p, "p001", 1.0)
    assert p.should_end(1.0, False, in_flight=0)  # steps
    p.stop_pod("p000", in_flight=True)
    assert p.end() is None
    assert [r.status for r in p.records.values()] == ["stopped", "idle"]
    q = pop(algos=("ppo",), pods=2, failed_replacements=0)
    q.fill()
    q.on_failure("p000", "E: a", retry=False, parent_broken=False)
    q.on_failure("p001", "E: a", retry=False, parent_broken=False)
    assert q.should_end(0.0, False, in_flight=0)  # nobody left
    assert q.end() == "every pod failed: 2 x E: a"


def test_pods_failing_for_one_reason_are_counted_once_whatever_their_details():
    """An error's first line is its reason; the lines after it name the pod (a
    NonFiniteError does): the end counts the reason once, with one pod's details."""
    q = pop(algos=("ppo",), pods=3, failed_replacements=0)
    q.fill()
    for pod in ("p000", "p001", "p002"):
        q.on_failure(pod, f"E: a\n  pod {pod}", retry=False, parent_broken=False)
    assert q.failing_alike() == "E: a"
    assert q.end() == "every pod failed: 3 x E: a\n  pod p000"


def test_state_round_trips_through_the_checks_and_prunes_what_nobody_needs():
    p = pop(algos=("ppo",), generator=GeneratorConfig(ready_segments=1, truncation=0.25))
    p.fill()
    for pod, score in [("p000", 9.0), ("p001", 8.0), ("p002", 7.0)]:
        finish(p, pod, score)
    (child,) = finish(p, "p003", 1.0)
    snap = p.to_state(elapsed_seconds=3.0, worker_deaths_survived=1)
    records, entries, counters = stored_state.load(snap, "snapshot")
    q = pop(algos=("ppo",))
    q.load(records, entries, counters)
    assert q.records.keys() == p.records.keys()
    assert [(e.pod_id, e.score_mean, e.checkpoint) for e in q.entries] == [
        (e.pod_id, e.score_mean, e.checkpoint) for e in p.entries
    ]
    assert q.records["p000"].recent_scores == [9.0] and q.next_index == p.next_index
    keep, settled = needed_checkpoints(snap)
    # p003 was replaced but its checkpoint is on the leaderboard; the child's parent stays
    assert child.parent_checkpoint in keep
    assert "pods/p003/seg-00001.pt" in keep  # leaderboard entry
    assert settled == {"p000": 1, "p001": 1, "p002": 1, "p003": 1, "p004": 0}
    snap["leaderboard"] = [e for e in snap["leaderboard"] if e["pod_id"] != "p003"]
    keep, _ = needed_checkpoints(snap)
    assert "pods/p003/seg-00001.pt" not in keep  # replaced and off the board: prunable


def test_a_mutation_policy_failing_mid_run_falls_back_to_the_default_and_says_so():
    calls = []

    def flaky(hparams, space, rng, config):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("the user's policy broke")
        from elegantpod.tournament.core.generator import mutate

        return mutate(hparams, space, rng, config)

    p = Population(
        TournamentSpec(env_id="CartPole-v1", pods=2, generator=GeneratorConfig(ready_segments=1)),
        mutation_policy=flaky,
    )
    p.fill()  # the explorer of the first two pods used the policy once
    finish(p, "p000", 9.0)
    (child,) = finish(p, "p001", 1.0)  # the policy raises now: the default stands in
    assert child.mutation and p.records["p001"].status == "replaced"
    assert "mutation_policy failed" in p.warning and "the user's policy broke" in p.warning
    bad = Population(TournamentSpec(env_id="CartPole-v1", pods=2), mutation_policy=flaky)
    calls.append(1)
    with pytest.raises(RuntimeError, match="broke"):
        bad.fill()  # at the start a broken policy fails at once


def test_the_best_pod_is_never_replaced_whatever_the_truncation():
    p = pop(algos=("ppo",), pods=2, generator=GeneratorConfig(ready_segments=1, truncation=1.0))
    p.fill()
    finish(p, "p000", 9.0)
    finish(p, "p001", 1.0)
    assert finish(p, "p000", 9.0) == [] and p.records["p000"].status == "queued"


def test_history_and_schedule_follow_a_lineage_through_its_mutations():
    from elegantpod.tournament.core import views

    p = pop(algos=("ppo",), generator=GeneratorConfig(ready_segments=1, truncation=0.25))
    p.fill()
    hp = {pod: dict(p.records[pod].hparams) for pod in p.records}
    for i, (pod, score) in enumerate([("p000", 9.0), ("p001", 8.0), ("p002", 7.0)]):
        rec = p.records[pod]
        p.submitted(rec)
        p.on_result(result(pod, 1, score, hparams=hp[pod]), ending=False, stopping=False, now=i)
    rec = p.records["p003"]
    p.submitted(rec)
    (child,) = p.on_result(
        result("p003", 1, 1.0, hparams=hp["p003"]), ending=False, stopping=False, now=3.0
    )
    parent = p.records[child.parent]
    # the child trains two segments with its mutated settings, then someone changes lr live
    p.submitted(child)
    p.on_result(
        result(child.pod_id, 1, 9.5, steps=2000, hparams=child.hparams),
        ending=False,
        stopping=False,
        now=5.0,
    )
    live = {**child.hparams, "lr": child.hparams["lr"] / 2}
    p.on_result(
        result(child.pod_id, 2, 9.8, steps=3000, hparams=live), ending=False, stopping=False, now=6
    )
    assert [h["segment"] for h in child.history] == [1, 2]
    assert "hparams" in child.history[1]  # stored only where they changed
    rows = views.history(p)
    assert [r["time"] for r in rows] == sorted(r["time"] for r in rows)
    assert [r["fork_segment"] for r in rows if r["pod"] == child.pod_id] == [1, 1]
    phases = views.schedule(p, child.pod_id)
    assert [ph["pod"] for ph in phases] == [parent.pod_id, child.pod_id, child.pod_id]
    assert phases[0]["changes"] == {} and phases[0]["hparams"] == parent.hparams
    assert phases[1]["changes"] == {k: [a, b] for k, (a, b) in child.mutation.items()}
    assert phases[2]["changes"] == {"lr": [child.hparams["lr"], live["lr"]]}
    assert [ph["to_steps"] for ph in phases] == [1000, 2000, 3000]
    assert phases[1]["from_steps"] == 1000 and phases[2]["score"] == 9.8
    # the history survives the untrusted-store checks of a resume
    snap = p.to_state(elapsed_seconds=6.0, worker_deaths_survived=0)
    records, _, _ = stored_state.load(snap, "snapshot")
    assert records[child.pod_id].history == child.history
    snap["pods"][0]["history"] = [{"segment": 1, "score": "1; rm -rf /"}]
    with pytest.raises(stored_state.StateError, match=r"history\[0\]\.score"):
        stored_state.load(snap, "snapshot")
    with pytest.raises(ValueError, match="unknown pod"):
        views.schedule(p, "p999")


def test_history_keeps_one_row_per_segment_and_stays_bounded():
    from elegantpod.tournament.core.history import keep_newest

    p = pop(
        algos=("ppo",),
        leaderboard_size=2,
        generator=GeneratorConfig(ready_segments=1, truncation=0.25),
    )
    p.fill()
    rec = p.records["p000"]
    hp = dict(rec.hparams)
    for now in (1.0, 2.0):  # a segment run again after its worker died: one row
        p.submitted(rec)
        p.on_result(result("p000", 1, 5.0, hparams=hp), ending=False, stopping=False, now=now)
    assert [(h["segment"], h["time"]) for h in rec.history] == [(1, 2.0)]
    rows = [
        {"segment": i, "hparams": {"lr": i}} if i % 5 == 0 else {"segment": i} for i in range(12)
    ]
    kept = keep_newest(rows, 4)
    assert [h["segment"] for h in kept] == [8, 9, 10, 11]
    assert kept[0]["hparams"] == {"lr": 5} and "hparams" not in rows[8]  # in force, copied
    # pods that nobody needs any more (replaced, off the board, no live descendant)
    # keep only their tail, so the snapshots written every second stay bounded
    for pod in ("p001", "p002", "p003"):
        finish(p, pod, 9.0)
    p.records["p000"].history = [{"segment": i, "score": 1.0, "time": 0.0} for i in range(40)]
    (child,) = finish(p, "p000", 0.0)
    assert child.parent != "p000" and len(p.records["p000"].history) == 16


# ---------------------------------------------------------------- replace on evidence
def result_std(pod_id, segment, score, std):
    import dataclasses

    return dataclasses.replace(result(pod_id, segment, score), score_std=std)


def run_segments(p, scores: dict[str, list[float]], std=0.0, now=0.0):
    """Every pod of ``scores`` finishes its segments in turn; returns the new pods."""
    made = []
    for i in range(max(len(v) for v in scores.values())):
        for pod, seq in scores.items():
            if i < len(seq) and p.records[pod].status in ("queued", "running"):
                rec = p.records[pod]
                p.submitted(rec)
                res = result_std(pod, rec.segment + 1, seq[i], std)
                made += p.on_result(res, ending=False, stopping=False, now=now)
    return made


def test_a_bottom_pod_within_the_noise_of_the_leader_is_kept():
    g = GeneratorConfig(ready_segments=1, score_window=3, restart_after=0)
    p = pop(algos=("ppo",), pods=2, generator=g)
    p.fill()
    # the leader's mean 5 and the pod's 0 differ by less than 2 standard errors:
    # the leader's scores spread +-20 between segments
    made = run_segments(p, {"p000": [25.0, -15.0, 5.0], "p001": [0.0, 0.0, 0.0]})
    assert made == [] and p.records["p001"].status == "queued"
    assert p.kept_in_noise >= 1 and p.replaced_on_evidence == 0


def test_a_bottom_pod_beaten_beyond_the_noise_is_replaced_with_the_figures():
    from elegantpod.tournament.core import views

    g = GeneratorConfig(ready_segments=1, score_window=3, restart_after=0)
    p = pop(algos=("ppo",), pods=2, generator=g)
    p.fill()
    made = run_segments(p, {"p000": [10.0, 11.0, 12.0], "p001": [0.0, 1.0, 0.0]}, std=1.0)
    assert len(made) == 1 and p.records["p001"].status == "replaced"
    child = made[0]
    o = child.origin
    assert o["kind"] == "child" and o["replaced"] == "p001" and o["leader"] == "p000"
    assert o["score"] == pytest.approx(0.0) and o["leader_score"] == pytest.approx(10.0)
    assert o["t"] > 2.0 and p.replaced_on_evidence == 1
    edge = next(x for x in views.lineage(p) if x["pod"] == child.pod_id)
    assert "replaced p001 on evidence" in edge["why"] and "t=" in edge["why"]
    # the origin survives the store's checks; a hostile one is refused
    snap = p.to_state(elapsed_seconds=1.0, worker_deaths_survived=0)
    records, _, _ = stored_state.load(snap, "snapshot")
    assert records[child.pod_id].origin == o
    bad = next(d for d in snap["pods"] if d["pod_id"] == child.pod_id)
    bad["origin"] = {"kind": "child", "replaced": "../../etc"}
    with pytest.raises(stored_state.StateError, match="origin.replaced"):
        stored_state.load(snap, "snapshot")
    bad["origin"] = {"kind": "<script>"}
    with pytest.raises(stored_state.StateError, match="origin.kind"):
        stored_state.load(snap, "snapshot")


# ---------------------------------------------------------------- explore when stuck
def test_a_population_stuck_on_a_plateau_restarts_its_bottom_with_fresh_draws():
    from elegantpod.tournament.core import views
    from elegantpod.tournament.core.generator import search_space

    g = GeneratorConfig(ready_segments=1, restart_after=3, restart_fraction=0.5, evidence_t=2.0)
    p = pop(algos=("td3",), env_id="MountainCarContinuous-v0", pods=4, generator=g)
    p.spec = p.spec.__class__(**{**p.spec.__dict__, "target_reward": 90.0})
    p.fill()
    flat = {f"p00{i}": [-0.1 * i, -0.1 * i, -0.1 * i, -0.1 * i] for i in range(4)}
    made = run_segments(p, flat, std=0.05)
    # 4 pods x 3 segments without improvement -> the bottom half is restarted
    restarts = [r for r in made if r.origin.get("kind") == "restart"]
    assert len(restarts) == 2 and p.restarts == 2
    assert {r.origin["replaced"] for r in restarts} == {"p002", "p003"}
    assert p.records["p000"].status in ("queued", "running")  # the leader stays
    space = search_space("td3")
    for r in restarts:
        assert r.parent is None and r.parent_checkpoint is None and r.env_steps == 0
        assert r.mutation and set(r.mutation) <= set(space)
        assert r.origin["stale"] >= 12
    why = next(x["why"] for x in views.lineage(p) if x["pod"] == restarts[0].pod_id)
    assert why.startswith("restart: replaced p00")
    rec = restarts[0]
    p.submitted(rec)
    p.on_result(result(rec.pod_id, 1, -0.2), ending=False, stopping=False)
    assert views.schedule(p, rec.pod_id)[0]["origin"].startswith("restart")


def test_no_restart_while_scores_improve_or_without_the_rule():
    g = GeneratorConfig(ready_segments=1, restart_after=2, evidence_t=2.0)
    p = pop(algos=("ppo",), pods=2, generator=g)
    p.fill()
    rising = {"p000": [1.0, 2.0, 3.0, 4.0, 5.0], "p001": [1.0, 2.0, 3.0, 4.0, 5.0]}
    assert [r for r in run_segments(p, rising) if r.origin["kind"] == "restart"] == []
    g = GeneratorConfig(ready_segments=1, restart_after=0)
    p = pop(algos=("ppo",), pods=2, generator=g)
    p.fill()
    flat = {"p000": [1.0] * 10, "p001": [0.9] * 10}
    assert p.restarts == 0 and not [r for r in run_segments(p, flat, std=1.0)]


def test_no_restart_without_a_target_a_plateau_may_be_the_best_there_is():
    g = GeneratorConfig(ready_segments=1, restart_after=1, evidence_t=100)
    p = pop(algos=("ppo",), pods=2, generator=g)  # no target_reward
    p.fill()
    flat = {"p000": [500.0] * 12, "p001": [400.0] * 12}
    assert [r for r in run_segments(p, flat, std=1.0) if r.origin["kind"] == "restart"] == []
    assert p.restarts == 0 and p.stale >= 4  # the segment rule alone would have fired


def test_an_old_store_keeps_the_rules_it_ran_with():
    from elegantpod.tournament.core.spec import TournamentSpec

    d = TournamentSpec(env_id="Pendulum-v1").to_dict()
    for key in ("evidence_t", "restart_after"):
        d["generator"].pop(key)
    g = TournamentSpec.from_dict(d).generator
    assert g.evidence_t == 0.0 and g.restart_after == 0


def test_restart_rounds_back_off_until_an_improvement_and_spare_young_pods():
    # evidence_t=100: no child replaces the bottom pod, so only restarts move it
    g = GeneratorConfig(ready_segments=1, restart_after=1, restart_fraction=0.5, evidence_t=100)
    p = pop(algos=("ppo",), pods=2, generator=g, target_reward=100.0)
    p.fill()
    seen = []
    for i in range(14):  # a flat plateau: rounds at 2, then 4, then 8 results apart
        for pod in [r.pod_id for r in p.alive()]:
            rec = p.records[pod]
            p.submitted(rec)
            score = 1.0 if rec.pod_id == "p000" else 0.0
            made = p.on_result(
                result_std(pod, rec.segment + 1, score, 0.1),
                ending=False,
                stopping=False,
                now=float(i),
            )
            seen += [(i, r.pod_id) for r in made if r.origin["kind"] == "restart"]
    assert p.records["p000"].status == "queued"  # the leader is never restarted
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:], strict=False)]
    assert len(seen) >= 3 and gaps == sorted(gaps) and gaps[-1] > gaps[0], seen
    # an improvement resets the back-off
    rounds = p.restart_rounds
    assert rounds >= 3
    p.submitted(p.records["p000"])
    p.on_result(
        result_std("p000", p.records["p000"].segment + 1, 50.0, 0.1), ending=False, stopping=False
    )
    assert p.restart_rounds == 0 and p.stale == 0


def test_the_only_live_pod_of_its_algorithm_is_not_replaced_by_a_copy_of_itself():
    """Issue 32: with one ppo and one sac pod, the bottom one was replaced by a mutated
    copy of itself at each segment (14 pods in 60 s, no exploitation): a child copies a
    pod of its own algorithm, and it was the only one."""
    g = GeneratorConfig(ready_segments=1, evidence_t=0.0, restart_after=0)
    p = pop(pods=2, generator=g)
    p.fill()
    lone = "p001"
    assert {r.algo for r in p.records.values()} == {"ppo", "sac"}
    finish(p, "p000", 10.0)
    for _ in range(3):
        assert finish(p, lone, 1.0) == []  # last among the live pods, and kept
    assert p.records[lone].status == "queued" and len(p.records) == 2
    assert exploit.judge(p.records[lone], p.pool).reason == "only live pod of its algorithm"
    # with a second live pod of its algorithm, the exploit rule replaces it again
    mate = p.add_pod(algo=p.records[lone].algo)
    assert finish(p, mate.pod_id, 5.0) == []
    (child,) = finish(p, lone, 1.0)
    assert p.records[lone].status == "replaced" and child.parent != lone
    assert p.records[child.parent].algo == child.algo


# ---------------------------------------------------------------- a tournament's own space
def test_init_sample_keeps_the_base_and_draws_the_other_first_pods_reproducibly():
    from elegantpod.agents.td3 import TD3Config
    from elegantpod.search.space import choice, loguniform, qrandint
    from elegantpod.tournament.core.generator import search_space

    own = {"td3": {"lr": loguniform(1e-4, 1e-3), "batch_size": qrandint(64, 256, 64)}}
    own["td3"]["noise"] = choice(["ou", "colored"])  # overrides TD3's own three kinds
    made = {}
    for seed in (1, 1, 2):
        p = pop(algos=("td3",), pods=6, search_space=own, init="sample", seed=seed)
        made.setdefault(seed, []).append([r.hparams for r in p.fill()])
    assert made[1][0] == made[1][1] != made[2][0]  # by the seed, and only by it
    space = search_space("td3", own)
    assert space["gamma"] == search_space("td3")["gamma"] and space["noise"] == own["td3"]["noise"]
    base, *drawn = made[1][0]
    # the user's own settings take part, as they are (even outside the tournament's space)
    assert base["lr"] == TD3Config().lr and base["noise"] == "gaussian"
    for hp in drawn:
        assert all(hp[name] in domain for name, domain in space.items()), hp
    assert len({hp["lr"] for hp in drawn}) == 5  # drawn, none the default 1e-3
    assert {hp["noise"] for hp in drawn} <= {"ou", "colored"}  # never TD3's gaussian
    assert {hp["hidden"] for hp in made[1][0]} == {TD3Config().hidden}  # not searched
    first, second = pop(algos=("td3",), pods=2, search_space=own).fill()  # init="base"
    assert first.hparams["noise"] == "gaussian" and first.mutation == {}
    assert second.hparams["noise"] == "gaussian" and second.mutation  # around the base


def test_children_and_restarts_stay_inside_the_tournaments_own_space():
    from elegantpod.search.space import choice, qrandint, quniform
    from elegantpod.tournament.core.generator import search_space

    own = {"ppo": {"epochs": choice([2, 4, 8]), "minibatch_size": qrandint(64, 256, 64)}}
    own["ppo"]["clip_coef"] = quniform(0.1, 0.3, 0.05)
    g = GeneratorConfig(ready_segments=1, evidence_t=0.0, restart_after=0, resample_prob=0.5)
    p = pop(algos=("ppo",), pods=4, search_space=own, generator=g)
    p.fill()
    space = search_space("ppo", own)
    children = []
    for _ in range(30):  # the leader scores well, the rest are replaced by its children
        alive = sorted(r.pod_id for r in p.alive())
        children += run_segments(p, {pod: [10.0 if pod == alive[0] else 0.0] for pod in alive})
    assert len(children) > 20 and all(c.parent for c in children)
    for child in children:
        assert all(child.hparams[k] in d for k, d in space.items()), child.mutation
    assert {c.hparams["epochs"] for c in children} == {2, 4, 8}
    assert len({c.hparams["minibatch_size"] for c in children}) > 1
    for _ in range(20):
        fresh = p.fresh_pod("ppo", {"kind": "restart"})
        assert all(fresh.hparams[k] in d for k, d in space.items())


def test_a_confirmed_crossing_sets_solved_at_and_every_crossing_keeps_its_confirmation():
    from elegantpod.tournament.core import views

    p = pop(algos=("ppo",), pods=2, target_reward=100.0)
    p.fill()
    for pod, segment, score, confirm, solved, now in (
        ("p000", 1, 120.0, 80.0, False, 5.0),  # lucky: fresh episodes said no
        ("p001", 1, 50.0, None, False, 6.0),
        ("p000", 2, 110.0, 105.0, True, 9.5),
    ):
        p.submitted(p.records[pod])
        res = result(pod, segment, score, solved=solved)
        res = SegmentResult(**{**res.__dict__, "confirm_score": confirm})
        p.on_result(res, ending=False, stopping=False, now=now)
    assert p.solved and p.solved_at == 9.5
    rows = [(r["pod"], r["score"], r["confirm"]) for r in views.history(p)]
    assert rows == [("p000", 120.0, 80.0), ("p001", 50.0, None), ("p000", 110.0, 105.0)]
    back = stored_state.record(p.records["p000"].to_dict(), "pods[0]")
    assert [h.get("confirm") for h in back.history] == [80.0, 105.0]
    with pytest.raises(stored_state.StateError, match="confirm"):
        bad = p.records["p000"].to_dict()
        bad["history"][0]["confirm"] = "lots"
        stored_state.record(bad, "pods[0]")
