"""A tournament's state saved as numbered snapshots, and the pointer to the newest.

Why snapshots and a pointer: object stores (S3, GCS, Azure) have no rename, so the
temp-file-and-rename trick of a local disk does not exist there, and some fsspec
backends stream large writes in parts. So the orchestrator's state is never rewritten in
place: each save is one new object under a versioned name (``state/00000042.json``),
and only after it is complete does the small :data:`POINTER` move to it (with the
snapshot's SHA-256). A writer that dies mid-save leaves at worst an unfinished object
that nothing points to; a reader that finds the pointer torn or pointing at a bad object
falls back to the newest snapshot that verifies. Leaderboard, records and counters live
in one object, so they can never disagree with each other. Old snapshots are pruned,
keeping the last :data:`KEEP_SNAPSHOTS`.

What a snapshot holds is read back as untrusted input by
:mod:`elegantpod.tournament.store.state`; here only the files are chosen and verified.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from typing import Any

from elegantpod.tournament.store.files import StoreError, StoreFiles, json_bytes

KEEP_SNAPSHOTS = 3
"""Snapshots kept besides the newest (older ones are deleted after each save)."""
POINTER = "state/LATEST"
"""The file naming the newest complete snapshot (written after it)."""
MAX_POINTER_BYTES = 4096
"""Largest ``state/LATEST`` read: it holds a few short fields."""
MAX_VERSION = 10**8 - 1
"""The largest snapshot number: a snapshot's name holds eight digits."""
VERSION_HEADROOM = 10**6
"""A store whose newest snapshot is numbered above ``MAX_VERSION - VERSION_HEADROOM`` is
refused on load: a million saves (at one every few seconds, months of running) must
still fit after a resume, and no tournament gets near 99 million saves, so a number
there was planted to make the next save's name overflow."""
_SNAPSHOT = re.compile(r"^(\d{8})\.json$")
_POINTED = re.compile(r"^state/(\d{8})\.json$")


class Snapshots:
    """The numbered snapshots and the pointer in a store's ``state/`` folder.

    Holds the newest version it wrote, so a save after the first lists nothing; the
    :class:`~elegantpod.tournament.store.store.Store` that owns it saves and loads through it.
    """

    def __init__(self, files: StoreFiles):
        self.files = files
        # Newest snapshot this object wrote; None: the first save lists the folder.
        self._version: int | None = None
        self.seen: int | None = None
        """The newest snapshot number this object knew of when it last loaded or saved
        (``None``: it did neither): :meth:`moved_on` compares the store with it."""
        self.loaded_from: str | None = None
        """The snapshot :meth:`load` read last (for error messages)."""

    def save(self, state: dict[str, Any]) -> int:
        """Save the orchestrator's state as a new snapshot, then move the pointer to it.

        Returns the snapshot's version. ``state`` must hold a ``"leaderboard"`` list; a
        readable copy of it goes to ``leaderboard.json`` after the pointer.
        """
        data = json_bytes(state, None)  # fails on NaN before anything is written
        if self._version is None:
            self._version = self._newest_version()
        version = self._version + 1
        if version > MAX_VERSION:  # a name the pointer's pattern rejects hides the save
            raise StoreError(
                f"store {self.files.url!r}: no snapshot number is left (the next would be "
                f"{version}, names hold at most {MAX_VERSION}); continue in a new store"
            )
        name = f"state/{version:08d}.json"
        self.files.write_bytes(name, data)
        pointer = {"version": version, "name": name, "sha256": hashlib.sha256(data).hexdigest()}
        self.files.write_bytes(POINTER, json_bytes(pointer, None))
        self._version = self.seen = version
        self.files.write_json("leaderboard.json", state.get("leaderboard", []))
        old = version - KEEP_SNAPSHOTS - 1
        if old >= 1:
            # pruning is housekeeping: a failure must not fail the save
            with contextlib.suppress(OSError):
                self.files.remove(f"state/{old:08d}.json")
        return version

    def load(self) -> dict[str, Any] | None:
        """The newest complete snapshot, or ``None`` if the store has none.

        Follows the pointer; if the pointer is missing, torn or names a snapshot that does
        not verify, the newest snapshot that parses is used instead. A link or special
        file, a file over its limit, or a snapshot numbered within
        :data:`VERSION_HEADROOM` of :data:`MAX_VERSION` is a :class:`StoreError`.
        """
        versions = self._versions()
        self._check_version(max(versions, default=0))
        self.seen = max(versions, default=0)
        pointer = None
        try:
            pointer = json.loads(self.files.read_bytes(POINTER, MAX_POINTER_BYTES))
            name = pointer["name"]
            pointed = _POINTED.match(name) if isinstance(name, str) else None
            if not pointed:
                raise ValueError(f"pointer names {name!r}, not a snapshot")  # stay inside
            self._check_version(int(pointed.group(1)))
            data = self.files.read_bytes(name)
            if hashlib.sha256(data).hexdigest() != pointer["sha256"]:
                raise ValueError("checksum mismatch")
            try:
                loaded = json.loads(data)
            except (ValueError, RecursionError) as exc:
                # It verifies, so it is what a writer saved, not a torn write: falling
                # back to an older snapshot would silently undo every later save.
                raise StoreError(
                    f"{self.files.path(*name.split('/'))!r} matches the pointer's checksum but is "
                    f"not readable JSON ({type(exc).__name__}, nested too deep?); refused "
                    "rather than replaced by an older snapshot"
                ) from None
            self.loaded_from = self.files.path(*name.split("/"))
            return loaded
        except StoreError:
            raise  # hostile, not torn: never fall back past it
        except FileNotFoundError:
            if pointer is None and not self.files.exists("state"):
                return None
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
        for version in sorted(versions, reverse=True):
            try:
                snapshot = json.loads(self.files.read_bytes(f"state/{version:08d}.json"))
            except StoreError:
                raise
            except (ValueError, OSError, RecursionError):
                continue
            if isinstance(snapshot, dict) and "leaderboard" in snapshot:
                self.loaded_from = self.files.path("state", f"{version:08d}.json")
                return snapshot
        raise StoreError(f"store {self.files.url!r} has a state/ folder but no readable snapshot")

    def moved_on(self) -> int | None:
        """The store's newest snapshot number if another writer saved since this object
        last loaded or saved (a new object: if the store holds any), else ``None``.

        Why: a tournament reads its store when it is made (a resume) and writes when it
        starts; another writer that resumed, advanced and released the store in between
        would have its progress overwritten by the older state."""
        newest = self._newest_version()
        return newest if newest > (self.seen or 0) else None

    def _check_version(self, version: int) -> None:
        if version > MAX_VERSION - VERSION_HEADROOM:
            raise StoreError(
                f"store {self.files.url!r}: snapshot number {version} is within "
                f"{VERSION_HEADROOM} of the largest a snapshot name holds ({MAX_VERSION}); "
                "no tournament saves that often, so this store is refused (a planted number "
                "would hide every later save)"
            )

    def _versions(self) -> list[int]:
        try:
            names = self.files.list_folder("state")
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            m = _SNAPSHOT.match(os.path.basename(str(n)))
            if m:
                out.append(int(m.group(1)))
        return out

    def _newest_version(self) -> int:
        """Never reuse a snapshot name, even one a crashed writer left unpointed."""
        return max(self._versions(), default=0)
