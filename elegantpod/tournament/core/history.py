"""What a pod's record keeps of its past segments, and how that stays bounded.

Two memories with two readers. ``history`` holds a row per segment (its score, steps,
time, and the hyperparameters where they changed): the views draw fitness curves and the
hyperparameter schedule a lineage followed from it, PBT's main product (the winner's
weights were trained by a sequence of settings, not one). ``recent_scores`` holds the
last ``GeneratorConfig.score_window`` scores, whose mean is the score the exploit rule
and the restart rule rank: one noisy evaluation does not decide a pod's fate.

The state snapshot is written every second or so, so history is bounded twice: a pod
keeps at most a limit of rows (the store's check allows no more), and a pod nobody needs
any more keeps only its tail. Functions of their inputs (``thin`` cuts the records it is
given), kept apart from the :class:`~elegantpod.tournament.core.population.Population` that
calls them so each is tested on plain rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from elegantpod.tournament.core.record import PodRecord


def recent_score(rec: PodRecord) -> float:
    """Mean of a pod's last scores (the exploit rule's smoothing); NaN with none."""
    scores = rec.recent_scores
    return sum(scores) / len(scores) if scores else math.nan


def last_hparams(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The hyperparameters in force after history ``rows`` (``None``: none recorded)."""
    return next((h["hparams"] for h in reversed(rows) if "hparams" in h), None)


def keep_newest(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The newest ``n`` history rows; the first keeps the hyperparameters in force."""
    if len(rows) <= n:
        return rows
    kept = rows[-n:]
    if "hparams" not in kept[0]:
        hp = last_hparams(rows[:-n])
        if hp is not None:
            kept[0] = {**kept[0], "hparams": hp}
    return kept


def with_segment(rows: list[dict[str, Any]], res, now: float, limit: int) -> list[dict[str, Any]]:
    """``rows`` with the row of segment result ``res`` (at ``now`` tournament seconds)
    as the newest, at most ``limit`` rows.

    A segment run again (its worker died after it saved) replaces its earlier row, so a
    segment has one row; its hyperparameters are stored only where they changed.
    """
    row = {
        "segment": res.segment,
        "env_steps": res.env_steps,
        "score": float(res.score_mean) if math.isfinite(res.score_mean) else None,
        "time": float(now),
    }
    confirm = getattr(res, "confirm_score", None)
    if confirm is not None:  # the fresh evaluation of a crossing of the target
        row["confirm"] = float(confirm) if math.isfinite(confirm) else None
    if rows and rows[-1]["segment"] == res.segment:
        rows = rows[:-1]
    if dict(res.hparams) != last_hparams(rows):
        row["hparams"] = dict(res.hparams)
    return keep_newest([*rows, row], limit)


def thin(records: Mapping[str, PodRecord], needed: Iterable[str], keep: int = 16) -> None:
    """Cut the history of every pod in ``records`` that is neither in ``needed`` (the
    live pods and those on the leaderboard) nor an ancestor of one to its last ``keep``
    rows (enough for its tail on the curves)."""
    needed = set(needed)
    todo = list(needed)
    while todo:
        parent = records.get(todo.pop())
        parent = parent.parent if parent is not None else None
        if parent is not None and parent not in needed:
            needed.add(parent)
            todo.append(parent)
    for r in records.values():
        if r.pod_id not in needed and len(r.history) > keep:
            r.history = keep_newest(r.history, keep)
