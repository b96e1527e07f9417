"""What runs on a Dask worker: one segment of one pod, controllable and idempotent.

A segment is the unit of scheduling, retry, elasticity and exploit/explore. It starts
from the pod's latest checkpoint (or its parent's, for a new child), trains for a step or
time budget, checkpoints into the store and returns a :class:`SegmentResult`. If the
worker dies, Dask runs the same task again elsewhere and it simply resumes from that
same latest checkpoint: at most one segment of work is lost, never the pod's history.

While it runs, the segment polls its control :class:`distributed.Variable` (pause,
resume, stop, new hyperparameters) and publishes progress with ``log_event``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from elegantpod.config import PodSpec
from elegantpod.pod.budget import Budget
from elegantpod.pod.checkpoint import (
    CheckpointError,
    checkpoint_exists,
    strip_replay_from_file,
    write_checkpoint_bytes,
)
from elegantpod.pod.finite import NonFiniteError
from elegantpod.pod.hooks import PodHooks
from elegantpod.pod.saved import SavedPod
from elegantpod.tournament.core.protocol import EventKind, OutcomeKind, PodStatus, SegmentEnd, event
from elegantpod.tournament.worker.channels import POLL_SECONDS, Control, Events


class ParentCheckpointError(CheckpointError):
    """A new child could not load its parent's checkpoint: the parent is unusable.

    Its own type so that the orchestrator tells this apart from a pod's own failure and
    stops breeding from that leaderboard entry.
    """


@dataclass(frozen=True, kw_only=True)
class SegmentTask:
    """Everything a worker needs to run one segment (pickled to the worker)."""

    tournament_id: str
    pod_id: str
    segment: int
    spec_json: str
    """The pod's :class:`PodSpec` as JSON, current hyperparameters included."""
    checkpoint: str
    """Where this segment writes its checkpoint."""
    resume_from: str | None = None
    """The pod's latest checkpoint (continue it), or ``None``."""
    parent_checkpoint: str | None = None
    """For a new child: the parent's checkpoint whose networks and optimizers it copies."""
    segment_steps: int | None = None
    segment_seconds: float | None = None
    control: str | None = None
    """Name of the control Variable; ``None`` runs uncontrolled (in-process use)."""
    topic: str | None = None
    """log_event topic for progress; ``None``: no events."""
    uses_gpu: bool = False
    """The segment holds a share of a worker's ``GPU`` resource: it must train on CUDA."""
    resident_slots: int | None = None
    """Pods a worker process keeps resident between segments (see :mod:`.resident`)."""
    tournament_uid: str | None = None
    """The tournament's identity: written into the checkpoint's ``origin``, and checked
    in every store checkpoint the segment loads (see
    :func:`~elegantpod.pod.checkpoint.check_origin`)."""
    store: str | None = None
    """The store's path or URL, where the fencing check reads the lease."""
    writer: str | None = None
    """The lease token of the tournament that submitted this segment (a fencing token):
    the segment writes nothing once the store's lease names another writer, and never
    adopts a checkpoint that another writer left under its name."""
    confirm_target: bool = False
    """A crossing of the target is confirmed on fresh episodes before it counts
    (``TournamentSpec.confirm_target``)."""


@dataclass(frozen=True, kw_only=True)
class SegmentResult:
    """What a finished segment reports to the orchestrator."""

    pod_id: str
    segment: int
    env_steps: int
    env_steps_delta: int
    wall_seconds: float
    score_mean: float
    score_std: float
    checkpoint: str
    solved: bool
    stopped: bool
    steps_per_second: float
    events_sent: int
    hparams: dict[str, Any] = field(default_factory=dict)
    worker: str = ""
    eval_seconds: float = 0.0
    """Wall seconds of this segment spent evaluating (its share of ``wall_seconds``)."""
    rebuilt: bool = True
    """Whether the pod was built for this segment (False: it was resident)."""
    captures: int = 0
    """CUDA-graph captures of the pod's iterations in this segment (0: eager)."""
    replays: int = 0
    """Iterations of this segment that replayed captured graphs: a capture pays only
    when many follow it."""
    confirm_score: float | None = None
    """The score of the fresh evaluation that confirmed (or not) a crossing of the
    target (``None``: no crossing, or no confirmation asked); ``solved`` says whether
    it reached the target too."""


@dataclass(frozen=True, kw_only=True)
class SegmentFailure:
    """A segment that trained but could not keep its result: returned, not raised.

    Not a pod's failure, so it never counts against the pod nor the tournament's
    replacements, and returning it keeps Dask from logging a traceback per segment.
    """

    pod_id: str
    segment: int
    kind: OutcomeKind
    """``STORE``: the store refused the checkpoint (full, read-only, gone); ``FENCED``:
    another writer holds the store's lease now."""
    error: str


class StoreUnwritable(OSError):
    """Writing a segment's checkpoint failed: the store is full, read-only or gone."""


class Fenced(RuntimeError):
    """The store's lease names another writer: this segment must not write to it."""


def _finite_or_none(x: float) -> float | None:
    """``x`` if it is a finite float, else ``None`` (a result's missing number)."""
    return x if isinstance(x, float) and math.isfinite(x) else None


def run_segment(task: SegmentTask) -> SegmentResult | SegmentFailure:
    """Run one segment (the function submitted to Dask).

    The pod comes from this process's resident pods when one holds exactly the state
    the segment resumes from (see :mod:`elegantpod.tournament.worker.resident`), else it is
    built and loads its checkpoint; either way it stays resident for its next segment.
    A checkpoint the store refuses, or a lease another writer took, comes back as a
    :class:`SegmentFailure` (the pod is dropped: its state was not kept).

    A pod whose training went non-finite raises :class:`~elegantpod.pod.finite.
    NonFiniteError`, naming the pod: it fails, with nothing of that state written, and
    the tournament counts it as any pod's failure (pods failing alike for one env end
    the run ``failed``).
    """
    try:
        return _run_segment(task)
    except (StoreUnwritable, Fenced) as exc:
        kind = OutcomeKind.FENCED if isinstance(exc, Fenced) else OutcomeKind.STORE
        return SegmentFailure(pod_id=task.pod_id, segment=task.segment, kind=kind, error=str(exc))
    except NonFiniteError as exc:
        # Its first line stays the reason alone: pods failing alike are counted by it.
        where = f"tournament pod {task.pod_id}, segment {task.segment}"
        raise NonFiniteError(f"{exc}\n  {where}") from None


def _run_segment(task: SegmentTask) -> SegmentResult:
    from elegantpod.pod.pod import Pod
    from elegantpod.tournament.worker import resident

    torch.set_num_threads(1)  # one torch thread per Dask worker thread
    start_wall = time.perf_counter()
    spec = PodSpec.from_json(task.spec_json)
    pod = resident.take(task.tournament_id, task.pod_id, task.resume_from, spec)
    taken = pod is not None
    if taken and checkpoint_exists(task.checkpoint):
        # This segment ran before (its result was lost): its checkpoint is the truth,
        # and the rebuilt path reuses it.
        resident.release(pod)
        pod, taken = None, False
    rebuilt = pod is None
    control = Control(task.control)
    try:
        if pod is None:
            pod = Pod(spec)
        else:  # as a rebuilt pod would start: fresh episodes, the spec's live hparams
            pod.restart_episodes()
            pod.apply_hparams(spec.hparams)
        if task.uses_gpu and torch.device(pod.spec.device).type != "cuda":
            raise RuntimeError(
                f"segment {task.segment} of pod {task.pod_id} holds a GPU but trains on "
                f"{pod.spec.device!r}: torch on this worker sees no CUDA device"
            )
        result = _run(task, spec, pod, rebuilt, start_wall, control)
    except BaseException:
        if taken:
            resident.release(pod)
        elif pod is not None:
            pod.close()  # a failed pod is rebuilt from its checkpoint next time
        raise
    finally:
        control.close()
    resident.keep(
        task.tournament_id, task.pod_id, pod, task.checkpoint, spec, task.resident_slots, taken
    )
    return result


def _run(task: SegmentTask, spec: PodSpec, pod, rebuilt: bool, start_wall: float, control):
    done_already = False
    # Idempotent: a re-run of a segment that already wrote its checkpoint reuses it, if
    # this writer wrote it (a writer whose lease was taken may have left one).
    own = _own_checkpoint(task, pod.spec.device) if rebuilt else None
    if own is not None:
        try:
            pod.load(own, expect=_expected(task, spec, task.pod_id))
            done_already = True
        except CheckpointError:  # not this pod's shape (e.g. a structural change)
            done_already = False
    if rebuilt and not done_already:
        if task.resume_from:
            pod.load(task.resume_from, expect=_expected(task, spec, task.pod_id))
        elif task.parent_checkpoint:
            try:
                pod.load(
                    task.parent_checkpoint,
                    restore_rng=False,
                    expect=_expected(task, spec, None),
                )
            except CheckpointError as exc:
                raise ParentCheckpointError(f"parent checkpoint: {exc}") from None
    # The learner was built from the spec, so the spec's (possibly mutated) hyperparameters
    # are in force; the checkpoint only brought weights, optimizer moments and step count.
    start_steps = pod.env_steps
    hooks = _SegmentHooks(task, control, start_steps, start_wall)
    eval_before = pod.eval_seconds
    captures_before, replays_before = _graph_counts(pod)
    if not done_already:
        pod.run(budget=_budget(task, pod, start_steps), hooks=hooks)
        # The checkpoint leaves the critical path: snapshot the pod in memory, write the
        # snapshot while the segment's evaluation runs, and return only once it is
        # written (so a killed worker still costs at most this segment).
        origin = None
        if task.tournament_uid is not None and task.writer is not None:
            origin = {"tournament": task.tournament_uid, "pod": task.pod_id, "writer": task.writer}
        ev = pod.snapshot_and_evaluate(lambda data: _write_fenced(task, data), origin)
        if task.resume_from and getattr(pod.learner, "replay", None) is not None:
            # The replay is needed only where the pod resumes: its newest checkpoint.
            # The previous one may stay on for the leaderboard or a child; without it.
            # Housekeeping: a store that refuses the smaller file keeps the larger one.
            with contextlib.suppress(CheckpointError, OSError):
                strip_replay_from_file(task.resume_from)
    else:
        # The checkpoint counted this segment's one evaluation ahead: repeat it exactly.
        ev = pod.evaluate(episode_index=pod.evaluations)
    hp = dataclasses.asdict(pod.learner.config)  # live mutations included
    captures, replays = _graph_counts(pod)
    wall = time.perf_counter() - start_wall
    target = spec.target_reward
    score_mean, score_std = ev.score(spec.fitness)
    solved = target is not None and score_mean >= target
    confirm_score = None
    if solved and task.confirm_target:  # fresh episodes: the next evaluation's seeds
        confirm_score = float(pod.evaluate().score(spec.fitness)[0])
        solved = confirm_score >= target
    events = hooks.events
    end = SegmentEnd.STOPPED if hooks.stopped else SegmentEnd.FINISHED
    events.publish(
        event(
            EventKind.SEGMENT_END,
            end,
            env_steps=pod.env_steps,
            eval_return=ev.mean,
            # what tracking logs for a segment too short for a progress event
            train_return=_finite_or_none(pod.pop_train_return()),
            losses={k: v for k, v in hooks.last_stats.items() if math.isfinite(v)},
        ),
        force=True,
    )
    worker_name = events.worker.address if events.worker is not None else ""
    return SegmentResult(
        pod_id=task.pod_id,
        segment=task.segment,
        env_steps=pod.env_steps,
        env_steps_delta=pod.env_steps - start_steps,
        wall_seconds=wall,
        score_mean=score_mean,
        score_std=score_std,
        checkpoint=task.checkpoint,
        solved=solved,
        stopped=hooks.stopped,
        steps_per_second=(pod.env_steps - start_steps) / max(wall, 1e-9),
        events_sent=events.sent,
        hparams=hp,
        worker=worker_name,
        eval_seconds=pod.eval_seconds - eval_before,
        rebuilt=rebuilt,
        captures=captures - captures_before,
        replays=replays - replays_before,
        confirm_score=confirm_score,
    )


def _budget(task: SegmentTask, pod, start_steps: int) -> Budget:
    """The segment's budget: its steps on top of the pod's count and its seconds; no
    evaluation inside it (the segment evaluates once, at its end, while its snapshot is
    written), as a tournament scores segments and evaluations in between would only
    slow training (a trading env's full validation range)."""
    if task.segment_steps:
        steps = start_steps + task.segment_steps
    else:  # a time budget alone, or (never from a tournament) none: the algorithm's default
        steps = None if task.segment_seconds else pod.learner.default_max_steps
    return Budget(
        steps=steps, seconds=task.segment_seconds, evaluate_every=None, evaluate_at_end=False
    )


class _SegmentHooks(PodHooks):
    """A segment's hooks: after each update, apply new hyperparameters, hold while
    paused, and publish progress; between gradient steps, end on a stop."""

    def __init__(self, task: SegmentTask, control, start_steps: int, start_wall: float):
        super().__init__()
        self.control, self.start_steps, self.start_wall = control, start_steps, start_wall
        self.events = Events(task.topic, task.pod_id, task.segment)
        self.stopped = False
        self.applied_version = -1
        self.last_stats: dict[str, float] = {}  # the last update's losses: the end's event

    def should_stop(self) -> bool:  # polled inside long updates too
        self.stopped = self.stopped or self.control.stop_requested() or super().should_stop()
        return self.stopped

    def on_update(self, pod, stats: dict[str, float]) -> bool | None:
        control, events = self.control, self.events
        self.last_stats = stats
        cmd = control.next()
        while cmd is not None:
            if cmd.version != self.applied_version and cmd.hparams:
                pod.set_hparams(**cmd.hparams)
                self.applied_version = cmd.version
            if cmd.stops:
                self.stopped = True
                return False
            if not cmd.is_paused:
                break
            events.publish(event(EventKind.STATUS, PodStatus.PAUSED, env_steps=pod.env_steps))
            time.sleep(POLL_SECONDS)
            cmd = control.poll(force=True)
        elapsed = time.perf_counter() - self.start_wall
        start_steps, version = self.start_steps, self.applied_version
        events.publish(
            lambda: event(
                EventKind.PROGRESS,
                PodStatus.RUNNING,
                env_steps=pod.env_steps,
                steps_per_second=(pod.env_steps - start_steps) / max(elapsed, 1e-9),
                train_return=_finite_or_none(pod.pop_train_return()),
                eval_return=pod.curve[-1].eval_return_mean if pod.curve else None,
                losses={k: v for k, v in stats.items() if math.isfinite(v)},
                hparams_version=version,
                lr=getattr(pod.spec.hparams, "lr", None),
            )
        )
        return None


def _graph_counts(pod) -> tuple[int, int]:
    """Captures and replays of the pod's iteration graphs so far (0, 0: eager)."""
    graphs = getattr(pod, "graphs", None)
    return (graphs.captures, graphs.replays) if graphs is not None else (0, 0)


def _expected(task: SegmentTask, spec: PodSpec, pod_id: str | None) -> dict[str, Any] | None:
    """What a store checkpoint this segment loads must say of itself (None: unchecked,
    a segment run outside a tournament)."""
    if task.tournament_uid is None:
        return None
    return {
        "tournament": task.tournament_uid,
        "env_id": spec.env_id,
        "algo": spec.algo,
        "pod": pod_id,
    }


def _own_checkpoint(task: SegmentTask, device: str) -> SavedPod | None:
    """The segment's checkpoint, if a run of it already wrote one under this writer
    (read once, onto the pod's ``device``: its origin is checked here, and the pod
    loads the same value)."""
    try:
        saved = SavedPod.read(task.checkpoint, map_location=device)
    except CheckpointError:
        return None
    if task.writer is None:
        return saved
    try:
        origin = saved.origin()
    except CheckpointError:
        return None
    is_own = origin is not None and origin["writer"] == task.writer
    return saved if is_own and origin["pod"] == task.pod_id else None


def _write_fenced(task: SegmentTask, data: bytes) -> None:
    """Write the segment's checkpoint, unless the store's lease names another writer.

    The check and the write are one step under the store's write lock
    (:func:`~elegantpod.tournament.store.lease.fenced`), so a takeover cannot land between
    them on a local disk. On an object store they stay two requests: a takeover landing
    between them lets one checkpoint through, which the new writer never adopts
    (:func:`_own_checkpoint`) and its own segment overwrites.
    """
    if task.writer is None or task.store is None:
        _write_checkpoint(task, data)
        return
    from elegantpod.tournament.store.lease import LeaseLost, fenced
    from elegantpod.tournament.store.store import Store

    what = f"segment {task.segment} of pod {task.pod_id}'s checkpoint"
    try:
        with fenced(Store(task.store), task.writer, what):
            _write_checkpoint(task, data)
    except LeaseLost as exc:
        raise Fenced(str(exc)) from None
    except StoreUnwritable:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a StoreError (a link, a FIFO)
        raise StoreUnwritable(f"store {task.store!r}: reading its lease failed: {exc}") from None


def _write_checkpoint(task: SegmentTask, data: bytes) -> None:
    try:
        write_checkpoint_bytes(task.checkpoint, data)
    except OSError as exc:
        raise StoreUnwritable(
            f"writing {task.checkpoint!r} failed: {type(exc).__name__}: {exc}"
        ) from None
