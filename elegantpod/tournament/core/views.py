"""Read-only views of a population: the tables and summaries users and the widget read.

Pure functions of a :class:`~elegantpod.tournament.core.population.Population` (and the paths
of its store), so the facade, the dashboard and the CLI show the same thing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from elegantpod.number_text import number
from elegantpod.tournament.core import leaderboard as lb
from elegantpod.tournament.core.field_checks import CHECKPOINT_NAME
from elegantpod.tournament.core.protocol import ACTIVE, PodStatus

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
    "checkpoint",
    "usable",
]
"""The columns of ``Tournament.leaderboard``: one short, typed value each. The
hyperparameters (whole dicts made a row some 600 characters wide) are in
:func:`leaderboard_hparams`.

``env_steps`` and ``wall_seconds`` cover the same span: the agent's whole training up to
that checkpoint, its ancestors' segments included (a child goes on from its parent's
networks, so its step count starts at its parent's, and so does its time).
``steps_per_second`` is the throughput of the pod's latest segment alone (how fast it
trains now), and ``segment`` counts the pod's own segments."""


def _entry_row(rank: int, e) -> dict[str, Any]:
    """What every table of the leaderboard shows of entry ``e`` at ``rank``."""
    return {
        "rank": rank,
        "pod": e.pod_id,
        "algo": e.algo,
        "score_mean": e.score_mean,
        "score_std": e.score_std,
        "env_steps": e.env_steps,
        "segment": e.segment,
        "parent": e.parent,
    }


def leaderboard_frame(population, resolve):
    """The leaderboard as a DataFrame, best first; ``resolve`` turns checkpoint names
    into the store's paths or URLs."""
    import pandas as pd

    rows = []
    for i, e in enumerate(lb.rank(population.entries), 1):
        rec = population.records.get(e.pod_id)
        rows.append(
            {
                **_entry_row(i, e),
                "wall_seconds": e.wall_seconds,
                "status": str(rec.status) if rec else "",
                "steps_per_second": rec.steps_per_second if rec else None,
                "checkpoint": resolve(e.checkpoint),
                "usable": e.usable,
            }
        )
    return pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)


HPARAMS_COLUMNS = ["rank", "pod", "algo", "segment", "parent", "mutated"]
"""The first columns of :func:`leaderboard_hparams`; one per hyperparameter follows."""
_ABSENT = object()


def leaderboard_hparams(population):
    """Each leaderboard entry's hyperparameters, best first, one typed column each.

    Rows match :func:`leaderboard_frame`'s: ``rank``, ``pod``, ``algo``, ``segment``,
    ``parent``, ``mutated`` (the names changed from the parent, a tuple; ``lineage``
    has the ``[old, new]`` values), then one column per hyperparameter (those of every
    algorithm on the board, in their configs' order). Numbers stay numbers: a column
    is float, or a nullable integer or boolean one, where some rows have no such
    hyperparameter (another algorithm's); lists (``hidden``) and strings are objects.
    """
    import pandas as pd

    entries = lb.rank(population.entries)
    names = list(dict.fromkeys(n for e in entries for n in e.hparams))
    frame = pd.DataFrame(
        {
            "rank": range(1, len(entries) + 1),
            "pod": [e.pod_id for e in entries],
            "algo": [e.algo for e in entries],
            "segment": [e.segment for e in entries],
            "parent": [e.parent for e in entries],
            "mutated": [tuple(e.mutation) for e in entries],
        },
        columns=HPARAMS_COLUMNS,
    )
    for name in names:
        if name not in frame:  # a hyperparameter named like a column above: never one
            frame[name] = _typed([e.hparams.get(name, _ABSENT) for e in entries])
    return frame


def _typed(values: list) -> Any:
    """A column of hyperparameter values that keeps their type (absent: missing)."""
    import pandas as pd

    present = [v for v in values if v is not _ABSENT and v is not None]
    filled = [None if v is _ABSENT else v for v in values]
    if present and all(isinstance(v, bool) for v in present):
        return pd.Series(filled, dtype="boolean")
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.Series(filled, dtype="Int64")
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pd.Series([float("nan") if v is None else float(v) for v in filled], dtype=float)
    return pd.Series(filled, dtype=object)


def pods_frame(population):
    """Every pod's record (status, lineage, hyperparameters, why it failed) as a DataFrame."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() for r in population.records.values()])


LINEAGE_COLUMNS = ["pod", "parent", "algo", "mutation", "origin", "why", "status", "error"]
"""The columns of ``Tournament.lineage()``."""


def lineage(population) -> list[dict[str, Any]]:
    """Parent -> child edges, each with its mutation, why the pod was made (``origin``
    and ``why``, see :func:`why_made`), the pod's status and any error."""
    return [
        {
            "pod": r.pod_id,
            "parent": r.parent,
            "algo": r.algo,
            "mutation": r.mutation,
            "origin": dict(r.origin),
            "why": why_made(r.origin),
            "status": str(r.status),
            "error": r.error,
        }
        for r in population.records.values()
    ]


def why_made(origin: dict[str, Any]) -> str:
    """A pod's ``origin`` in words, with its figures: what the lineage shows.

    >>> why_made({"kind": "restart", "replaced": "p002", "stale": 24, "best": 0.5})
    'restart: replaced p002 after 24 segments without improvement (best 0.5)'
    """
    kind = origin.get("kind")
    if kind == "start":
        return "first pods"
    if kind == "user":
        return "added by the user"
    if kind == "failure":
        return f"replaced {origin.get('replaced')}, which failed"
    if kind == "restart":
        best = origin.get("best")
        tail = f" (best {number(best)})" if isinstance(best, int | float) else ""
        rule = origin.get("rule")
        if rule not in (None, "restart"):  # a rule of the user's, with its own reasons
            return f"fresh draw: replaced {origin.get('replaced')} (rule {rule})"
        return (
            f"restart: replaced {origin.get('replaced')} after {origin.get('stale')} "
            f"segments without improvement{tail}"
        )
    if kind == "child":
        if origin.get("replaced") is None:
            return "child"
        score, top, t = origin.get("score"), origin.get("leader_score"), origin.get("t")

        def num(x: Any) -> str:
            return number(x) if isinstance(x, int | float) else "n/a"

        evidence = "no noise" if isinstance(t, int | float) and t >= 1e9 else f"t={num(t)}"
        if t is None:
            evidence = "no evidence asked"
        kept = ", hyperparameters kept" if origin.get("rule") == "copy" else ""
        by = (
            f" (rule {origin['rule']})"
            if origin.get("rule") not in (None, "exploit", "copy")
            else ""
        )
        return (
            f"replaced {origin.get('replaced')} on evidence: {num(score)} vs leader "
            f"{origin.get('leader')} {num(top)} ({evidence}{kept}){by}"
        )
    return ""


HISTORY_COLUMNS = [
    "pod",
    "parent",
    "fork_segment",
    "segment",
    "env_steps",
    "score",
    "time",
    "confirm",
]


def history(population) -> list[dict[str, Any]]:
    """Every segment evaluation, oldest first: ``pod``, ``parent``, ``segment``,
    ``env_steps``, ``score`` (the fitness the leaderboard ranks), ``time`` (tournament
    seconds) and ``confirm`` (where ``score`` reached the target, the fresh evaluation
    that confirmed it or not, see ``TournamentSpec.confirm_target``; else ``None``). A
    child's first row follows the parent row it was forked from (``fork_segment``), so a
    curve can be drawn as one line through a lineage."""
    rows = []
    for r in population.records.values():
        fork = _fork_segment(r)
        for h in r.history:
            rows.append(
                {
                    "pod": r.pod_id,
                    "parent": r.parent,
                    "fork_segment": fork,
                    "segment": h["segment"],
                    "env_steps": h["env_steps"],
                    "score": h["score"],
                    "time": h["time"],
                    "confirm": h.get("confirm"),
                }
            )
    rows.sort(key=lambda row: row["time"])
    return rows


def _fork_segment(rec) -> int | None:
    """The parent's segment a child was forked from (its ``parent_checkpoint``)."""
    match = CHECKPOINT_NAME.match(rec.parent_checkpoint or "") if rec.parent else None
    return int(match.group(2)) if match else None


def schedule(population, pod: str | None = None) -> list[dict[str, Any]]:
    """The hyperparameter schedule ``pod`` trained with, through its ancestors.

    PBT's main product: a child copies its parent's networks at a segment and trains on
    with mutated hyperparameters, so the best pod's weights were shaped by a *sequence*
    of settings. Returns one phase per run of segments with the same hyperparameters,
    oldest first, each a dict:

    - ``pod``: the pod that trained in this phase (an ancestor, or ``pod`` itself);
    - ``from_steps``, ``to_steps``: env steps of the lineage at its start and end
      (counted from the first ancestor's 0, so a child continues its parent's count);
    - ``from_time``, ``to_time``: tournament seconds at its start and end;
    - ``segments``: how many segments it lasted;
    - ``score``: the fitness of the phase's *last* segment, not the best;
    - ``hparams``: the settings of the phase;
    - ``changes``: ``{name: [old, new]}`` against the previous phase (for the first,
      the mutation that made its pod, if any);
    - ``origin``: why the phase began, in words (:func:`why_made` of its pod, or
      ``"live mutation"``).

    A lineage is followed as far back as the records go. ``pod`` ``None``: the best
    pod's (empty before any segment finished).
    """
    if pod is None:
        best = population.best()
        if best is None or best.pod_id not in population.records:
            return []
        pod = best.pod_id
    if pod not in population.records:
        raise ValueError(f"unknown pod {pod!r}")
    chain, upto, seen = [], None, set()
    rec = population.records[pod]
    while rec is not None and rec.pod_id not in seen:
        seen.add(rec.pod_id)
        chain.append((rec, [h for h in rec.history if upto is None or h["segment"] <= upto]))
        upto = _fork_segment(rec)
        rec = population.records.get(rec.parent) if upto is not None else None
    phases: list[dict[str, Any]] = []
    hp: dict[str, Any] | None = None
    steps = time = 0.0
    for rec, rows in reversed(chain):
        current = None
        for h in rows:
            hp_row = h.get("hparams") or hp or rec.hparams
            # each pod starts a phase (current is None), even one that kept its parent's
            # settings; within a pod, a live mutation starts one
            if current is None or hp_row != current["hparams"]:
                if hp is not None:
                    changes = {k: [hp.get(k), v] for k, v in hp_row.items() if hp.get(k) != v}
                else:  # the oldest pod we know of; a child of a pod gone from the records
                    changes = {k: list(v) for k, v in (rec.mutation or {}).items()}
                current = {
                    "pod": rec.pod_id,
                    "origin": why_made(rec.origin)
                    if not phases or rec.pod_id != phases[-1]["pod"]
                    else "live mutation",
                    "from_steps": steps,
                    "from_time": time,
                    "segments": 0,
                    "hparams": dict(hp_row),
                    "changes": changes,
                }
                phases.append(current)
            current.update(to_steps=h["env_steps"], to_time=h["time"], score=h["score"])
            current["segments"] += 1
            hp, steps, time = hp_row, h["env_steps"], h["time"]
    return phases


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
        "solved_at": population.solved_at,
        "best_score": best.score_mean if best else None,
        "best_pod": best.pod_id if best else None,
        "best_checkpoint": resolve(best.checkpoint) if best else None,
        "env_steps_total": population.total_steps,
        "pods_total": len(population.records),
        "pods_alive": sum(statuses[s] for s in ACTIVE),
        "pods_finished": sum(1 for r in records if r.segment >= 1 and r.status != PodStatus.FAILED),
        "pods_failed": statuses[PodStatus.FAILED],
        "pods_replaced": statuses[PodStatus.REPLACED],
        "restarts": population.restarts,
        "replaced_on_evidence": population.replaced_on_evidence,
        "kept_in_noise": population.kept_in_noise,
        "failures": dict(Counter(r.error for r in records if r.status == PodStatus.FAILED)),
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
        "captures": population.captures,
        "replays": population.replays,
        **extra,
    }


def tracking_tables(population) -> dict[str, list[dict[str, Any]]]:
    """What experiment tracking records at a tournament's end: the ``leaderboard`` (best
    first), the ``lineage`` and the best pod's hyperparameter ``schedule``."""
    board = [
        {**_entry_row(i, e), "hparams": dict(e.hparams)}
        for i, e in enumerate(lb.rank(population.entries), 1)
    ]
    return {"leaderboard": board, "lineage": lineage(population), "schedule": schedule(population)}
