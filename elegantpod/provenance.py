"""Whose file is it: data that a checkpoint or a store names, read without a flag when it
is this user's own.

A checkpoint's spec (or a store's ``tournament.json``) may name market data to read: a
path or a URL. A file from someone else must not make this process read other files or
reach the network on its say-so, so such names are refused unless the caller passes
the same data again or says ``allow_remote=True``. That refusal also hit the common case:
a user backtesting the agent they trained on their own CSV. :func:`own_sources` lets
that case through, and only that case:

- the naming file (checkpoint, ``tournament.json``) is a local regular file owned by the
  current user and writable by nobody else (no group or other write bit), so no other
  user wrote or changed what it names;
- the named value is a local path (never a URL) whose target is a regular file (no FIFO,
  device or folder), owned by the current user, writable by nobody else, and named like
  a market-data table (:data:`DATA_SUFFIXES`).

What this cannot tell apart: a file this user copied or unpacked from someone else's
archive is owned by this user too. What it bounds is what such a file can make
elegantpod read: a data table of this user's own (``.csv``, ``.parquet``...), locally,
shown to this user in their own report. Never a URL, never another user's file, a
special file, or a file not named as a table (keys, tokens, configs, ``xml_file``), and
nothing on an object store. Where there is no notion of a file owner (Windows), nothing
passes and the flag is needed as before.
"""

from __future__ import annotations

import os
import stat
from typing import Any

DATA_SUFFIXES = (
    ".csv",
    ".csv.gz",
    ".csv.bz2",
    ".csv.xz",
    ".csv.zst",
    ".parquet",
    ".pq",
)
"""File names that market data may have to be read as this user's own."""


def _is_own(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else (group or others)."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def is_own_file(path: Any) -> bool:
    """Whether ``path`` is a local regular file (not a link) that only this user can write."""
    if not hasattr(os, "getuid") or not isinstance(path, str | os.PathLike):
        return False
    text = os.fspath(path)
    if "://" in text:
        return False
    try:
        st = os.lstat(text)
    except (OSError, ValueError):  # missing, or a NUL in the name
        return False
    return stat.S_ISREG(st.st_mode) and _is_own(st)


def is_own_data(value: Any) -> bool:
    """Whether ``value`` names a local market-data file of this user's (see the module)."""
    if not hasattr(os, "getuid") or not isinstance(value, str) or "://" in value:
        return False
    if not value.lower().endswith(DATA_SUFFIXES):
        return False
    try:
        st = os.stat(value)  # the target: a link to the user's own table is fine
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and _is_own(st)


def own_sources(named: dict[str, Any], made_by: Any) -> dict[str, Any]:
    """The entries of ``named`` (data a file names) that are this user's own, when the
    naming file ``made_by`` is too; ``{}`` otherwise."""
    if not named or not is_own_file(made_by):
        return {}
    return {k: v for k, v in named.items() if is_own_data(v)}


def same_file(a: Any, b: Any) -> bool:
    """Whether two values name the same local file (``prices.csv`` and its absolute path);
    equal values are the same whatever they name."""
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)) or "://" in a or "://" in b:
        return False
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
