"""The engine: the background loop that drives a tournament, and its lifecycle.

Each round: decide under the lock what to submit (the population, pure), submit and read
finished segments outside it (the runner, Dask), fold the outcomes in under the lock,
then save outside it. Saving goes through the store's lease (one writer per store); a
failing store pauses saving with a visible warning and retries with back-off, while the
pods train on, and pruning keeps the store bounded.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections import Counter
from typing import Any

from elegantpod.tournament.lease import Lease, LeaseError, LeaseLost
from elegantpod.tournament.protocol import EventKind, OutcomeKind, TournamentStatus
from elegantpod.tournament.runner import Runner, control_message
from elegantpod.tournament.store import needed_checkpoints
from elegantpod.tournament.tasks import largest_pod_bytes, segment_task, shipping

LOOP_SECONDS = 0.1
FINISH_SECONDS = 120.0
"""How long the end of a tournament waits for running segments to checkpoint and return."""
SAVE_SECONDS = 1.0
"""Segment results are saved to the store at most this often (control actions at once)."""
PRUNE_SECONDS = 2.0
"""Checkpoints nobody needs any more are deleted at most this often: one listing each (a
LIST request on object stores), and between two of them at most a few segments land."""
LEASE_SECONDS = 2.0
"""How often the loop checks the lease (one read), saves or not; the lease heartbeats itself."""
MAX_TRANSIENT_FAILURES = 20
"""Consecutive scheduler errors after which a tournament gives up."""
STORE_GIVE_UP_SECONDS = 120.0
"""A store that has refused every snapshot for this long stops the tournament (failed):
a short outage is ridden out while pods train on, a full or read-only disk is not."""


def _transient_errors() -> tuple[type[BaseException], ...]:
    from distributed.comm.core import CommClosedError

    return (OSError, CommClosedError, TimeoutError)


TRANSIENT_ERRORS = _transient_errors()


class Engine:
    """Lifecycle and loop of a :class:`~elegantpod.tournament.Tournament` (a mixin: the
    facade owns ``spec``, ``store``, ``population``, ``client``, ``_lock``)."""

    def _init_engine(self) -> None:
        self._runner: Runner | None = None
        self._lease: Lease | None = None
        self._force = False
        self._thread: threading.Thread | None = None
        self._write_lock = threading.Lock()  # one snapshot write at a time
        self._stop_requested = False
        self._stopped_by_user = False  # stop() ended the run before its budget
        self._status = TournamentStatus.CREATED
        self._error: str | None = None
        self.warning: str | None = None
        """Why saving to the store is failing right now (training goes on), or None."""
        self._elapsed_before = 0.0
        self._started_at: float | None = None
        self._deaths_at_start = 0
        self._dirty = False
        self._saved_at = -float("inf")
        self._save_failures = 0
        self._save_failing_since: float | None = None
        self._store_failure: str | None = None  # why the store stopped the tournament
        self.saved = True
        """Whether the store holds the state :meth:`summary` reports (False after a save
        that failed; a final save that fails leaves it False)."""
        self._retry_save_at = 0.0
        self._pruned_at = -float("inf")
        self._last_worker: dict[str, str] = {}  # where each pod is resident
        self._lease_checked_at = -float("inf")
        self._freed: Counter = Counter()  # slots that finished segments freed, by worker
        self.store_bytes: int | None = None
        """Bytes of checkpoints in the store at the last pruning (``summary()`` shows it)."""

    # ------------------------------------------------------------------ lifecycle
    def start(self, client=None, *, close_client: bool | None = None):
        """Start (or continue) the tournament in the background and return at once.

        ``client`` replaces the one given at construction; ``close_client=True`` closes
        it (and its cluster) when the tournament ends, as for the embedded default.
        Raises :class:`~elegantpod.tournament.lease.LeaseError` if another tournament
        writes this store.
        """
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise RuntimeError("tournament is already running")
            if client is not None:
                self.client, self._own_client = client, bool(close_client)
            elif close_client is not None:
                self._own_client = close_client
        self.store.ensure()
        lease = Lease(self.store).acquire(force=self._force)
        lease.keep_alive()  # until release: a writer waiting at its end is not stale
        try:
            self.store.clean_orphans()
            if self.client is None:
                from elegantpod.dask_cluster import cluster

                # on a GPU node the processes per GPU are planned for this tournament's pods
                self.client = cluster(
                    pods_per_gpu=self.spec.pods_per_gpu,
                    pod_bytes=largest_pod_bytes(self.spec, self.population.base_hparams),
                )
            with self._lock:
                self.population.fill()
                self._lease = lease
            self.store.write_json("tournament.json", self.spec.to_dict())
            self._save(force=True)
            self._runner = Runner(self.client, self.id)
            self._runner.open()
            size = largest_pod_bytes(self.spec, self.population.base_hparams)
            self._runner.plan(self.spec.device, self.spec.pods_per_gpu, size)
            with self._lock:
                messages = [(r.pod_id, control_message(r, False)) for r in self.population.alive()]
                self._stop_requested = self._stopped_by_user = False
                self._error = None
                self._store_failure = None
                self._save_failing_since = None
                self._status = TournamentStatus.RUNNING
                self._started_at = time.monotonic()
                self._deaths_at_start = self.worker_deaths_survived  # before the new runner
            self._runner.publish(messages)
        except BaseException:
            self._lease = None
            lease.release()
            if self._runner is not None:
                with contextlib.suppress(Exception):
                    self._runner.close()
                self._runner = None
            raise
        self._thread = threading.Thread(
            target=self._loop, name=f"tournament-{self.id}", daemon=True
        )
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the tournament ends (or ``timeout``); return :meth:`summary`."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.summary()

    def _loop(self) -> None:
        try:
            failures = 0
            while True:
                try:
                    if self._step():
                        break
                    failures = 0
                except TRANSIENT_ERRORS as exc:
                    # A scheduler hiccup must not end a tournament of many hours: retry,
                    # and give up only if it persists.
                    failures += 1
                    self.warning = f"scheduler error ({failures}): {type(exc).__name__}: {exc}"
                    if failures > MAX_TRANSIENT_FAILURES:
                        raise
                    time.sleep(min(5.0, 0.2 * failures))
        except LeaseLost as exc:
            self._error, self._status = str(exc), TournamentStatus.FAILED
        except Exception:
            self._error, self._status = traceback.format_exc(), TournamentStatus.FAILED
        finally:
            with contextlib.suppress(Exception):
                self._finish()

    def _step(self) -> bool:
        """One round: submit what fits, handle what finished, submit again into the slots
        that freed (before saving: a pod waits for no fsync), save. True: time to end."""
        if time.monotonic() - self._lease_checked_at >= LEASE_SECONDS:
            self._lease_checked_at = time.monotonic()
            self._keep_lease()
        if self._submit_runnable():
            return True
        done = self._runner.take_done(LOOP_SECONDS)
        if done:
            self._handle(done, ending=False)
            if self._submit_runnable():
                return True
        self._save()
        return False

    def _submit_runnable(self) -> bool:
        """Submit queued pods into the free slots; True when the tournament should end."""
        runner = self._runner
        capacity, uses_gpu = runner.capacity()
        with self._lock:
            self._drain_events()
            if self.population.should_end(
                self._elapsed(), self._stop_requested, runner.in_flight()
            ):
                return True
            todo = []
            for rec in self.population.runnable(runner.flying, capacity - runner.in_flight()):
                # Back to the worker where it is resident, if that one just freed a slot.
                worker = self._last_worker.get(rec.pod_id)
                worker = worker if self._freed[worker] > 0 else None
                self._freed[worker] -= 1
                task = segment_task(
                    self.spec, rec, self.store, runner, self.id, uses_gpu, self.uid, self._lease
                )
                ship = shipping(self.spec.env_id, rec.algo)
                todo.append((rec.pod_id, task, rec.retries, ship, worker))
                runner.reserve(rec.pod_id)
                self.population.submitted(rec)
            self._freed.clear()
        for pod_id, task, retries, ship, worker in todo:  # network calls: never under the lock
            runner.submit(pod_id, task, retries, uses_gpu, ship, worker)
        return False

    def _handle(self, done: list, ending: bool) -> None:
        runner = self._runner
        outcomes = [o for o in map(runner.outcome, done) if o is not None]
        messages = []
        with self._lock:
            self._drain_events()
            for o in outcomes:
                if o.pod_id not in self.population.records:
                    continue
                if o.kind == OutcomeKind.RESULT:
                    self.events_sent += o.result.events_sent
                    if o.result.worker:
                        self._last_worker[o.pod_id] = o.result.worker
                        self._freed[o.result.worker] += 1
                    new = self.population.on_result(
                        o.result,
                        ending=ending,
                        stopping=self._stop_requested,
                        now=self._elapsed(),
                    )
                elif o.kind in (OutcomeKind.KILLED, OutcomeKind.ERROR):
                    new = self.population.on_failure(
                        o.pod_id,
                        o.error,
                        retry=o.kind == OutcomeKind.KILLED,
                        parent_broken=o.parent_broken,
                        ending=ending,
                    )
                elif o.kind == OutcomeKind.UNSUBMITTED:
                    new = self.population.on_unsubmitted(o.pod_id, o.error, ending)
                elif o.kind in (OutcomeKind.STORE, OutcomeKind.FENCED):
                    # Not the pod's failure: it continues from its last checkpoint when
                    # the store takes writes again (a resume), or under the writer that
                    # holds the store now. The tournament stops.
                    self.population.on_lost(o.pod_id)
                    self._stop_requested = True
                    if o.kind == OutcomeKind.FENCED:
                        self._status, self._error = TournamentStatus.FAILED, self._error or o.error
                    else:
                        self._store_failure = self._store_failure or o.error
                    new = []
                else:
                    self.population.on_lost(o.pod_id)
                    new = []
                messages += [(r.pod_id, control_message(r, self._stop_requested)) for r in new]
                self._dirty = True
        if messages and not ending:
            runner.publish(messages)

    def _finish(self) -> None:
        """Ask running pods to stop, collect their last segments, save, release.

        Whatever fails on the way (a scheduler gone, a store gone), the final statuses
        are set, the lease is released and an own cluster is closed.
        """
        runner = self._runner
        try:
            with self._lock:
                self._stop_requested = True
                flying = list(runner.flying)
                messages = [(p, control_message(self.population.records[p], True)) for p in flying]
            with contextlib.suppress(Exception):
                runner.publish(messages)
            runner.wait_all(FINISH_SECONDS)
            while True:
                done = runner.take_done(0.01)
                if not done:
                    break
                self._handle(done, ending=True)
        except Exception:
            self._error = self._error or traceback.format_exc()
        finally:
            for pod in runner.cancel_all():
                with self._lock:
                    self.population.on_lost(pod)
            with self._lock:
                why = self.population.end()
                self._deaths_at_start = self.worker_deaths_survived  # the runner goes
                self._elapsed_before = self._elapsed()
                self._started_at = None
                if self._store_failure is not None:
                    self._status = TournamentStatus.FAILED
                    self._error = (
                        f"store {self.store.url!r} stopped taking writes: "
                        f"{self._store_failure}. Every checkpoint it took is intact; once it "
                        "takes writes again, resume (Tournament.resume(store), or --resume)"
                    )
                elif why is not None:
                    self._status, self._error = TournamentStatus.FAILED, why
                elif self._status != TournamentStatus.FAILED:
                    early = self._stopped_by_user
                    self._status = TournamentStatus.STOPPED if early else TournamentStatus.FINISHED
                self._dirty = True
                self.saved = False  # until the final save lands
            with contextlib.suppress(Exception):  # a lost lease or a dead store: no more
                self._save(force=True)
            if not self.saved:
                self.warning = (
                    f"the final state could not be saved to store {self.store.url!r}"
                    + (f" ({self.warning})" if self.warning else "")
                    + ": the store holds its last saved snapshot, and resuming continues "
                    "from there; the counts here are this process's"
                )
            with contextlib.suppress(OSError):
                self.store.clean_orphans()
            with contextlib.suppress(Exception):
                runner.close()
            lease, self._lease = self._lease, None
            if lease is not None:
                with contextlib.suppress(Exception):
                    lease.release()
            if self._own_client:
                from elegantpod.dask_cluster import shutdown

                with contextlib.suppress(Exception):
                    shutdown(self.client)  # quietly: no nanny warnings on the terminal
                self.client = None  # a later start() makes a new one

    # ------------------------------------------------------------------ the store
    def _save(self, force: bool = False) -> None:
        """Snapshot leaderboard, records and counters to the store (one object).

        Segment results save at most every :data:`SAVE_SECONDS`; control actions at once
        (``force``). Only the lease holder writes: before start and after the end, a
        change is kept in memory and saved by the next ``start()``. A failing store
        pauses saving (``warning`` says why) and retries with back-off; a client that
        dies loses at most the unsaved bookkeeping, never a checkpoint.
        """
        # The snapshot is taken and written under one lock, in that order: a newer
        # snapshot can never be overwritten by an older one (nor prune what it names).
        with self._write_lock:
            now = time.monotonic()
            with self._lock:
                if self._lease is None or not (self._dirty or force):
                    return
                if not force and (now - self._saved_at < SAVE_SECONDS or now < self._retry_save_at):
                    return
                snapshot = self.population.to_state(
                    elapsed_seconds=self._elapsed(),
                    worker_deaths_survived=self.worker_deaths_survived,
                    tournament_uid=self.uid,
                )
                self._dirty, self._saved_at = False, now
                lease = self._lease
            try:
                lease.check()  # the background thread heartbeats (start() keeps it alive)
                self.store.save_state(snapshot)
            except LeaseLost as exc:
                # Another writer took the store over: write nothing more, end, failed.
                self._lease, self._stop_requested = None, True
                self._status, self._error = TournamentStatus.FAILED, str(exc)
                raise
            except (OSError, ValueError, LeaseError) as exc:
                with self._lock:
                    self._dirty, self.saved = True, False
                    self._save_failures += 1
                    wait = min(30.0, 0.5 * 2**self._save_failures)
                    self._retry_save_at = now + wait
                    if self._save_failing_since is None:
                        self._save_failing_since = now
                    failing = now - self._save_failing_since
                    running = self._status == TournamentStatus.RUNNING
                    if failing >= STORE_GIVE_UP_SECONDS and running:
                        self._stop_requested = True
                        self._store_failure = self._store_failure or (
                            f"every save failed for {failing:.0f} s "
                            f"(last: {type(exc).__name__}: {exc})"
                        )
                self.warning = (
                    f"saving to store {self.store.url!r} failed ({type(exc).__name__}: {exc}); "
                    + (
                        "the tournament stops"
                        if self._stop_requested
                        else f"retrying in {wait:.0f} s, pods keep training"
                    )
                )
                return
            self._save_failures, self.warning = 0, None
            self._save_failing_since, self.saved = None, True
            if force or now - self._pruned_at >= PRUNE_SECONDS:
                self._pruned_at = now
                keep, settled = needed_checkpoints(snapshot)
                # housekeeping; ValueError: a StoreError (something hostile under pods/)
                with contextlib.suppress(OSError, ValueError):
                    _, self.store_bytes = self.store.prune(keep, settled)

    def _keep_lease(self) -> None:
        """Check the lease even when nothing is saved (all pods paused, long segments):
        ``LeaseLost`` ends the run. The heartbeat itself is the lease's own background
        thread (:meth:`~elegantpod.tournament.lease.Lease.keep_alive`)."""
        lease = self._lease
        if lease is None:
            return
        try:
            if lease.lost is not None:  # the background heartbeat saw the takeover
                raise lease.lost
            lease.check()  # one read
        except LeaseLost as exc:
            self._lease, self._stop_requested = None, True
            self._status, self._error = TournamentStatus.FAILED, str(exc)
            raise
        except (OSError, ValueError) as exc:
            self.warning = f"renewing the store's lease failed ({type(exc).__name__}: {exc})"

    # ------------------------------------------------------------------ helpers
    @property
    def worker_deaths_survived(self) -> int:
        """Worker deaths that hit a running segment (the scheduler's count), all runs."""
        runner = self._runner
        live = runner.worker_deaths if runner is not None and self._started_at else 0
        return self._deaths_at_start + live

    @worker_deaths_survived.setter
    def worker_deaths_survived(self, value: int) -> None:  # a resumed store's count
        self._deaths_at_start = int(value)

    def _publish(self, messages) -> None:
        runner = self._runner
        if runner is not None and messages and self._status == TournamentStatus.RUNNING:
            runner.publish(messages)

    def _in_flight(self, pod: str) -> bool:
        return self._runner is not None and pod in self._runner.flying

    def _elapsed(self) -> float:
        running = time.monotonic() - self._started_at if self._started_at is not None else 0.0
        return self._elapsed_before + running

    def _drain_events(self) -> None:
        """Fold queued progress events into curves and records (call with the lock held)."""
        runner = self._runner
        if runner is None:
            return
        while runner.inbox:
            _, msg = runner.inbox.popleft()
            if not isinstance(msg, dict) or "pod" not in msg:
                continue
            pod = msg["pod"]
            self.events_received[pod] += 1
            self._curves[pod].append(msg)
            rec = self.population.records.get(pod)
            if rec is not None and msg.get("type") == EventKind.PROGRESS:
                rec.steps_per_second = msg.get("steps_per_second", rec.steps_per_second)
