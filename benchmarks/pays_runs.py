"""The run log of "does the tournament pay?": one JSON line per finished run, and the
table made from it by :func:`elegantpod.compare`.

Why a log and not one result file per invocation: ten seeds of four methods on four
tasks are hours of a 2-core machine, which no single session has, and two heavy jobs
must never share the machine. So every run (one method, one task, one seed) appends its
line as soon as it ends (``tournament_pays.py`` and round 3's Tune PBT alike), an
interrupted invocation loses at most the run in flight, and the next invocation skips
every ``(task, method, seed)`` already logged. The tables and reports are made from the
log by ``compare`` (``python benchmarks/tournament_pays.py --report``), the same code a
user runs on their own stores.

Each line: ``task``, ``method``, ``seed``, ``time`` and ``score`` (every evaluation of
the run: the best-so-far is computed by ``compare``), ``budget``, ``target``,
``segment_steps``, the machine and date, and whatever the method adds (replacements,
restarts, backtest figures).

A task's runs are compared only with runs of the same segment size: when a task's
segments change (the lander's went from 10,000 to 5,000 steps, because at 10,000 a
240 s run gave each pod about three segments and the evidence rule never acted), its
earlier runs stay in the log, as measured, but leave its table, and every seed runs
again at the new size.

Likewise the tournament's queue: on 2026-12-06 a free slot began to go to the pod whose
agent had trained the fewest seconds, ancestors included, not the fewest segments of its
own (``Population.runnable``). Every method this script runs through ``Tournament``
(both tournaments, the sweep and random search) queues its pods that way, so each line
records ``queue``; a line without it was measured with the old order (``"segments"``).
A run of the old order does not count as done, so the next invocation measures it again,
and the table takes each seed's newest run. Tune PBT's runs do not go through our queue
(``queue`` is ``None`` for them) and stay as they are.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR

from elegantpod.checks.limits import check_finite
from elegantpod.checks.text import is_printable, short

LOG = RESULTS_DIR / "tournament_pays_runs.jsonl"
"""The run log (``--log`` overrides it)."""
CURVE_KEYS = ("time", "score", "budget", "target")
SEGMENT_STEPS_BEFORE_LOGGED = {
    "trap": 8_000,
    "schedule": 20_480,
    "lander": 10_000,
    "trading": 4_000,
}
"""The segment size of the runs logged before each line recorded its own (until
2026-12-05): each task's size in ``tournament_pays.TASKS`` then."""
QUEUE = "lineage_seconds"
"""The order in which ``Tournament`` gives free slots to queued pods, as of this code."""
OWN_QUEUE_FREE = {"tune_pbt"}
"""Methods whose pods Tune schedules, not ``Tournament``'s queue."""
MAX_NAME = 80
"""The longest task or method name read from the log (``compare``'s bound on names)."""


def outcome(solved_at: float, budget: float) -> str:
    """A run's progress line: when it reached the target, or that it did not (an
    unsolved run's time is NaN, which a format string prints as "nans")."""
    if math.isfinite(solved_at):
        return f"solved at {solved_at:.1f} s"
    return f"not solved in {budget:g} s"


def segment_steps(run: dict[str, Any]) -> int | None:
    """The segment size ``run`` trained with (recorded, or its task's before it was)."""
    return run.get("segment_steps", SEGMENT_STEPS_BEFORE_LOGGED.get(run["task"]))


def queue(run: dict[str, Any]) -> str | None:
    """The queue order ``run`` was measured with (``None``: its method has no such
    queue); a line logged before the field existed used the old order, ``"segments"``."""
    if run["method"] in OWN_QUEUE_FREE:
        return None
    return run.get("queue", "segments")


def read_log(path: Path = LOG) -> list[dict[str, Any]]:
    """Every complete line of the log (a line cut short by a kill is skipped).

    Raises ``ValueError`` naming the line and the field for a line whose task or method
    is not a printable string of at most :data:`MAX_NAME` characters, whose seed is not
    an integer or whose budget is not a finite number: the report prints names as they
    are, so a log from elsewhere with ``\\x1b[2J`` in a method name would drive the
    terminal (the curves' numbers are ``compare``'s to check).
    """
    if not path.exists():
        return []
    runs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            run = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(run, dict) and {"task", "method", "seed", "time", "score"} <= set(run):
            _check_run(run, f"{path}:{number}")
            runs.append(run)
    return runs


def _check_run(run: dict[str, Any], where: str) -> None:
    for key in ("task", "method"):
        name = run[key]
        if not isinstance(name, str):
            raise ValueError(f"{where}: {key} must be a string, got {short(name)}")
        if not is_printable(name):
            raise ValueError(f"{where}: {key} {short(name)} holds a control or invisible character")
        if len(name) > MAX_NAME:
            raise ValueError(f"{where}: {key} {short(name, 60)} is over {MAX_NAME} characters")
    seed = run["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{where}: seed must be an integer, got {short(seed)}")
    check_finite(f"{where}: budget", run.get("budget"))  # the report groups runs by it


def done(path: Path = LOG, sizes: dict[str, int | None] | None = None) -> set[tuple[str, str, int]]:
    """The ``(task, method, seed)`` triples already logged with today's queue
    (:data:`QUEUE`); with ``sizes`` (task -> segment size), only the runs of each task's
    size count as done."""
    return {
        (r["task"], r["method"], int(r["seed"]))
        for r in read_log(path)
        if (sizes is None or r["task"] not in sizes or segment_steps(r) == sizes[r["task"]])
        and queue(r) in (None, QUEUE)
    }


def append(run: dict[str, Any], path: Path = LOG) -> None:
    """Append one run as one line, flushed and synced before returning (a kill after
    this keeps it; a kill during it leaves at most a partial last line, skipped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(run, sort_keys=True, allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def curves(
    task: str, path: Path = LOG, methods: list[str] | None = None, size: int | None = None
) -> dict[str, list]:
    """``{method: [curve, ...]}`` of one task for ``compare``, on the seeds every method
    has (a method whose run of a seed is still missing does not get fewer, harder seeds
    than the others), seeds in order; the methods in ``methods`` order, the rest after.
    With ``size``, only the runs of that segment size. A seed run twice counts once, as
    its newest run (appended last: a rerun with today's queue replaces the old order's),
    and a run of the old queue says so in its ``source``."""
    by: dict[str, dict[int, dict]] = {}
    for r in read_log(path):
        if r["task"] == task and (size is None or segment_steps(r) == size):
            curve = {k: r[k] for k in CURVE_KEYS if k in r}
            old = " (queue by segments)" if queue(r) == "segments" else ""
            curve["source"] = f"{r['method']} seed {r['seed']}{old}"
            by.setdefault(r["method"], {})[int(r["seed"])] = curve
    common = sorted(set.intersection(*(set(s) for s in by.values()))) if by else []
    order = [m for m in (methods or []) if m in by]
    order += sorted(m for m in by if m not in order)
    return {m: [by[m][seed] for seed in common] for m in order}
