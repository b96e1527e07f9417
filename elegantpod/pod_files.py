"""The files a pod writes as it trains: ``checkpoint.pt`` and ``best.pt`` after an
evaluation, and a snapshot written in the background of the evaluation that follows it.

Kept apart from :mod:`elegantpod.pod` because the order of the writes and the thread
they run on are a contract of their own (a killed run must never leave a
``checkpoint.pt`` that claims a best ``best.pt`` does not hold), while the pod only
decides what to save and when.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from elegantpod.checkpoint import checkpoint_bytes, without_replay, write_checkpoint_bytes

T = TypeVar("T")

_WRITER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="elegantpod-checkpoint")
"""Writes snapshots in the background of the evaluation that follows them."""


def is_best(score: float, best_score: float | None) -> bool:
    """Whether an evaluation's ``score`` beats the best so far (a NaN or infinite one
    never does)."""
    return math.isfinite(score) and (best_score is None or score > best_score)


def write_evaluated(
    payload: dict[str, Any],
    checkpoint_path: str | os.PathLike,
    best_path: str | os.PathLike | None = None,
) -> None:
    """After an evaluation: ``checkpoint.pt`` (a killed run loses at most one evaluation
    interval) and, given ``best_path`` (the score is the best yet), ``best.pt`` too, so
    that a later, worse stretch of training never overwrites the agent worth keeping.

    ``best.pt`` is written first: ``checkpoint.pt`` records ``best_score``, so a kill
    between the two writes must not leave it claiming a best that ``best.pt`` does not
    hold. ``best.pt`` is the agent to use, not a run to resume: it has no replay
    (``checkpoint.pt`` keeps it).
    """
    if best_path is not None:
        write_checkpoint_bytes(best_path, checkpoint_bytes(without_replay(payload)))
    write_checkpoint_bytes(checkpoint_path, checkpoint_bytes(payload))


def while_writing(write: Callable[[bytes], Any], data: bytes, work: Callable[[], T]) -> T:
    """``work()``, while ``write(data)`` runs on a background thread; returns once both
    have ended, raising the error of either."""
    written = _WRITER.submit(write, data)
    try:
        return work()
    finally:
        written.result()
