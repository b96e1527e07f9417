"""The tournament store: a directory or any fsspec URL that all workers can reach.

Layout::

    tournament.json            the tournament's spec (env, algorithms, budgets, seed)
    state/00000042.json        snapshot 42: leaderboard, every pod's record, counters
    state/LATEST               pointer to the newest complete snapshot (written last)
    leaderboard.json           a copy of the newest leaderboard, for people and tools
    pods/<pod>/seg-00003.pt    checkpoint at the end of each segment

Why snapshots and a pointer: object stores (S3, GCS, Azure) have no rename, so the
temp-file-and-rename trick of a local disk does not exist there, and some fsspec
backends stream large writes in parts. So the orchestrator's state is never rewritten in
place: each save is one new object under a versioned name, and only after it is
complete does the small ``LATEST`` pointer move to it (with the snapshot's SHA-256). A
writer that dies mid-save leaves at worst an unfinished object that nothing points to;
a reader that finds the pointer torn or pointing at a bad object falls back to the newest
snapshot that verifies. Leaderboard, records and counters live in one object, so they can
never disagree with each other. Old snapshots are pruned, keeping the last
:data:`KEEP_SNAPSHOTS`.

On a local filesystem every file is additionally written atomically (temp file, fsync,
rename), so a reader never sees half a file there either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import fsspec

from elegantpod.checkpoint import atomic_write_bytes
from elegantpod.tournament import state

KEEP_SNAPSHOTS = 3
"""Snapshots kept besides the newest (older ones are deleted after each save)."""
POINTER = "state/LATEST"
ORPHAN_SECONDS = 120.0
"""Temporary files older than this are a killed writer's leftovers (a checkpoint write
takes well under a second): :meth:`Store.clean_orphans` deletes them."""
_SNAPSHOT = re.compile(r"^(\d{8})\.json$")
_POINTED = re.compile(r"^state/\d{8}\.json$")


class StoreError(ValueError):
    """A store that cannot be read or written (names the store and the file)."""


class Store:
    """Read and write a tournament's files under ``url`` (a path or an fsspec URL).

    Remote filesystems take their credentials and endpoints from the environment in the
    usual way of their fsspec package (``AWS_*`` variables and ``AWS_ENDPOINT_URL`` for
    s3fs, ``GOOGLE_APPLICATION_CREDENTIALS`` for gcsfs...): every Dask worker reads the
    same store, so configuration that travels with the environment reaches them all.
    """

    def __init__(self, url: str | os.PathLike):
        url = os.fspath(url)
        if not url:
            raise ValueError("store must be a directory path or an fsspec URL, got ''")
        try:
            self.fs, self.root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise ValueError(
                f"store {url!r}: {exc} (object stores need their fsspec package, e.g. "
                "pip install 'elegantpod[s3]')"
            ) from exc
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.is_local = "file" in protocols or "local" in protocols
        self.url = str(Path(self.root).resolve()) if self.is_local else url.rstrip("/")
        # Newest snapshot this object wrote; None: the first save lists the folder.
        self._version: int | None = None
        self.loaded_from: str | None = None
        """The snapshot :meth:`load_state` read last (for error messages)."""

    def path(self, *parts: str) -> str:
        """Absolute path (local) or URL (remote) of a file in the store."""
        if self.is_local:
            return str(Path(self.url, *parts))
        return "/".join([self.url, *parts])

    def _fs_path(self, *parts: str) -> str:
        if self.is_local:
            return self.path(*parts)
        return "/".join([self.root.rstrip("/"), *parts])

    def exists(self, *parts: str) -> bool:
        """Whether a file (or folder) exists in the store."""
        return self.fs.exists(self._fs_path(*parts))

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write one whole file: atomically on a local disk, one ``put`` on object stores."""
        if self.is_local:
            atomic_write_bytes(self.path(name), data)
        else:
            self.fs.pipe_file(self._fs_path(name), data)

    def read_bytes(self, name: str) -> bytes:
        """A whole file's bytes; ``FileNotFoundError`` if missing."""
        path = self._fs_path(name)
        if not self.is_local:
            self.fs.invalidate_cache(path)  # other processes write here: no stale "missing"
        return self.fs.cat_file(path)

    def write_json(self, name: str, obj: Any, indent: int | None = 1) -> None:
        """Write JSON (never NaN or infinities: they are not JSON)."""
        self.write_bytes(name, _dumps(obj, indent))

    def read_json(self, name: str, default: Any = None) -> Any:
        """A JSON file's content, or ``default`` if it is missing."""
        try:
            data = self.read_bytes(name)
        except FileNotFoundError:
            return default
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:  # nested past reason: hostile
            raise StoreError(f"{self.path(name)!r} is not valid JSON: {exc}") from None

    def ensure(self) -> None:
        """Create the store's root (and prove it is writable)."""
        try:
            self.fs.makedirs(self._fs_path("pods"), exist_ok=True)
            self.write_bytes(".write-test", b"")
            self.fs.rm(self._fs_path(".write-test"))
        except (OSError, PermissionError) as exc:
            raise ValueError(f"store {self.url!r} is not writable: {exc}") from exc

    def checkpoint(self, pod_id: str, segment: int) -> str:
        """Absolute path or URL where segment ``segment`` of ``pod_id`` checkpoints."""
        return self.resolve(checkpoint_name(pod_id, segment))

    def resolve(self, name: str) -> str:
        """Absolute path or URL of a store-relative checkpoint name, checked first.

        Records keep names relative to the store, so a moved or copied store reads its
        own checkpoints; the check keeps any name read from a file inside the store.
        """
        return self.path(*state.checkpoint_name(name, "checkpoint").split("/"))

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
        root = Path(self.url)
        for tmp in [*root.glob("state/.*.tmp"), *root.glob("pods/*/.*.tmp"), *root.glob(".*.tmp")]:
            with contextlib.suppress(OSError):
                if tmp.is_file() and tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed.append(str(tmp))
        return removed

    def checkpoints(self) -> dict[str, int]:
        """Every checkpoint in the store, ``{store-relative name: size in bytes}`` (one
        recursive listing; names that are not checkpoints are left out)."""
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
            if state.CHECKPOINT_NAME.match(name):
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
            m = state.CHECKPOINT_NAME.match(name)
            pod, segment = m.group(1), int(m.group(2))
            if name in keep or pod not in settled or segment > settled[pod]:
                left += size
                continue
            try:
                self.fs.rm(self._fs_path(*name.split("/")))
                deleted.append(name)
            except OSError:
                left += size  # housekeeping: a failure here must not fail the tournament
        return deleted, left

    def pod_ids(self) -> list[str]:
        """Pods that have a checkpoint folder (one listing; used on resume)."""
        try:
            entries = self._list("pods")
        except FileNotFoundError:
            return []
        names = (os.path.basename(str(p).rstrip("/")) for p in entries)
        return sorted(n for n in names if state.POD_ID.match(n))  # nothing else is ours

    # ------------------------------------------------------------------ snapshots
    def save_state(self, state: dict[str, Any]) -> int:
        """Save the orchestrator's state as a new snapshot, then move the pointer to it.

        Returns the snapshot's version. ``state`` must hold a ``"leaderboard"`` list; a
        readable copy of it goes to ``leaderboard.json`` after the pointer.
        """
        data = _dumps(state, None)  # fails on NaN before anything is written
        if self._version is None:
            self._version = self._newest_version()
        version = self._version + 1
        name = f"state/{version:08d}.json"
        self.write_bytes(name, data)
        pointer = {"version": version, "name": name, "sha256": hashlib.sha256(data).hexdigest()}
        self.write_bytes(POINTER, _dumps(pointer, None))
        self._version = version
        self.write_json("leaderboard.json", state.get("leaderboard", []))
        old = version - KEEP_SNAPSHOTS - 1
        if old >= 1:
            # pruning is housekeeping: a failure must not fail the save
            with contextlib.suppress(OSError):
                self.fs.rm(self._fs_path(f"state/{old:08d}.json"))
        return version

    def load_state(self) -> dict[str, Any] | None:
        """The newest complete snapshot, or ``None`` if the store has none.

        Follows the pointer; if the pointer is missing, torn or names a snapshot that does
        not verify, the newest snapshot that parses is used instead.
        """
        pointer = None
        try:
            pointer = json.loads(self.read_bytes(POINTER))
            name = pointer["name"]
            if not (isinstance(name, str) and _POINTED.match(name)):
                raise ValueError(f"pointer names {name!r}, not a snapshot")  # stay inside
            data = self.read_bytes(name)
            if hashlib.sha256(data).hexdigest() != pointer["sha256"]:
                raise ValueError("checksum mismatch")
            loaded = json.loads(data)
            self.loaded_from = self.path(*name.split("/"))
            return loaded
        except FileNotFoundError:
            if pointer is None and not self.exists("state"):
                return None
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
        for version in sorted(self._versions(), reverse=True):
            try:
                snapshot = json.loads(self.read_bytes(f"state/{version:08d}.json"))
            except (ValueError, OSError, RecursionError):
                continue
            if isinstance(snapshot, dict) and "leaderboard" in snapshot:
                self.loaded_from = self.path("state", f"{version:08d}.json")
                return snapshot
        raise StoreError(f"store {self.url!r} has a state/ folder but no readable snapshot")

    def _list(self, folder: str) -> list[str]:
        """A fresh listing: fsspec caches listings, and other processes write here."""
        path = self._fs_path(folder)
        self.fs.invalidate_cache(path)
        return self.fs.ls(path, detail=False)

    def _versions(self) -> list[int]:
        try:
            names = self._list("state")
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
        alive = d.get("status") in ("queued", "running", "paused", "idle", "stopped")
        if alive and d.get("latest_checkpoint"):
            keep.add(d["latest_checkpoint"])
        if alive and not d.get("segment") and d.get("parent_checkpoint"):
            keep.add(d["parent_checkpoint"])
    keep.update(e["checkpoint"] for e in snapshot.get("leaderboard", []))
    return keep, settled


def checkpoint_name(pod_id: str, segment: int) -> str:
    """Store-relative name of a pod's checkpoint at the end of ``segment``."""
    return f"pods/{state.check_pod_id(pod_id, 'pod id')}/seg-{segment:05d}.pt"


def _dumps(obj: Any, indent: int | None) -> bytes:
    if indent is None:  # the C encoder: compact and several times faster
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return json.dumps(obj, indent=indent, sort_keys=True, allow_nan=False).encode()
