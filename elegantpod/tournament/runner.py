"""The runner: the tournament's only Dask glue.

It submits segments, keeps their futures, tells each finished future's outcome apart by
its status (each in its own error boundary), publishes live control through one
``distributed.Variable`` per pod, receives progress through ``subscribe_topic``, counts
worker deaths from the scheduler's own events, and measures the cluster's capacity.

Every method here may talk to the scheduler, so the tournament calls none of them while
holding its lock: the lock guards the population, which never waits on the network.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from elegantpod.agents import get_algo
from elegantpod.tournament.segment import (
    ParentCheckpointError,
    SegmentFailure,
    SegmentResult,
    run_segment,
)
from elegantpod.tournament.spec import PodRecord

CAPACITY_SECONDS = 1.0
"""How long a capacity reading is reused (one ``scheduler_info`` call a second at most)."""
MAX_PODS_PER_GPU = 8
"""Automatic packing stops here: past it, small pods contend for the GPU's streams."""
CUDA_OVERHEAD = 512 * 2**20
"""Memory a pod takes on a GPU beyond its tensors (allocator slack, kernels, workspace)."""


def pods_per_gpu(given: int | None, gpu_bytes: int | None, pod_bytes: int, threads: int) -> int:
    """How many pods share one GPU: ``given``, or as many as its memory holds.

    A pod is counted at twice its estimated tensors plus :data:`CUDA_OVERHEAD`, within
    80% of the GPU's memory, at most :data:`MAX_PODS_PER_GPU` and at most the GPU
    worker's threads (one pod runs per thread). The result is a power of two, so the
    fractional ``GPU`` resource each pod asks for (``1 / n``) adds up exactly.
    """
    if given is not None:
        n = given
    elif gpu_bytes:
        n = int(0.8 * gpu_bytes // (2 * max(pod_bytes, 1) + CUDA_OVERHEAD))
        n = min(n, MAX_PODS_PER_GPU)
    else:
        n = 1
    n = max(1, min(n, max(1, threads)))
    return 1 << (n.bit_length() - 1)


def _gpu_memory() -> int | None:
    """On a worker: total memory of the GPU it sees (``None`` without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(0).total_memory)


@dataclass(frozen=True)
class Outcome:
    """What became of one submitted segment."""

    pod_id: str
    kind: str
    """``"result"``, ``"killed"`` (Dask gave up after worker deaths), ``"error"`` (the
    segment raised), ``"unsubmitted"`` (submitting it failed), ``"lost"`` (cancelled,
    lost, or unreadable: run it again), ``"store"`` (the store refused its checkpoint)
    or ``"fenced"`` (another writer holds the store's lease); see
    :class:`~elegantpod.tournament.segment.SegmentFailure`."""
    result: SegmentResult | None = None
    error: str = ""
    parent_broken: bool = False
    """The segment could not load its parent's checkpoint."""


def control_message(rec: PodRecord, tournament_stopping: bool) -> dict[str, Any]:
    """What a running segment reads from its control Variable (the runner adds a version).

    Built while the tournament holds its lock, so it is a consistent copy of the record.
    """
    learner = get_algo(rec.algo)
    live = {k: v for k, v in rec.hparams.items() if k not in learner.structural_hparams}
    state = "paused" if rec.status == "paused" else "running"
    return {
        "state": "stopped" if rec.stop_requested else state,
        "hparams": live,
        "tournament": "stopped" if tournament_stopping else "running",
    }


class Runner:
    """Segments in flight on a Dask cluster, and the channels to and from them.

    Parameters
    ----------
    client
        The ``distributed.Client``.
    tournament_id
        Prefix of every key, Variable and topic, so tournaments sharing a cluster never
        see each other's.
    """

    def __init__(self, client, tournament_id: str):
        self.client = client
        self.id = tournament_id
        self.topic = f"elegantpod-{tournament_id}"
        self.futures: dict[Any, str] = {}
        self.flying: set[str] = set()
        """Pods with a segment submitted and not yet handled."""
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.inbox: deque = deque()
        """Progress events, appended by the client's event loop, drained by the tournament."""
        self.worker_deaths = 0
        self.versions: Counter = Counter()
        self._variables: dict[str, Any] = {}
        self._shipped: set[str] = set()
        self._capacity = (-float("inf"), 0, False)
        self.pods_per_gpu = 1
        """Pods packed per GPU (see :func:`pods_per_gpu`); set by :meth:`plan_gpus`."""
        self.wants_gpu = True
        self.all_gpu = False
        """False for a tournament told to train on the CPU: GPUs are then not asked for."""
        self.resident_slots = 8
        """Pods a worker process keeps resident (see :mod:`.resident`); set by :meth:`plan`."""
        self._gpu_bytes: int | None = None
        self._lock = threading.Lock()  # futures and flying: the loop and the done callbacks

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Subscribe to progress events and to the scheduler's worker removals."""
        self.client.subscribe_topic(self.topic, self.inbox.append)
        # The scheduler's own record of lost workers and the tasks they were running:
        # a death counts even when its segment sent no progress event before it. A client
        # keeps one handler per topic, so tournaments sharing a client share one.
        _SCHEDULER_EVENTS.add(self.client, self._on_scheduler_event)

    def close(self) -> None:
        """Unsubscribe, free the tournament's resident pods on every worker, and forget
        the control Variables (the cluster stays)."""
        from elegantpod.tournament.resident import drop

        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)
        with contextlib.suppress(Exception):
            _SCHEDULER_EVENTS.remove(self.client, self._on_scheduler_event)
        with contextlib.suppress(Exception):
            self.client.run(drop, self.id)
        self._variables.clear()

    def _on_scheduler_event(self, event) -> None:
        # On the client's event-loop thread: only a counter moves (atomic under the GIL).
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        if msg.get("expected"):
            return  # retired on purpose (scale down): the task moves, nobody died
        prefix = f"elegantpod-{self.id}-"
        self.worker_deaths += sum(
            1 for k in msg.get("processing-tasks", ()) if str(k).startswith(prefix)
        )

    # ------------------------------------------------------------------ capacity
    def plan(self, device: str, given: int | None, pod_bytes: int) -> None:
        """Decide GPU packing and residency from the workers (their GPUs' memory asked
        once): ``pod_bytes`` is a pod's estimated size, ``given`` the spec's
        ``pods_per_gpu``."""
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        self.wants_gpu = device != "cpu"
        gpu_workers = {a: w for a, w in workers.items() if w.get("resources", {}).get("GPU")}
        if gpu_workers and self.wants_gpu:
            if given is None and self._gpu_bytes is None:
                sizes = self.client.run(_gpu_memory, workers=list(gpu_workers))
                self._gpu_bytes = min((b for b in sizes.values() if b), default=None)
            threads = min(int(w.get("nthreads", 1)) for w in gpu_workers.values())
            self.pods_per_gpu = pods_per_gpu(given, self._gpu_bytes, pod_bytes, threads)
            self.resident_slots = self.pods_per_gpu  # what the GPU's memory was planned for
        else:
            self.pods_per_gpu = 1
            memory = min((int(w.get("memory_limit") or 0) for w in workers.values()), default=0)
            fit = int(0.5 * memory // (4 * max(pod_bytes, 1))) if memory else 8
            self.resident_slots = max(1, min(32, fit))
        self._capacity = (-float("inf"), 0, False)

    def capacity(self) -> tuple[int, bool]:
        """Pod slots and whether they are GPU shares.

        On GPU workers: ``pods_per_gpu`` per GPU, at most the worker's threads; else
        one per worker thread.
        """
        t, n, gpu = self._capacity
        if time.monotonic() - t < CAPACITY_SECONDS:
            return n, gpu
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        gpu_slots = 0
        for w in workers.values():
            # One GPU per worker process, as dask-cuda starts them: "auto" trains on the
            # process's first GPU, so a worker declaring more still packs one.
            if w.get("resources", {}).get("GPU") and self.wants_gpu:
                gpu_slots += min(int(w.get("nthreads", 1)), self.pods_per_gpu)
        n = gpu_slots or sum(int(w.get("nthreads", 1)) for w in workers.values())
        # Dask may place a loosely pinned task on any worker, resources or not: pin GPU
        # segments to their resident worker only where every worker has a GPU.
        self.all_gpu = bool(workers) and all(
            w.get("resources", {}).get("GPU") for w in workers.values()
        )
        self._capacity = (time.monotonic(), n, bool(gpu_slots))
        return n, bool(gpu_slots)

    # ------------------------------------------------------------------ segments
    def in_flight(self) -> int:
        """Segments submitted and not yet handled."""
        return len(self.flying)

    def reserve(self, pod_id: str) -> None:
        """Mark a pod in flight before its submission leaves the lock (no double submit)."""
        with self._lock:
            self.flying.add(pod_id)

    def submit(
        self, pod_id: str, task, retries: int, uses_gpu: bool, ship=(), worker: str | None = None
    ) -> None:
        """Submit one segment; on failure the pod is handed back as a ``lost`` outcome.

        ``worker``: where the pod is resident and a slot just freed; Dask runs it there
        (or elsewhere if that worker is gone), so the pod need not be rebuilt.
        """
        if uses_gpu and not self.all_gpu:
            worker = None
        try:
            for name, register, args in ship:
                if name not in self._shipped:
                    self.client.register_plugin(_Register(register, *args), name=name)
                    self._shipped.add(name)
            key = f"elegantpod-{self.id}-{pod_id}-s{task.segment}-r{retries}-{time.monotonic_ns()}"
            fut = self.client.submit(
                run_segment,
                task,
                key=key,
                pure=False,
                resources={"GPU": 1 / self.pods_per_gpu} if uses_gpu else None,
                workers=[worker] if worker else None,
                allow_other_workers=bool(worker),
            )
        except Exception as exc:  # a plugin failed, the scheduler went away: retried, bounded
            self.done.put(Outcome(pod_id, "unsubmitted", error=f"{type(exc).__name__}: {exc}"))
            return
        with self._lock:
            self.futures[fut] = pod_id
        # Dask calls this from its own thread when the segment ends: the loop then waits
        # on one queue instead of asking about every future in flight each round.
        fut.add_done_callback(self.done.put)

    def take_done(self, timeout: float) -> list:
        """Finished futures (and failed submissions), waiting up to ``timeout`` for one."""
        try:
            done = [self.done.get(timeout=timeout)]
        except queue.Empty:
            return []
        while len(done) < 1000:
            try:
                done.append(self.done.get_nowait())
            except queue.Empty:
                break
        return done

    def outcome(self, item) -> Outcome | None:
        """The outcome of a finished future, by its status; ``None`` if not ours.

        Each future in its own error boundary: reading one result can fail (a worker
        that held it died, the scheduler went away) and must never strand the others.
        """
        if isinstance(item, Outcome):
            with self._lock:
                self.flying.discard(item.pod_id)
            return item
        with self._lock:
            pod_id = self.futures.pop(item, None)
            if pod_id is None:
                return None
            self.flying.discard(pod_id)
        from distributed.scheduler import KilledWorker

        try:
            status = item.status
            if status == "finished":
                result = item.result(timeout=30)
                # Drop the result from the cluster: otherwise a dying worker that holds
                # it makes Dask recompute a segment we already have.
                item.release()
                if isinstance(result, SegmentFailure):  # the store, not the pod, failed
                    return Outcome(pod_id, result.kind, error=result.error)
                return Outcome(pod_id, "result", result=result)
            if status == "error":
                exc = item.exception(timeout=30)
                text = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, KilledWorker):
                    return Outcome(pod_id, "killed", error=text)
                return Outcome(
                    pod_id,
                    "error",
                    error=text,
                    parent_broken=isinstance(exc, ParentCheckpointError),
                )
            return Outcome(pod_id, "lost", error=f"future {status}")  # cancelled, lost
        except Exception as exc:
            return Outcome(pod_id, "lost", error=f"{type(exc).__name__}: {exc}")

    def cancel_all(self) -> list[str]:
        """Cancel what is still in flight; return those pods."""
        with self._lock:
            futures, self.futures = dict(self.futures), {}
            pods = sorted(self.flying)
            self.flying.clear()
        for fut in futures:
            with contextlib.suppress(Exception):
                fut.cancel()
        return pods

    def wait_all(self, timeout: float, every: float = 0.05) -> None:
        """Wait until every future in flight is done, or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                futures = list(self.futures)
            if all(f.done() for f in futures):
                return
            time.sleep(every)

    # ------------------------------------------------------------------ control
    def publish(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        """Set each pod's control Variable from ``(pod_id, control_message(...))`` pairs."""
        from distributed import Variable

        for pod_id, msg in messages:
            with self._lock:
                self.versions[pod_id] += 1
                version = self.versions[pod_id]
                var = self._variables.get(pod_id)
                if var is None:
                    var = Variable(self.control_name(pod_id), client=self.client)
                    self._variables[pod_id] = var
            var.set({**msg, "version": version})

    def control_name(self, pod_id: str) -> str:
        """The name of a pod's control Variable."""
        return f"elegantpod-{self.id}-{pod_id}"


class _FanOut:
    """One ``"all"`` topic handler per client, calling every tournament's own."""

    def __init__(self):
        self._lock = threading.Lock()  # the handler lists (the event loop reads them)
        self._subscribing = threading.Lock()  # (un)subscribe calls, in order
        self._handlers: dict[int, list] = {}

    def add(self, client, handler) -> None:
        key = id(client)
        with self._subscribing:
            with self._lock:
                handlers = self._handlers.setdefault(key, [])
                first = not handlers
                handlers.append(handler)
            if first:
                client.subscribe_topic("all", lambda event: self._call(key, event))

    def remove(self, client, handler) -> None:
        key = id(client)
        with self._subscribing:
            with self._lock:
                handlers = self._handlers.get(key, [])
                if handler in handlers:
                    handlers.remove(handler)
                last = not handlers
                if last:
                    self._handlers.pop(key, None)
            if last:
                client.unsubscribe_topic("all")

    def _call(self, key: int, event) -> None:
        with self._lock:
            handlers = list(self._handlers.get(key, ()))
        for handler in handlers:
            handler(event)


_SCHEDULER_EVENTS = _FanOut()


def cluster_info(client) -> dict[str, Any]:
    """Workers, threads, memory, GPUs, the Dask dashboard link and whether it scales."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return {
        "workers": len(workers),
        "threads": sum(int(w.get("nthreads", 0)) for w in workers.values()),
        "memory_bytes": sum(int(w.get("memory_limit") or 0) for w in workers.values()),
        "gpus": sum(int(w.get("resources", {}).get("GPU", 0)) for w in workers.values()),
        "dashboard": getattr(client, "dashboard_link", None),
        "can_scale": hasattr(getattr(client, "cluster", None), "scale"),
    }


class _Register(WorkerPlugin):
    """Runs ``register(*args)`` on each worker as it joins (custom algorithms and envs)."""

    def __init__(self, register, *args):
        self.register, self.args = register, args

    def setup(self, worker) -> None:
        self.register(*self.args)
