"""One run of a method, read from wherever it was saved: a tournament's store, a single
pod's output folder, or a curve given as data.

Why one shape for all three: a comparison asks the same two questions of every run
whatever made it (when did its best agent first reach the target, and how good was the
best agent by the budget), so each source is read once into a :class:`RunCurve`, the
evaluations it made over its own clock, and the statistics never see where it came from.

Everything read here is untrusted input, as everywhere in elegantpod: a store goes
through the store's own checks (:func:`~elegantpod.tournament.store.reading.read_store`),
a ``result.json`` is read as a store's files are (a regular file inside its run folder,
never through a link, of bounded size and nesting) and, like a curve given as data, is
checked field by field here (sizes, types, finite numbers within bounds, bounded
lengths), and the only text kept from a source is the name the user gave it, which
every view escapes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elegantpod.checks.json_values import parse_json
from elegantpod.checks.text import short

MAX_POINTS = 200_000
"""Evaluations kept per run: a bound on what a hostile file can make us hold."""
MAX_RESULT_BYTES = 64 * 2**20
"""The largest ``result.json`` read."""
MAX_SECONDS = 10 * 365 * 86_400.0
"""The longest run clock accepted (ten years): anything longer is a corrupt field."""
MAX_SCORE = 1e15
"""The largest score (and target) accepted, either sign. Returns and Sharpe ratios sit
many orders below it; what lies beyond is a corrupt or hostile field, and bounding it
keeps every figure finite: a mean of scores of 1e308 overflows to infinity (and a
difference of two to NaN), which a report would print with a verdict, while sums of
scores within it stay near 1e21 even over a million runs."""


class RunError(ValueError):
    """A run that cannot be read, or a field of it that fails its check (the message
    names the run and the field)."""


@dataclass(frozen=True)
class RunCurve:
    """One run's evaluations over its own clock.

    Attributes
    ----------
    source
        What it was read from, as the user named it (a path, or ``"<data>"``).
    kind
        ``"tournament"`` (a store: every pod's evaluations on the tournament's clock),
        ``"pod"`` (a single pod's ``result.json``) or ``"curve"`` (data).
    times, scores
        Seconds since the run started, and the score (the fitness a tournament ranks:
        the return, or the env's fitness such as a validation Sharpe ratio) of each
        evaluation, in time order.
    budget
        The wall seconds the run was given, where it says (a store's ``max_seconds``).
    target
        The target the run itself was given (a store's ``target_reward``), if any.
    seed
        The run's seed, where it says (a store's ``seed``, a pod's ``result.json``
        ``seed``, a curve's ``"seed"``): runs of two methods with the same seeds are
        compared pair by pair (:func:`~elegantpod.comparison.comparison.compare`).
    """

    source: str
    kind: str
    times: tuple[float, ...]
    scores: tuple[float, ...]
    budget: float | None = None
    target: float | None = None
    seed: int | None = None

    def time_to(self, target: float, budget: float | None = None) -> float:
        """Seconds until an evaluation first scored ``>= target`` (by ``budget``, when
        given); ``inf`` when none did."""
        for t, s in zip(self.times, self.scores, strict=True):
            if budget is not None and t > budget:
                break
            if s >= target:
                return t
        return math.inf

    def best(self, budget: float | None = None) -> float:
        """The best score evaluated by ``budget`` (all evaluations without one); NaN
        when none was."""
        kept = [
            s for t, s in zip(self.times, self.scores, strict=True) if budget is None or t <= budget
        ]
        return max(kept) if kept else math.nan

    @property
    def duration(self) -> float:
        """The time of the last evaluation (0 for a run with none)."""
        return self.times[-1] if self.times else 0.0


def _number(value: Any, where: str, *, low: float = -MAX_SCORE, high: float = MAX_SCORE) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunError(f"{where} must be a number, got {short(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer of 400 digits, say: JSON reads it whole
        x = math.inf
    if not math.isfinite(x) or not (low <= x <= high):
        raise RunError(
            f"{where} must be a finite number in [{low:g}, {high:g}], got {short(value)}"
        )
    return x


MAX_SEED = 2**32
"""The largest seed accepted, either sign (a tournament spec's bound)."""


def _seed(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -MAX_SEED <= value <= MAX_SEED:
        raise RunError(f"{where} must be an integer within +-2**32, got {short(value)}")
    return int(value)


def _points(pairs, where: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Checked ``(time, score)`` pairs, sorted by time (a missing score is skipped)."""
    out = []
    for i, (t, s) in enumerate(pairs):
        if i >= MAX_POINTS:
            raise RunError(f"{where} has more than {MAX_POINTS:,} evaluations")
        if s is None:
            continue
        out.append(
            (
                _number(t, f"{where}[{i}].time", low=0.0, high=MAX_SECONDS),
                _number(s, f"{where}[{i}].score"),
            )
        )
    out.sort(key=lambda p: p[0])
    return tuple(p[0] for p in out), tuple(p[1] for p in out)


def from_data(data: Mapping[str, Any], source: str = "<data>") -> RunCurve:
    """A run given as data: ``{"time": [...], "score": [...]}`` (equal lengths), with
    optional ``"budget"``, ``"target"`` and ``"seed"`` (what the benchmarks append per
    run)."""
    if not isinstance(data, Mapping):
        raise RunError(
            f"{source}: a run given as data must be a mapping, got {type(data).__name__}"
        )
    unknown = sorted(set(data) - {"time", "score", "budget", "target", "seed", "source"})
    if unknown:
        raise RunError(
            f"{source}: unknown keys {short(unknown)} (time, score, budget, target, seed)"
        )
    times, scores = data.get("time"), data.get("score")
    for name, value in (("time", times), ("score", scores)):
        if not isinstance(value, (list, tuple)):
            raise RunError(f"{source}: {name!r} must be a list, got {short(value)}")
    if len(times) != len(scores):
        raise RunError(f"{source}: 'time' has {len(times)} values and 'score' {len(scores)}")
    if len(times) > MAX_POINTS:
        raise RunError(f"{source} has more than {MAX_POINTS:,} evaluations")
    t, s = _points(zip(times, scores, strict=True), source)
    budget = data.get("budget")
    target = data.get("target")
    return RunCurve(
        source=source,
        kind="curve",
        times=t,
        scores=s,
        budget=None
        if budget is None
        else _number(budget, f"{source}.budget", low=0.0, high=MAX_SECONDS),
        target=None if target is None else _number(target, f"{source}.target"),
        seed=_seed(data.get("seed"), f"{source}.seed"),
    )


def from_store(root: str | os.PathLike) -> RunCurve:
    """Every evaluation of every pod of a tournament's store (a folder or URL), on the
    tournament's clock, read only (the tournament may still be running)."""
    from elegantpod.tournament.store.reading import read_store

    source = os.fspath(root)
    try:
        _, spec, records, _, _ = read_store(source)
    except (OSError, ValueError) as exc:
        raise RunError(f"{source}: not a readable tournament store: {exc}") from exc
    pairs = [(h["time"], h["score"]) for r in records.values() for h in r.history]
    t, s = _points(pairs, source)
    budget, target = spec.get("max_seconds"), spec.get("target_reward")
    return RunCurve(
        source=source,
        kind="tournament",
        times=t,
        scores=s,
        budget=None
        if budget is None
        else _number(budget, f"{source}: max_seconds", low=0.0, high=MAX_SECONDS),
        target=None if target is None else _number(target, f"{source}: target_reward"),
        seed=_seed(spec.get("seed"), f"{source}: seed"),
    )


def from_pod_output(folder: str | os.PathLike) -> RunCurve:
    """A single pod's run from its output folder (``elegantpod train --out`` or
    ``train(out=...)``): its ``result.json`` curve, each evaluation at the pod's wall
    seconds, scored by the pod's fitness (the evaluation return without one)."""
    from elegantpod.safe_files import read_bytes

    source = os.fspath(folder)
    path = Path(folder) / "result.json"
    try:
        # the folder is the root: it may be a link the user typed, but result.json in
        # it may not be one (a store's rule: a link would read some other file)
        data = read_bytes(path, MAX_RESULT_BYTES, root=folder)
    except (OSError, ValueError) as exc:  # a link, a FIFO, a file over its limit
        raise RunError(f"{source}: cannot read result.json: {exc}") from exc
    try:
        raw = parse_json(data, f"{source}: cannot read result.json")
    except ValueError as exc:
        raise RunError(str(exc)) from None
    if not isinstance(raw, dict):
        raise RunError(f"{source}/result.json must hold an object, got {type(raw).__name__}")
    curve = raw.get("curve")
    if not isinstance(curve, list):
        raise RunError(
            f"{source}/result.json has no curve (a list of evaluations), got {short(curve)}"
        )
    if len(curve) > MAX_POINTS:
        raise RunError(f"{source}/result.json has more than {MAX_POINTS:,} evaluations")
    pairs = []
    for i, p in enumerate(curve):
        if not isinstance(p, dict):
            raise RunError(f"{source}/result.json: curve[{i}] must be an object, got {short(p)}")
        score = p.get("score")
        if score is None:
            score = p.get("eval_return_mean")
        if isinstance(score, float) and math.isnan(score):
            score = None  # a pod that has not evaluated yet
        pairs.append((p.get("wall_seconds"), score))
    t, s = _points(pairs, f"{source}/result.json: curve")
    return RunCurve(
        source=source,
        kind="pod",
        times=t,
        scores=s,
        seed=_seed(raw.get("seed"), f"{source}/result.json: seed"),
    )


def read_run(run: Any) -> RunCurve:
    """A :class:`RunCurve` from a store (folder or URL), a pod's output folder, a curve
    given as a mapping, or a :class:`RunCurve` itself.

    Raises :class:`RunError` naming the run for anything else, or for a field that fails
    its check.
    """
    if isinstance(run, RunCurve):
        return run
    if isinstance(run, Mapping):
        return from_data(run, str(run.get("source", "<data>"))[:200])
    if not isinstance(run, (str, os.PathLike)):
        raise RunError(
            f"a run must be a store, a pod's output folder or a mapping of curves, got {short(run)}"
        )
    from elegantpod.tournament.store.reading import is_store

    if is_store(run):
        return from_store(run)
    if Path(run).is_dir() and os.path.lexists(Path(run) / "result.json"):
        return from_pod_output(run)  # which refuses anything but a regular file
    raise RunError(
        f"{short(os.fspath(run))} is neither a tournament's store (no tournament.json) nor a "
        "pod's output folder (no result.json)"
    )
