"""Local files opened safely: regular files only, reads bounded before they start, no
link followed below a root, and atomic writes that respect the umask.

Why: a store or a checkpoint may come from someone else (a tarball, a shared folder). A
symbolic link inside a store makes its reads and writes land in another folder (another
store's checkpoints written, its snapshots deleted); a FIFO blocks ``open()`` forever; a
link to ``/dev/zero`` is an endless file. So:

* below a *root* (a store's folder, resolved once from what the user typed) every
  component is opened with ``O_NOFOLLOW`` relative to its parent's descriptor, so a
  link is refused even if it was swapped in after a check, and a file is deleted or
  renamed only through its folder's descriptor (never through a link);
* every file is opened with ``O_NONBLOCK`` (a FIFO cannot block) and ``fstat``-checked to
  be a regular file, and its size is compared with a limit before a byte is read;
* a path given without a root (a checkpoint or report the user names) may be a link the
  user made, but it must still lead to a regular file.

A root travels with a path as a :class:`RootedPath` (a ``str``), so a Dask worker that
writes a store's checkpoint checks it as the store would without knowing the store.
POSIX only (descriptor-relative calls), as is the rest of elegantpod.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from pathlib import Path, PurePath
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


def _umask_at_import() -> int:
    # os.umask can only be read by setting it: once, here, and only where /proc is missing
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _proc_umask() -> int | None:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


_UMASK_FALLBACK = None if _proc_umask() is not None else _umask_at_import()


def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file now: ``0o666`` less the
    process umask (read from ``/proc/self/status``; where that is missing, as read once
    at import, since setting the umask to read it races with other threads)."""
    mask = _proc_umask()
    if mask is None:
        mask = 0o022 if _UMASK_FALLBACK is None else _UMASK_FALLBACK
    return 0o666 & ~mask


class UnsafeFileError(ValueError):
    """A path that is not a regular file or folder (a link, FIFO, device, socket), or a
    file over its size limit: refused before anything is read or written through it.

    ``name`` is the offending path relative to the root (or the whole path without
    one), ``kind`` what it is (``"a symbolic link"``...), ``size`` and ``limit`` are set
    for a file over its limit.
    """

    def __init__(
        self, path: str, name: str, kind: str, size: int | None = None, limit: int | None = None
    ):
        self.path, self.name, self.kind, self.size, self.limit = path, name, kind, size, limit
        if limit is not None:
            text = f"{_shown(path)} is {size} bytes, over the limit of {limit} bytes for it"
        else:
            text = (
                f"{_shown(path)} is {kind}; only regular files and folders are read or "
                "written there (refusing to follow it)"
            )
        super().__init__(text)


class RootedPath(str):
    """A local path that must be reached from its root ``no_links_below`` through
    folders only: the functions of this module check it so wherever it travels."""

    no_links_below: str

    def __new__(cls, path: str | os.PathLike, root: str | os.PathLike) -> RootedPath:
        self = super().__new__(cls, os.fspath(path))
        self.no_links_below = os.fspath(root)
        return self

    def __reduce__(self):
        return (RootedPath, (str(self), self.no_links_below))


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "a special file"


def is_plain(mode: int) -> bool:
    """Whether a file of this ``st_mode`` is a regular file or a folder."""
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def open_dir(root: str | os.PathLike, parts, *, create: bool = False) -> int:
    """A descriptor of the folder ``root/parts...``, reached through folders only.

    ``root`` itself is opened as given (a link the user typed is theirs); each part
    below it with ``O_NOFOLLOW``. ``create`` makes missing folders (mode as ``mkdir``
    gives under the umask). Raises :class:`UnsafeFileError` for a part that is a link
    or a special file, ``FileNotFoundError`` for a missing one.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                nxt = _open_at(fd, part, _DIR_FLAGS, root, parts[: i + 1])
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = _open_at(fd, part, _DIR_FLAGS, root, parts[: i + 1])
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: str | os.PathLike, limit: int, *, root=None) -> BinaryIO:
    """``path`` opened for reading, once it is known to be a regular file of at most
    ``limit`` bytes. ``root`` (default: the path's own, for a :class:`RootedPath`):
    no part below it may be a link. Raises :class:`UnsafeFileError`,
    ``FileNotFoundError`` or ``IsADirectoryError``."""
    root = _root_of(path, root)
    path = os.fspath(path)
    if root is None:
        name = path
        try:
            fd = os.open(path, _FILE_FLAGS)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise
        except OSError as exc:  # a socket (ENXIO), a device that refuses...
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise exc from None
            raise UnsafeFileError(path, path, kind_of(mode)) from None
    else:
        parts = _parts_below(path, root)
        name = "/".join(parts)
        dir_fd = open_dir(root, parts[:-1])
        try:
            fd = _open_at(dir_fd, parts[-1], _FILE_FLAGS | os.O_NOFOLLOW, root, parts)
        finally:
            os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", path)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(path, name, kind_of(st.st_mode))
        if st.st_size > limit:
            raise UnsafeFileError(path, name, "a regular file", st.st_size, limit)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, limit: int, *, root=None) -> bytes:
    """A regular file's bytes, at most ``limit`` of them (see :func:`open_file`)."""
    with open_file(path, limit, root=root) as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew after the check
        name = os.fspath(path)
        raise UnsafeFileError(name, name, "a regular file", len(data), limit)
    return data


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, root=None) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and a rename.

    The file gets the mode a plain ``open()`` would (``0o666`` less the umask). With a
    ``root`` (default: the path's own, for a :class:`RootedPath`) every folder below it
    is reached without following a link (missing ones are made), and an existing
    target that is not a regular file is refused (:class:`UnsafeFileError`).
    """
    root = _root_of(path, root)
    if root is None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        name = target.name
    else:
        parts = _parts_below(path, root)
        dir_fd = open_dir(root, parts[:-1], create=True)
        name = parts[-1]
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = stat.S_IFREG
        except BaseException:
            os.close(dir_fd)
            raise
        if not stat.S_ISREG(mode):
            os.close(dir_fd)
            raise UnsafeFileError(os.fspath(path), "/".join(parts), kind_of(mode))
    try:
        _write_in(dir_fd, name, data)
    finally:
        os.close(dir_fd)


class LockHeld(Exception):
    """Another holder kept a :class:`FileLock` for the whole wait. ``note`` is what that
    holder wrote in the lock file (who it is), printable ASCII cut short; ``""`` if none."""

    def __init__(self, path: str, note: str):
        super().__init__(f"{_shown(path)} is locked by {note or 'another holder'}")
        self.path, self.note = path, note


class FileLock:
    """An exclusive ``flock`` on one regular file: the lock of a folder that one writer
    at a time may change (a store's ``.write.lock``, a run folder's ``.run.lock``).

    Why ``flock``: the lock belongs to the open file, so another process, and another
    :class:`FileLock` on the same file in this process (a second ``train()`` in another
    thread), is refused while one holds it; and the kernel drops it when its holder
    dies, so no stale lock is ever left to clean up. Local disks (and NFSv4) only. The
    file is created if missing (mode ``0o600``), opened without following a link, and
    must be a regular file.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0, note: str = "") -> None:
        """Take the lock, trying for ``wait`` seconds (0: once); write ``note`` (who
        holds it, for the message of whoever is refused) into the file.

        Raises
        ------
        UnsafeFileError
            If the lock file is a link, or not a regular file.
        LockHeld
            If another holder kept it for ``wait`` seconds.
        """
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFileError(self.path, self.path, "a symbolic link") from None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise UnsafeFileError(self.path, self.path, kind_of(mode))
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(self.path, _note(os.pread(fd, 256, 0))) from None
                    time.sleep(0.02)
                    continue
                if self._is_the_file(fd):
                    break
                # a holder that removes its lock file on release (a run folder's) removed
                # it after this opened it: this lock is of a file no one else will open
                os.close(fd)
                fd = os.open(self.path, flags, 0o600)
                if not stat.S_ISREG(mode := os.fstat(fd).st_mode):
                    raise UnsafeFileError(self.path, self.path, kind_of(mode))
            if note:
                os.ftruncate(fd, 0)
                os.pwrite(fd, note.encode()[:200], 0)
        except BaseException:
            os.close(fd)  # closing drops a lock taken
            raise
        self._fd = fd

    def _is_the_file(self, fd: int) -> bool:
        """Whether ``fd`` is still the file at :attr:`path` (not one removed since)."""
        try:
            here = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)

    def release(self, remove: bool = False) -> None:
        """Let the lock go (nothing if it is not held); with ``remove``, delete the lock
        file first, while still holding it (a run folder then holds only its run's
        files; whoever opened it meanwhile sees it gone and opens the new one)."""
        if self._fd is not None:
            import fcntl

            fd, self._fd = self._fd, None
            try:
                if remove and self._is_the_file(fd):
                    os.unlink(self.path)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _note(data: bytes) -> str:
    """A lock file's note as a message may repeat it: printable ASCII, 200 at most."""
    return "".join(c for c in data.decode("ascii", "replace") if c.isprintable())[:200]


def remove_file(path: str | os.PathLike, *, root) -> bool:
    """Delete the regular file ``path`` below ``root``; ``False`` if it is missing.

    Never deletes through a link: a link on the way, or at ``path``, is refused.
    """
    parts = _parts_below(path, root)
    try:
        dir_fd = open_dir(root, parts[:-1])
    except FileNotFoundError:
        return False
    try:
        try:
            mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(os.fspath(path), "/".join(parts), kind_of(mode))
        os.unlink(parts[-1], dir_fd=dir_fd)  # a link swapped in since: the link goes
        return True
    finally:
        os.close(dir_fd)


def list_dir(path: str | os.PathLike, *, root) -> dict[str, os.stat_result]:
    """The entries of the folder ``path`` below ``root``, ``{name: lstat}`` (links are
    reported as links, never followed); the folder is reached as in :func:`open_dir`."""
    dir_fd = open_dir(root, _parts_below(path, root, allow_root=True))
    try:
        out = {}
        for name in os.listdir(dir_fd):
            with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                out[name] = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return out
    finally:
        os.close(dir_fd)


def lstat_below(path: str | os.PathLike, *, root) -> os.stat_result | None:
    """``lstat`` of ``path`` below ``root`` (``None`` if missing), reached through
    folders only (:class:`UnsafeFileError` otherwise)."""
    parts = _parts_below(path, root, allow_root=True)
    if not parts:
        return os.stat(root)
    try:
        dir_fd = open_dir(root, parts[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------------- private
def _write_in(dir_fd: int, name: str, data: bytes) -> None:
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", name)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), file_mode())  # what open() gives, not mkstemp's 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _open_at(dir_fd: int, part: str, flags: int, root, parts) -> int:
    """``os.open`` of one name in a folder; a failure caused by a link or a special file
    becomes an :class:`UnsafeFileError` naming it (others are raised as they are)."""
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            mode = os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            raise exc from None
        if is_plain(mode):  # permissions, a file where a folder should be...
            raise
        raise UnsafeFileError(
            os.path.join(os.fspath(root), *parts), "/".join(parts), kind_of(mode)
        ) from None


def _root_of(path, root):
    return root if root is not None else getattr(path, "no_links_below", None)


def _parts_below(path, root, allow_root: bool = False) -> tuple[str, ...]:
    try:
        parts = PurePath(os.fspath(path)).relative_to(os.fspath(root)).parts
    except ValueError:
        raise ValueError(f"{_shown(os.fspath(path))} is not inside {_shown(root)}") from None
    if (not parts and not allow_root) or any(p in (".", "..") for p in parts):
        raise ValueError(f"{_shown(os.fspath(path))} is not a file inside {_shown(root)}")
    return parts


def _shown(value) -> str:
    text = repr(os.fspath(value))
    return text if len(text) <= 200 else text[:200] + "..."


def check_report_path(path: str | os.PathLike) -> Path:
    """``path`` as a ``Path``; ``ValueError`` unless it ends in .html in an existing,
    writable folder and is not a folder itself.

    Called before the work that a report shows (a backtest, a comparison) as well as
    before writing: a bad path fails in a second, not after minutes.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"report path {str(path)!r} should end in .html")
    if not path.parent.is_dir():
        raise ValueError(f"report directory {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"report path {str(path)!r} is a folder")
    # prove the folder takes a file now, not after the work
    probe = path.parent / f".{path.name}.write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(
            f"report directory {str(path.parent)!r} is not writable: {exc.strerror or exc}"
        ) from None
    return path
