"""The runner: the tournament's only Dask glue, on the client.

It submits segments, keeps their futures, tells each finished future's outcome apart by
its status (each in its own error boundary), publishes live control through one
``distributed.Variable`` per pod, receives progress through ``subscribe_topic``, counts
worker deaths from the scheduler's own events, and measures the cluster's capacity.

Every method here may talk to the scheduler, so the tournament calls none of them while
holding its lock: the lock guards the population, which never waits on the network.

Where the rest runs: a segment itself runs on a Dask worker
(:mod:`~elegantpod.tournament.worker.segment`, its pods kept there by
:mod:`~elegantpod.tournament.worker.resident`), as does the ``_Register`` plugin's setup; the GPU
packing is pure (:mod:`~elegantpod.tournament.client.gpu_plan`); the scheduler's event stream is
shared per client (:mod:`~elegantpod.tournament.client.scheduler_events`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from elegantpod.agents import get_algo
from elegantpod.clusters.gpu import gpu_worker_info, mps_running_cached
from elegantpod.tournament.client.gpu_plan import plan_gpus, worker_ref
from elegantpod.tournament.client.scheduler_events import SCHEDULER_EVENTS
from elegantpod.tournament.core.protocol import (
    ControlMessage,
    OutcomeKind,
    PodStatus,
    TournamentStatus,
)
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.worker.segment import (
    ParentCheckpointError,
    SegmentFailure,
    SegmentResult,
    run_segment,
)

CAPACITY_SECONDS = 1.0
"""How long a capacity reading is reused (one ``scheduler_info`` call a second at most)."""
STALL_SECONDS = 30.0
"""A worker whose heartbeat has not moved for this long is taken as stopped (SIGSTOP, a
frozen machine): an ending tournament stops waiting for its segments and asks nothing
more of it. Dask itself removes such a worker only after ``worker-ttl`` (5 minutes);
a live worker, however loaded, beats every second or so."""
HEARTBEAT_SECONDS = 2.0
"""How often the runner reads the workers' heartbeats (one ``scheduler_info`` call)."""
PROBE_SECONDS = 300.0
"""How long :meth:`Runner.probe` waits for its one task (a worker still starting, a
slow import of the user's env)."""


@dataclass(frozen=True)
class Outcome:
    """What became of one submitted segment."""

    pod_id: str
    kind: OutcomeKind
    result: SegmentResult | None = None
    error: str = ""
    parent_broken: bool = False
    """The segment could not load its parent's checkpoint."""

    def __post_init__(self) -> None:  # an unknown kind fails here, not as "lost" later
        object.__setattr__(self, "kind", OutcomeKind(self.kind))


def control_message(rec: PodRecord, tournament_stopping: bool) -> ControlMessage:
    """What a running segment reads from its control Variable (the runner numbers it);
    built while the tournament holds its lock, so a consistent copy of the record."""
    learner = get_algo(rec.algo)
    live = {k: v for k, v in rec.hparams.items() if k not in learner.structural_hparams}
    state = PodStatus.PAUSED if rec.status == PodStatus.PAUSED else PodStatus.RUNNING
    return ControlMessage(
        state=PodStatus.STOPPED if rec.stop_requested else state,
        hparams=live,
        tournament=TournamentStatus.STOPPED if tournament_stopping else TournamentStatus.RUNNING,
    )


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
        """Pods running at once per GPU, one per worker process (see
        :func:`~elegantpod.clusters.gpu.pods_per_gpu`); set by :meth:`plan`."""
        self.wants_gpu = True
        self.all_gpu = False
        """False for a tournament told to train on the CPU: GPUs are then not asked for."""
        self.resident_slots = 8
        """Pods a worker process keeps resident (see :mod:`.resident`); set by :meth:`plan`."""
        self.gpu_share = 1.0
        """The ``GPU`` resource a segment asks for: one GPU worker process's own share, so
        a process runs one pod at a time; set by :meth:`plan`."""
        self.gpu_workers: list[str] | None = None
        """GPU worker processes segments go to when fewer pods fit a GPU than it has
        processes (``pods_per_gpu`` of each); ``None``: all."""
        self.mps: bool | None = None
        """Whether CUDA MPS runs on the GPU workers' machines (``None``: not asked)."""
        self._gpu_bytes: int | None = None
        self._lock = threading.Lock()  # futures and flying: the loop and the done callbacks
        self._heartbeats: dict[str, tuple[Any, float]] = {}
        """Worker address -> (its ``last_seen`` as the scheduler reported it, our
        monotonic time when that value was first read): a heartbeat that stopped moving
        is measured on this process's clock, whatever the scheduler's clock says."""
        self._heartbeats_read = -float("inf")
        self.stalled: dict[str, float] = {}
        """Workers whose heartbeat stopped (address -> seconds since it last moved), as
        of the last :meth:`watch_heartbeats`."""

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Subscribe to progress events and to the scheduler's worker removals."""
        self.client.subscribe_topic(self.topic, self.inbox.append)
        # The scheduler's own record of lost workers and the tasks they were running:
        # a death counts even when its segment sent no progress event before it. A client
        # keeps one handler per topic, so tournaments sharing a client share one.
        SCHEDULER_EVENTS.add(self.client, self._on_scheduler_event)

    def close(self) -> None:
        """Unsubscribe, free the tournament's resident pods on every worker that still
        answers, and forget the control Variables (the cluster stays).

        A stopped worker is not asked: ``Client.run`` waits for every worker it asks, so
        one frozen process would hold the close until Dask removes it (minutes)."""
        from elegantpod.tournament.worker.resident import drop

        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)
        with contextlib.suppress(Exception):
            SCHEDULER_EVENTS.remove(self.client, self._on_scheduler_event)
        with contextlib.suppress(Exception):
            self.watch_heartbeats(force=True)  # also the workers there are now
            workers = None
            if self.stalled:
                workers = [w for w in self._heartbeats if w not in self.stalled]
            if workers != []:
                self.client.run(drop, self.id, workers=workers, on_error="ignore")
        self._variables.clear()

    def watch_heartbeats(self, force: bool = False) -> dict[str, float]:
        """Read the workers' heartbeats (at most every :data:`HEARTBEAT_SECONDS` unless
        ``force``) and return :attr:`stalled`: the workers silent for
        :data:`STALL_SECONDS` or more."""
        now = time.monotonic()
        if not force and now - self._heartbeats_read < HEARTBEAT_SECONDS:
            return self.stalled
        self._heartbeats_read = now
        # empty while the client has no scheduler (reconnecting, or gone for good)
        workers = self.client.scheduler_info(n_workers=-1).get("workers") or {}
        stalled = {}
        for address, info in workers.items():
            seen = info.get("last_seen")
            before = self._heartbeats.get(address)
            if before is None or before[0] != seen:
                self._heartbeats[address] = (seen, now)
            elif now - before[1] >= STALL_SECONDS:
                stalled[address] = now - before[1]
        for gone in set(self._heartbeats) - set(workers):
            del self._heartbeats[gone]
        self.stalled = stalled
        return stalled

    def held_by_stalled(self) -> dict[str, str]:
        """Pods in flight whose segment runs on a stalled worker: ``{pod: worker}``."""
        if not self.stalled:
            return {}
        with self._lock:
            by_key = {f.key: pod for f, pod in self.futures.items() if not f.done()}
        held = {}
        for worker, keys in self.client.processing(workers=list(self.stalled)).items():
            for key in keys:
                if key in by_key:
                    held[by_key[key]] = worker
        return held

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
        """Decide GPU packing and residency from the workers (their GPUs asked once):
        ``pod_bytes`` is a pod's estimated size, ``given`` the spec's ``pods_per_gpu``.

        GPU workers run one pod per process: a segment asks for one process's ``GPU``
        share (see :func:`plan_gpus`).
        """
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        self.wants_gpu = device != "cpu"
        gpu_workers = {a: w for a, w in workers.items() if w.get("resources", {}).get("GPU")}
        self.gpu_workers = None
        if gpu_workers and self.wants_gpu:
            found = self.client.run(gpu_worker_info, workers=list(gpu_workers), on_error="return")
            found = {a: i for a, i in found.items() if isinstance(i, dict)}  # not the dead
            plan = plan_gpus(gpu_workers, found, given, pod_bytes, self._gpu_bytes)
            self._gpu_bytes = plan.gpu_bytes
            self.pods_per_gpu, self.resident_slots = plan.pods_per_gpu, plan.resident_slots
            self.gpu_share, self.gpu_workers, self.mps = plan.share, plan.workers, plan.mps
        else:
            self.pods_per_gpu = 1
            memory = min((int(w.get("memory_limit") or 0) for w in workers.values()), default=0)
            fit = int(0.5 * memory // (4 * max(pod_bytes, 1))) if memory else 8
            self.resident_slots = max(1, min(32, fit))
        self._capacity = (-float("inf"), 0, False)

    def capacity(self) -> tuple[int, bool]:
        """Pod slots and whether they are GPU processes.

        On GPU workers: one per GPU worker process (those of :attr:`gpu_workers` when
        set); else one per worker thread.
        """
        t, n, gpu = self._capacity
        if time.monotonic() - t < CAPACITY_SECONDS:
            return n, gpu
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        gpu_slots = 0
        chosen = set(self.gpu_workers) if self.gpu_workers is not None else None
        for address, w in workers.items():
            # One pod per GPU worker process, whatever its threads: pods that share a
            # process break each other's CUDA-graph captures (see elegantpod.clusters.gpu).
            is_gpu = bool(w.get("resources", {}).get("GPU")) and self.wants_gpu
            if is_gpu and (chosen is None or worker_ref(address, w) in chosen):
                gpu_slots += 1
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
        workers = [worker] if worker else None
        if uses_gpu and not worker and self.gpu_workers is not None:
            # Loose, so that a segment never waits for workers that were restarted under
            # new addresses; Dask's work stealing would move a queued one to any idle
            # process, but the capacity (one segment per chosen process) queues none.
            workers = self.gpu_workers
        try:
            self.ship(ship)
            key = f"elegantpod-{self.id}-{pod_id}-s{task.segment}-r{retries}-{time.monotonic_ns()}"
            fut = self.client.submit(
                run_segment,
                task,
                key=key,
                pure=False,
                resources={"GPU": self.gpu_share} if uses_gpu else None,
                workers=workers,
                allow_other_workers=bool(workers),
            )
        except Exception as exc:  # a plugin failed, the scheduler went away: retried, bounded
            error = f"{type(exc).__name__}: {exc}"
            self.done.put(Outcome(pod_id, OutcomeKind.UNSUBMITTED, error=error))
            return
        with self._lock:
            self.futures[fut] = pod_id
        # Dask calls this from its own thread when the segment ends: the loop then waits
        # on one queue instead of asking about every future in flight each round.
        fut.add_done_callback(self.done.put)

    def ship(self, ship) -> None:
        """Register ``ship``'s worker plugins (``(name, register, args)``) once each:
        every worker runs them now, and each that joins later as it starts."""
        for name, register, args in ship:
            if name not in self._shipped:
                self.client.register_plugin(_Register(register, *args), name=name)
                self._shipped.add(name)

    def probe(self, fn, *args, timeout: float = PROBE_SECONDS):
        """``fn(*args)`` on one worker, its result or its exception (a ``TimeoutError``
        after ``timeout`` seconds): checks a worker can do what every pod will."""
        return self.client.submit(fn, *args, pure=False).result(timeout=timeout)

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
                return Outcome(pod_id, OutcomeKind.RESULT, result=result)
            if status == "error":
                exc = item.exception(timeout=30)
                text = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, KilledWorker):
                    return Outcome(pod_id, OutcomeKind.KILLED, error=text)
                return Outcome(
                    pod_id,
                    OutcomeKind.ERROR,
                    error=text,
                    parent_broken=isinstance(exc, ParentCheckpointError),
                )
            return Outcome(pod_id, OutcomeKind.LOST, error=f"future {status}")  # cancelled, lost
        except Exception as exc:
            return Outcome(pod_id, OutcomeKind.LOST, error=f"{type(exc).__name__}: {exc}")

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

    def wait_all(self, timeout: float, every: float = 0.05) -> dict[str, str]:
        """Wait until every future in flight is done, or ``timeout`` passes, or every
        one not done runs on a stalled worker (see :meth:`watch_heartbeats`).

        Returns the pods left waiting on a stalled worker, ``{pod: worker}``: no use
        waiting for those, their worker is not running."""
        deadline = time.monotonic() + timeout
        held: dict[str, str] = {}
        while time.monotonic() < deadline:
            with self._lock:
                waiting = [f for f in self.futures if not f.done()]
            if not waiting:
                return {}
            with contextlib.suppress(Exception):  # a scheduler gone: wait out the timeout
                if self.watch_heartbeats():
                    held = self.held_by_stalled()
                    if len(held) >= len(waiting):
                        return held
            time.sleep(every)
        return held

    # ------------------------------------------------------------------ control
    def publish(self, messages: list[tuple[str, ControlMessage]]) -> None:
        """Set each pod's control Variable from ``(pod_id, control_message(...))`` pairs,
        each numbered and as plain data."""
        from distributed import Variable

        for pod_id, msg in messages:
            with self._lock:
                self.versions[pod_id] += 1
                version = self.versions[pod_id]
                var = self._variables.get(pod_id)
                if var is None:
                    var = Variable(self.control_name(pod_id), client=self.client)
                    self._variables[pod_id] = var
            var.set(replace(msg, version=version).to_dict())

    def control_name(self, pod_id: str) -> str:
        """The name of a pod's control Variable."""
        return f"elegantpod-{self.id}-{pod_id}"


def cluster_info(client) -> dict[str, Any]:
    """Workers, threads, memory, GPUs and their worker processes, the Dask dashboard link,
    whether it scales, and whether CUDA MPS runs (``None``: unknown, a remote cluster or
    no GPUs; see :meth:`Runner.plan` for a tournament's own reading)."""
    from distributed import LocalCluster

    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    shares = [float(w.get("resources", {}).get("GPU", 0)) for w in workers.values()]
    gpus = round(sum(shares))  # a GPU's processes hold 1/n each
    processes = sum(1 for s in shares if s)
    local = isinstance(getattr(client, "cluster", None), LocalCluster)
    return {
        "workers": len(workers),
        "threads": sum(int(w.get("nthreads", 0)) for w in workers.values()),
        "memory_bytes": sum(int(w.get("memory_limit") or 0) for w in workers.values()),
        "gpus": gpus,
        "gpu_processes": processes,
        "pods_per_gpu": processes // gpus if gpus else 0,
        "mps": mps_running_cached() if gpus and local else None,
        "dashboard": getattr(client, "dashboard_link", None),
        "can_scale": hasattr(getattr(client, "cluster", None), "scale"),
    }


class _Register(WorkerPlugin):
    """Runs ``register(*args)`` on each worker as it joins (custom algorithms and envs)."""

    def __init__(self, register, *args):
        self.register, self.args = register, args

    def setup(self, worker) -> None:
        self.register(*self.args)


# ----------------------------------------------------------------------
# What a tournament's cluster has and does, for the dashboard and ``cluster_info()``:
# the cluster's own figures with the tournament's runner's on top (pod slots, pods in
# flight, pods per GPU as planned, CUDA MPS as asked on the GPU workers' machines).


def tournament_cluster_info(client, runner) -> dict[str, Any]:
    """The cluster's figures (zeros before a client exists) and the ``runner``'s (the
    current run's, or ``None`` when not running)."""
    info = {"workers": 0, "threads": 0, "memory_bytes": 0, "gpus": 0, "dashboard": None}
    info.update({"gpu_processes": 0, "mps": None, "can_scale": False})
    if client is not None:
        info.update(cluster_info(client))
    info["pods_in_flight"] = runner.in_flight() if runner is not None else 0
    info["pods_per_gpu"] = runner.pods_per_gpu if runner is not None and info["gpus"] else 0
    if runner is not None and runner.mps is not None:
        info["mps"] = runner.mps  # asked on the GPU workers' own machines
    info["slots"] = runner.capacity()[0] if runner is not None else None
    return info


def scale_cluster(client, n_workers: int) -> None:
    """Ask ``client``'s cluster for ``n_workers`` workers; ``ValueError`` for a bad count
    or a cluster that cannot be scaled from here."""
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
        raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
    cluster = getattr(client, "cluster", None)
    if cluster is None or not hasattr(cluster, "scale"):
        raise ValueError("this client's cluster cannot be scaled from here")
    cluster.scale(n_workers)
