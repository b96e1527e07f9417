"""A comparison of training methods over seeds: its figures, table and report.

:func:`compare` reads each method's runs (:mod:`~elegantpod.comparison.runs`) and asks two
questions of each run on the same budget: *when* did its best agent first reach the
target (the time-to-target, censored at the budget when it never did), and *how good*
was its best agent by the budget (the final score). Per method it reports the solved
fraction with its Wilson interval and the interquartile means of both with stratified
bootstrap intervals; per pair (the first method against each other) the difference of
those IQMs and the probability of improvement, each with its interval
(:mod:`~elegantpod.comparison.statistics`). A method *pays* against another on a task only
where the interval of the time-to-target difference lies wholly below zero, and only
with at least :data:`~elegantpod.comparison.statistics.MIN_RUNS` runs of each: the
bootstrap interval of one run is a point (every resample is that run) and of two runs
has at most three values, so a "pays" on so few would be the interval's artefact, not
evidence.

Why censoring rather than dropping unsolved runs: dropping them would make a method that
solves one seed in ten, quickly, look faster than one that solves ten of ten a little
later. Counting an unsolved run at the budget is a lower bound on its time, so an IQM
that includes them is a lower bound too, the same for every method; the solved fraction
says how much of each IQM is censored.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elegantpod.checks.text import is_printable, short
from elegantpod.comparison import statistics as st
from elegantpod.comparison.runs import MAX_SCORE, MAX_SECONDS, RunCurve, read_run

MAX_METHODS = 32
"""Methods in one comparison (a bound on what a hostile call can make us draw)."""
MAX_NAME = 80
"""The longest method name shown."""
MAX_RUNS = 1_000
"""Runs of one method: far past any study of seeds (Agarwal et al. judge 3 to 100), and
a bound on what one comparison reads, holds and lists in its report."""
MAX_RESAMPLED = 10_000_000
"""Bootstrap resamples times the runs of the largest method: each interval holds that
many drawn indices and values at once (80 MB of each), so ``reps=1_000_000`` is
accepted for a few runs but not for a thousand (8 GB)."""
MIN_BUDGET = 1e-3
"""The shortest budget accepted (a millisecond): below it the seconds were surely given
in another unit, and no run evaluates that fast."""


@dataclass(frozen=True)
class MethodFigures:
    """One method's figures (every interval 95%)."""

    method: str
    runs: int
    solved: st.Interval
    """The fraction of runs that reached the target by the budget (Wilson interval)."""
    time_iqm: st.Interval
    """The IQM of the seconds to the target, unsolved runs counted at the budget."""
    final_iqm: st.Interval
    """The IQM of the best score by the budget."""


@dataclass(frozen=True)
class Versus:
    """The first method (``method``) against another (``other``)."""

    method: str
    other: str
    time_difference: st.Interval
    """``IQM(method's seconds) - IQM(other's)``: below zero is faster."""
    faster: st.Interval
    """``P(a run of method reaches the target sooner than a run of other)``."""
    final_difference: st.Interval
    """``IQM(method's final score) - IQM(other's)``: above zero is better."""
    better: st.Interval
    """``P(a run of method ends with a higher score than a run of other)``."""
    runs: int
    """The runs of whichever of the two has fewer."""

    @property
    def pays(self) -> bool:
        """Whether ``method`` is faster to the target with the difference's interval
        wholly below zero, on at least
        :data:`~elegantpod.comparison.statistics.MIN_RUNS` runs of each (the only
        "pays" a reviewer accepts)."""
        return self.runs >= st.MIN_RUNS and bool(self.time_difference.high < 0)

    @property
    def verdict(self) -> str:
        """``"pays"``, ``"loses"`` (the interval wholly above zero), ``"undecided"``, or
        ``"too few runs"`` (fewer than
        :data:`~elegantpod.comparison.statistics.MIN_RUNS` of either method)."""
        if self.runs < st.MIN_RUNS:
            return "too few runs"
        if self.pays:
            return "pays"
        if self.time_difference.low > 0:
            return "loses"
        return "undecided"


@dataclass(frozen=True)
class Comparison:
    """Methods compared over their runs on one task: see :func:`compare`.

    Attributes
    ----------
    runs
        Each method's runs, in the order given (the first method is the one compared
        against the others).
    target, budget
        What counts as solved, and the seconds every run is judged on.
    title
        The report's title (the task).
    """

    runs: dict[str, tuple[RunCurve, ...]]
    target: float
    budget: float
    title: str = "Comparison"
    reps: int = st.BOOTSTRAP_REPS
    seed: int = 0
    figures: dict[str, MethodFigures] = field(init=False, repr=False, compare=False)
    versus: tuple[Versus, ...] = field(init=False, repr=False, compare=False)
    _seconds: dict[str, np.ndarray] = field(init=False, repr=False, compare=False)
    _finals: dict[str, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # each run read once: every figure, table and chart below uses these arrays
        seconds = {
            m: np.array([r.time_to(self.target, self.budget) for r in rs])
            for m, rs in self.runs.items()
        }
        finals = {m: np.array([r.best(self.budget) for r in rs]) for m, rs in self.runs.items()}
        object.__setattr__(self, "_seconds", seconds)
        object.__setattr__(self, "_finals", finals)
        figures = {m: self._method(m, rs) for m, rs in self.runs.items()}
        object.__setattr__(self, "figures", figures)
        first, *others = list(self.runs)
        object.__setattr__(self, "versus", tuple(self._versus(first, o) for o in others))

    # ---------------------------------------------------------------- per run
    def times(self, method: str) -> np.ndarray:
        """Each run's seconds to the target, ``inf`` where it never got there."""
        return self._seconds[method].copy()

    def censored_times(self, method: str) -> np.ndarray:
        """:meth:`times` with unsolved runs counted at the budget (what the IQMs use)."""
        return np.minimum(self.times(method), self.budget)

    def finals(self, method: str) -> np.ndarray:
        """Each run's best score by the budget (NaN for a run with no evaluation)."""
        return self._finals[method].copy()

    # ---------------------------------------------------------------- figures
    def _method(self, method: str, runs) -> MethodFigures:
        times = self.times(method)
        finals = self.finals(method)
        scored = finals[np.isfinite(finals)]
        return MethodFigures(
            method=method,
            runs=len(runs),
            solved=st.wilson(int(np.isfinite(times).sum()), len(runs)),
            time_iqm=st.iqm_interval(self.censored_times(method), reps=self.reps, seed=self.seed),
            final_iqm=st.iqm_interval(scored, reps=self.reps, seed=self.seed),
        )

    def _versus(self, method: str, other: str) -> Versus:
        kw = {"reps": self.reps, "seed": self.seed}
        t_a, t_b = self.censored_times(method), self.censored_times(other)
        f_a, f_b = self.finals(method), self.finals(other)
        f_a, f_b = f_a[np.isfinite(f_a)], f_b[np.isfinite(f_b)]
        return Versus(
            method=method,
            other=other,
            time_difference=st.iqm_difference(t_a, t_b, **kw),
            faster=st.improvement_interval(t_a, t_b, lower_is_better=True, **kw),
            final_difference=st.iqm_difference(f_a, f_b, **kw),
            better=st.improvement_interval(f_a, f_b, **kw),
            runs=min(len(self.runs[method]), len(self.runs[other])),
        )

    # ---------------------------------------------------------------- tables
    @property
    def table(self):
        """One row per method: runs, solved fraction, IQMs, each with its interval
        (a pandas DataFrame indexed by method)."""
        import pandas as pd

        rows = []
        for f in self.figures.values():
            rows.append(
                {
                    "method": f.method,
                    "runs": f.runs,
                    "solved": f.solved.value,
                    "solved_low": f.solved.low,
                    "solved_high": f.solved.high,
                    "time_iqm": f.time_iqm.value,
                    "time_low": f.time_iqm.low,
                    "time_high": f.time_iqm.high,
                    "final_iqm": f.final_iqm.value,
                    "final_low": f.final_iqm.low,
                    "final_high": f.final_iqm.high,
                }
            )
        return pd.DataFrame(rows).set_index("method")

    @property
    def pairs(self):
        """One row per comparison of the first method against another: the IQM
        differences and probabilities of improvement with their intervals, and the
        verdict (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        for v in self.versus:
            row = {"method": v.method, "other": v.other}
            for name in ("time_difference", "faster", "final_difference", "better"):
                iv = getattr(v, name)
                row[name], row[f"{name}_low"], row[f"{name}_high"] = iv.value, iv.low, iv.high
            row["verdict"] = v.verdict
            rows.append(row)
        return pd.DataFrame(rows)

    def run_table(self):
        """One row per run: method, source, seconds to the target (NaN when never),
        final score, evaluations (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        for method, runs in self.runs.items():
            for r, t, final in zip(runs, self._seconds[method], self._finals[method], strict=True):
                rows.append(
                    {
                        "method": method,
                        "source": r.source,
                        "kind": r.kind,
                        "seconds_to_target": float(t) if math.isfinite(t) else math.nan,
                        "final_score": float(final),
                        "evaluations": len(r.times),
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """Every figure as plain JSON-ready data (intervals as ``[value, low, high]``)."""
        return {
            "title": self.title,
            "target": self.target,
            "budget": self.budget,
            "bootstrap_reps": self.reps,
            "methods": {
                m: {
                    "runs": f.runs,
                    "solved": f.solved.as_list(),
                    "time_iqm": f.time_iqm.as_list(),
                    "final_iqm": f.final_iqm.as_list(),
                    "seconds_to_target": [
                        None if not math.isfinite(t) else t for t in self.times(m)
                    ],
                    "final_scores": [None if not math.isfinite(x) else x for x in self.finals(m)],
                }
                for m, f in self.figures.items()
            },
            "versus": [
                {
                    "method": v.method,
                    "other": v.other,
                    "time_difference": v.time_difference.as_list(),
                    "faster": v.faster.as_list(),
                    "final_difference": v.final_difference.as_list(),
                    "better": v.better.as_list(),
                    "verdict": v.verdict,
                }
                for v in self.versus
            ],
        }

    def to_markdown(self) -> str:
        """The table as Markdown (what the benchmarks' README tables are): one row per
        method, the pairs' verdicts in the last column."""
        from elegantpod.comparison.report import markdown

        return markdown(self)

    def to_html(self) -> str:
        """The self-contained HTML report (see :mod:`~elegantpod.comparison.report`)."""
        from elegantpod.comparison.report import html_report

        return html_report(self)

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_html` to ``path`` atomically (a report already there is
        replaced only by a complete one)."""
        from elegantpod.safe_files import atomic_write_bytes

        atomic_write_bytes(path, self.to_html().encode("utf-8"))

    def _repr_html_(self) -> str:
        from elegantpod.comparison.report import notebook_view

        return notebook_view(self)

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{m}: {f.solved.value * f.runs:.0f}/{f.runs} solved" for m, f in self.figures.items()
        )
        return f"<Comparison {self.title!r}, target {self.target:g} in {self.budget:g} s: {parts}>"


def _method_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"method names must be non-empty strings, got {name!r}")
    if len(name) > MAX_NAME:
        raise ValueError(f"method name {name[:40]!r}... is longer than {MAX_NAME} characters")
    if not is_printable(name):  # printed to terminals by the CLI and the benchmarks
        raise ValueError(
            f"method name {short(name)} holds a control or invisible character; "
            "a name is printed as it is"
        )
    return name


def _check_budget(budget: float, given: str) -> None:
    if not MIN_BUDGET <= budget <= MAX_SECONDS:
        raise ValueError(
            f"budget must be between {MIN_BUDGET:g} and {MAX_SECONDS:g} seconds "
            f"(ten years), got {budget!r}{given}"
        )


def compare(
    runs: Mapping[str, Sequence[Any]],
    target: float | None = None,
    *,
    budget: float | None = None,
    title: str | None = None,
    out: str | os.PathLike | None = None,
    reps: int = st.BOOTSTRAP_REPS,
    seed: int = 0,
) -> Comparison:
    """Compare training methods over their runs, as a reviewer would accept.

    Parameters
    ----------
    runs
        ``{method: [run, ...]}``, the first method being the one compared against each
        other. A run is a tournament's store (folder or URL: every pod's evaluations on
        the tournament's clock), a single pod's output folder (``train(out=...)``: its
        ``result.json``), or a curve as data ``{"time": [...], "score": [...]}``. Equal
        compute is the caller's to arrange: same machine, same budget, same seeds.
    target
        The score that counts as solved. Default: the target the stores were given
        (``target_reward``), when every run that says one says the same.
    budget
        The seconds each run is judged on: evaluations after it are ignored and a run
        that never reached the target counts at it. Default: the budget the stores were
        given (``max_seconds``) when they agree, else the longest run's last evaluation.
    title
        The report's title (default: the target and budget).
    out
        Also write the HTML report there (atomically).
    reps, seed
        Bootstrap resamples per interval, and the seed of the resampling (the same runs
        give the same intervals).

    Returns
    -------
    Comparison
        ``.table`` and ``.pairs`` (DataFrames), ``.to_html()``, ``.save(path)``, a rich
        view in a notebook.

    Raises
    ------
    ValueError
        Naming the bad value, before anything is read: no methods, an empty method, a
        bad name or title (one with a control character included), a target beyond
        :data:`~elegantpod.comparison.runs.MAX_SCORE` either way, a budget outside
        :data:`MIN_BUDGET` to :data:`~elegantpod.comparison.runs.MAX_SECONDS`, more
        than :data:`MAX_RUNS` runs of a method, or ``reps`` times those runs past
        :data:`MAX_RESAMPLED`. :class:`~elegantpod.comparison.runs.RunError` (a
        ``ValueError``) naming the run that cannot be read or that fails a check.
    """
    from elegantpod.checks.limits import check_finite

    if not isinstance(runs, Mapping) or not runs:
        raise ValueError(f"runs must be a non-empty mapping of method -> runs, got {runs!r:.80}")
    if len(runs) > MAX_METHODS:
        raise ValueError(f"at most {MAX_METHODS} methods in one comparison, got {len(runs)}")
    for name, given in runs.items():
        _method_name(name)
        if isinstance(given, (str, bytes, os.PathLike, Mapping)) or not isinstance(given, Sequence):
            raise ValueError(f"runs[{name!r}] must be a list of runs, got {given!r:.80}")
        if not given:
            raise ValueError(f"runs[{name!r}] is empty: a method needs at least one run")
        if len(given) > MAX_RUNS:
            raise ValueError(
                f"runs[{name!r}] has {len(given):,} runs; at most {MAX_RUNS:,} a method"
            )
    check_finite("target", target, allow_none=True)
    check_finite("budget", budget, allow_none=True)
    if target is not None and not -MAX_SCORE <= target <= MAX_SCORE:
        raise ValueError(f"target must be within +-{MAX_SCORE:g}, got {target!r}")
    if budget is not None and budget <= 0:
        raise ValueError(f"budget must be > 0 seconds, got {budget}")
    if budget is not None:
        _check_budget(budget, "")
    if isinstance(reps, bool) or not isinstance(reps, int) or not 100 <= reps <= 1_000_000:
        raise ValueError(f"reps must be an integer in [100, 1000000], got {reps!r}")
    largest = max(runs, key=lambda name: len(runs[name]))
    if reps * len(runs[largest]) > MAX_RESAMPLED:
        raise ValueError(
            f"reps={reps:,} resamples of the {len(runs[largest]):,} runs of {largest!r} are "
            f"{reps * len(runs[largest]):,} values; at most {MAX_RESAMPLED:,} (fewer reps)"
        )
    if title is not None and not isinstance(title, str):
        raise ValueError(f"title must be a string, got {title!r:.80}")
    if title is not None and not is_printable(title):
        raise ValueError(
            f"title {short(title)} holds a control or invisible character; "
            "a title is printed as it is"
        )

    curves = {name: tuple(read_run(r) for r in given) for name, given in runs.items()}
    every = [c for cs in curves.values() for c in cs]
    if target is None:
        said = {c.target for c in every if c.target is not None}
        if len(said) != 1:
            raise ValueError(
                "give target=: "
                + (
                    "no run says its target"
                    if not said
                    else f"the runs say different targets {sorted(said)}"
                )
            )
        target = said.pop()
    if budget is None:
        said = {c.budget for c in every if c.budget is not None}
        budget = said.pop() if len(said) == 1 else max((c.duration for c in every), default=0.0)
        if budget <= 0:
            raise ValueError("give budget=: no run says its budget and none has an evaluation")
        _check_budget(budget, " (from the runs: give budget=)")
    result = Comparison(
        runs=curves,
        target=float(target),
        budget=float(budget),
        title=title or f"target {target:g} within {budget:g} s",
        reps=reps,
        seed=seed,
    )
    if out is not None:
        result.save(out)
    return result
