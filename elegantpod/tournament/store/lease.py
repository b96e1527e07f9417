"""One writer per store: a lease object, ``lease.json``, beside the tournament's state.

Two writers on one store (two ``Tournament.resume()`` calls, two CLI processes) would
interleave snapshot versions and overwrite each other's checkpoints. The lease makes the
second one stop with a message that says who holds the store.

The lease is one small JSON object::

    {"owner": "alice@box pid 123", "token": "<random hex>",
     "heartbeat": <unix time>, "acquired": <unix time>}

Object stores have no rename, no locks and (through fsspec) no conditional put, so the
protocol uses only whole-object reads and writes, and "last writer wins":

* **acquire**: read the lease. If there is one and its token is not ours, refuse with
  :class:`LeaseError` (naming its owner and the age of its heartbeat) unless
  ``force=True``. Otherwise write ours, wait a short settle interval, read it again: if
  the token is still ours we hold the lease; if another writer's write landed after ours,
  it won and we back off with :class:`LeaseError` naming it.
* **force**: ``force=True`` (``--force`` on the command line) takes over whatever lease is
  there, fresh or stale, because the person asserts that its writer is gone. A lease
  whose writer was a process on this machine that no longer runs (a double Ctrl-C, a
  kill) is taken without it: its owner names the host and the pid. Without it
  every lease of another writer is refused; one whose heartbeat is older than
  ``stale_seconds`` (default :data:`STALE_SECONDS`) is only *reported* as looking stale.
  A store is never taken over silently: a writer paused for a minute (a laptop lid, a
  stopped container) would otherwise wake up next to its successor.
* **while holding it**: call :meth:`Lease.check` before each state save (one read) and
  :meth:`Lease.heartbeat` every :data:`HEARTBEAT_SECONDS` (:meth:`Lease.renew` does
  whichever is due). Both raise :class:`LeaseLost` once another writer took the lease
  over; the caller must then stop writing to the store.
* **release**: delete the lease, only if it is still ours.

On a local disk (and NFSv4) every lease change and every fenced write (:func:`fenced`:
snapshots, the pointer, checkpoints) holds the store's write lock, so a writer's check
that the lease is its own and its write are one step: a writer paused between them
cannot write over the writer that took the store over meanwhile.

Limits on object stores, inherent to read-then-write without conditional puts: a
competitor whose read and write are further apart than the settle interval can also
believe it won; the next :meth:`Lease.check` of one of the two then raises
:class:`LeaseLost`, so both never keep saving. Likewise a takeover that lands between a
check and its write lets that one write through (a window of one request). Ages compare
this machine's clock with the writer's, so clocks skewed by more than ``stale_seconds``
mislabel a lease as fresh or stale; nothing is taken over on that basis alone.

The lease's content comes from another process or a hostile store: it is validated, and
a malformed one counts as held by ``"unknown (malformed lease.json)"`` with an unknown
heartbeat age. None of its strings is ever used in a path.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import os
import re
import secrets
import socket
import threading
import time
from typing import Any

from elegantpod.tournament.store.files import StoreFileTooLarge
from elegantpod.tournament.store.store import Store

NAME = "lease.json"
"""The lease's object in the store."""
HEARTBEAT_SECONDS = 10.0
"""How often a holder rewrites its heartbeat: a few times within :data:`STALE_SECONDS`,
so one slow request or a short pause does not make a live writer look dead, while each
heartbeat is one small read and one small write (cheap on any object store)."""
STALE_SECONDS = 60.0
"""A heartbeat older than this (six missed heartbeats) makes the lease look abandoned: the
refusal then says so and suggests ``force``. Generous, to absorb clock skew between
machines and pauses of a live writer."""
SETTLE_SECONDS = 0.5
"""How long :meth:`Lease.acquire` waits between writing its lease and reading it back: a
competitor that read before our write lands its own write within this time (one request
on a local disk or an object store), so the read-back sees who won."""
MALFORMED = "unknown (malformed lease.json)"
"""The owner reported for a lease that is not a valid lease record."""
_MAX_BYTES = 4096
_MAX_OWNER = 200
_TOKEN = re.compile(r"[0-9a-f]{16,128}")


class LeaseError(ValueError):
    """The store is held by another writer, or the lease could not be won."""


class LeaseLost(LeaseError):
    """Another writer took the lease over: stop writing to the store."""


def default_owner() -> str:
    """``user@host pid N``: who holds a lease, in words a person can act on."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class Lease:
    """The right to write to one store, held by at most one writer at a time.

    Parameters
    ----------
    store
        The tournament's store; the lease is its ``lease.json``.
    owner
        Who holds the lease, as shown to other writers (default ``user@host pid N``).
    stale_seconds
        A heartbeat older than this is reported as stale (see the module docstring).
    settle_seconds
        Wait between writing the lease and reading it back in :meth:`acquire`.

    Examples
    --------
    >>> with Lease(store).acquire(force=False) as lease:  # doctest: +SKIP
    ...     lease.check()
    ...     store.save_state(state)
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        stale_seconds: float = STALE_SECONDS,
        settle_seconds: float = SETTLE_SECONDS,
    ):
        self.store = store
        self.owner = owner if owner is not None else default_owner()
        if not _valid_owner(self.owner):
            raise ValueError(f"lease owner must be printable, at most {_MAX_OWNER} characters")
        self.stale_seconds = float(stale_seconds)
        self.settle_seconds = float(settle_seconds)
        self.token = secrets.token_hex(16)
        """Also the fencing token: a tournament's segments carry it, and write nothing
        once the store's lease holds another (see :func:`holder`)."""
        self.is_held = False
        self.lost: LeaseLost | None = None
        """Set by the background heartbeat (:meth:`keep_alive`) when another writer took
        the lease over."""
        self._beat_lock = threading.Lock()  # a heartbeat never lands after release
        self._stop_beating: threading.Event | None = None
        self._acquired = 0.0
        self._last_heartbeat = 0.0

    # ------------------------------------------------------------------ public
    def acquire(self, *, force: bool = False) -> Lease:
        """Take the lease, or raise :class:`LeaseError` naming the writer that holds it.

        ``force=True`` takes over another writer's lease, fresh or stale: pass it only
        once that writer is gone. Returns ``self`` (for ``with lease.acquire():``).
        """
        with self.store.write_lock():  # no other writer's check-and-write in between
            current = self._read()
            foreign = current is not None and current.get("token") != self.token
            if foreign and not force and not _holder_is_dead(current):
                raise LeaseError(self._held_message(current))
            now = time.time()
            self._acquired = now
            self._write(now)
        time.sleep(self.settle_seconds)  # object stores: a racing write lands by now
        winner = self._read()
        if winner is None or winner.get("token") != self.token:
            who = "nobody (lease.json was deleted)" if winner is None else winner["owner"]
            raise LeaseError(
                f"store {self.store.url!r}: another writer took the lease at the same "
                f"moment ({who} when this one looked); this one backs off"
            )
        self.is_held = True
        return self

    def check(self) -> None:
        """Verify that the lease is still ours (one read); :class:`LeaseLost` if not."""
        self._verify()

    def heartbeat(self) -> None:
        """Verify that the lease is still ours, then rewrite it with a new heartbeat,
        in one step under the store's write lock: a holder paused between the two would
        otherwise write its lease back over a successor's."""
        with self.store.write_lock():
            self._verify()
            self._write(time.time())

    def renew(self) -> None:
        """:meth:`heartbeat` if :data:`HEARTBEAT_SECONDS` have passed since the last one,
        else :meth:`check`: call it before each state save."""
        if time.time() - self._last_heartbeat >= HEARTBEAT_SECONDS:
            self.heartbeat()
        else:
            self.check()

    def keep_alive(self, every: float = HEARTBEAT_SECONDS / 2) -> None:
        """Heartbeat from a background thread until :meth:`release`.

        A writer busy elsewhere (waiting minutes at its end for a stopped worker, a long
        save) must not look dead to the next writer. A lost lease stops the thread and is
        kept in :attr:`lost`; a store error is retried at the next beat.
        """
        if self._stop_beating is not None:
            return
        stop = self._stop_beating = threading.Event()

        def beat() -> None:
            while not stop.wait(every):
                with self._beat_lock:
                    if stop.is_set() or not self.is_held:
                        return
                    try:
                        self.heartbeat()
                    except LeaseLost as exc:
                        self.lost = exc
                        return
                    except (OSError, ValueError):
                        continue  # the holder's own checks report a failing store

        threading.Thread(target=beat, name="elegantpod-lease", daemon=True).start()

    def release(self) -> bool:
        """Delete the lease if it is still ours; return whether it was deleted.

        Another writer's lease is never deleted (after a takeover this is a no-op).
        """
        if self._stop_beating is not None:
            self._stop_beating.set()
        with self._beat_lock:
            return self._release()

    def _release(self) -> bool:
        if not self.is_held:
            return False
        self.is_held = False
        with self.store.write_lock():
            current = self._read()
            if current is None or current.get("token") != self.token:
                return False
            return self.store.remove(NAME)  # never through a link

    def __enter__(self) -> Lease:
        if not self.is_held:
            self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.is_held else "not held"
        return f"Lease({self.store.url!r}, owner={self.owner!r}, {state})"

    # ------------------------------------------------------------------ private
    def _verify(self) -> None:
        if not self.is_held:
            raise LeaseError(f"store {self.store.url!r}: this lease was not acquired")
        current = self._read()
        if current is None or current.get("token") != self.token:
            self.is_held = False
            who = "nobody (lease.json was deleted)" if current is None else current["owner"]
            raise LeaseLost(
                f"store {self.store.url!r}: lease lost, now held by {who}: stop writing "
                "(another writer took the store over)"
            )

    def _write(self, heartbeat: float) -> None:
        record = {
            "owner": self.owner,
            "token": self.token,
            "heartbeat": heartbeat,
            "acquired": self._acquired,
        }
        self.store.write_json(NAME, record)
        self._last_heartbeat = heartbeat

    def _read(self) -> dict[str, Any] | None:
        """The current lease, validated; ``None`` if there is none.

        A malformed lease comes back as ``{"owner": MALFORMED, "token": None, ...}``, one
        over :data:`_MAX_BYTES` too (unread: ``force`` replaces it). A link or special
        file as ``lease.json`` is a :class:`~elegantpod.tournament.store.store.StoreError`.
        """
        return holder(self.store)

    def _held_message(self, current: dict[str, Any]) -> str:
        heartbeat = current["heartbeat"]
        if heartbeat is None:
            age, verdict = "heartbeat age unknown", "it is not a valid lease"
        else:
            seconds = max(0.0, time.time() - heartbeat)
            age = f"heartbeat {seconds:.0f} s ago"
            if seconds > self.stale_seconds:
                verdict = (
                    f"it looks stale (older than {self.stale_seconds:.0f} s): its writer "
                    "probably died"
                )
            else:
                verdict = "its writer looks alive"
        return (
            f"store {self.store.url!r} is held by {current['owner']}, {age}; {verdict}. "
            "One writer per store: if that writer is gone, pass force=True (Python) or "
            "--force (CLI) to take the lease over"
        )


@contextlib.contextmanager
def fenced(store: Store, token: str, what: str = "this write"):
    """Hold ``store``'s write lock while the lease names ``token``: the body's writes
    happen only if no other writer took the store over, checked at that moment.

    Every write of a tournament's state, pointer and checkpoints goes through this, so a
    writer that was paused (SIGSTOP, a laptop lid, a stalled disk) and fenced out by
    ``force`` writes nothing once it continues: the takeover and this check cannot
    interleave (see :meth:`~elegantpod.tournament.store.files.StoreFiles.write_lock`).

    Raises
    ------
    LeaseLost
        Naming who holds the lease now; the body does not run.
    """
    with store.write_lock():
        current = holder(store)
        if current is None or current.get("token") != token:
            who = "nobody (lease.json was deleted)" if current is None else current["owner"]
            raise LeaseLost(
                f"store {store.url!r}: lease lost, now held by {who}: {what} was not made "
                "(another writer took the store over)"
            )
        yield


_OWNER = re.compile(r"^(?P<user>[^@]+)@(?P<host>\S+) pid (?P<pid>[0-9]{1,10})$")


def _holder_is_dead(current: dict[str, Any]) -> bool:
    """Whether the lease's writer was a process on this machine that no longer exists
    (its owner reads ``user@<this host> pid N``, and no process N runs): a writer
    stopped by a double Ctrl-C or killed, whose lease nobody else can hold. Its lease
    is taken without ``force``. A writer on another machine, or one whose pid runs (or
    was reused), is never judged dead."""
    m = _OWNER.match(str(current.get("owner") or ""))
    if m is None or m["host"] != socket.gethostname():
        return False
    import psutil

    return not psutil.pid_exists(int(m["pid"]))


def holder(store: Store) -> dict[str, Any] | None:
    """The lease in ``store`` now, validated (``None``: there is none): what a segment
    compares with its own token before it writes (fencing)."""
    try:
        data = store.read_bytes(NAME, limit=_MAX_BYTES)
    except FileNotFoundError:
        return None
    except StoreFileTooLarge:
        return _malformed()
    return parse(data)


def parse(data: bytes) -> dict[str, Any]:
    """A lease record from ``lease.json``'s bytes, validated (untrusted input).

    Anything that is not a valid record becomes ``{"owner": MALFORMED, "token": None,
    "heartbeat": None, "acquired": None}``: held by an unknown writer.
    """
    malformed = _malformed()
    if len(data) > _MAX_BYTES:
        return malformed
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return malformed
    if not isinstance(record, dict):
        return malformed
    owner, token = record.get("owner"), record.get("token")
    heartbeat, acquired = record.get("heartbeat"), record.get("acquired")
    if not (
        _valid_owner(owner)
        and isinstance(token, str)
        and _TOKEN.fullmatch(token)
        and _is_finite_number(heartbeat)
        and _is_finite_number(acquired)
    ):
        return malformed
    return {"owner": owner, "token": token, "heartbeat": float(heartbeat), "acquired": acquired}


def _malformed() -> dict[str, Any]:
    return {"owner": MALFORMED, "token": None, "heartbeat": None, "acquired": None}


def _valid_owner(owner: Any) -> bool:
    # printable: the owner goes into error messages, where a newline could fake a line
    return isinstance(owner, str) and 0 < len(owner) <= _MAX_OWNER and owner.isprintable()


def _is_finite_number(x: Any) -> bool:
    """Whether ``x`` is a number a float can hold, neither NaN nor infinite (nor a bool)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False
