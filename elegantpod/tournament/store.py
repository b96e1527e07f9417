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

What a store can reach: a store may come from someone else (a tarball, a shared folder),
so on a local disk nothing below its root may be a symbolic link, FIFO, device or socket:
every read, write, listing and deletion walks from the root (resolved once from the path
the user typed) through folders only, with ``O_NOFOLLOW`` (see
:mod:`elegantpod.safe_files`), and refuses anything else with a :class:`StoreError`
naming it. Every file is opened only as a regular file, and its size is checked against
its limit (:data:`MAX_POINTER_BYTES`, :data:`MAX_SPEC_BYTES`, :data:`MAX_SNAPSHOT_BYTES`)
before it is read. Object stores have no links or special files (a key names one
object), so there the boundary is the bucket's access policy: give a tournament its own
bucket or prefix, writable only by its writers, and credentials that reach nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import fsspec

from elegantpod import safe_files
from elegantpod.tournament import state
from elegantpod.tournament.protocol import RESUMABLE

KEEP_SNAPSHOTS = 3
"""Snapshots kept besides the newest (older ones are deleted after each save)."""
POINTER = "state/LATEST"
READ_ATTEMPTS = 3
"""Reads of an object that another writer replaced mid-read (its ETag changed) before
the error stands: the pointer and the lease are rewritten every few seconds."""
ORPHAN_SECONDS = 120.0
"""Temporary files older than this are a killed writer's leftovers (a checkpoint write
takes well under a second): :meth:`Store.clean_orphans` deletes them."""
MAX_VERSION = 10**8 - 1
"""The largest snapshot number: a snapshot's name holds eight digits."""
VERSION_HEADROOM = 10**6
"""A store whose newest snapshot is numbered above ``MAX_VERSION - VERSION_HEADROOM`` is
refused on load: a million saves (at one every few seconds, months of running) must
still fit after a resume, and no tournament gets near 99 million saves, so a number
there was planted to make the next save's name overflow."""
MAX_POINTER_BYTES = 4096
"""Largest ``state/LATEST`` (and ``lease.json``) read: both hold a few short fields."""
MAX_SPEC_BYTES = 16 * 2**20
"""Largest ``tournament.json`` read (a spec is a few KiB)."""
MAX_SNAPSHOT_BYTES = 64 * 2**20
"""Largest snapshot (and any other store file) read: a snapshot holds every pod's record
and the leaderboard, well under this for any tournament that fits a cluster."""
_LIMITS = {POINTER: MAX_POINTER_BYTES, "lease.json": MAX_POINTER_BYTES}
_LIMITS["tournament.json"] = MAX_SPEC_BYTES
_SNAPSHOT = re.compile(r"^(\d{8})\.json$")
_POINTED = re.compile(r"^state/(\d{8})\.json$")


class StoreError(ValueError):
    """A store that cannot be read or written (names the store and the file)."""


class StoreFileTooLarge(StoreError):
    """A store file over its size limit, refused before it was read."""


class Store:
    """Read and write a tournament's files under ``url`` (a path or an fsspec URL).

    On a local disk a store holds only regular files and folders: a link or special file
    below its root is refused (:class:`StoreError`), never followed; see the module
    docstring for object stores. Remote filesystems take their credentials and endpoints
    from the environment in the usual way of their fsspec package (``AWS_*`` variables
    and ``AWS_ENDPOINT_URL`` for s3fs, ``GOOGLE_APPLICATION_CREDENTIALS`` for gcsfs...):
    every Dask worker reads the same store, so configuration that travels with the
    environment reaches them all.
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

    def safe_local_path(self, name: str) -> safe_files.RootedPath:
        """The local path of ``name`` (``"pods/p011/seg-00003.pt"``), checked: every part
        below the root that exists is a folder, and the file is a regular one or missing.

        The path returned carries the store's root (a :class:`~elegantpod.safe_files.
        RootedPath`), so whoever writes or reads it later, a Dask worker included, walks
        from the root again without following a link. Raises :class:`StoreError`.
        """
        path = safe_files.RootedPath(self.path(*self._parts(name)), self.url)
        with self._guard():
            st = safe_files.lstat_below(path, root=self.url)
        if st is not None and not safe_files.is_plain(st.st_mode):
            raise StoreError(self._refusal(name, safe_files.kind_of(st.st_mode)))
        return path

    def exists(self, *parts: str) -> bool:
        """Whether a file (or folder) exists in the store."""
        if not self.is_local:
            return self.fs.exists(self._fs_path(*parts))
        with self._guard():
            st = safe_files.lstat_below(self.path(*self._parts(*parts)), root=self.url)
        if st is not None and not safe_files.is_plain(st.st_mode):
            raise StoreError(self._refusal("/".join(parts), safe_files.kind_of(st.st_mode)))
        return st is not None

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write one whole file: atomically on a local disk, one ``put`` on object stores."""
        if self.is_local:
            os.makedirs(self.url, exist_ok=True)  # the root: the user's own path
            with self._guard():
                safe_files.atomic_write_bytes(self.path(*self._parts(name)), data, root=self.url)
        else:
            self.fs.pipe_file(self._fs_path(name), data)

    def read_bytes(self, name: str, limit: int | None = None) -> bytes:
        """A whole file's bytes; ``FileNotFoundError`` if missing.

        At most ``limit`` bytes (default: the file's own limit, :data:`MAX_SNAPSHOT_BYTES`
        for most): a larger file is a :class:`StoreFileTooLarge`, refused before it is
        read. On a local disk only a regular file reached through folders is read.
        """
        if limit is None:
            limit = _LIMITS.get(name, MAX_SNAPSHOT_BYTES)
        if self.is_local:
            with self._guard():
                return safe_files.read_bytes(self.path(*self._parts(name)), limit, root=self.url)
        path = self._fs_path(name)
        for attempt in range(READ_ATTEMPTS):
            self.fs.invalidate_cache(path)  # other processes write here: no stale "missing"
            try:
                with self.fs.open(path, "rb", cache_type="none") as f:  # reads what it asks
                    data = f.read(limit + 1)
                break
            except FileNotFoundError:
                raise
            except OSError as exc:
                # Replaced between open and read (another writer moved the pointer): an
                # object store refuses the old version's ETag (s3fs: FileExpired, EBUSY;
                # PreconditionFailed, EINVAL). Read the new version instead.
                if exc.errno not in (errno.EBUSY, errno.EINVAL) or attempt == READ_ATTEMPTS - 1:
                    raise
        if len(data) > limit:
            raise StoreFileTooLarge(self._too_large(name, limit))
        return data

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
            if self.is_local:
                os.makedirs(self.url, exist_ok=True)  # the root: the user's own path
                with self._guard():
                    os.close(safe_files.open_dir(self.url, ["pods"], create=True))
            else:
                self.fs.makedirs(self._fs_path("pods"), exist_ok=True)
            self.write_bytes(".write-test", b"")
            self.remove(".write-test")
        except (OSError, PermissionError) as exc:
            raise ValueError(f"store {self.url!r} is not writable: {exc}") from exc

    def remove(self, name: str) -> bool:
        """Delete one file; ``False`` if it was missing. On a local disk only a regular
        file reached through folders is deleted (never through a link)."""
        if self.is_local:
            with self._guard():
                return safe_files.remove_file(self.path(*self._parts(name)), root=self.url)
        try:
            self.fs.rm(self._fs_path(name))
        except FileNotFoundError:
            return False
        return True

    def checkpoint(self, pod_id: str, segment: int) -> str:
        """Absolute path or URL where segment ``segment`` of ``pod_id`` checkpoints
        (local: checked, and carrying the root for the worker, see :meth:`safe_local_path`)."""
        return self.resolve(state.checkpoint_name(pod_id, segment))

    def resolve(self, name: str) -> str:
        """Absolute path or URL of a store-relative checkpoint name, checked first.

        Records keep names relative to the store, so a moved or copied store reads its
        own checkpoints; the check keeps any name read from a file inside the store.
        """
        name = state.check_checkpoint(name, "checkpoint")
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
                if state.POD_ID.match(pod) and stat.S_ISDIR(st.st_mode):
                    for seg, info in self._scan_local("pods", pod).items():
                        name = f"pods/{pod}/{seg}"
                        if state.CHECKPOINT_NAME.match(name) and stat.S_ISREG(info.st_mode):
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
                self.remove(name)  # never through a link
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
        if version > MAX_VERSION:  # a name the pointer's pattern rejects hides the save
            raise StoreError(
                f"store {self.url!r}: no snapshot number is left (the next would be "
                f"{version}, names hold at most {MAX_VERSION}); continue in a new store"
            )
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
                self.remove(f"state/{old:08d}.json")
        return version

    def load_state(self) -> dict[str, Any] | None:
        """The newest complete snapshot, or ``None`` if the store has none.

        Follows the pointer; if the pointer is missing, torn or names a snapshot that does
        not verify, the newest snapshot that parses is used instead. A link or special
        file, a file over its limit, or a snapshot numbered within
        :data:`VERSION_HEADROOM` of :data:`MAX_VERSION` is a :class:`StoreError`.
        """
        versions = self._versions()
        self._check_version(max(versions, default=0))
        pointer = None
        try:
            pointer = json.loads(self.read_bytes(POINTER))
            name = pointer["name"]
            pointed = _POINTED.match(name) if isinstance(name, str) else None
            if not pointed:
                raise ValueError(f"pointer names {name!r}, not a snapshot")  # stay inside
            self._check_version(int(pointed.group(1)))
            data = self.read_bytes(name)
            if hashlib.sha256(data).hexdigest() != pointer["sha256"]:
                raise ValueError("checksum mismatch")
            try:
                loaded = json.loads(data)
            except (ValueError, RecursionError) as exc:
                # It verifies, so it is what a writer saved, not a torn write: falling
                # back to an older snapshot would silently undo every later save.
                raise StoreError(
                    f"{self.path(*name.split('/'))!r} matches the pointer's checksum but is "
                    f"not readable JSON ({type(exc).__name__}, nested too deep?); refused "
                    "rather than replaced by an older snapshot"
                ) from None
            self.loaded_from = self.path(*name.split("/"))
            return loaded
        except StoreError:
            raise  # hostile, not torn: never fall back past it
        except FileNotFoundError:
            if pointer is None and not self.exists("state"):
                return None
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
        for version in sorted(versions, reverse=True):
            try:
                snapshot = json.loads(self.read_bytes(f"state/{version:08d}.json"))
            except StoreError:
                raise
            except (ValueError, OSError, RecursionError):
                continue
            if isinstance(snapshot, dict) and "leaderboard" in snapshot:
                self.loaded_from = self.path("state", f"{version:08d}.json")
                return snapshot
        raise StoreError(f"store {self.url!r} has a state/ folder but no readable snapshot")

    def _check_version(self, version: int) -> None:
        if version > MAX_VERSION - VERSION_HEADROOM:
            raise StoreError(
                f"store {self.url!r}: snapshot number {version} is within "
                f"{VERSION_HEADROOM} of the largest a snapshot name holds ({MAX_VERSION}); "
                "no tournament saves that often, so this store is refused (a planted number "
                "would hide every later save)"
            )

    def _list(self, folder: str) -> list[str]:
        """A fresh listing: fsspec caches listings, and other processes write here."""
        if self.is_local:
            return sorted(self._scan_local(folder))
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

    # ------------------------------------------------------------------ local safety
    def _parts(self, *names: str) -> list[str]:
        """Store-relative names as path parts; nothing may climb out or be empty."""
        parts = [p for n in names for p in str(n).split("/")]
        if not parts or any(p in ("", ".", "..") for p in parts):
            raise StoreError(f"store {self.url!r}: {'/'.join(names)[:200]!r} is not a name in it")
        return parts

    def _scan_local(self, *parts: str) -> dict[str, os.stat_result]:
        """A local folder's entries, ``{name: lstat}``; any entry that is not a regular
        file or a folder is refused. Raises ``FileNotFoundError`` if it is missing."""
        with self._guard():
            entries = safe_files.list_dir(self.path(*parts), root=self.url)
        for name, st in entries.items():
            if not safe_files.is_plain(st.st_mode):
                where = "/".join([*parts, name])
                raise StoreError(self._refusal(where, safe_files.kind_of(st.st_mode)))
        return entries

    def _refusal(self, name: str, kind: str) -> str:
        return (
            f"store {self.url!r}: {name[:200]} is {kind}; a store must hold only regular "
            "files and folders (refusing to follow it)"
        )

    def _too_large(self, name: str, limit: int, size: int | None = None) -> str:
        size = "more than" if size is None else f"{size} bytes,"
        return f"store {self.url!r}: {name[:200]} is {size} over its limit of {limit} bytes"

    @contextlib.contextmanager
    def _guard(self):
        """Local safety refusals as :class:`StoreError` naming the store and the file."""
        try:
            yield
        except safe_files.UnsafeFileError as exc:
            if exc.limit is not None:
                raise StoreFileTooLarge(self._too_large(exc.name, exc.limit, exc.size)) from None
            raise StoreError(self._refusal(exc.name, exc.kind)) from None


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


def _dumps(obj: Any, indent: int | None) -> bytes:
    if indent is None:  # the C encoder: compact and several times faster
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return json.dumps(obj, indent=indent, sort_keys=True, allow_nan=False).encode()
