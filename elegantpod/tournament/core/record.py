"""``PodRecord``: the tournament's view of one pod, what its state snapshots save.

Its own module, apart from the spec: the store's state is read back into records
(:func:`elegantpod.tournament.store.state.record`), and the spec's checks use the
store's bounds, so neither needs the other.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from elegantpod.tournament.core.protocol import PodStatus


@dataclass
class PodRecord:
    """The orchestrator's view of one pod (mutable; saved in the store's state snapshots)."""

    pod_id: str
    algo: str
    hparams: dict[str, Any]
    seed: int
    parent: str | None = None
    mutation: dict[str, Any] = field(default_factory=dict)
    parent_checkpoint: str | None = None
    status: PodStatus = PodStatus.QUEUED
    """Where the pod is in its life (a :class:`~elegantpod.tournament.core.protocol.PodStatus`)."""
    segment: int = 0
    """Segments completed."""
    env_steps: int = 0
    latest_checkpoint: str | None = None
    score_mean: float | None = None
    score_std: float | None = None
    wall_seconds: float = 0.0
    steps_per_second: float | None = None
    retries: int = 0
    error: str | None = None
    stop_requested: bool = False
    recent_scores: list[float] = field(default_factory=list)
    """The last segment scores (``GeneratorConfig.score_window``) the exploit rule averages."""
    origin: dict[str, Any] = field(default_factory=dict)
    """Why the generator made this pod (shown in the lineage): ``kind`` is ``"start"``
    (the first pods), ``"child"`` (a child that replaced ``replaced`` on evidence: its
    recent ``score`` against the leader's ``leader_score``, Welch's ``t``; or a
    failure's replacement), ``"restart"`` (a fresh draw that replaced ``replaced``
    after ``stale`` segments without improvement, the best score then ``best``) or
    ``"user"`` (``add_pod``). Empty: a record written before origins were kept."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """One row per finished segment: ``segment``, ``env_steps``, ``score`` (the fitness
    the leaderboard ranks), ``time`` (tournament seconds) and, where they changed since
    the previous row, the ``hparams`` the segment trained with. The curves and the
    winner's hyperparameter schedule are drawn from it."""

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-able values (non-finite scores become ``None``)."""
        # Shallow on purpose: the orchestrator serializes every record at each save, and
        # dataclasses.asdict's deep copy was most of its CPU time with hundreds of pods.
        d = {f.name: getattr(self, f.name) for f in _RECORD_FIELDS}
        d["hparams"], d["mutation"] = dict(self.hparams), dict(self.mutation)
        d["origin"] = dict(self.origin)
        d["recent_scores"] = list(self.recent_scores)
        d["history"] = [dict(h) for h in self.history]  # callers (t.pod, t.pods) may edit
        d["status"] = str(self.status)  # the plain string stores and DataFrames hold
        for k in ("score_mean", "score_std", "steps_per_second"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = None
        return d


_RECORD_FIELDS = dataclasses.fields(PodRecord)
