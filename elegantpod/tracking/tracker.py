"""``Tracker``: the driver-side feed from a tournament (or a ``train()`` run) to its
experiment-tracking :class:`~elegantpod.tracking.base.Logger` backends.

Why a thread and a bounded queue: the engine calls :meth:`Tracker.observe` under the
tournament's lock, where nothing may wait on the network. It only diffs the pod
records against what it already handed on and enqueues plain data; one background
thread calls the loggers. A logger that raises is disabled with a warning, a full queue
drops records with a warning, and :meth:`Tracker.close` waits a bounded time: a
tracking server that is down or slow costs a warning, never the run.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Any

from elegantpod.tracking.base import Logger, finite_metrics

_log = logging.getLogger("elegantpod")

QUEUE_ITEMS = 10_000
"""Calls waiting for the loggers at most; more are dropped (with a warning)."""
CLOSE_SECONDS = 30.0
"""How long the end of a run waits for the loggers to write what is queued."""
_CLOSE = object()
FINAL = frozenset({"replaced", "failed"})
"""Pod statuses after which a record never changes (a long tournament's many replaced
pods cost the feed nothing once logged)."""


BACKENDS = ("tensorboard", "mlflow", "wandb")
"""The backends by name (``--track``, ``loggers=["tensorboard"]``)."""


def make_logger(kind: str, where: str | None = None) -> Logger:
    """The backend named ``kind``; ``where`` is its folder (TensorBoard), tracking URI
    (MLflow) or project (W&B); ``None``: its default. ``ValueError`` for an unknown
    name, ``ImportError`` naming the extra when its library is missing."""
    if kind == "tensorboard":
        from elegantpod.tracking.tensorboard_logger import TensorBoardLogger

        return TensorBoardLogger(where or "runs")
    if kind == "mlflow":
        from elegantpod.tracking.mlflow_logger import MLflowLogger

        return MLflowLogger(where)
    if kind == "wandb":
        from elegantpod.tracking.wandb_logger import WandbLogger

        return WandbLogger(where or "elegantpod")
    raise ValueError(f"unknown tracking backend {kind!r}: use one of {', '.join(BACKENDS)}")


def group_name(kind: str, uid: str) -> str:
    """A start's group: ``tournament-1a2b3c4d-20261203T044501`` (a UTC time: every
    start, a resume's too, logs into runs of its own)."""
    return f"{kind}-{uid[:8]}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"


def check_loggers(loggers) -> list[Logger]:
    """``loggers`` as a list of :class:`Logger`; a name (``"tensorboard"``, ``"mlflow"``,
    ``"wandb"``) becomes that backend with its defaults. ``ValueError`` names anything
    else, before any work."""
    if loggers is None:
        return []
    if isinstance(loggers, Logger | str) or not isinstance(loggers, list | tuple):
        loggers = [loggers]  # one logger (and anything else, refused below by name)
    out = []
    for lg in loggers:
        if isinstance(lg, str):
            lg = make_logger(lg)
        if not isinstance(lg, Logger):
            raise ValueError(
                "loggers must be elegantpod.tracking.Logger instances or backend names, "
                f"got {repr(lg)[:200]}"
            )
        out.append(lg)
    return out


class Tracker:
    """Feeds :class:`Logger` backends from one background thread.

    Parameters
    ----------
    loggers
        The backends; none: every method returns at once (no thread is started).
    queue_items, close_seconds
        The queue's bound and how long :meth:`close` waits (see the module's docstring).
    """

    def __init__(
        self,
        loggers=(),
        *,
        queue_items: int = QUEUE_ITEMS,
        close_seconds: float = CLOSE_SECONDS,
    ) -> None:
        self.loggers = check_loggers(loggers)
        self.close_seconds = float(close_seconds)
        self._queue_items = int(queue_items)
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._disabled: set[int] = set()
        self._dropped = 0
        self.warning: str | None = None
        """The last thing that went wrong with tracking (the run went on), or ``None``."""
        self._reset()

    def _reset(self) -> None:
        self._started: set[str] = set()
        self._generation: dict[str, int] = {}
        self._segment: dict[str, int] = {}  # the last segment logged, by pod
        self._hparams: dict[str, dict[str, Any]] = {}  # the hyperparameters logged, by pod
        self._event: dict[str, dict] = {}  # the progress event logged last, by pod
        self._final: set[str] = set()  # replaced or failed pods, wholly logged

    @property
    def is_active(self) -> bool:
        """Whether there is a logger to feed (and :meth:`open` was called)."""
        return self._queue is not None

    # ------------------------------------------------------------------ the run's side
    def open(self, group: str, config: dict[str, Any]) -> None:
        """Begin: start the thread and open every logger. Everything is logged anew
        from here (a resumed tournament's loggers get its whole history)."""
        if not self.loggers:
            return
        self._reset()
        self._disabled.clear()
        self._dropped = 0
        self._queue = queue.Queue(self._queue_items)
        self._thread = threading.Thread(
            target=self._work, args=(self._queue,), name="elegantpod-tracking", daemon=True
        )
        self._thread.start()
        self._put("open", group, config)

    def start_run(self, run_id: str, name: str, tags: dict, params: dict) -> None:
        """Enqueue a run (see :meth:`Logger.start_run`)."""
        self._put("start_run", run_id, name, dict(tags), dict(params))

    def log_metrics(self, run_id: str, metrics: dict[str, Any], step: int) -> None:
        """Enqueue the finite numbers of ``metrics`` at ``step``."""
        clean = finite_metrics(metrics)
        if clean:
            self._put("log_metrics", run_id, clean, int(step))

    def log_tables(self, tables: dict[str, list[dict[str, Any]]]) -> None:
        """Enqueue the end's tables (see :meth:`Logger.log_tables`)."""
        self._put("log_tables", tables)

    def observe(self, records: dict, latest: dict[str, dict] | None = None) -> None:
        """Enqueue what changed in the pod ``records`` since the last call: new pods
        (a run each), new history rows (a segment's metrics), a new progress event in
        ``latest`` (training return and losses at its steps: a long segment's curve
        grows as it trains) and changed hyperparameters (step-stamped).

        Called with the tournament's lock held, as often as its loop turns: it reads
        the records, copies plain values and never waits.
        """
        if self._queue is None:
            return
        latest = latest or {}
        for rec in list(records.values()):
            if rec.pod_id in self._final:
                continue
            try:
                self._observe_one(rec, records, latest)
            except Exception as exc:  # a record read from a store is untrusted input
                self._final.add(rec.pod_id)
                self._warn(f"tracking skips pod {rec.pod_id!r}: {type(exc).__name__}: {exc}")

    def _observe_one(self, rec, records: dict, latest: dict) -> None:
        pod = rec.pod_id
        if pod not in self._started:
            self._started.add(pod)
            self.start_run(pod, pod, self._tags(rec, records), rec.hparams)
            self._hparams[pod] = dict(rec.hparams)
            mutation = {k: list(v) for k, v in (rec.mutation or {}).items()}
            if mutation:  # how the generator made it from its parent, where it forked
                first = rec.history[0]["env_steps"] if rec.history else rec.env_steps
                self._put("log_params_change", pod, mutation, int(first))
        event = latest.get(pod)
        if event is not None and event is not self._event.get(pod):
            self._event[pod] = event
            self.log_metrics(pod, _progress(event), event.get("env_steps") or 0)
        done = self._segment.get(pod, 0)
        if rec.history and rec.history[-1].get("segment", 0) > done:
            self._rows(pod, rec, done)
            done = self._segment[pod]
        self._changes(pod, rec.hparams, rec.env_steps)  # a live Tournament.mutate
        if str(rec.status) in FINAL and (event is None or event.get("segment", 0) >= done):
            self._final.add(pod)  # never changes again: skipped from now on

    def _rows(self, pod: str, rec, done: int) -> None:
        """Enqueue the history rows of ``rec`` after segment ``done``."""
        rows = [h for h in rec.history if h.get("segment", 0) > done]
        start = next((h["env_steps"] for h in rec.history if h.get("segment") == done), 0)
        for i, h in enumerate(rows):
            if h.get("hparams"):  # what the segment trained with: from its start
                self._changes(pod, h["hparams"], start)
            metrics = {
                "fitness": h.get("score"),
                "env_steps": h.get("env_steps"),
                "wall_seconds": h.get("time"),
                "segment": h.get("segment"),
            }
            if i == len(rows) - 1:
                metrics["score_std"] = rec.score_std
            self.log_metrics(pod, metrics, h.get("env_steps", 0))
            start = h.get("env_steps", start)
        self._segment[pod] = max(h.get("segment", 0) for h in rows)

    def close(self, tables: dict[str, list[dict[str, Any]]] | None = None) -> None:
        """Log ``tables``, close every logger and wait up to ``close_seconds`` for the
        thread (then warn: what is still queued may be lost)."""
        q, thread = self._queue, self._thread
        if q is None or thread is None:
            return
        if tables:
            self.log_tables(tables)
        self._queue = None
        deadline = time.monotonic() + self.close_seconds
        with contextlib.suppress(queue.Full):  # behind by a full queue: the join warns
            q.put(_CLOSE, timeout=self.close_seconds)
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            self._warn(
                f"tracking did not finish within {self.close_seconds:g}s (a slow tracking "
                "server?); what it had not written yet may be missing"
            )
        if self._dropped:
            self._warn(f"tracking dropped {self._dropped} records: its loggers fell behind")

    # ------------------------------------------------------------------ helpers
    def _tags(self, rec, records: dict) -> dict[str, str]:
        parent = rec.parent
        if parent in self._generation:
            gen = self._generation[parent] + 1
        else:  # walk up the records (a resumed tournament's first look)
            gen, seen, p = 0, {rec.pod_id}, parent
            while p is not None and p not in seen:
                seen.add(p)
                gen += 1
                up = records.get(p)
                p = up.parent if up is not None else None
        self._generation[rec.pod_id] = gen
        return {
            "pod": rec.pod_id,
            "algo": rec.algo,
            "parent": parent or "",
            "generation": str(gen),
            "origin": str(rec.origin.get("kind", "")) if isinstance(rec.origin, dict) else "",
        }

    def _changes(self, pod: str, new: dict[str, Any], step: int) -> None:
        old = self._hparams.get(pod, {})
        if new == old:  # the usual case, each time the loop turns
            return
        changes = {k: [old.get(k), v] for k, v in new.items() if old.get(k) != v}
        if changes:
            self._hparams[pod] = {**old, **new}
            self._put("log_params_change", pod, changes, int(step))

    def _put(self, method: str, *args: Any) -> None:
        q = self._queue
        if q is None:
            return
        try:
            q.put_nowait((method, args))
        except queue.Full:
            self._dropped += 1
            if self._dropped == 1:
                self._warn(
                    f"tracking is {self._queue_items} records behind (a slow tracking "
                    "server?): dropping records until it catches up"
                )

    def _warn(self, text: str) -> None:
        self.warning = text
        _log.warning("elegantpod: %s", text)

    def _work(self, q: queue.Queue) -> None:
        while True:
            item = q.get()
            if item is _CLOSE:
                for lg in self.loggers:
                    with contextlib.suppress(Exception):  # a disabled one too: its files
                        lg.close()
                return
            method, args = item
            for i, lg in enumerate(self.loggers):
                if i in self._disabled:
                    continue
                try:
                    getattr(lg, method)(*args)
                except Exception as exc:  # a user's or a server's failure: not the run's
                    self._disabled.add(i)
                    self._warn(
                        f"tracking: logger {getattr(lg, 'name', type(lg).__name__)!r} "
                        f"disabled after {method} failed: {type(exc).__name__}: {exc}"
                    )


def _progress(event: dict | None) -> dict[str, Any]:
    """The metrics of a progress (or segment-end) event: returns, steps per second and
    losses (``losses/<name>``, as the learners name them)."""
    if not isinstance(event, dict):
        return {}
    out = {k: event.get(k) for k in ("train_return", "eval_return", "steps_per_second")}
    losses = event.get("losses")
    if isinstance(losses, dict):
        named = {
            k if "/" in k else f"losses/{k}": v for k, v in losses.items() if isinstance(k, str)
        }
        out.update(named)
    return out
