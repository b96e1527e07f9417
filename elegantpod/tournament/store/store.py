"""The tournament store: a directory or any fsspec URL that all workers can reach.

Layout::

    tournament.json            the tournament's spec (env, algorithms, budgets, seed)
    state/00000042.json        snapshot 42: leaderboard, every pod's record, counters
    state/LATEST               pointer to the newest complete snapshot (written last)
    leaderboard.json           a copy of the newest leaderboard, for people and tools
    pods/<pod>/seg-00003.pt    checkpoint at the end of each segment

The store is its files with this layout on top, each part in its own module:

- :mod:`elegantpod.tournament.store.files`: reading and writing whole files, on a local
  disk only regular files reached through folders (never a link), each read bounded by
  its file's limit (:data:`MAX_POINTER_BYTES`, :data:`MAX_SPEC_BYTES`,
  :data:`MAX_SNAPSHOT_BYTES`), and why object stores are bounded by their access policy;
- :mod:`elegantpod.tournament.store.snapshots`: the state saved as numbered snapshots and a
  pointer, since object stores have no rename;
- here: where checkpoints live, which ones a saved snapshot still needs, and the
  deletion of the rest and of killed writers' leftovers.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import Any

from elegantpod.tournament.core.field_checks import (
    CHECKPOINT_NAME,
    POD_ID,
    check_checkpoint,
    checkpoint_name,
)
from elegantpod.tournament.core.protocol import RESUMABLE
from elegantpod.tournament.store.files import StoreFiles
from elegantpod.tournament.store.snapshots import (
    MAX_POINTER_BYTES,
    POINTER,
    Snapshots,
)

__all__ = ["MAX_SNAPSHOT_BYTES", "MAX_SPEC_BYTES", "ORPHAN_SECONDS", "Store", "needed_checkpoints"]

STATE_NAME = re.compile(r"\d{8}\.json|LATEST")
"""The files of ``state/`` a store writes: numbered snapshots and their pointer."""
ORPHAN_SECONDS = 120.0
"""Temporary files older than this are a killed writer's leftovers (a checkpoint write
takes well under a second): :meth:`Store.clean_orphans` deletes them."""
MAX_SPEC_BYTES = 16 * 2**20
"""Largest ``tournament.json`` read (a spec is a few KiB)."""
MAX_SNAPSHOT_BYTES = 64 * 2**20
"""Largest snapshot (and any other store file) read: a snapshot holds every pod's record
and the leaderboard, well under this for any tournament that fits a cluster."""
_LIMITS = {POINTER: MAX_POINTER_BYTES, "lease.json": MAX_POINTER_BYTES}
_LIMITS["tournament.json"] = MAX_SPEC_BYTES  # the lease holds a few short fields too


class Store(StoreFiles):
    """Read and write a tournament's files under ``url`` (a path or an fsspec URL).

    On a local disk a store holds only regular files and folders: a link or special file
    below its root is refused (:class:`StoreError`), never followed; see
    :mod:`elegantpod.tournament.store.files` for object stores, and for the credentials
    remote filesystems take from the environment (every Dask worker reads the same
    store, so configuration that travels with the environment reaches them all).
    """

    def __init__(self, url: str | os.PathLike):
        super().__init__(url)
        self._snapshots = Snapshots(self)

    @property
    def loaded_from(self) -> str | None:
        """The snapshot :meth:`load_state` read last (for error messages)."""
        return self._snapshots.loaded_from

    def limit_of(self, name: str) -> int:
        """The most bytes read of file ``name``: the pointer, the lease and the spec have
        their own limits, any other file :data:`MAX_SNAPSHOT_BYTES`."""
        return _LIMITS.get(name, MAX_SNAPSHOT_BYTES)

    def checkpoint(self, pod_id: str, segment: int) -> str:
        """Absolute path or URL where segment ``segment`` of ``pod_id`` checkpoints
        (local: checked, and carrying the root for the worker, see :meth:`safe_local_path`)."""
        return self.resolve(checkpoint_name(pod_id, segment))

    def resolve(self, name: str) -> str:
        """Absolute path or URL of a store-relative checkpoint name, checked first.

        Records keep names relative to the store, so a moved or copied store reads its
        own checkpoints; the check keeps any name read from a file inside the store.
        """
        name = check_checkpoint(name, "checkpoint")
        if self.is_local:
            return self.safe_local_path(name)
        return self.path(*name.split("/"))

    def clean_orphans(self, older_than: float = ORPHAN_SECONDS) -> list[str]:
        """Delete temporary files left by writers killed mid-write; return their paths.

        A local atomic write goes through ``.<name>.<random>.tmp`` beside its target; a
        writer killed before the rename leaves it behind. Only files older than
        ``older_than`` seconds go, so a write in progress elsewhere is never touched.
        Object stores write whole objects and leave no such files.
        """
        if not self.is_local:
            return []
        import time

        removed = []
        cutoff = time.time() - older_than
        folders = [(), ("state",)]
        with contextlib.suppress(FileNotFoundError):
            for name, st in self._scan_local("pods").items():
                if stat.S_ISDIR(st.st_mode):
                    folders.append(("pods", name))
        for folder in folders:
            try:
                entries = self._scan_local(*folder)
            except FileNotFoundError:
                continue
            for name, st in entries.items():
                if not (name.startswith(".") and name.endswith(".tmp")):
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                    with contextlib.suppress(OSError):
                        if self.remove("/".join([*folder, name])):
                            removed.append(self.path(*folder, name))
        return removed

    def checkpoints(self) -> dict[str, int]:
        """Every checkpoint in the store, ``{store-relative name: size in bytes}`` (one
        recursive listing; names that are not checkpoints are left out)."""
        if self.is_local:
            out = {}
            try:
                pods = self._scan_local("pods")
            except FileNotFoundError:
                return {}
            for pod, st in pods.items():
                if POD_ID.match(pod) and stat.S_ISDIR(st.st_mode):
                    for seg, info in self._scan_local("pods", pod).items():
                        name = f"pods/{pod}/{seg}"
                        if CHECKPOINT_NAME.match(name) and stat.S_ISREG(info.st_mode):
                            out[name] = info.st_size
            return out
        try:
            root = self._fs_path("pods")
            self.fs.invalidate_cache(root)
            found = self.fs.find(root, detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        base = self._fs_path("").rstrip("/")
        for path, info in found.items():
            name = str(path)[len(base) :].lstrip("/") if str(path).startswith(base) else ""
            if not name:  # some backends drop the protocol or the leading slash
                name = "/".join(str(path).replace("\\", "/").split("/")[-3:])
            if CHECKPOINT_NAME.match(name):
                out[name] = int(info.get("size") or 0)
        return out

    def prune(self, keep: set[str], settled: dict[str, int]) -> tuple[list[str], int]:
        """Delete checkpoints nobody needs; return (deleted names, bytes left in pods/).

        A checkpoint goes only if it is not in ``keep`` and its pod's segment number is
        at most ``settled[pod]`` (the segments whose results the state already holds):
        a segment still running, or one whose result came after the last save, is never
        touched, nor is any pod the state does not know. Call it after the pointer moved.
        """
        deleted, left = [], 0
        for name, size in self.checkpoints().items():
            m = CHECKPOINT_NAME.match(name)
            pod, segment = m.group(1), int(m.group(2))
            if name in keep or pod not in settled or segment > settled[pod]:
                left += size
                continue
            try:
                self.remove(name)  # never through a link
                deleted.append(name)
            except OSError:
                left += size  # housekeeping: a failure here must not fail the tournament
        return deleted, left

    def clear(self) -> list[str]:
        """Delete the tournament this store holds: every pod's checkpoints, the state
        snapshots and their pointer, the leaderboard, and the spec last (a store cleared
        halfway still reads as a tournament, and clearing it again finishes the job).
        Files the store does not write are left alone, as are the (then empty) folders.
        Returns the names removed. The caller holds the store's lease
        (:func:`~elegantpod.tournament.assembly.empty_store` does)."""
        removed = []
        for name in sorted(self.checkpoints()):
            if self.remove(name):  # never through a link
                removed.append(name)
        try:
            entries = [os.path.basename(str(p).rstrip("/")) for p in self.list_folder("state")]
        except FileNotFoundError:
            entries = []
        for entry in sorted(entries):
            if STATE_NAME.fullmatch(entry) and self.remove(f"state/{entry}"):
                removed.append(f"state/{entry}")
        for name in ("leaderboard.json", "tournament.json"):
            if self.remove(name):
                removed.append(name)
        return removed

    def pod_ids(self) -> list[str]:
        """Pods that have a checkpoint folder (one listing; used on resume)."""
        try:
            entries = self.list_folder("pods")
        except FileNotFoundError:
            return []
        names = (os.path.basename(str(p).rstrip("/")) for p in entries)
        return sorted(n for n in names if POD_ID.match(n))  # nothing else is ours

    # ------------------------------------------------------------------ snapshots
    def save_state(self, state: dict[str, Any]) -> int:
        """Save the orchestrator's state as a new snapshot, then move the pointer to it.

        Returns the snapshot's version. ``state`` must hold a ``"leaderboard"`` list; a
        readable copy of it goes to ``leaderboard.json`` after the pointer (see
        :meth:`elegantpod.tournament.store.snapshots.Snapshots.save`).
        """
        return self._snapshots.save(state)

    def moved_on(self) -> int | None:
        """The newest snapshot's number if another writer saved since this store object
        loaded or saved, else ``None`` (see :meth:`Snapshots.moved_on
        <elegantpod.tournament.store.snapshots.Snapshots.moved_on>`)."""
        return self._snapshots.moved_on()

    def load_state(self) -> dict[str, Any] | None:
        """The newest complete snapshot, or ``None`` if the store has none.

        Follows the pointer; if the pointer is missing, torn or names a snapshot that does
        not verify, the newest snapshot that parses is used instead. A link or special
        file, a file over its limit, or a snapshot numbered within
        :data:`VERSION_HEADROOM` of :data:`MAX_VERSION` is a :class:`StoreError`.
        """
        return self._snapshots.load()


def needed_checkpoints(snapshot: dict[str, Any]) -> tuple[set[str], dict[str, int]]:
    """What a saved snapshot still needs: ``(keep, settled)`` for ``Store.prune``.

    Computed from the snapshot that was saved, not the live population, so a checkpoint
    the store's state names is never deleted. Kept: the latest checkpoint of every pod
    that is alive, idle or stopped (resume and ``add_pod(parent=...)`` use it), every
    leaderboard entry's, and the parent checkpoint of every pod that has not finished
    its first segment (it still loads it). ``settled`` maps each pod to its last
    finished segment; anything newer is in flight and is not touched.
    """
    keep: set[str] = set()
    settled: dict[str, int] = {}
    for d in snapshot.get("pods", []):
        settled[d["pod_id"]] = d.get("segment", 0)
        alive = d.get("status") in RESUMABLE
        if alive and d.get("latest_checkpoint"):
            keep.add(d["latest_checkpoint"])
        if alive and not d.get("segment") and d.get("parent_checkpoint"):
            keep.add(d["parent_checkpoint"])
    keep.update(e["checkpoint"] for e in snapshot.get("leaderboard", []))
    return keep, settled
