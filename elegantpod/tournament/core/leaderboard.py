"""Leaderboard entries, ranking and the updater: pure functions of their inputs.

The leaderboard keeps the best ``k`` agents of a tournament, one entry per pod (its best
finished segment), ranked by score mean (higher is better), then by lower standard
deviation, fewer env steps, and pod id, so that ties have one deterministic order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One agent on the leaderboard: a pod's checkpoint, its score and its lineage."""

    pod_id: str
    """Pod that produced the agent."""
    algo: str
    """Algorithm name."""
    hparams: dict[str, Any]
    """Hyperparameters of the pod when the agent was scored."""
    score_mean: float
    """Mean evaluation return (or a finance fitness)."""
    score_std: float
    """Standard deviation over evaluation episodes."""
    env_steps: int
    """Env steps the agent has learned from (inherited from parents included)."""
    wall_seconds: float
    """Wall time the pod has trained."""
    checkpoint: str
    """Store-relative name of the checkpoint that holds this agent (``pods/p003/seg-00002.pt``)."""
    segment: int = 0
    """Segment of the pod that produced the checkpoint."""
    parent: str | None = None
    """Pod id of the parent this pod was generated from (``None``: a fresh pod)."""
    mutation: dict[str, Any] = field(default_factory=dict)
    """Hyperparameter changes from the parent: ``{name: [old, new]}``."""
    usable: bool = True
    """False once its checkpoint failed to load: the generator no longer breeds from it."""

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able values (for the store's snapshots)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["hparams"], d["mutation"] = dict(self.hparams), dict(self.mutation)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Entry:
        """Rebuild an entry from :meth:`to_dict` output (unknown keys ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def is_valid_score(x: float) -> bool:
    """Finite numbers only: NaN and infinities never enter a leaderboard."""
    return isinstance(x, int | float) and math.isfinite(x)


def rank_key(e: Entry) -> tuple:
    """Sort key: best first."""
    std = e.score_std if is_valid_score(e.score_std) else math.inf
    return (-e.score_mean, std, e.env_steps, e.pod_id)


def rank(entries: list[Entry]) -> list[Entry]:
    """Entries best first."""
    return sorted(entries, key=rank_key)


def update(entries: list[Entry], candidate: Entry, k: int) -> tuple[list[Entry], bool]:
    """The updater: insert ``candidate`` when it ranks in the top ``k``.

    A pod keeps one entry, its best: a better segment replaces the pod's older entry, a
    worse one leaves it. NaN or infinite scores never enter.

    Returns
    -------
    (entries, inserted)
        The new ranked list (at most ``k`` long) and whether the candidate is in it.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    ranked = rank(entries)
    if not is_valid_score(candidate.score_mean):
        return ranked[:k], False
    same = [e for e in ranked if e.pod_id == candidate.pod_id]
    if same and rank_key(same[0]) <= rank_key(candidate):
        return ranked[:k], False
    others = [e for e in ranked if e.pod_id != candidate.pod_id]
    new = rank([*others, candidate])[:k]
    inserted = candidate in new
    if not inserted:
        return ranked[:k], False
    return new, True
