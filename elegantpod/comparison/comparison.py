"""A comparison of training methods over seeds: its figures, table and report.

:func:`compare` reads each method's runs (:mod:`~elegantpod.comparison.runs`) and asks two
questions of each run on the same budget: *when* did its best agent first reach the
target (the time-to-target, right-censored at the budget when it never did), and *how
good* was its best agent by the budget (the final score).

Per method it reports the solved fraction with its Wilson interval beside every time
figure: the Kaplan-Meier curve of ``P(not yet at the target)``, the restricted mean time
to target at the budget (RMST) with its bootstrap interval
(:mod:`~elegantpod.comparison.survival`), and the interquartile means of both questions
with stratified bootstrap intervals (:mod:`~elegantpod.comparison.statistics`).

Per comparison of a declared family (by default the first method against each other):
the RMST difference with its interval, the log-rank test, a permutation test of the RMST
difference (paired by seed where both methods' runs carry the same seeds, the design
that gives both the same starting pods; unpaired otherwise, and the comparison says
which), its p-value adjusted by Holm over the family, and a verdict at the declared level
(:attr:`Versus.family_verdict`); beside them the IQM differences and the probabilities of
improvement, and the older per-comparison rule (:attr:`Versus.verdict`): *pays* where the
interval of the IQM time difference lies wholly below zero, with at least
:data:`~elegantpod.comparison.statistics.MIN_RUNS` runs of each (the bootstrap interval
of one run is a point and of two runs has at most three values).

Why censoring rather than dropping unsolved runs: dropping them would make a method that
solves one seed in ten, quickly, look faster than one that solves ten of ten a little
later. Why the RMST rather than the IQM of times counted at the budget: that IQM is a
lower bound on each method's IQM, but *not the same bound for every method*: its bias
grows with the method's censored fraction, and once more than a quarter of the runs are
censored the budget itself enters it (at 75% censored it *is* the budget), so the
difference of two such bounds bounds nothing. Such IQMs are shown with ``>=``. The RMST
is an estimand in its own right for every method (the mean of ``min(T, budget)``), so
its difference is one too.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elegantpod.checks.text import is_printable, short
from elegantpod.comparison import statistics as st
from elegantpod.comparison import survival as sv
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
MAX_PERMUTATIONS = 1_000_000
"""Monte Carlo permutations accepted. Each test draws at most :data:`MAX_RESAMPLED`
labels in all, so with many runs it counts fewer (and says how many)."""
LEVEL = 0.05
"""The default family-wise level (two-sided). The issue's pre-registered family uses
``alternative="less", level=0.025``."""
RATE_RATIO = 3.0
"""Evaluation rates (per second) of two methods this many times apart are noted
(:meth:`Comparison.notes`): a single pod evaluated 158-446 times against a tournament's
pods 18-22 times measured the single pod's time to target far more finely."""
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
    rmst: st.Interval = st.NAN_INTERVAL
    """The restricted mean seconds to the target at the budget (the area under the
    Kaplan-Meier curve), with its bootstrap interval."""
    kaplan_meier: sv.KaplanMeier | None = None
    """The Kaplan-Meier estimate of ``P(not yet at the target)``, as its steps."""
    censored: int = 0
    """Runs that never reached the target by the budget."""

    @property
    def time_iqm_censored(self) -> bool:
        """Whether the time IQM includes a run counted at the budget (more than a
        quarter of the runs censored): then it is only a lower bound on the IQM, shown
        as ``>= x``."""
        return self.censored > int(0.25 * self.runs)


@dataclass(frozen=True)
class Versus:
    """One comparison of the family: ``method`` against ``other`` (by default the first
    method against another)."""

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
    rmst_difference: st.Interval = st.NAN_INTERVAL
    """``RMST(method) - RMST(other)`` in seconds (below zero is faster), with its
    bootstrap 95% interval (seeds resampled together where the test is paired)."""
    logrank: sv.LogRank | None = None
    """The log-rank test of equal time-to-target curves."""
    test: sv.PermutationTest | None = None
    """The permutation test of the RMST difference: the family's test."""
    pairing: str = ""
    """Why the test is paired or not, in words."""
    alternative: str = "two-sided"
    """What the test's p-value is for (``"less"``: ``method`` is faster)."""
    level: float = LEVEL
    """The family-wise level of :attr:`family_verdict`."""
    p_adjusted: float = math.nan
    """The test's p-value adjusted by Holm over the family."""

    @property
    def p_value(self) -> float:
        """The permutation test's raw p-value for :attr:`alternative`."""
        return math.nan if self.test is None else self.test.p_value(self.alternative)

    @property
    def family_verdict(self) -> str:
        """The verdict of the family's test at its level: ``"faster"`` or ``"slower"``
        where the Holm-adjusted p-value is ``<= level`` (``"slower"`` only where the
        alternative allows it), ``"not shown"`` otherwise, ``"too few runs"`` with fewer
        than :data:`~elegantpod.comparison.statistics.MIN_RUNS` of either method."""
        if self.runs < st.MIN_RUNS:
            return "too few runs"
        if not self.p_adjusted <= self.level or self.test is None:
            return "not shown"
        return "faster" if self.test.difference < 0 else "slower"

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
    family
        The comparisons tested together, ``(method, other)`` pairs; ``None``: the first
        method against each other.
    alternative, level, permutations, paired
        See :func:`compare`.
    """

    runs: dict[str, tuple[RunCurve, ...]]
    target: float
    budget: float
    title: str = "Comparison"
    reps: int = st.BOOTSTRAP_REPS
    seed: int = 0
    family: tuple[tuple[str, str], ...] | None = None
    alternative: str = "two-sided"
    level: float = LEVEL
    permutations: int = sv.PERMUTATIONS
    paired: bool | None = None
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
        if self.family is None:
            first, *others = list(self.runs)
            object.__setattr__(self, "family", tuple((first, o) for o in others))
        versus = [self._versus(a, b) for a, b in self.family]
        adjusted = st.holm([v.p_value for v in versus]) if versus else []
        versus = [
            dataclasses.replace(v, p_adjusted=float(p))
            for v, p in zip(versus, adjusted, strict=True)
        ]
        object.__setattr__(self, "versus", tuple(versus))

    # ---------------------------------------------------------------- per run
    def times(self, method: str) -> np.ndarray:
        """Each run's seconds to the target, ``inf`` where it never got there."""
        return self._seconds[method].copy()

    def censored_times(self, method: str) -> np.ndarray:
        """:meth:`times` with unsolved runs counted at the budget (what the IQMs use)."""
        return np.minimum(self.times(method), self.budget)

    def events(self, method: str) -> np.ndarray:
        """Whether each run reached the target by the budget (else it is censored there)."""
        return np.isfinite(self._seconds[method])

    def kaplan_meier(self, method: str):
        """The Kaplan-Meier steps of ``method`` as a DataFrame: ``seconds``, ``survival``
        (``P(not yet at the target)`` just after), ``at_risk``, ``events``, ``censored``;
        a first row at 0 seconds with survival 1."""
        import pandas as pd

        km = self.figures[method].kaplan_meier
        return pd.DataFrame(
            {
                "seconds": [0.0, *km.times],
                "survival": [1.0, *km.survival],
                "at_risk": [len(self.runs[method]), *km.at_risk],
                "events": [0, *km.events],
                "censored": [0, *km.censored],
            }
        )

    def finals(self, method: str) -> np.ndarray:
        """Each run's best score by the budget (NaN for a run with no evaluation)."""
        return self._finals[method].copy()

    # ---------------------------------------------------------------- figures
    def _method(self, method: str, runs) -> MethodFigures:
        finals = self.finals(method)
        scored = finals[np.isfinite(finals)]
        observed, events = self.censored_times(method), self.events(method)
        return MethodFigures(
            method=method,
            runs=len(runs),
            solved=st.wilson(int(events.sum()), len(runs)),
            time_iqm=st.iqm_interval(observed, reps=self.reps, seed=self.seed),
            final_iqm=st.iqm_interval(scored, reps=self.reps, seed=self.seed),
            rmst=self._rmst_interval(observed, events),
            kaplan_meier=sv.kaplan_meier(observed, events),
            censored=int((~events).sum()),
        )

    def _rmst_interval(self, observed: np.ndarray, events: np.ndarray) -> st.Interval:
        """The RMST with its percentile bootstrap interval: the runs' indices are
        resampled, so each run's time and event flag travel together."""
        tau = self.budget
        return st.bootstrap_interval(
            lambda i: sv.rmst_rows(observed[i.astype(int)], events[i.astype(int)], tau),
            np.arange(observed.size),
            point=sv.rmst(observed, events, tau),
            reps=self.reps,
            seed=self.seed,
        )

    def pairing(self, method: str, other: str) -> tuple[np.ndarray, np.ndarray] | str:
        """The runs of ``method`` and ``other`` matched by seed, as two index arrays in
        seed order; or, where the design does not pair them, why (a sentence).

        Runs pair only where every run of both says its seed, no seed repeats within a
        method, and both methods ran the same seeds: a seed then names the same start
        for both (what a tournament and its sweep share by design). ``paired=False``
        declines the pairing where a shared seed means nothing more (random search's
        draws, say).
        """
        if self.paired is False:
            return "unpaired: paired=False"
        return pair_by_seed(self.runs[method], self.runs[other], method, other)

    def _versus(self, method: str, other: str) -> Versus:
        kw = {"reps": self.reps, "seed": self.seed}
        t_a, t_b = self.censored_times(method), self.censored_times(other)
        e_a, e_b = self.events(method), self.events(other)
        f_a, f_b = self.finals(method), self.finals(other)
        f_a, f_b = f_a[np.isfinite(f_a)], f_b[np.isfinite(f_b)]
        tau = self.budget
        pairs = self.pairing(method, other)
        if isinstance(pairs, str):
            # the most labels one test draws at once is bounded as the bootstrap's are
            draws = min(self.permutations, max(1, MAX_RESAMPLED // (t_a.size + t_b.size)))
            test = sv.permutation_test(t_a, e_a, t_b, e_b, tau, permutations=draws, seed=self.seed)
            difference = st.bootstrap_interval(
                lambda i, j: (
                    sv.rmst_rows(t_a[i.astype(int)], e_a[i.astype(int)], tau)
                    - sv.rmst_rows(t_b[j.astype(int)], e_b[j.astype(int)], tau)
                ),
                np.arange(t_a.size),
                np.arange(t_b.size),
                point=test.difference,
                **kw,
            )
            pairing = pairs
        else:
            ia, ib = pairs
            ta, ea, tb, eb = t_a[ia], e_a[ia], t_b[ib], e_b[ib]
            draws = min(self.permutations, max(1, MAX_RESAMPLED // ta.size))
            test = sv.paired_permutation_test(
                ta, ea, tb, eb, tau, permutations=draws, seed=self.seed
            )
            difference = st.bootstrap_interval(
                lambda k: (
                    sv.rmst_rows(ta[k.astype(int)], ea[k.astype(int)], tau)
                    - sv.rmst_rows(tb[k.astype(int)], eb[k.astype(int)], tau)
                ),
                np.arange(ta.size),
                point=test.difference,
                **kw,
            )
            pairing = f"paired by seed ({ta.size} seeds)"
        return Versus(
            method=method,
            other=other,
            time_difference=st.iqm_difference(t_a, t_b, **kw),
            faster=st.improvement_interval(t_a, t_b, lower_is_better=True, **kw),
            final_difference=st.iqm_difference(f_a, f_b, **kw),
            better=st.improvement_interval(f_a, f_b, **kw),
            runs=min(len(self.runs[method]), len(self.runs[other])),
            rmst_difference=difference,
            logrank=sv.logrank(t_a, e_a, t_b, e_b),
            test=test,
            pairing=pairing,
            alternative=self.alternative,
            level=self.level,
        )

    # ---------------------------------------------------------------- tables
    @property
    def table(self):
        """One row per method: runs, solved fraction, censored runs, the RMST and IQMs,
        each with its interval, and ``time_iqm_censored`` (the time IQM is only a lower
        bound) (a pandas DataFrame indexed by method)."""
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
                    "censored": f.censored,
                    "rmst": f.rmst.value,
                    "rmst_low": f.rmst.low,
                    "rmst_high": f.rmst.high,
                    "time_iqm": f.time_iqm.value,
                    "time_low": f.time_iqm.low,
                    "time_high": f.time_iqm.high,
                    "final_iqm": f.final_iqm.value,
                    "final_low": f.final_iqm.low,
                    "final_high": f.final_iqm.high,
                    "time_iqm_censored": f.time_iqm_censored,
                }
            )
        return pd.DataFrame(rows).set_index("method")

    @property
    def pairs(self):
        """One row per comparison of the family: both solved fractions, the RMST, IQM
        and final-score differences and probabilities of improvement with their
        intervals, the log-rank p-value, the permutation test's raw and Holm-adjusted
        p-values, whether it was paired, and both verdicts (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        for v in self.versus:
            row = {
                "method": v.method,
                "other": v.other,
                "solved": self.figures[v.method].solved.value,
                "other_solved": self.figures[v.other].solved.value,
            }
            for name in (
                "rmst_difference",
                "time_difference",
                "faster",
                "final_difference",
                "better",
            ):
                iv = getattr(v, name)
                row[name], row[f"{name}_low"], row[f"{name}_high"] = iv.value, iv.low, iv.high
            row["logrank_z"], row["logrank_p"] = v.logrank.z, v.logrank.p_value(v.alternative)
            row["p_value"], row["p_adjusted"] = v.p_value, v.p_adjusted
            row["paired"], row["alternative"] = v.test.paired, v.alternative
            row["family_verdict"] = v.family_verdict
            row["verdict"] = v.verdict
            rows.append(row)
        return pd.DataFrame(rows)

    def run_table(self):
        """One row per run: method, source, seconds to the target (NaN when never),
        whether the run stopped there (``stopped_at_target``: it reached the target and
        evaluated no more, as a run given the target does), final score, evaluations
        (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        for method, runs in self.runs.items():
            for r, t, final in zip(runs, self._seconds[method], self._finals[method], strict=True):
                solved = math.isfinite(t)
                rows.append(
                    {
                        "method": method,
                        "source": r.source,
                        "kind": r.kind,
                        "seconds_to_target": float(t) if solved else math.nan,
                        "stopped_at_target": bool(solved and r.times and r.times[-1] <= t),
                        "final_score": float(final),
                        "evaluations": len(r.times),
                    }
                )
        return pd.DataFrame(rows)

    def evaluation_rates(self) -> dict[str, float]:
        """Each method's median evaluations per second of its runs (within the budget):
        how finely its time to the target is measured."""
        out = {}
        for method, runs in self.runs.items():
            rates = [
                sum(1 for x in r.times if x <= self.budget)
                / max(min(r.duration, self.budget), 1e-9)
                for r in runs
            ]
            out[method] = float(np.median(rates)) if rates else math.nan
        return out

    def notes(self) -> list[str]:
        """What a reader of the figures should know about these runs, in sentences:
        runs that stopped when they reached the target (their final scores are the
        target's crossing, not what they would have reached by the budget), and methods
        evaluated at rates that differ by ``RATE_RATIO`` or more (a method evaluated more
        often has its time to target measured more finely, which alone makes it look
        faster: a run evaluated every 10 s is only seen to cross 5 s late on average)."""
        out = []
        runs = self.run_table()
        stopped = runs[runs["stopped_at_target"]].groupby("method", sort=False).size()
        if len(stopped):
            each = ", ".join(f"{m} {n} of {len(self.runs[m])}" for m, n in stopped.items())
            out.append(
                f"Runs that stopped when they reached the target ({each}): their final "
                "scores are the crossing, not what they would have scored by the budget."
            )
        rates = {m: r for m, r in self.evaluation_rates().items() if r > 0}
        if len(rates) >= 2 and max(rates.values()) >= RATE_RATIO * min(rates.values()):
            each = ", ".join(f"{m} {r:.3g}" for m, r in rates.items())
            out.append(
                f"The methods evaluated at very different rates (median evaluations per "
                f"second: {each}): a time to target is only seen at an evaluation, so a "
                "method evaluated more often is measured more finely and looks faster for "
                "that alone; compare methods on one evaluation schedule where you can."
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every figure as plain JSON-ready data (intervals as ``[value, low, high]``)."""
        return {
            "title": self.title,
            "notes": self.notes(),
            "target": self.target,
            "budget": self.budget,
            "bootstrap_reps": self.reps,
            "alternative": self.alternative,
            "level": self.level,
            "family": [list(pair) for pair in self.family],
            "methods": {
                m: {
                    "runs": f.runs,
                    "solved": f.solved.as_list(),
                    "censored": f.censored,
                    "rmst": f.rmst.as_list(),
                    "kaplan_meier": {
                        "seconds": list(f.kaplan_meier.times),
                        "survival": list(f.kaplan_meier.survival),
                    },
                    "time_iqm": f.time_iqm.as_list(),
                    "time_iqm_censored": f.time_iqm_censored,
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
                    "rmst_difference": v.rmst_difference.as_list(),
                    "logrank": {"z": v.logrank.z, "p": v.logrank.p_value(v.alternative)},
                    "test": {
                        "paired": v.test.paired,
                        "pairing": v.pairing,
                        "exact": v.test.exact,
                        "permutations": v.test.permutations,
                        "p": v.p_value,
                        "p_adjusted": v.p_adjusted,
                    },
                    "family_verdict": v.family_verdict,
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


def pair_by_seed(
    a: Sequence[RunCurve], b: Sequence[RunCurve], a_name: str, b_name: str
) -> tuple[np.ndarray, np.ndarray] | str:
    """The runs ``a`` and ``b`` matched by seed, as two index arrays in seed order; or,
    where they do not pair, why (a sentence naming the method): see
    :meth:`Comparison.pairing`."""
    seeds = {}
    for name, runs in ((a_name, a), (b_name, b)):
        given = [r.seed for r in runs]
        if any(x is None for x in given):
            return f"unpaired: {sum(x is None for x in given)} run(s) of {name!r} say no seed"
        if len(set(given)) != len(given):
            return f"unpaired: a seed repeats among the runs of {name!r}"
        seeds[name] = given
    if set(seeds[a_name]) != set(seeds[b_name]):
        only = sorted(set(seeds[a_name]) ^ set(seeds[b_name]))[:5]
        return f"unpaired: the two methods ran different seeds (e.g. {only})"
    order = sorted(seeds[a_name])
    where_a = {x: i for i, x in enumerate(seeds[a_name])}
    where_b = {x: i for i, x in enumerate(seeds[b_name])}
    return np.array([where_a[x] for x in order]), np.array([where_b[x] for x in order])


def _family(family: Any, methods: list[str]) -> tuple[tuple[str, str], ...]:
    """The declared family as ``(method, other)`` pairs, checked against the methods."""
    if family == "reference":
        return tuple((methods[0], m) for m in methods[1:])
    if family == "all":
        return tuple((a, b) for i, a in enumerate(methods) for b in methods[i + 1 :])
    if isinstance(family, (str, bytes, Mapping)) or not isinstance(family, Sequence):
        raise ValueError(
            f"family must be 'reference', 'all' or a list of (method, other) pairs, "
            f"got {family!r:.80}"
        )
    out: list[tuple[str, str]] = []
    for pair in family:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(
                f"each comparison of family is a (method, other) pair, got {pair!r:.80}"
            )
        a, b = pair
        for name in (a, b):
            if name not in methods:
                raise ValueError(f"family names {name!r:.80}, which is not one of the methods")
        if a == b:
            raise ValueError(f"family compares {a!r} with itself")
        if (a, b) in out or (b, a) in out:
            raise ValueError(f"family holds the comparison {a!r} against {b!r} twice")
        out.append((a, b))
    if not out:
        raise ValueError("family is empty: declare at least one comparison")
    return tuple(out)


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
    family: str | Sequence[tuple[str, str]] = "reference",
    alternative: str = "two-sided",
    level: float = LEVEL,
    permutations: int = sv.PERMUTATIONS,
    paired: bool | None = None,
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
        Bootstrap resamples per interval, and the seed of the resampling and of the
        permutations (the same runs give the same intervals and p-values).
    family
        The comparisons tested together, declared before the data is seen: ``(method,
        other)`` pairs, ``"reference"`` (the first method against each other) or
        ``"all"`` (every pair). Their p-values are adjusted by Holm over the family.
    alternative
        What each comparison tests: ``"two-sided"`` (the RMSTs differ), ``"less"``
        (``method`` is faster) or ``"greater"`` (slower).
    level
        The family-wise level of :attr:`Versus.family_verdict`, in (0, 0.5]. The issue's
        pre-registered family: ``alternative="less", level=0.025``.
    permutations
        Monte Carlo permutations of a test that is not enumerated exactly (a paired test
        of more than :data:`~elegantpod.comparison.survival.EXACT_PAIRS` seeds, or an
        unpaired test), at most :data:`MAX_PERMUTATIONS`, and fewer where
        ``permutations`` times the runs compared would pass :data:`MAX_RESAMPLED`.
    paired
        ``None``: pair runs by seed wherever both methods ran the same seeds (see
        :meth:`Comparison.pairing`). ``True``: require it (an error names a comparison
        that cannot pair). ``False``: never pair (a shared seed that does not mean a
        shared start, as for random search's draws).

    Returns
    -------
    Comparison
        ``.table`` and ``.pairs`` (DataFrames), ``.kaplan_meier(method)``,
        ``.to_html()``, ``.save(path)``, a rich view in a notebook.

    Raises
    ------
    ValueError
        Naming the bad value, before anything is read: no methods, an empty method, a
        bad name or title (one with a control character included), a target beyond
        :data:`~elegantpod.comparison.runs.MAX_SCORE` either way, a budget outside
        :data:`MIN_BUDGET` to :data:`~elegantpod.comparison.runs.MAX_SECONDS`, more
        than :data:`MAX_RUNS` runs of a method, or ``reps`` times those runs past
        :data:`MAX_RESAMPLED`, a family naming an unknown method, a method against
        itself or a comparison twice, an unknown ``alternative``, a ``level`` outside
        (0, 0.5], ``permutations`` outside [1000, :data:`MAX_PERMUTATIONS`], and, with
        ``paired=True``, a comparison whose runs do not pair by seed (after reading).
        :class:`~elegantpod.comparison.runs.RunError` (a ``ValueError``) naming the run
        that cannot be read or that fails a check.
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

    pairs = _family(family, list(runs))
    if alternative not in sv.ALTERNATIVES:
        raise ValueError(f"alternative must be one of {sv.ALTERNATIVES}, got {alternative!r:.80}")
    if (
        isinstance(level, bool)
        or not isinstance(level, (int, float))
        or not 0 < level <= 0.5  # NaN fails this too
    ):
        raise ValueError(f"level must be a number in (0, 0.5], got {level!r:.80}")
    if (
        isinstance(permutations, bool)
        or not isinstance(permutations, int)
        or not 1_000 <= permutations <= MAX_PERMUTATIONS
    ):
        raise ValueError(
            f"permutations must be an integer in [1000, {MAX_PERMUTATIONS}], "
            f"got {permutations!r:.80}"
        )
    if paired is not None and not isinstance(paired, bool):
        raise ValueError(f"paired must be None, True or False, got {paired!r:.80}")

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
    if paired:
        for a, b in pairs:
            why = pair_by_seed(curves[a], curves[b], a, b)
            if isinstance(why, str):
                raise ValueError(f"paired=True, but {a!r} against {b!r} is {why}")
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
        family=pairs,
        alternative=alternative,
        level=float(level),
        permutations=permutations,
        paired=paired,
    )
    if out is not None:
        result.save(out)
    return result
