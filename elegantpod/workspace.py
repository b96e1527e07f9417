"""One documented place for the files of tutorials, notebooks and the demo.

Why: each tutorial once made a fresh ``tempfile.mkdtemp`` folder per run and left it
behind (the demo about 32 MB a run), so a day of trying things filled ``/tmp`` with
folders nobody would find again. Now every run of the same example reuses one folder,
``workdir(name)``, under one root:

- ``$ELEGANTPOD_WORKDIR`` when set,
- else ``elegantpod-<user id>`` in the system's temporary folder (``/tmp/elegantpod-1000``
  on Linux): one per user, so that users of a shared machine never share or block it.

A fresh run empties its own folder first, so the space used is bounded by one run of
each example; ``clear_workdir()`` removes them all.

Why the root is checked (:func:`private_folder`): on a shared machine another user can
create ``/tmp/elegantpod-1000`` before you do, world-writable or as a symlink to a
folder of theirs, and read (or swap) everything your runs write there. The root must be
yours, writable by nobody else, not a symlink, and reached only through folders that no
other user can change; the JAX compilation cache (:mod:`elegantpod.envs.mjx.env`) is checked
the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

ENV_VAR = "ELEGANTPOD_WORKDIR"
"""Environment variable that moves the root of every example's folder."""
MARKER = ".elegantpod-workdir"
"""A file in each folder :func:`workdir` made: only such folders are ever emptied."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


ROOT_ADVICE = f"remove it or set {ENV_VAR} to a folder you own"
"""What to do about a root that :func:`private_folder` refuses."""
_MAX_LINKS = 40  # as the kernel's limit on symlinks in one path lookup


def workdir_root() -> Path:
    """The folder that holds every example's folder (see the module's docstring).

    The path only: :func:`workdir` checks it before use.
    """
    given = os.environ.get(ENV_VAR)
    if given:
        return Path(given).expanduser()
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    # the system's temporary folder resolved (macOS: /var -> /private/var, root's link)
    return Path(os.path.realpath(tempfile.gettempdir())) / f"elegantpod-{user}"


def private_folder(
    path: str | Path, *, what: str, advice: str, create: bool = True
) -> tuple[Path, tuple[int, int]]:
    """Check that no other user can write ``path`` or change where it leads; create it.

    Every folder from ``/`` down must be owned by root or by this user, and one that
    others may write must have the sticky bit (so that they cannot rename or remove what
    they do not own). ``path`` itself must be a folder of this user's that nobody else
    may write, not a symlink. A symlink on the way is followed only when it is root's or
    this user's (in a folder that passed); its target is checked the same way. Missing
    folders are made with mode 0700.

    Returns
    -------
    (real path, (st_dev, st_ino))
        The folder with the symlinks on the way resolved, and its identity, to compare
        with a later ``os.stat`` (a folder swapped in between has another).

    Raises
    ------
    ValueError
        Naming ``path``, the component at fault and why, followed by ``advice``.
    FileNotFoundError
        When ``path`` is missing and ``create`` is false.
    """
    given = str(path)[:200]

    def refuse(reason: str) -> ValueError:
        return ValueError(f"{what} {given!r} is not safe to use: {reason}; {advice}")

    absolute = Path(os.path.abspath(Path(path).expanduser()))
    if not hasattr(os, "getuid"):  # Windows: no owners and modes of this kind to check
        absolute.mkdir(parents=True, exist_ok=True)
        info = absolute.stat()
        return absolute, (info.st_dev, info.st_ino)
    try:
        return _walk(absolute, create, refuse)
    except FileNotFoundError:
        if not create:
            raise
        raise refuse("a folder on the way vanished while it was being checked") from None
    except OSError as exc:
        raise refuse(f"cannot check {str(exc.filename)[:200]!r} ({exc.strerror})") from None


def _walk(absolute: Path, create: bool, refuse) -> tuple[Path, tuple[int, int]]:
    """The checks of :func:`private_folder`, component by component from the root."""
    uid = os.getuid()
    current = Path(absolute.anchor)
    todo = list(absolute.parts[1:])
    info = os.lstat(current)
    links = 0
    while True:
        final = not todo
        if info.st_uid not in (0, uid) or (final and info.st_uid != uid):
            whose = "root or you" if not final else "you"
            raise refuse(f"{str(current)!r} is owned by uid {info.st_uid}, not by {whose}")
        if not stat.S_ISDIR(info.st_mode):
            raise refuse(f"{str(current)!r} is not a folder")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
            if final:
                raise refuse(f"other users can write to it ({mode})")
            if not info.st_mode & stat.S_ISVTX:
                raise refuse(
                    f"other users can write to {str(current)!r} ({mode}, no sticky bit) "
                    "and could replace what is in it"
                )
        if final:
            return current, (info.st_dev, info.st_ino)
        name = todo.pop(0)
        if name == "..":  # only from a symlink's target; ``current`` is a real path
            current = current.parent
            info = os.lstat(current)
            continue
        step = current / name
        try:
            info = os.lstat(step)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(step, 0o700)
            except FileExistsError:
                pass  # made in between: checked below like any other
            except OSError as exc:
                raise refuse(f"cannot create {str(step)!r} ({exc.strerror})") from None
            info = os.lstat(step)
        if stat.S_ISLNK(info.st_mode):
            if not todo:
                raise refuse("it is a symbolic link")
            if info.st_uid not in (0, uid):
                raise refuse(
                    f"it passes through {str(step)!r}, a symbolic link of uid {info.st_uid}"
                )
            links += 1
            if links > _MAX_LINKS:
                raise refuse("too many symbolic links")
            target = Path(os.readlink(step))
            if target.is_absolute():
                current = Path(target.anchor)
                info = os.lstat(current)
                todo = list(target.parts[1:]) + todo
            else:
                info = os.lstat(current)
                todo = list(target.parts) + todo
            continue
        current = step


def workdir(name: str, *, fresh: bool = True) -> Path:
    """The folder of the example ``name`` (``"demo"``, ``"quickstart"``, ...), created.

    Parameters
    ----------
    name
        A plain folder name: letters, digits, ``_``, ``.`` and ``-``.
    fresh
        Empty the folder first (its last run's files go), so that a rerun starts clean
        and the space used stays one run's worth. ``False`` keeps what is there, to
        resume a run.

    Raises
    ------
    ValueError
        For a name that is not a plain folder name, a folder that exists but was not
        made by :func:`workdir` (it is never emptied: it may hold someone's files), or a
        root that is not private to this user (:func:`private_folder`).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"workdir name must be a plain folder name, got {name!r}")
    path = _checked_root(create=True) / name
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"workdir {str(path)!r} exists and is not a folder")
        if not (path / MARKER).is_file():
            if any(path.iterdir()):
                raise ValueError(
                    f"workdir {str(path)!r} holds files elegantpod did not write; move them "
                    f"or point {ENV_VAR} elsewhere"
                )
        elif fresh:
            shutil.rmtree(path)
    path.mkdir(exist_ok=True)
    (path / MARKER).write_text("made by elegantpod.workdir(); emptied by its next run\n")
    return path


def clear_workdir() -> list[Path]:
    """Remove every folder :func:`workdir` made under the root; returns those removed."""
    root = _checked_root(create=False)
    removed = []
    if root is not None:
        for child in sorted(root.iterdir()):
            if child.is_dir() and (child / MARKER).is_file():
                shutil.rmtree(child)
                removed.append(child)
    return removed


def _checked_root(*, create: bool) -> Path | None:
    """:func:`workdir_root`, checked by :func:`private_folder` (``None``: missing and
    ``create`` false). The default root is also made unreadable to others (0700): what
    the examples write is nobody else's business."""
    root = workdir_root()
    try:
        real, _ = private_folder(root, what="workdir root", advice=ROOT_ADVICE, create=create)
    except FileNotFoundError:
        return None
    if not os.environ.get(ENV_VAR) and hasattr(os, "getuid"):
        os.chmod(real, 0o700)
    return real
