"""How a tournament saves its state: when, under which lease, and what a failing store costs.

The engine decides *what* happened; the saver decides when a snapshot is written and
keeps the store bounded. Segment results save at most every :data:`SAVE_SECONDS`,
control actions at once. Only the lease holder writes: before start and after the end
(no lease), a change is kept in memory and saved by the next start. A failing store
pauses saving and retries with back-off while the pods train on; one that refuses every
snapshot for :data:`STORE_GIVE_UP_SECONDS` gives up (the engine then stops the run).
A client that dies loses at most the unsaved bookkeeping, never a checkpoint.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from elegantpod.tournament.store.lease import Lease, LeaseError, LeaseLost, fenced
from elegantpod.tournament.store.store import needed_checkpoints

SAVE_SECONDS = 1.0
"""Segment results are saved to the store at most this often (control actions at once)."""
PRUNE_SECONDS = 2.0
"""Checkpoints nobody needs any more are deleted at most this often: one listing each (a
LIST request on object stores), and between two of them at most a few segments land."""
STORE_GIVE_UP_SECONDS = 120.0
"""A store that has refused every snapshot for this long stops the tournament (failed):
a short outage is ridden out while pods train on, a full or read-only disk is not."""


class Saver:
    """Writes a tournament's snapshots to its store and prunes what no snapshot needs.

    Parameters
    ----------
    store
        The tournament's :class:`~elegantpod.tournament.store.store.Store`.
    lock
        The tournament's lock, which guards the population (and :attr:`dirty`).
    """

    def __init__(self, store, lock) -> None:
        self.store, self.lock = store, lock
        self.lease: Lease | None = None
        """The store's lease while a run holds it; nothing is written without one."""
        self.dirty = False
        """Whether the population changed since the last snapshot (set under the lock)."""
        self.saved = True
        """Whether the store holds the state the views report."""
        self.store_bytes: int | None = None
        """Bytes of checkpoints in the store at the last pruning."""
        self.gave_up: str | None = None
        """Why the store is given up on (every save failed for too long), or ``None``."""
        self.failure: str | None = None
        """The last failed save's warning, or ``None`` after a save that landed."""
        self._write_lock = threading.Lock()  # one snapshot write at a time
        self._saved_at = -float("inf")
        self._failures = 0
        self._failing_since: float | None = None
        self._retry_at = 0.0
        self._pruned_at = -float("inf")

    def reset(self) -> None:
        """A new run starts: earlier failures no longer count toward giving up."""
        self.gave_up, self._failing_since = None, None

    def save(
        self,
        snapshot: Callable[[], dict[str, Any]],
        *,
        force: bool = False,
        running: bool = True,
        stopping: Callable[[], bool] = lambda: False,
    ) -> bool | None:
        """Write ``snapshot()`` (taken under the lock) if one is due.

        Returns ``None`` when nothing was due, ``True`` when the snapshot landed,
        ``False`` when the store refused it (:attr:`failure` says why, in words that
        say whether the run stops: ``stopping()`` or :attr:`gave_up`). Raises
        :class:`~elegantpod.tournament.store.lease.LeaseLost` when another writer took the
        store over (the lease is dropped: nothing more is written).
        """
        # The snapshot is taken and written under one lock, in that order: a newer
        # snapshot can never be overwritten by an older one (nor prune what it names).
        with self._write_lock:
            now = time.monotonic()
            with self.lock:
                if self.lease is None or not (self.dirty or force):
                    return None
                if not force and (now - self._saved_at < SAVE_SECONDS or now < self._retry_at):
                    return None
                state = snapshot()
                self.dirty, self._saved_at = False, now
                lease = self.lease
            try:
                # the check and the writes are one step (the background thread
                # heartbeats: start() keeps it alive)
                with fenced(self.store, lease.token, "this snapshot"):
                    self.store.save_state(state)
            except LeaseLost:
                self.lease = None
                raise
            except (OSError, ValueError, LeaseError) as exc:
                with self.lock:
                    self.dirty, self.saved = True, False
                    self._failures += 1
                    wait = min(30.0, 0.5 * 2**self._failures)
                    self._retry_at = now + wait
                    if self._failing_since is None:
                        self._failing_since = now
                    failing = now - self._failing_since
                    if failing >= STORE_GIVE_UP_SECONDS and running:
                        self.gave_up = self.gave_up or (
                            f"every save failed for {failing:.0f} s "
                            f"(last: {type(exc).__name__}: {exc})"
                        )
                    ends = self.gave_up is not None or stopping()
                then = "the tournament stops" if ends else f"retrying in {wait:.0f} s"
                self.failure = (
                    f"saving to store {self.store.url!r} failed ({type(exc).__name__}: {exc}); "
                    + (then if ends else then + ", pods keep training")
                )
                return False
            self._failures, self.failure = 0, None
            self._failing_since, self.saved = None, True
            if force or now - self._pruned_at >= PRUNE_SECONDS:
                self._pruned_at = now
                keep, settled = needed_checkpoints(state)
                # housekeeping; ValueError: a StoreError (something hostile under pods/)
                with contextlib.suppress(OSError, ValueError):
                    _, self.store_bytes = self.store.prune(keep, settled)
            return True

    def check_lease(self) -> str | None:
        """Check the lease even when nothing is saved (all pods paused, long segments).

        Returns why renewing it failed (a store hiccup: the run goes on), or ``None``.
        Raises :class:`~elegantpod.tournament.store.lease.LeaseLost` after a takeover (the
        lease is dropped). The heartbeat itself is the lease's own background thread
        (:meth:`~elegantpod.tournament.store.lease.Lease.keep_alive`).
        """
        lease = self.lease
        if lease is None:
            return None
        try:
            if lease.lost is not None:  # the background heartbeat saw the takeover
                raise lease.lost
            lease.check()  # one read
        except LeaseLost:
            self.lease = None
            raise
        except (OSError, ValueError) as exc:
            return f"renewing the store's lease failed ({type(exc).__name__}: {exc})"
        return None
