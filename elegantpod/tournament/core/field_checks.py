"""Checks of one value read from a store: pod ids, checkpoint names, bounded numbers, text.

A store can come from anyone: a shared bucket, a colleague's run, a downloaded archive.
Each value read from it reaches a file path, a worker, a budget check or an HTML view,
so each is checked like user input first. These are the checks of single values, kept
apart from the snapshot's layout (:mod:`elegantpod.tournament.store.state` applies them
field by field): the store, the spec and the views use the same patterns and bounds
without importing a snapshot's parser.

- pod ids match :data:`POD_ID` (``p`` and digits): they become folder names;
- checkpoints are store-relative names matching :data:`CHECKPOINT_NAME`, so a moved or
  copied store reads its own files and no path or URL in a file can point elsewhere
  (absolute paths written by older versions keep only their ``pods/<id>/seg-N.pt`` tail);
- counters and budgets are finite, non-negative and bounded;
- lists and objects nest at most :data:`MAX_DEPTH` levels.

Every error is a :class:`StateError` (a ``ValueError``) naming the file and the field,
and repeats at most :data:`~elegantpod.checks.text.MAX_SHOWN` characters of the bad value
(:func:`~elegantpod.checks.text.short`): a value can be megabytes, or an integer of
thousands of digits that Python refuses to print. Numbers are compared as they are,
never through ``float()``, so such an integer is refused, not an ``OverflowError``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from elegantpod.checks.limits import MAX_SECONDS, check_finite
from elegantpod.checks.text import short

POD_ID = re.compile(r"^p[0-9]{3,9}$")
"""Pod ids the orchestrator makes (``p000``, ``p001``...): the only ones a store may name."""
CHECKPOINT_NAME = re.compile(r"^pods/(p[0-9]{3,9})/seg-([0-9]{5,9})\.pt$")
"""A checkpoint's name relative to the store root."""
TOURNAMENT_UID = re.compile(r"^[0-9a-f]{32}$")
"""A tournament's identity, made once and saved in its state: every checkpoint it writes
names it, so a checkpoint from another tournament is refused (see
:func:`elegantpod.pod.checkpoint.check_origin`)."""
MAX_INDEX = 10**9 - 1
"""Upper bound of pod indexes, segments, retries and death counts (nine digits: what the
pod id and checkpoint name patterns allow)."""
MAX_TEXT = 4000
"""Longest error or lineage string kept from a store (longer ones are cut)."""
MAX_HISTORY = 10_000
"""Segment rows kept per pod (the newest): what a store can make a resume check, hold
and plot is bounded, however long its file."""


class StateError(ValueError):
    """A field of a store's state that fails its check (message: where and why)."""


def check_pod_id(value: Any, where: str) -> str:
    """``value`` if it is a pod id the orchestrator could have made, else ``StateError``."""
    if not isinstance(value, str) or not POD_ID.match(value):
        raise StateError(f"{where}: pod id must match {POD_ID.pattern}, got {short(value)}")
    return value


def checkpoint_name(pod_id: str, segment: int) -> str:
    """Store-relative name of a pod's checkpoint at the end of ``segment``."""
    return f"pods/{check_pod_id(pod_id, 'pod id')}/seg-{segment:05d}.pt"


def check_checkpoint(value: Any, where: str) -> str:
    """A store-relative checkpoint name; legacy absolute paths keep their tail.

    Never returns anything that could leave the store: the result always matches
    :data:`CHECKPOINT_NAME` (no ``..``, no scheme, no leading slash).
    """
    if isinstance(value, str):
        parts = value.replace("\\", "/").split("/")
        tail = "/".join(parts[-3:])
        if CHECKPOINT_NAME.match(tail):
            return tail
    raise StateError(
        f"{where}: checkpoint must be a store-relative name like pods/p000/seg-00001.pt, "
        f"got {short(value)}"
    )


def _number(value: Any, where: str, high: float, integer: bool) -> float | int:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    # only floats can be NaN or infinite; math.isfinite(10**400) raises OverflowError
    bad_float = isinstance(value, float) and not math.isfinite(value)
    if isinstance(value, bool) or not ok_type or bad_float:
        kind = "an integer" if integer else "a finite number"
        raise StateError(f"{where} must be {kind}, got {short(value)}")
    if not 0 <= value <= high:  # exact for integers of any size
        raise StateError(f"{where} must be in [0, {high:g}], got {short(value)}")
    return value


def count(value: Any, where: str, high: float = MAX_INDEX) -> int:
    """A non-negative bounded integer."""
    return int(_number(value, where, high, integer=True))


def seconds(value: Any, where: str) -> float:
    """A non-negative bounded number of seconds."""
    return float(_number(value, where, MAX_SECONDS, integer=False))


def score(value: Any, where: str, optional: bool = True) -> float | None:
    """A finite score, or ``None`` where a score may be missing."""
    if value is None and optional:
        return None
    try:
        check_finite(where, value)
    except ValueError as exc:
        raise StateError(str(exc)) from None
    return float(value)


def text(value: Any, where: str) -> str | None:
    """An optional string, cut to :data:`MAX_TEXT` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise StateError(f"{where} must be a string, got {type(value).__name__}")
    return value[:MAX_TEXT]


MAX_DEPTH = 32
"""Deepest nesting of lists and objects a value from a store may have (an env's keywords
need three or four levels). Deeper values would exhaust Python's stack in whatever walks
them (``json.dumps``, a check, a repr), so they are refused before anything does."""


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> Any:
    """``value`` if its lists and objects nest at most ``limit`` deep, else ``StateError``.

    Walks with its own stack, never by recursion: the value it refuses is the one that
    would break a recursive walk."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list | tuple):
            if depth >= limit:
                raise StateError(f"{where} nests lists or objects deeper than {limit} levels")
            children = v.values() if isinstance(v, dict) else v
            stack.extend((child, depth + 1) for child in children)
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a dict (JSON object)."""
    if not isinstance(value, dict):
        raise StateError(f"{where} must be an object, got {type(value).__name__}")
    return value


def items(value: Any, where: str) -> list[Any]:
    """``value`` if it is a list (JSON array)."""
    if not isinstance(value, list):
        raise StateError(f"{where} must be a list, got {type(value).__name__}")
    return value
