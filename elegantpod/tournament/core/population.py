"""The population: a pure state machine of pod records and the leaderboard.

Every transition a tournament makes lives here: new pods (fresh, explored around the
base, or children that copy a parent), live control (pause, resume, stop, mutate), the
end of a segment (updater, exploit/explore), failures (retry, replace) and the end
conditions. No Dask, no threads, no I/O: the runner tells it what happened, it answers
with what to do next, and each transition is tested exactly on fixed inputs and seeds.

The exploit rule (truncation selection, population-based training) is explained in
:mod:`~elegantpod.tournament.core.exploit`: the live pods are ranked by their recent scores,
and a pod in the bottom fraction that the leader beats beyond the noise is replaced by a
child of a top pod. The leaderboard keeps the best agents ever scored: it is what users
see and what ``best()`` returns.

The population holds the rules that are more than a transition, and calls them
through their public methods: a :class:`~elegantpod.tournament.core.breeder.Breeder` makes
its new pods; the selection rules of ``GeneratorConfig.rules``
(:mod:`~elegantpod.tournament.core.rules`: restart a stuck population's bottom, exploit a
lagging pod, or a rule of the user's) observe each segment's result and say whether its
pod is replaced; and :mod:`~elegantpod.tournament.core.history` keeps each pod's history
bounded. Each is handed what it reads, a :class:`~elegantpod.tournament.core.breeder.Pool`
(the spec, the records, the leaderboard), and answers with values: none reads the
population's private state, nor the population theirs.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks.overrides import replace_checked
from elegantpod.tournament.core import leaderboard as lb
from elegantpod.tournament.core.breeder import Breeder, Pool, as_entry, base_hparams
from elegantpod.tournament.core.field_checks import MAX_HISTORY, MAX_TEXT, checkpoint_name
from elegantpod.tournament.core.history import thin, with_segment
from elegantpod.tournament.core.hparam_checks import learner_config
from elegantpod.tournament.core.protocol import ACTIVE, SCHEDULED, PodStatus
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.restart import RestartRule
from elegantpod.tournament.core.rules import BUILTIN as BUILTIN_RULES
from elegantpod.tournament.core.rules import ExploitRule, make_rules, replacement_origin
from elegantpod.tournament.core.spec import TournamentSpec

SAME_FAILURES = 3
"""Pods failed for one reason, with none trained, after which no failed pod is
replaced (:meth:`Population.failing_alike`)."""


def _reason(error: str | None) -> str:
    """A pod's failure reason: its error's first line (the lines after it may name the
    pod or its step, and differ between pods failing alike)."""
    return error.splitlines()[0] if error else ""


class Population:
    """Pod records, the leaderboard and the counters of one tournament.

    Parameters
    ----------
    spec
        The tournament's spec (algorithms, generator, budgets, limits).
    mutation_policy
        ``(hparams, space, rng, config) -> (new_hparams, mutation)``; see
        :func:`elegantpod.tournament.core.generator.mutate`. Its output is checked.
    """

    def __init__(self, spec: TournamentSpec, mutation_policy=None):
        self.spec = spec
        self.breeder = Breeder(spec.seed, mutation_policy)
        """Makes the new pods, from the :attr:`pool` it is handed."""
        self.rules = make_rules(spec.generator.rules)
        """``(name, rule)`` of each selection rule, in the order they are asked (made
        anew each run: their counters are not saved, a resume judges afresh)."""
        self.rule_warning: str | None = None
        """The last failure of a rule of the user's (the pod was kept), if any."""
        self.records: dict[str, PodRecord] = {}
        self.entries: list[lb.Entry] = []
        self.total_steps = 0
        self.solved = False
        self.solved_at: float | None = None
        """Tournament seconds at the confirmed crossing of the target, in this run (the
        segment's end, its confirming evaluation included)."""
        self.failures_replaced = 0
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

    # ------------------------------------------------------------------ held parts
    @property
    def pool(self) -> Pool:
        """What the breeder and the restart rule read of this population, now."""
        return Pool(self.spec, self.records, self.entries)

    @property
    def next_index(self) -> int:
        """The index of the next pod's id (the breeder's count; saved with the state)."""
        return self.breeder.next_index

    @property
    def warning(self) -> str | None:
        """The last mutation policy or user rule failure, if any."""
        return self.rule_warning or self.breeder.warning

    @property
    def restart_rule(self) -> RestartRule | None:
        """The restart rule among :attr:`rules`, if it is one of them."""
        return next((r for _, r in self.rules if isinstance(r, RestartRule)), None)

    @property
    def stale(self) -> int:
        """Segment results since the last improvement (see ``GeneratorConfig.restart_after``)."""
        rule = self.restart_rule
        return rule.stale if rule is not None else 0

    @property
    def restart_rounds(self) -> int:
        """Restart rounds since the last improvement: each doubles the wait for the next
        (a long plateau is not churned through, a trap still gets its first restart soon)."""
        rule = self.restart_rule
        return rule.rounds if rule is not None else 0

    @property
    def kept_in_noise(self) -> int:
        """Bottom pods kept because the leader's lead was within the noise, this run."""
        return sum(r.kept_in_noise for _, r in self.rules if isinstance(r, ExploitRule))

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
        return base_hparams(self.spec, algo)

    # ------------------------------------------------------------------ new pods
    def new_pod(
        self, strict: bool = False, origin: dict | None = None, mutate: bool = True
    ) -> PodRecord:
        """The generator at work: a fresh pod, or a child of a top live pod, mutated
        unless ``mutate`` is False
        (see :meth:`~elegantpod.tournament.core.breeder.Breeder.new_pod`)."""
        return self._admit(
            self.breeder.new_pod(self.pool, strict=strict, origin=origin, keep_hparams=not mutate)
        )

    def fresh_pod(self, algo: str, origin: dict) -> PodRecord:
        """A restart: a pod of ``algo`` with fresh networks and hyperparameters drawn
        from the whole search space (see :mod:`~elegantpod.tournament.core.restart`)."""
        return self._admit(self.breeder.fresh_pod(self.pool, algo, origin))

    def fill(self) -> list[PodRecord]:
        """New pods until the population has ``spec.pods`` (at the first start)."""
        # strict: a broken mutation policy fails start() at once, not hours later
        return [self.new_pod(strict=True) for _ in range(self.spec.pods - len(self.records))]

    def add_pod(self, algo: str | None = None, parent: str | None = None, **hparams) -> PodRecord:
        """A pod added by the user: fresh, or cloned from a leaderboard entry or a pod.

        Raises ``ValueError`` for an algorithm the env cannot take, an unknown or
        unusable parent, a bad hyperparameter or a structural change from the parent.
        """
        return self._admit(self.breeder.user_pod(self.pool, algo, parent, hparams))

    def _admit(self, rec: PodRecord) -> PodRecord:
        self.records[rec.pod_id] = rec
        return rec

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

    def unpause(self, pod: str, in_flight: bool) -> bool:
        """Let a paused pod go on; True if its status changed."""
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
        """Queued pods to submit into ``slots`` free slots, least training time first.

        Fair share: a population larger than the cluster trains round-robin, by the
        seconds each agent has trained, its ancestors' included. A child inherits its
        parent's seconds (:class:`~elegantpod.tournament.core.breeder.Breeder`), so it
        queues as its parent would. Ordering by the pod's own segments instead gave
        every child priority until it had as many segments as the oldest pods, while
        the leader it was copied from waited: on the lander task the same starting pod
        reached the target 3 to 42 s later in the tournament than in a plain sweep.
        A fresh pod (a restart, or one the user adds) starts at zero seconds and
        catches up first, as before. Ties (the first pods) go by segments, then by id.
        """
        queued = [r for r in self.records.values() if r.status == PodStatus.QUEUED]
        ready = [r for r in queued if r.pod_id not in in_flight]
        order = sorted(ready, key=lambda r: (r.wall_seconds, r.segment, r.pod_id))
        return order[: max(0, slots)]

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
        rec.history = with_segment(rec.history, res, now, MAX_HISTORY)
        if math.isfinite(res.score_mean):
            window = self.spec.generator.score_window
            rec.recent_scores = [*rec.recent_scores, float(res.score_mean)][-window:]
        # the checkpoint just saved, scored by this segment alone, with the settings it ran
        entry = dataclasses.replace(
            as_entry(rec),
            hparams=dict(res.hparams),
            score_mean=res.score_mean,
            score_std=res.score_std,
        )
        self.entries, _ = lb.update(self.entries, entry, self.spec.leaderboard_size)
        if res.solved:
            if not self.solved:
                self.solved_at = now
            self.solved = True
        if rec.stop_requested:
            rec.status = PodStatus.STOPPED
        elif rec.status == PodStatus.PAUSED:
            pass  # stays paused, not resubmitted until resumed
        elif ending or stopping or self.solved:
            rec.status = PodStatus.IDLE
        else:
            origin, fresh, mutate = self._select(rec, now)
            if origin is not None:
                rec.status = PodStatus.REPLACED
                if fresh:
                    child = self.fresh_pod(rec.algo, origin)
                else:
                    child = self.new_pod(origin=origin, mutate=mutate)
                self._thin_histories()
                return [child]
            rec.status = PodStatus.QUEUED
        return []

    def _select(self, rec: PodRecord, now: float) -> tuple[dict | None, bool, bool]:
        """Every rule observes the result, then the first to answer replaces the pod:
        ``(origin, fresh, mutate)`` of its successor, or ``(None, ...)`` to keep it.

        A rule of the user's that raises or answers badly keeps the pod and leaves a
        :attr:`warning`: a bug in a plugin must not end a tournament of many hours.
        """
        pool = self.pool
        for name, rule in self.rules:
            try:
                rule.observe(pool, rec, now)
            except Exception as exc:
                self._rule_failed(name, exc)
        for name, rule in self.rules:
            try:
                answer = rule.take(pool, rec)
                if answer is None:
                    continue
                origin = replacement_origin(name, rec.pod_id, answer)
            except Exception as exc:
                self._rule_failed(name, exc)
                continue
            return origin, answer.fresh, answer.mutate
        return None, False, True

    def _rule_failed(self, name: str, exc: Exception) -> None:
        if name in BUILTIN_RULES:
            raise exc
        self.rule_warning = f"selection rule {name!r} failed, the pod was kept: {exc}"

    def _thin_histories(self) -> None:
        """Bound the state snapshots (written every second or so): pods that are neither
        alive, on the leaderboard nor an ancestor of one keep only their last rows."""
        thin(self.records, [r.pod_id for r in self.alive()] + [e.pod_id for e in self.entries])

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
        if self.failing_alike() is not None:
            return []  # the next pod would fail the same way: stop spending the budget
        if self.failures_replaced < self.spec.failed_replacements and not (self.solved or ending):
            self.failures_replaced += 1
            return [self.new_pod(origin={"kind": "failure", "replaced": pod})]
        return []

    def failing_alike(self) -> str | None:
        """The reason, where :data:`SAME_FAILURES` pods failed for it and no pod has
        finished a segment: a deterministic failure (an env the workers cannot build, a
        bad hyperparameter), which replacements would only repeat until the budget is
        spent. ``None`` otherwise."""
        records = self.records.values()
        if any(r.segment >= 1 and r.status != PodStatus.FAILED for r in records):
            return None
        reasons = Counter(_reason(r.error) for r in records if r.status == PodStatus.FAILED)
        reason, n = reasons.most_common(1)[0] if reasons else ("", 0)
        return reason if n >= SAME_FAILURES else None

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
        reasons, counted, say why. A reason is an error's first line, as
        :meth:`failing_alike` counts them; the lines after it (which pod, which step)
        are shown for the first pod of each reason only.
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
            reasons = Counter(_reason(r.error) for r in failed)
            first: dict[str, str] = {}  # reason -> the first full error of it
            for r in failed:
                first.setdefault(_reason(r.error), r.error or "")
            return "every pod failed: " + "; ".join(
                f"{n} x {first[why]}" for why, n in reasons.most_common()
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
        """Continue from a checked snapshot (see :func:`elegantpod.tournament.store.state.load`)."""
        self.records, self.entries = records, entries
        for rec in records.values():
            if rec.status in (PodStatus.RUNNING, PodStatus.IDLE):
                rec.status = PodStatus.QUEUED
        self.total_steps = counters["total_steps"]
        self.solved = counters["solved"]
        self.failures_replaced = counters["failures_replaced"]
        self.breeder.resume_at(counters["next_index"])

    def reseed(self, known_ids: set[str]) -> None:
        """After a resume: never reuse a pod id, and draw a fresh generator stream."""
        self.breeder.reseed(set(known_ids) | set(self.records))
