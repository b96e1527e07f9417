"""Read-only views of a population: the tables and summaries users and the widget read.

Pure functions of a :class:`~elegantpod.tournament.population.Population` (and the paths
of its store), so the facade, the dashboard and the CLI show the same thing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from elegantpod.tournament import leaderboard as lb

LEADERBOARD_COLUMNS = [
    "rank",
    "pod",
    "algo",
    "score_mean",
    "score_std",
    "env_steps",
    "wall_seconds",
    "segment",
    "status",
    "steps_per_second",
    "parent",
    "mutation",
    "hparams",
    "checkpoint",
    "usable",
]


def leaderboard_frame(population, resolve):
    """The leaderboard as a DataFrame, best first; ``resolve`` turns checkpoint names
    into the store's paths or URLs."""
    import pandas as pd

    rows = []
    for i, e in enumerate(lb.rank(population.entries), 1):
        rec = population.records.get(e.pod_id)
        rows.append(
            {
                "rank": i,
                "pod": e.pod_id,
                "algo": e.algo,
                "score_mean": e.score_mean,
                "score_std": e.score_std,
                "env_steps": e.env_steps,
                "wall_seconds": e.wall_seconds,
                "segment": e.segment,
                "status": rec.status if rec else "",
                "steps_per_second": rec.steps_per_second if rec else None,
                "parent": e.parent,
                "mutation": e.mutation,
                "hparams": e.hparams,
                "checkpoint": resolve(e.checkpoint),
                "usable": e.usable,
            }
        )
    return pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)


def pods_frame(population):
    """Every pod's record (status, lineage, hyperparameters, why it failed) as a DataFrame."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() for r in population.records.values()])


def lineage(population) -> list[dict[str, Any]]:
    """Parent -> child edges, each with its mutation, the pod's status and any error."""
    return [
        {
            "pod": r.pod_id,
            "parent": r.parent,
            "algo": r.algo,
            "mutation": r.mutation,
            "status": r.status,
            "error": r.error,
        }
        for r in population.records.values()
    ]


def summary(population, resolve, **extra: Any) -> dict[str, Any]:
    """The outcome so far: best agent, counts, failures and their reasons."""
    best = population.best()
    records = population.records.values()
    statuses = Counter(r.status for r in records)
    spec = population.spec
    return {
        "env": spec.env_id,
        "algos": list(spec.algos),
        "solved": population.solved,
        "best_score": best.score_mean if best else None,
        "best_pod": best.pod_id if best else None,
        "best_checkpoint": resolve(best.checkpoint) if best else None,
        "env_steps_total": population.total_steps,
        "pods_total": len(population.records),
        "pods_alive": sum(statuses[s] for s in ("queued", "running", "paused")),
        "pods_finished": sum(1 for r in records if r.segment >= 1 and r.status != "failed"),
        "pods_failed": statuses["failed"],
        "pods_replaced": statuses["replaced"],
        "failures": dict(Counter(r.error for r in records if r.status == "failed")),
        "eval_share": (
            population.eval_seconds / population.segment_seconds
            if population.segment_seconds
            else None
        ),
        "resident_share": (
            population.segments_resident / population.segments_run
            if population.segments_run
            else None
        ),
        **extra,
    }
