"""The population: a pure state machine of pod records and the leaderboard.

Every transition a tournament makes lives here: new pods (fresh, explored around the
base, or children that copy a parent), live control (pause, resume, stop, mutate), the
end of a segment (updater, exploit/explore), failures (retry, replace) and the end
conditions. No Dask, no threads, no I/O: the runner tells it what happened, it answers
with what to do next, and each transition is tested exactly on fixed inputs and seeds.

The exploit rule (population-based training, Jaderberg et al. 2017, "Population Based
Training of Neural Networks", arXiv:1711.09846, truncation selection): when a pod that is
*ready* (it has trained ``GeneratorConfig.ready_segments`` segments) finishes a segment,
the pods alive now are ranked by their recent score, the mean of their last
``GeneratorConfig.score_window`` segment scores (smoothing the noise of a few evaluation
episodes). A pod in the bottom ``truncation`` fraction is replaced by a child of a pod
drawn from the top fraction: the child copies that pod's latest networks and optimizer
state and perturbs its hyperparameters (explore). Ranking the live population, not the
leaderboard of best-ever scores, avoids the ratchet and winner's curse of comparing one
noisy evaluation against the luckiest evaluations ever seen. The leaderboard still keeps
the best agents ever scored: it is what users see and what ``best()`` returns.

With a target (``target_reward``) a pod is replaced only when the leader's lead over it
is a sizeable fraction (``GeneratorConfig.min_gap``) of the distance the pod still has to
go: in an exploration trap every pod scores about zero until one finds the reward, and
chasing those tiny differences replaced the pods still exploring with copies of the one
that had stopped moving first. Every segment's score and the hyperparameters it trained
with go into the pod's ``history``, from which the views draw fitness curves and the
hyperparameter schedule a lineage followed (PBT's main product: the winner's weights were
trained by a sequence of settings, not one).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks import replace_checked
from elegantpod.tournament import leaderboard as lb
from elegantpod.tournament.breeding import Breeding, recent_score
from elegantpod.tournament.field_checks import MAX_HISTORY, MAX_TEXT, checkpoint_name
from elegantpod.tournament.generator import Verdict, judge, mutate, standard_error
from elegantpod.tournament.hparam_checks import learner_config
from elegantpod.tournament.protocol import ACTIVE, SCHEDULED, PodStatus
from elegantpod.tournament.record import PodRecord
from elegantpod.tournament.spec import TournamentSpec


def last_hparams(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The hyperparameters in force after history ``rows`` (``None``: none recorded)."""
    return next((h["hparams"] for h in reversed(rows) if "hparams" in h), None)


def keep_newest(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The newest ``n`` history rows; the first keeps the hyperparameters in force."""
    if len(rows) <= n:
        return rows
    kept = rows[-n:]
    if "hparams" not in kept[0]:
        hp = last_hparams(rows[:-n])
        if hp is not None:
            kept[0] = {**kept[0], "hparams": hp}
    return kept


class Population(Breeding):
    """Pod records, the leaderboard and the counters of one tournament.

    Parameters
    ----------
    spec
        The tournament's spec (algorithms, generator, budgets, limits).
    mutation_policy
        ``(hparams, space, rng, config) -> (new_hparams, mutation)``; see
        :func:`elegantpod.tournament.generator.mutate`. Its output is checked.
    """

    def __init__(self, spec: TournamentSpec, mutation_policy=None):
        self.spec = spec
        self.mutation_policy = mutation_policy or mutate
        self.rng = random.Random(spec.seed)
        self.records: dict[str, PodRecord] = {}
        self.entries: list[lb.Entry] = []
        self.total_steps = 0
        self.next_index = 0
        self.solved = False
        self.failures_replaced = 0
        self.warning: str | None = None
        """The last mutation policy failure (the default mutation stood in), if any."""
        self.segment_seconds = 0.0
        """Wall seconds of the segments finished in this run (not saved: a rate)."""
        self.eval_seconds = 0.0
        """Of which evaluating: the evaluation share is ``eval_seconds / segment_seconds``."""
        self.segments_resident = 0
        """Segments whose pod was resident on its worker (not rebuilt), this run."""
        self.segments_run = 0
        self.captures = 0
        """CUDA-graph captures of pods' iterations in this run's segments."""
        self.replays = 0
        """Iterations that replayed captured graphs, this run: many per capture, or the
        captures did not pay."""
        self.plateau = -math.inf
        """The score of the last improvement (the restart rule's reference)."""
        self.stale = 0
        """Segment results since the last improvement (see ``GeneratorConfig.restart_after``)."""
        self.improved_at = 0.0
        """Tournament seconds of the last improvement (or restart)."""
        self.restart_due: dict[str, dict[str, Any]] = {}
        """Pods a restart will replace at their next segment end, with the origin their
        fresh successor gets (not saved: a resume judges afresh)."""
        self.restart_rounds = 0
        """Restart rounds since the last improvement: each doubles the wait for the next
        (a long plateau is not churned through, a trap still gets its first restart soon)."""
        self.kept_in_noise = 0
        """Bottom pods kept because the leader's lead was within the noise, this run."""

    # ------------------------------------------------------------------ lookups
    @property
    def restarts(self) -> int:
        """Fresh pods made by restarts (from the records' origins: resumes included)."""
        return sum(1 for r in self.records.values() if r.origin.get("kind") == "restart")

    @property
    def replaced_on_evidence(self) -> int:
        """Pods a child replaced (beyond the noise; by the plain rule where no evidence is
        asked), from the records' origins."""
        return sum(
            1
            for r in self.records.values()
            if r.origin.get("kind") == "child" and r.origin.get("replaced")
        )

    def record(self, pod: str) -> PodRecord:
        """One pod's record; ``ValueError`` naming the known pods otherwise."""
        if pod not in self.records:
            known = ", ".join(sorted(self.records)) or "none yet"
            raise ValueError(f"unknown pod {pod!r}; pods: {known}")
        return self.records[pod]

    def alive(self) -> list[PodRecord]:
        """Pods that take part now (queued, running or paused)."""
        return [r for r in self.records.values() if r.status in ACTIVE]

    def best(self) -> lb.Entry | None:
        """The leaderboard's best usable entry (one whose checkpoint failed to load, or
        failed its check against the record, is never best)."""
        usable = [e for e in self.entries if e.usable]
        return lb.rank(usable)[0] if usable else None

    def mark_unusable(self, checkpoint: str) -> None:
        """The leaderboard entry of ``checkpoint`` failed to load: never best, never a parent."""
        self.entries = [
            dataclasses.replace(e, usable=False) if e.checkpoint == checkpoint else e
            for e in self.entries
        ]

    def base_hparams(self, algo: str) -> dict[str, Any]:
        """The spec's base hyperparameters of ``algo`` over the learner's defaults."""
        learner = get_algo(algo)
        cfg = replace_checked(learner.config_cls(), self.spec.hparams.get(algo, {}))
        return dataclasses.asdict(cfg)

    # ------------------------------------------------------------------ live control
    def mutate(self, pod: str, **hparams: Any) -> PodRecord:
        """New hyperparameters for a pod; ``ValueError`` leaves it untouched."""
        rec = self.record(pod)
        learner = get_algo(rec.algo)
        current = learner_config(rec.algo, rec.hparams)
        new = replace_checked(current, hparams)
        for key in hparams:
            if key in learner.structural_hparams and getattr(new, key) != getattr(current, key):
                raise ValueError(
                    f"{key!r} fixes the network or buffer shapes of pod {pod!r}; "
                    "it cannot change live"
                )
        rec.hparams = dataclasses.asdict(new)
        return rec

    def pause(self, pod: str) -> bool:
        """Pause a queued or running pod; True if its status changed."""
        rec = self.record(pod)
        if rec.status in SCHEDULED:
            rec.status = PodStatus.PAUSED
            return True
        return False

    def resume_pod(self, pod: str, in_flight: bool) -> bool:
        """Resume a paused pod; True if its status changed."""
        rec = self.record(pod)
        if rec.status == PodStatus.PAUSED:
            rec.status = PodStatus.RUNNING if in_flight else PodStatus.QUEUED
            return True
        return False

    def stop_pod(self, pod: str, in_flight: bool) -> bool:
        """Ask a pod to stop (it checkpoints and ends); True if it was alive."""
        rec = self.record(pod)
        if rec.status not in ACTIVE:
            return False
        rec.stop_requested = True
        if rec.status in (PodStatus.QUEUED, PodStatus.PAUSED) and not in_flight:
            rec.status = PodStatus.STOPPED
        return True

    # ------------------------------------------------------------------ segments
    def runnable(self, in_flight: set[str], slots: int) -> list[PodRecord]:
        """Queued pods to submit into ``slots`` free slots, fewest segments first.

        Fair share: a population larger than the cluster trains round-robin.
        """
        queued = [r for r in self.records.values() if r.status == PodStatus.QUEUED]
        ready = [r for r in queued if r.pod_id not in in_flight]
        return sorted(ready, key=lambda r: (r.segment, r.pod_id))[: max(0, slots)]

    def submitted(self, rec: PodRecord) -> None:
        """A segment of ``rec`` went to the cluster."""
        if rec.status == PodStatus.QUEUED:
            rec.status = PodStatus.RUNNING

    def on_result(self, res, *, ending: bool, stopping: bool, now: float = 0.0) -> list[PodRecord]:
        """A segment finished: update the record and leaderboard, exploit/explore.

        ``now``: the tournament's elapsed seconds, kept in the pod's history. Returns the
        new pods made (a child that replaces a lagging pod).
        """
        rec = self.record(res.pod_id)
        # from the record, not the task: a re-run that found its checkpoint reports 0
        self.total_steps += max(0, res.env_steps - rec.env_steps)
        rec.segment = res.segment
        rec.env_steps = res.env_steps
        rec.latest_checkpoint = checkpoint_name(rec.pod_id, res.segment)
        rec.score_mean, rec.score_std = res.score_mean, res.score_std
        rec.wall_seconds += res.wall_seconds
        rec.steps_per_second = res.steps_per_second
        self.segment_seconds += res.wall_seconds
        self.eval_seconds += res.eval_seconds
        self.segments_run += 1
        self.segments_resident += not res.rebuilt
        self.captures += getattr(res, "captures", 0)
        self.replays += getattr(res, "replays", 0)
        row = {
            "segment": res.segment,
            "env_steps": res.env_steps,
            "score": float(res.score_mean) if math.isfinite(res.score_mean) else None,
            "time": float(now),
        }
        history = rec.history
        if history and history[-1]["segment"] == res.segment:
            history = history[:-1]  # a segment run again: its row, once
        if dict(res.hparams) != last_hparams(history):
            row["hparams"] = dict(res.hparams)
        rec.history = keep_newest([*history, row], MAX_HISTORY)
        if math.isfinite(res.score_mean):
            window = self.spec.generator.score_window
            rec.recent_scores = [*rec.recent_scores, float(res.score_mean)][-window:]
        entry = lb.Entry(
            pod_id=rec.pod_id,
            algo=rec.algo,
            hparams=dict(res.hparams),
            score_mean=res.score_mean,
            score_std=res.score_std,
            env_steps=res.env_steps,
            wall_seconds=rec.wall_seconds,
            checkpoint=rec.latest_checkpoint,
            segment=res.segment,
            parent=rec.parent,
            mutation=rec.mutation,
        )
        self.entries, _ = lb.update(self.entries, entry, self.spec.leaderboard_size)
        if res.solved:
            self.solved = True
        if rec.stop_requested:
            rec.status = PodStatus.STOPPED
        elif rec.status == PodStatus.PAUSED:
            pass  # stays paused, not resubmitted until resumed
        elif ending or stopping or self.solved:
            rec.status = PodStatus.IDLE
        else:
            self._track(res.score_mean, now)
            if self._stuck(now):
                self._plan_restart(now)
            if rec.pod_id in self.restart_due:
                rec.status = PodStatus.REPLACED
                origin = self.restart_due.pop(rec.pod_id)
                child = self.fresh_pod(rec.algo, origin)
                self._thin_histories()
                return [child]
            verdict = self._judge(rec)
            if verdict.replace:
                rec.status = PodStatus.REPLACED
                child = self.new_pod(origin=_child_origin(rec.pod_id, verdict))
                self._thin_histories()
                return [child]
            self.kept_in_noise += verdict.reason == "within the noise"
            rec.status = PodStatus.QUEUED
        return []

    # ------------------------------------------------------------------ explore when stuck
    def _track(self, score: float, now: float) -> None:
        """Count a segment result towards the restart rule: an improvement (a score above
        the last one by ``stuck_tolerance`` of the way to go) resets the count."""
        if not math.isfinite(score):
            self.stale += 1
            return
        g, target = self.spec.generator, self.spec.target_reward
        ref = self.plateau
        if math.isfinite(ref):
            scale = abs(target - ref) if target is not None else abs(ref)
            improved = score > ref + g.stuck_tolerance * scale
        else:
            improved = True
        if improved:
            self.plateau, self.stale, self.improved_at = score, 0, now
            self.restart_rounds = 0
        else:
            self.stale += 1

    def _stuck(self, now: float) -> bool:
        """Whether no segment improved for ``restart_after`` segments per live pod (or
        ``restart_after_seconds``), with the target still to reach and no restart pending."""
        g = self.spec.generator
        self.restart_due = {  # a pod paused, stopped or failed meanwhile is not waited for
            p: o
            for p, o in self.restart_due.items()
            if self.records[p].status in SCHEDULED and not self.records[p].stop_requested
        }
        if self.solved or self.restart_due or self.spec.target_reward is None:
            return False  # without a target a plateau may be the best there is (500 on CartPole)
        backoff = 2**self.restart_rounds
        by_segments = g.restart_after > 0 and self.stale >= backoff * g.restart_after * max(
            1, len(self.alive())
        )
        wait = g.restart_after_seconds
        by_time = wait is not None and now - self.improved_at >= backoff * wait
        return by_segments or by_time

    def _plan_restart(self, now: float) -> None:
        """Mark the bottom ``restart_fraction`` of the ready live pods (never the leader,
        never a paused or stopping pod) for replacement by fresh draws."""
        g = self.spec.generator
        live = [r for r in self.alive() if r.status != PodStatus.PAUSED and not r.stop_requested]

        def key(r: PodRecord) -> float:
            x = recent_score(r)
            return x if math.isfinite(x) else -math.inf

        ranked = sorted(live, key=key, reverse=True)
        # a pod is judged stuck only after it had the time the rule gives everyone
        old_enough = max(g.ready_segments, g.restart_after)
        ready = [r for r in ranked[1:] if r.segment >= old_enough]
        k = min(len(ready), max(1, math.floor(len(live) * g.restart_fraction)))
        if not k:  # nobody old enough yet: the count stands, the next result tries again
            return
        stale, best = self.stale, self.plateau
        for r in ready[len(ready) - k :]:
            self.restart_due[r.pod_id] = {
                "kind": "restart",
                "replaced": r.pod_id,
                "stale": stale,
                "best": best if math.isfinite(best) else None,
            }
        self.stale, self.improved_at = 0, now  # the restarted pods get their time
        self.restart_rounds += 1

    def _judge(self, rec: PodRecord) -> Verdict:
        g = self.spec.generator
        if rec.segment < g.ready_segments:
            return Verdict(False, recent_score(rec), reason="not ready")
        if not any(r.algo == rec.algo and r is not rec for r in self.alive()):
            # A child copies the networks of a pod of its own algorithm (Breeding.new_pod),
            # and this is the only one alive: its child would be a mutated copy of itself
            # (or of an older entry of its lineage), though the ranking that put it at the
            # bottom weighed it against other algorithms.
            return Verdict(False, recent_score(rec), reason="only live pod of its algorithm")
        pods = [r for r in self.alive() if r.recent_scores or r is rec]
        live = {r.pod_id: recent_score(r) for r in pods}
        noise = {
            r.pod_id: standard_error(r.recent_scores, r.score_std, self.spec.eval_episodes)
            for r in pods
        }
        return judge(rec.pod_id, live, g, target=self.spec.target_reward, noise=noise)

    def _thin_histories(self, keep: int = 16) -> None:
        """Bound the state snapshots (written every second or so): pods that are neither
        alive, on the leaderboard nor an ancestor of one keep only their last ``keep``
        history rows (enough for their tail on the curves)."""
        needed = {r.pod_id for r in self.alive()} | {e.pod_id for e in self.entries}
        todo = list(needed)
        while todo:
            parent = self.records.get(todo.pop())
            parent = parent.parent if parent is not None else None
            if parent is not None and parent not in needed:
                needed.add(parent)
                todo.append(parent)
        for r in self.records.values():
            if r.pod_id not in needed and len(r.history) > keep:
                r.history = keep_newest(r.history, keep)

    def on_failure(
        self, pod: str, error: str, *, retry: bool, parent_broken: bool, ending: bool = False
    ) -> list[PodRecord]:
        """A segment raised or its worker died; retry, or fail and replace the pod.

        ``retry``: Dask gave up after worker deaths and the pod has retries left.
        ``parent_broken``: the parent's checkpoint failed to load, so that leaderboard
        entry is marked unusable (no more children of it). A failed pod is replaced by
        a new one while ``spec.failed_replacements`` allows, unless the tournament is
        ``ending``. Returns the new pods.
        """
        rec = self.record(pod)
        if parent_broken:
            self.mark_unusable(rec.parent_checkpoint)
        if retry and rec.retries < self.spec.max_retries:
            rec.retries += 1
            if rec.stop_requested:
                rec.status = PodStatus.STOPPED
            elif rec.status != PodStatus.PAUSED:
                rec.status = PodStatus.QUEUED
            return []
        rec.status = PodStatus.FAILED
        rec.error = error[:MAX_TEXT]
        if self.failures_replaced < self.spec.failed_replacements and not (self.solved or ending):
            self.failures_replaced += 1
            return [self.new_pod(origin={"kind": "failure", "replaced": pod})]
        return []

    def on_unsubmitted(self, pod: str, error: str, ending: bool = False) -> list[PodRecord]:
        """A segment could not even be submitted (a plugin failed, the scheduler went
        away): retried like a worker death, then failed, never looped on forever."""
        rec = self.record(pod)
        if rec.status == PodStatus.RUNNING:
            rec.status = PodStatus.QUEUED
        return self.on_failure(
            pod, f"could not submit: {error}", retry=True, parent_broken=False, ending=ending
        )

    def on_lost(self, pod: str) -> None:
        """A segment's future was cancelled or lost: run it again (it is idempotent)."""
        rec = self.record(pod)
        if rec.status == PodStatus.RUNNING:
            rec.status = PodStatus.QUEUED

    # ------------------------------------------------------------------ the end
    def should_end(self, elapsed: float, stop_requested: bool, in_flight: int) -> bool:
        """Any end condition: stop, solved, a budget spent, or no pod left alive."""
        s = self.spec
        if stop_requested or self.solved:
            return True
        if s.max_seconds is not None and elapsed >= s.max_seconds:
            return True
        if s.max_steps is not None and self.total_steps >= s.max_steps:
            return True
        return not self.alive() and not in_flight

    def end(self) -> str | None:
        """Final statuses when the tournament ends; returns why it failed, if it did.

        Stopped pods end ``stopped``; live ones ``idle`` (a resume continues them). A
        tournament where pods failed and none finished a segment has failed: the
        reasons, counted, say why.
        """
        for rec in self.records.values():
            if rec.stop_requested and rec.status in ACTIVE:
                rec.status = PodStatus.STOPPED
            elif rec.status in SCHEDULED:
                rec.status = PodStatus.IDLE
        records = self.records.values()
        failed = [r for r in records if r.status == PodStatus.FAILED]
        trained = any(r.segment >= 1 and r.status != PodStatus.FAILED for r in records)
        if failed and not trained:  # replacements the budget cut short failed no better
            reasons = Counter(r.error for r in failed)
            return "every pod failed: " + "; ".join(
                f"{n} x {why}" for why, n in reasons.most_common()
            )
        return None

    # ------------------------------------------------------------------ state
    def to_state(self, **extra: Any) -> dict[str, Any]:
        """Leaderboard, records and counters as one JSON-able snapshot."""
        return {
            "leaderboard": [e.to_dict() for e in lb.rank(self.entries)],
            "pods": [r.to_dict() for r in self.records.values()],
            "state": {
                "total_steps": self.total_steps,
                "next_index": self.next_index,
                "solved": self.solved,
                "failures_replaced": self.failures_replaced,
                **extra,
            },
        }

    def load(self, records: dict, entries: list, counters: dict[str, Any]) -> None:
        """Continue from a checked snapshot (see :func:`elegantpod.tournament.state.load`)."""
        self.records, self.entries = records, entries
        for rec in records.values():
            if rec.status in (PodStatus.RUNNING, PodStatus.IDLE):
                rec.status = PodStatus.QUEUED
        self.total_steps = counters["total_steps"]
        self.solved = counters["solved"]
        self.failures_replaced = counters["failures_replaced"]
        self.next_index = counters["next_index"]

    def reseed(self, known_ids: set[str]) -> None:
        """After a resume: never reuse a pod id, and draw a fresh generator stream."""
        highest = max((int(p[1:]) for p in known_ids | set(self.records)), default=-1)
        self.next_index = max(self.next_index, highest + 1)
        self.rng.seed(f"{self.spec.seed}-{self.next_index}")


def _child_origin(replaced: str, v: Verdict) -> dict[str, Any]:
    """A child's ``origin``: whom it replaced and on what evidence (JSON-safe figures)."""

    def finite(x: float) -> float | None:
        if math.isnan(x):
            return None
        return max(-1e9, min(1e9, x))  # inf (no noise at all) saved as 1e9

    out: dict[str, Any] = {"kind": "child", "replaced": replaced, "score": finite(v.score)}
    if v.leader is not None:
        out["leader"] = v.leader
    out["leader_score"], out["t"] = finite(v.leader_score), finite(v.t)
    return out
