"""A store's files: one folder or fsspec URL, read and written whole, on a local disk
only as regular files reached through folders.

:class:`~elegantpod.tournament.store.store.Store` adds the tournament's layout (snapshots,
checkpoints) on top; this module holds what any of its files needs, apart from that
layout: where a name lives, atomic whole-file writes, reads bounded by a size limit,
fresh listings, and the refusals.

On a local filesystem every file is written atomically (temp file, fsync, rename), so a
reader never sees half a file. Object stores write whole objects; a read of one that
another writer replaced mid-read (its ETag changed) is tried again.

What a store can reach: a store may come from someone else (a tarball, a shared folder),
so on a local disk nothing below its root may be a symbolic link, FIFO, device or socket:
every read, write, listing and deletion walks from the root (resolved once from the path
the user typed) through folders only, with ``O_NOFOLLOW`` (see
:mod:`elegantpod.safe_files`), and refuses anything else with a :class:`StoreError`
naming it. Every file is opened only as a regular file, and its size is checked against
its limit (:meth:`StoreFiles.limit_of`) before it is read. Object stores have no links
or special files (a key names one object), so there the boundary is the bucket's access
policy: give a tournament its own bucket or prefix, writable only by its writers, and
credentials that reach nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from pathlib import Path
from typing import Any

import fsspec

from elegantpod import safe_files

WRITE_LOCK = ".write.lock"
"""The lock file of a local store's writes (:meth:`StoreFiles.write_lock`)."""
LOCK_WAIT_SECONDS = 60.0
"""How long a write waits for the lock before saying that another process holds it."""
READ_ATTEMPTS = 3
"""Reads of an object that another writer replaced mid-read (its ETag changed) before
the error stands: the pointer and the lease are rewritten every few seconds."""
MAX_FILE_BYTES = 64 * 2**20
"""Largest file read where its layout sets no other limit (see :meth:`StoreFiles.limit_of`)."""


class StoreError(ValueError):
    """A store that cannot be read or written (names the store and the file)."""


class StoreFileTooLarge(StoreError):
    """A store file over its size limit, refused before it was read."""


class StoreFiles:
    """The files under ``url`` (a path or an fsspec URL), read and written whole.

    On a local disk it holds only regular files and folders: a link or special file below
    its root is refused (:class:`StoreError`), never followed; see the module docstring
    for object stores. Remote filesystems take their credentials and endpoints from the
    environment in the usual way of their fsspec package (``AWS_*`` variables and
    ``AWS_ENDPOINT_URL`` for s3fs, ``GOOGLE_APPLICATION_CREDENTIALS`` for gcsfs...):
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

    @contextlib.contextmanager
    def write_lock(self, wait: float = LOCK_WAIT_SECONDS):
        """Hold the store's write lock (on a local disk; elsewhere a no-op).

        Why: a writer checks that the lease is still its own and then writes; without a
        lock those are two steps, and a writer paused between them (a stopped process,
        a stalled disk) writes over its successor after waking. Every lease change and
        every fenced write (:func:`~elegantpod.tournament.store.lease.fenced`) takes this lock,
        so a check and its write are one step to every other writer: a compare-and-swap.
        The lock is ``flock`` on :data:`WRITE_LOCK` in the store's root, shared by every
        process on the machine (and over NFSv4); the kernel drops it when its holder
        dies. Object stores offer no lock through fsspec: there the check and the write
        stay two requests (see :mod:`elegantpod.tournament.store.lease`).

        Raises
        ------
        StoreError
            If the lock is a link or not a regular file, or another process held it for
            ``wait`` seconds (a writer paused inside a write).
        """
        if not self.is_local:
            yield
            return
        os.makedirs(self.url, exist_ok=True)
        lock = safe_files.FileLock(self.path(WRITE_LOCK))
        try:
            lock.acquire(wait)
        except safe_files.UnsafeFileError as exc:
            raise StoreError(self._refusal(WRITE_LOCK, exc.kind)) from None
        except safe_files.LockHeld:
            raise StoreError(
                f"store {self.url!r}: another process has held its write lock "
                f"for {wait:.0f} s (a writer paused in the middle of a write?): "
                "continue or end that process, then try again"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def read_bytes(self, name: str, limit: int | None = None) -> bytes:
        """A whole file's bytes; ``FileNotFoundError`` if missing.

        At most ``limit`` bytes (default: the file's own limit, :meth:`limit_of`): a
        larger file is a :class:`StoreFileTooLarge`, refused before it is read. On a
        local disk only a regular file reached through folders is read.
        """
        if limit is None:
            limit = self.limit_of(name)
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
        self.write_bytes(name, json_bytes(obj, indent))

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

    def list_folder(self, folder: str) -> list[str]:
        """A folder's entries, listed afresh (fsspec caches listings, and other processes
        write here): names on a local disk, paths on object stores (take the basename).
        Raises ``FileNotFoundError`` if the folder is missing."""
        if self.is_local:
            return sorted(self._scan_local(folder))
        path = self._fs_path(folder)
        self.fs.invalidate_cache(path)
        return self.fs.ls(path, detail=False)

    def limit_of(self, name: str) -> int:
        """The most bytes :meth:`read_bytes` reads of file ``name`` unless told: a layout
        with files of other sizes overrides it."""
        return MAX_FILE_BYTES

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


def json_bytes(obj: Any, indent: int | None) -> bytes:
    """``obj`` as JSON (never NaN or infinities: they are not JSON); compact when
    ``indent`` is ``None``, else indented with sorted keys, for people."""
    if indent is None:  # the C encoder: compact and several times faster
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return json.dumps(obj, indent=indent, sort_keys=True, allow_nan=False).encode()
