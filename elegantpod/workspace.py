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
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

ENV_VAR = "ELEGANTPOD_WORKDIR"
"""Environment variable that moves the root of every example's folder."""
MARKER = ".elegantpod-workdir"
"""A file in each folder :func:`workdir` made: only such folders are ever emptied."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def workdir_root() -> Path:
    """The folder that holds every example's folder (see the module's docstring)."""
    given = os.environ.get(ENV_VAR)
    if given:
        return Path(given).expanduser()
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"elegantpod-{user}"


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
        For a name that is not a plain folder name, or a folder that exists but was not
        made by :func:`workdir` (it is never emptied: it may hold someone's files).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"workdir name must be a plain folder name, got {name!r}")
    path = workdir_root() / name
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
    workdir_root().mkdir(mode=0o700, parents=True, exist_ok=True)
    path.mkdir(exist_ok=True)
    (path / MARKER).write_text("made by elegantpod.workdir(); emptied by its next run\n")
    return path


def clear_workdir() -> list[Path]:
    """Remove every folder :func:`workdir` made under the root; returns those removed."""
    root = workdir_root()
    removed = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and (child / MARKER).is_file():
                shutil.rmtree(child)
                removed.append(child)
    return removed
