"""The engine: the background loop that drives a tournament, and its lifecycle.

Each round: decide under the lock what to submit (the population, pure), submit and read
finished segments outside it (the runner, Dask), fold the outcomes in under the lock,
then save outside it (:mod:`~elegantpod.tournament.store.saver`: through the store's lease,
with back-off while a failing store pauses saving and the pods train on).

The :class:`~elegantpod.tournament.Tournament` holds one engine and steers it through
its public methods; the engine holds the runner, the saver and the run's status.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
import uuid
from collections import Counter
from typing import Any

from distributed.comm.core import CommClosedError

from elegantpod.tournament.client.progress_log import ProgressLog
from elegantpod.tournament.client.runner import Runner, control_message
from elegantpod.tournament.client.tasks import build_env, largest_pod_bytes, segment_task, shipping
from elegantpod.tournament.core.protocol import ControlMessage, OutcomeKind, TournamentStatus
from elegantpod.tournament.core.views import tracking_tables
from elegantpod.tournament.store.lease import Lease, LeaseError, LeaseLost, fenced
from elegantpod.tournament.store.saver import Saver
from elegantpod.tracking.tracker import Tracker, group_name

LOOP_SECONDS = 0.1
GRACE_SECONDS = (10.0, 0.1, 120.0)
"""How long the end of a tournament waits for running segments to checkpoint and return
(see :func:`grace_seconds`): at least 10 s, else a tenth of the run's time, at most 120 s.
A segment asked to stop checkpoints within a gradient step and one evaluation; one that
has not returned by then hangs (an env whose ``reset`` or ``step`` never returns) or
dies over and over, and waiting longer would only overrun the budget."""
LEASE_SECONDS = 2.0
"""How often the loop checks the lease (one read), saves or not; the lease heartbeats itself."""
SLOW_ROUND_SECONDS = 10.0
"""A round of the loop that took this long waited on a scheduler that did not answer
(SIGSTOPped, overloaded) or on a slow store: said at the end of the run, in a warning
and in the reason of a run that trained nothing."""
MAX_TRANSIENT_FAILURES = 20
"""Consecutive scheduler errors after which a tournament gives up."""


TRANSIENT_ERRORS = (OSError, CommClosedError, TimeoutError)
"""Scheduler errors the loop rides out (up to :data:`MAX_TRANSIENT_FAILURES` in a row)."""


def grace_seconds(run_seconds: float) -> float:
    """How long the end of a run that took ``run_seconds`` waits for its running
    segments (:data:`GRACE_SECONDS`): long enough for a segment to checkpoint, short
    against the budget, bounded however long the run."""
    least, share, most = GRACE_SECONDS
    return min(most, max(least, share * run_seconds))


class SchedulerLost(RuntimeError):
    """The tournament's Dask scheduler is gone for good (its client closed)."""


class Engine:
    """The background loop of a :class:`~elegantpod.tournament.Tournament`, and the run
    state it owns: the runner, the store's lease, the status and the saving.

    The tournament holds one engine (as dask's ``Adaptive`` holds a cluster) and steers
    it through public methods only; both share one lock, which guards the population.

    Parameters
    ----------
    spec, store, population
        What the tournament runs, where it saves, and its pure state.
    client
        A ``distributed.Client``, or ``None`` for :func:`elegantpod.cluster` at
        :meth:`start` (closed at the end, as every client the engine made).
    uid
        The tournament's identity (a resume keeps its store's); new when ``None``.
    elapsed_seconds, worker_deaths
        What earlier runs of a resumed tournament took and survived.
    force
        Take over the store's lease from a writer that is gone.
    tracker
        Feeds experiment tracking from this process (none: a tracker with no loggers).
    """

    def __init__(
        self,
        spec,
        store,
        population,
        client=None,
        *,
        uid: str | None = None,
        elapsed_seconds: float = 0.0,
        worker_deaths: int = 0,
        force: bool = False,
        tracker: Tracker | None = None,
    ) -> None:
        self.spec, self.store, self.population = spec, store, population
        self.tracker = tracker or Tracker()
        self.lock = threading.RLock()
        """Guards the population; never held while waiting on the network or the store."""
        self.client = client
        self.own_client = client is None
        """Whether the end of a run closes the client (and its cluster)."""
        self.id = uuid.uuid4().hex[:8]
        """This run's key on the cluster (tasks, Variables, topics): new at every start."""
        self.uid = uid or uuid.uuid4().hex
        """The tournament's identity, saved in its store and kept by a resume: every
        checkpoint it writes names it, and a checkpoint naming another is refused."""
        self.progress = ProgressLog()
        """Progress events received from running segments."""
        self.runner: Runner | None = None
        """The Dask side of the current run (``None`` when not running)."""
        self.thread: threading.Thread | None = None
        """The background loop's thread."""
        self.status = TournamentStatus.CREATED
        self.error: str | None = None
        """Why the tournament failed, or ``None``."""
        self.warning: str | None = None
        """What goes wrong right now while training goes on (a failing store, a
        scheduler hiccup, an unusable checkpoint), or None; a landed save clears it."""
        self.workers_warning: str | None = None
        """Which pods wait on (or, at the end, were given up with) a worker whose
        heartbeat stopped, and at the end whose segments did not return within the
        grace and how long the loop waited on the scheduler; apart from :attr:`warning`,
        which a landed save clears."""
        self.pods_hung: list[str] = []
        """Pods whose segment had not returned when the last run's grace ran out
        (:func:`grace_seconds`): abandoned, each continues from its last checkpoint."""
        self.saver = Saver(store, self.lock)
        """Writes the snapshots (``saver.saved``: whether the store holds the state the
        views report; ``saver.store_bytes``: its checkpoints' size at the last pruning)."""
        self._force = force
        self._stop_requested = False
        self._stopped_by_user = False  # stop() ended the run before its budget
        self._elapsed_before = float(elapsed_seconds)
        self._started_at: float | None = None
        self._deaths_at_start = int(worker_deaths)
        self._store_failure: str | None = None  # why the store stopped the tournament
        self._last_worker: dict[str, str] = {}  # where each pod is resident
        self._lease_checked_at = -float("inf")
        self._freed: Counter = Counter()  # slots that finished segments freed, by worker
        self._submitted = self._completed = 0  # segments of this run: sent, returned
        self._slowest_round = 0.0  # seconds: a scheduler that does not answer blocks one

    # ------------------------------------------------------------------ lifecycle
    def start(self, client=None, *, close_client: bool | None = None) -> None:
        """Take the store's lease, fill the population, open the runner and start the
        loop's thread (see :meth:`Tournament.start <elegantpod.tournament.Tournament.start>`)."""
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                raise RuntimeError("tournament is already running")
            if client is not None:
                self.client, self.own_client = client, bool(close_client)
            elif close_client is not None:
                self.own_client = close_client
            self.workers_warning = None  # a resume starts on whatever workers answer now
            self.pods_hung = []
            self._submitted = self._completed = 0
            self._slowest_round = 0.0
        self.store.ensure()
        lease = Lease(self.store).acquire(force=self._force)
        lease.keep_alive()  # until release: a writer waiting at its end is not stale
        try:
            # read again now that no other writer can save: one that resumed, advanced
            # and released the store since this tournament read it would otherwise have
            # its progress overwritten by the older state held here
            newer = self.store.moved_on()
            if newer is not None:
                raise LeaseError(
                    f"store {self.store.url!r} has moved on since this tournament read it "
                    f"(another writer saved snapshot {newer}): resume it again "
                    "(Tournament.resume, --resume) to continue from there"
                )
            self.store.clean_orphans()
            if self.client is None:
                from elegantpod.clusters.cluster import cluster

                # on a GPU node the processes per GPU are planned for this tournament's pods
                self.client = cluster(
                    pods_per_gpu=self.spec.pods_per_gpu,
                    pod_bytes=largest_pod_bytes(self.spec, self.population.base_hparams),
                )
            with self.lock:
                self.population.fill()
                self.saver.lease = lease
            with fenced(self.store, lease.token, "tournament.json"):
                self.store.write_json("tournament.json", self.spec.to_dict())
            self.save(force=True)
            self.runner = Runner(self.client, self.id)
            self.runner.open()
            size = largest_pod_bytes(self.spec, self.population.base_hparams)
            self.runner.plan(self.spec.device, self.spec.pods_per_gpu, size)
            self._check_env_on_a_worker()
            with self.lock:
                messages = [(r.pod_id, control_message(r, False)) for r in self.population.alive()]
                self._stop_requested = self._stopped_by_user = False
                self.error = None
                self._store_failure = None
                self.saver.reset()
                self.status = TournamentStatus.RUNNING
                self._started_at = time.monotonic()
                self._deaths_at_start = self.worker_deaths_survived  # before the new runner
                self.tracker.open(group_name("tournament", self.uid), self.spec.to_dict())
                self.drain_events()  # the first pods' runs, at once
            self.runner.publish(messages)
        except BaseException:
            self.saver.lease = None
            lease.release()
            if self.runner is not None:
                with contextlib.suppress(Exception):
                    self.runner.close()
                self.runner = None
            raise
        self.thread = threading.Thread(target=self._loop, name=f"tournament-{self.id}")
        self.thread.daemon = True
        self.thread.start()

    def _check_env_on_a_worker(self) -> None:
        """Build the env once on one worker, where it is the user's own (registered in
        this process and shipped), before any pod starts: an env the workers cannot
        build fails the start with its reason, once, instead of failing every pod.

        Raises
        ------
        ValueError
            Naming the env and the worker's reason.
        """
        ship = shipping(self.spec.env_id, self.spec.algos[0])
        envs = [s for s in ship if not s[0].startswith("elegantpod-algo-")]
        if not envs:
            return  # elegantpod's or gymnasium's own: every worker has it
        self.runner.ship(ship)
        kwargs = {**self.spec.env_kwargs}
        try:
            self.runner.probe(build_env, self.spec.env_id, kwargs)
        except Exception as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise ValueError(
                f"the workers cannot build env {self.spec.env_id!r} ({type(exc).__name__}: "
                f"{reason}); no pod was started. An env registered in this process is "
                "shipped to the workers: one they must import themselves needs its module "
                "installed there"
            ) from None

    def wait(self, timeout: float | None = None) -> None:
        """Block until the run ends (or ``timeout``)."""
        if self.thread is not None:
            self.thread.join(timeout)

    def _loop(self) -> None:
        try:
            failures = 0
            while True:
                try:
                    began = time.monotonic()
                    ended = self._step()
                    self._slowest_round = max(self._slowest_round, time.monotonic() - began)
                    if ended:
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
        except (LeaseLost, SchedulerLost) as exc:
            self.error, self.status = str(exc), TournamentStatus.FAILED
        except Exception:
            self.error, self.status = traceback.format_exc(), TournamentStatus.FAILED
        finally:
            with contextlib.suppress(Exception):
                self._finish()

    def _step(self) -> bool:
        """One round: submit what fits, handle what finished, submit again into the slots
        that freed (before saving: a pod waits for no fsync), save. True: time to end."""
        lost = self._scheduler_lost()
        if lost is not None:
            raise SchedulerLost(lost)
        if time.monotonic() - self._lease_checked_at >= LEASE_SECONDS:
            self._lease_checked_at = time.monotonic()
            self._keep_lease()
        self._watch_workers()
        if self._submit_runnable():
            return True
        done = self.runner.take_done(LOOP_SECONDS)
        if done:
            self._handle(done, ending=False)
            if self._submit_runnable():
                return True
        self.save()
        return False

    def _scheduler_lost(self) -> str | None:
        """Why the Dask scheduler is gone, where the client gave up reconnecting to it
        (distributed closes a client that cannot reconnect within its timeout); ``None``
        while it is there (or a reconnect is still being tried)."""
        status = str(getattr(self.client, "status", "running"))
        if status not in ("closing", "closed"):
            return None
        return (
            "lost the Dask scheduler (the client could not reconnect to it, and closed): "
            "the store holds the last saved state; once a scheduler runs again, resume "
            "(Tournament.resume(store, client=...), or --resume)"
        )

    def _submit_runnable(self) -> bool:
        """Submit queued pods into the free slots; True when the tournament should end."""
        runner = self.runner
        capacity, uses_gpu = runner.capacity()
        with self.lock:
            self.drain_events()
            if self.population.should_end(self.elapsed(), self._stop_requested, runner.in_flight()):
                return True
            todo = []
            for rec in self.population.runnable(runner.flying, capacity - runner.in_flight()):
                # Back to the worker where it is resident, if that one just freed a slot.
                worker = self._last_worker.get(rec.pod_id)
                worker = worker if self._freed[worker] > 0 else None
                self._freed[worker] -= 1
                lease = self.saver.lease
                task = segment_task(
                    self.spec, rec, self.store, runner, self.id, uses_gpu, self.uid, lease
                )
                ship = shipping(self.spec.env_id, rec.algo)
                todo.append((rec.pod_id, task, rec.retries, ship, worker))
                runner.reserve(rec.pod_id)
                self.population.submitted(rec)
                self._submitted += 1
            self._freed.clear()
        for pod_id, task, retries, ship, worker in todo:  # network calls: never under the lock
            runner.submit(pod_id, task, retries, uses_gpu, ship, worker)
        return False

    def _handle(self, done: list, ending: bool) -> None:
        runner = self.runner
        outcomes = [o for o in map(runner.outcome, done) if o is not None]
        messages = []
        with self.lock:
            self.drain_events()
            for o in outcomes:
                if o.pod_id not in self.population.records:
                    continue
                if o.kind == OutcomeKind.RESULT:
                    self._completed += 1
                    self.progress.events_sent += o.result.events_sent
                    if o.result.worker:
                        self._last_worker[o.pod_id] = o.result.worker
                        self._freed[o.result.worker] += 1
                    new = self.population.on_result(
                        o.result,
                        ending=ending,
                        stopping=self._stop_requested,
                        now=self.elapsed(),
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
                        self.status, self.error = TournamentStatus.FAILED, self.error or o.error
                    else:
                        self._store_failure = self._store_failure or o.error
                    new = []
                else:
                    self.population.on_lost(o.pod_id)
                    new = []
                messages += [(r.pod_id, control_message(r, self._stop_requested)) for r in new]
                self.saver.dirty = True
        if messages and not ending:
            runner.publish(messages)

    def _finish(self) -> None:
        """Ask running pods to stop, collect their last segments (for a bounded grace,
        :func:`grace_seconds`), save, release, then end tracking. Whatever fails on the
        way (a scheduler gone, a store gone), the final statuses are set, the lease is
        released and an own cluster is closed.

        A segment still running after the grace is abandoned and its pod named (in
        :attr:`pods_hung` and a warning); a run in which no segment returned has
        failed, saying so: a hung or dying env never reads as "finished"."""
        runner = self.runner
        grace = grace_seconds(self.elapsed() - self._elapsed_before)
        held: dict[str, str] = {}
        try:
            with self.lock:
                self._stop_requested = True
                flying = list(runner.flying)
                messages = [(p, control_message(self.population.records[p], True)) for p in flying]
            with contextlib.suppress(Exception):
                runner.publish(messages)
            held = runner.wait_all(grace)
            self._warn_stalled(held, ending=True)
            while True:
                done = runner.take_done(0.01)
                if not done:
                    break
                self._handle(done, ending=True)
        except Exception:
            self.error = self.error or traceback.format_exc()
        finally:
            hung = runner.cancel_all()
            for pod in hung:
                with self.lock:
                    self.population.on_lost(pod)
            self._warn_hung(hung, grace, held)
            if self._slowest_round >= SLOW_ROUND_SECONDS:
                self._add_workers_warning(self._slow_round())
            with self.lock:
                idle = self._nothing_returned()  # before end(): which pods were alive
                why = self.population.end()
                self._deaths_at_start = self.worker_deaths_survived  # the runner goes
                self._elapsed_before = self.elapsed()
                self._started_at = None
                if self._store_failure is not None:
                    self.status = TournamentStatus.FAILED
                    self.error = (
                        f"store {self.store.url!r} stopped taking writes: "
                        f"{self._store_failure}. Every checkpoint it took is intact; once it "
                        "takes writes again, resume (Tournament.resume(store), or --resume)"
                    )
                elif why is not None:
                    self.status, self.error = TournamentStatus.FAILED, why
                elif self.status != TournamentStatus.FAILED and (lost := self._scheduler_lost()):
                    # the budget ended while the scheduler was gone: not "finished"
                    self.status, self.error = TournamentStatus.FAILED, lost
                elif self.status != TournamentStatus.FAILED and idle is not None:
                    self.status, self.error = TournamentStatus.FAILED, idle
                elif self.status != TournamentStatus.FAILED:
                    early = self._stopped_by_user
                    self.status = TournamentStatus.STOPPED if early else TournamentStatus.FINISHED
                self.saver.dirty = True
                self.saver.saved = False  # until the final save lands
            with contextlib.suppress(Exception):  # a lost lease or a dead store: no more
                self.save(force=True)
            if not self.saver.saved:
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
            lease, self.saver.lease = self.saver.lease, None
            if lease is not None:
                with contextlib.suppress(Exception):
                    lease.release()
            if self.own_client:
                from elegantpod.clusters.shutdown import shutdown

                with contextlib.suppress(Exception):
                    shutdown(self.client)  # quietly: no nanny warnings on the terminal
                self.client = None  # a later start() makes a new one
            with self.lock:  # last: the lease and the cluster wait for no tracking server
                self.drain_events()
                tables = tracking_tables(self.population) if self.tracker.is_active else None
            self.tracker.close(tables)

    def _watch_workers(self) -> None:
        """Read the workers' heartbeats and say which pods wait on a silent one. Advisory:
        a scheduler that does not answer now is the loop's own concern (a transient
        error, or :class:`SchedulerLost`), never this watch's."""
        try:
            stalled = self.runner.watch_heartbeats()
            held = self.runner.held_by_stalled() if stalled else {}
        except Exception:
            return
        if held:
            self._warn_stalled(held)
        elif self.workers_warning is not None and not self._stop_requested:
            self.workers_warning = None  # every worker answers again

    def _warn_stalled(self, held: dict[str, str], ending: bool = False) -> None:
        """Say which pods wait on a worker whose heartbeat stopped (a SIGSTOPped or
        frozen process): while running, they wait for it to answer or for Dask to
        remove it; at the end they are given up (their last checkpoints stand)."""
        if not held:
            return
        silent = self.runner.stalled
        workers = ", ".join(
            f"{w} (silent {silent.get(w, 0.0):.0f} s)" for w in sorted(set(held.values()))
        )
        pods = ", ".join(sorted(held))
        if ending:
            self.workers_warning = (
                f"worker {workers} stopped answering: pod {pods} ended without its last "
                "segment (its last saved checkpoint stands; a resume continues from it)"
            )
        else:
            self.workers_warning = (
                f"worker {workers} stopped answering: pod {pods} waits for it (Dask "
                "removes a silent worker after its worker-ttl, and the pod moves on)"
            )

    def _warn_hung(self, pods: list[str], grace: float, held: dict[str, str]) -> None:
        """Name the pods whose segment had not returned when the grace ran out; those
        ``held`` by a stopped worker are named already (:meth:`_warn_stalled`)."""
        self.pods_hung = sorted(pods)
        rest = [p for p in self.pods_hung if p not in held]
        if not rest:
            return
        hung = (
            f"pod {', '.join(rest)} did not return within the budget + {grace:.0f} s grace "
            "(an env whose reset or step never returns, or a worker that keeps dying?): "
            "its segment was abandoned (its last saved checkpoint, if any, stands)"
        )
        if not self.own_client:  # an own cluster closes, its stuck threads with it
            hung += "; a thread stuck in an env holds its worker until that worker restarts"
        self.workers_warning = None if not held else self.workers_warning
        self._add_workers_warning(hung)

    def _add_workers_warning(self, text: str) -> None:
        """Say ``text`` too: at a run's end, several things may have gone wrong."""
        old = self.workers_warning
        self.workers_warning = f"{old}; {text}" if old else text

    def _slow_round(self) -> str:
        """The loop's longest wait, in words (see :data:`SLOW_ROUND_SECONDS`)."""
        return (
            f"the loop waited {self._slowest_round:.0f} s at once on the Dask scheduler (or "
            "the store): was it stopped (SIGSTOP) or overloaded?"
        )

    def _nothing_returned(self) -> str | None:
        """Why a run that trained nothing failed, or ``None``: a run ended by its budget
        (not by :meth:`request_stop` before any segment was sent) with pods to train and
        no segment returned. A hung env, a worker that keeps dying, a cluster with no
        worker slot or a scheduler that did not answer (SIGSTOP) must never end as
        "finished" with nothing done (call with the lock held, before
        ``population.end()``)."""
        if self._completed:
            return None
        if not self._submitted and (self._stopped_by_user or not self.population.alive()):
            return None  # nothing to train, or the user ended it before it began
        why = []
        if self.pods_hung:
            why.append(f"pod {', '.join(self.pods_hung)} still running after the grace")
        if self.runner.worker_deaths:
            why.append(f"{self.runner.worker_deaths} lost with a dying worker")
        if self._slowest_round >= SLOW_ROUND_SECONDS:
            why.append(self._slow_round())
        if self.warning:
            why.append(f"last trouble: {self.warning}")
        said = "".join(f"; {w}" for w in why)
        if not self._submitted:
            return (
                f"no segment was sent in this run (no worker slot, or a scheduler that did "
                f"not answer{said})"
            )
        return (
            f"no segment completed in this run ({self._submitted} sent, none returned{said}): "
            "check that the env's reset and step return (build and step it in this process) "
            "and that a worker has the memory a pod needs"
        )

    # ------------------------------------------------------------------ the store
    def save(self, force: bool = False) -> None:
        """Snapshot leaderboard, records and counters to the store, if due (see
        :class:`~elegantpod.tournament.store.saver.Saver`; ``force``: at once, for control
        actions). Another writer taking the store over ends the run, failed."""
        try:
            landed = self.saver.save(
                self._snapshot,
                force=force,
                running=self.status == TournamentStatus.RUNNING,
                stopping=lambda: self._stop_requested,
            )
        except LeaseLost as exc:
            self._stop_requested = True
            self.status, self.error = TournamentStatus.FAILED, str(exc)
            raise
        if landed is False:
            if self.saver.gave_up is not None:
                self._stop_requested = True
                self._store_failure = self._store_failure or self.saver.gave_up
            self.warning = self.saver.failure
        elif landed:
            self.warning = None

    def _snapshot(self) -> dict[str, Any]:
        return self.population.to_state(
            elapsed_seconds=self.elapsed(),
            worker_deaths_survived=self.worker_deaths_survived,
            tournament_uid=self.uid,
        )

    def _keep_lease(self) -> None:
        """Check the lease even when nothing is saved: ``LeaseLost`` ends the run."""
        try:
            trouble = self.saver.check_lease()
        except LeaseLost as exc:
            self._stop_requested = True
            self.status, self.error = TournamentStatus.FAILED, str(exc)
            raise
        if trouble is not None:
            self.warning = trouble

    # ------------------------------------------------------------------ for the facade
    @property
    def worker_deaths_survived(self) -> int:
        """Worker deaths that hit a running segment (the scheduler's count), all runs."""
        runner = self.runner
        live = runner.worker_deaths if runner is not None and self._started_at else 0
        return self._deaths_at_start + live

    def request_stop(self, *, by_user: bool = False) -> None:
        """End the run: running pods checkpoint, then the loop ends (``by_user``: the
        status becomes ``stopped`` rather than ``finished``)."""
        with self.lock:
            if by_user and self.status == TournamentStatus.RUNNING:
                self._stopped_by_user = True
            self._stop_requested = True

    def changed(self) -> None:
        """Note that the population changed (call with the lock held): the next save writes."""
        self.saver.dirty = True

    def message(self, pod: str) -> list[tuple[str, ControlMessage]]:
        """A pod's control message (call with the lock held; :meth:`publish` after)."""
        return [(pod, control_message(self.population.record(pod), self._stop_requested))]

    def publish(self, messages) -> None:
        """Send control messages to running pods (never under the lock: network)."""
        runner = self.runner
        if runner is not None and messages and self.status == TournamentStatus.RUNNING:
            runner.publish(messages)

    def is_in_flight(self, pod: str) -> bool:
        """Whether a segment of ``pod`` is on the cluster now."""
        return self.runner is not None and pod in self.runner.flying

    def elapsed(self) -> float:
        """Tournament seconds: every run of this tournament, this one so far included."""
        running = time.monotonic() - self._started_at if self._started_at is not None else 0.0
        return self._elapsed_before + running

    def drain_events(self) -> None:
        """Fold queued progress events into curves and records; feed tracking (lock held)."""
        if self.runner is not None:
            self.progress.fold(self.runner.inbox, self.population.records)
        self.tracker.observe(self.population.records, self.progress.latest)
