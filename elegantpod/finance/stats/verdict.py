"""The verdict: did an agent beat equal-weight buy & hold, and how sure can we be?

The statistics behind the report's "Did it beat doing nothing?" section and the sentence
that sums them up (:func:`verdict`, also printed by ``elegantpod backtest``): Sharpe
ratios with block-bootstrap intervals, the paired interval of their difference, and the
deflated Sharpe ratio over the selection's trials. Pure functions of a backtest result
(anything with its attributes): no HTML, no charts, no files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.stats import bootstrap, metrics, selection
from elegantpod.number_text import fixed

BOOTSTRAP_SAMPLES = 2000
"""Resamples of the report's bootstrap intervals (seed 0: a report is reproducible)."""
UNKNOWN_SELECTION = "unknown"
"""``BacktestResult.selection`` of an agent whose selection nobody recorded (a bare
checkpoint or pod): its deflated Sharpe ratio assumes 1 trial, and the verdict says so."""


@dataclass(frozen=True)
class Beat:
    """The agent against equal weight, as the report section and :func:`verdict` say it."""

    sharpe: bootstrap.BootstrapInterval
    """The agent's Sharpe ratio and its bootstrap interval."""
    benchmark: bootstrap.BootstrapInterval
    """Equal weight's, on the same days (NaN without that benchmark)."""
    difference: bootstrap.BootstrapInterval
    """Agent minus equal weight, from the same resampled days (paired)."""
    deflated: selection.DeflatedSharpe | None
    """The agent's deflated Sharpe ratio over its selection's trials; ``None`` for a
    backtest too short to compare."""
    block: int
    """Days per bootstrap block."""
    has_benchmark: bool
    """Whether the result has an equal-weight benchmark."""


def daily_returns(result) -> list[tuple[str, pd.Series]]:
    """Daily returns of the agent (first) and each benchmark, dated by the day they end.

    Pairs, not a frame: an agent may carry a benchmark's name."""
    out = [(result.name, result.account_value)] + list(result.benchmarks.items())
    return [
        (str(name), pd.Series(metrics.returns_from_values(v.to_numpy()), index=v.index[1:]))
        for name, v in out
    ]


def compare(result) -> Beat:
    """The statistics of :func:`verdict`: bootstrap intervals of both Sharpe ratios and
    of their difference (:data:`BOOTSTRAP_SAMPLES` resamples, seed 0) and the deflated
    Sharpe ratio over ``result.trials``."""
    agent = daily_returns(result)[0][1].to_numpy()
    ew = result.benchmarks.get(EQUAL_WEIGHT)
    nan = bootstrap.BootstrapInterval(math.nan, math.nan, math.nan)
    if len(agent) < 3:  # too short for any of it
        return Beat(nan, nan, nan, None, 1, ew is not None)
    kw = {"samples": BOOTSTRAP_SAMPLES, "seed": 0}
    ppy = result.periods_per_year
    sharpe = bootstrap.bootstrap_sharpe_ci(agent, ppy, **kw)
    benchmark = difference = nan
    if ew is not None:
        ew_returns = metrics.returns_from_values(ew.to_numpy())
        benchmark = bootstrap.bootstrap_sharpe_ci(ew_returns, ppy, **kw)
        difference = bootstrap.bootstrap_sharpe_difference_ci(agent, ew_returns, ppy, **kw)
    deflated = selection.deflated_sharpe_ratio(agent, result.trials, periods_per_year=ppy)
    block = bootstrap.default_block_length(len(agent))
    return Beat(sharpe, benchmark, difference, deflated, block, ew is not None)


def verdict(result) -> str:
    """One plain sentence: did the agent beat equal-weight buy & hold, risk-adjusted, and
    how sure can we be?

    It compares Sharpe ratios with the 95% interval of their difference from a paired
    block bootstrap (the same resampled days for both), and adds the agent's deflated
    Sharpe ratio over ``result.trials`` trials: a difference whose interval lies above
    zero beat equal weight on these dates; a deflated Sharpe ratio of 0.95 or more says
    that Sharpe ratio is unlikely to be the luck of picking the best of that many.

    When one stock dominated the account (more than half its value on the last day or
    on most days: :attr:`~elegantpod.finance.stats.concentration.Concentration.is_concentrated`),
    a second sentence says so: a bet on one stock is not a diversified portfolio,
    however its Sharpe ratio compares.

    Parameters
    ----------
    result : BacktestResult
        A backtest with its equal-weight benchmark.

    Returns
    -------
    str
        The sentence, unescaped (it names the agent and tickers: escape it for HTML).
    """
    return verdict_of(result, compare(result))


def _concentration_sentence(result) -> str:
    conc = result.concentration
    return "" if conc is None else conc.sentence()


def verdict_of(result, beat: Beat) -> str:
    """:func:`verdict` from statistics :func:`compare` computed already (the report
    shows them too, and a bootstrap is not free)."""
    bet = _concentration_sentence(result)
    return f"{_sharpe_verdict(result, beat)} {bet}".strip()


def _sharpe_verdict(result, beat: Beat) -> str:
    name = result.name
    start, end = f"{result.dates[0]:%Y-%m-%d}", f"{result.dates[-1]:%Y-%m-%d}"
    prefix = "In-sample (so this measures memory, not skill): " if result.in_sample else ""
    a, e = beat.sharpe.estimate, beat.benchmark.estimate
    if not beat.has_benchmark:
        return f"{prefix}{name}: no equal-weight benchmark to compare with."
    if beat.deflated is None:
        return f"{prefix}{name}: {len(result.dates)} days are too few to compare Sharpe ratios."
    if not math.isfinite(a):
        return (
            f"{prefix}{name}'s account value never changed from {start} to {end}, so it has no "
            f"Sharpe ratio: it did not beat equal-weight buy & hold ({fixed(e)})."
        )
    lo, hi, d = beat.difference
    head = (
        f"{prefix}From {start} to {end}, {name} had a Sharpe ratio of {a:.2f} against "
        f"{fixed(e)} for equal-weight buy & hold"
    )
    interval = f"95% interval of the difference {lo:+.2f} to {hi:+.2f}"
    if not math.isfinite(d):
        judged = ", and equal weight's has no Sharpe ratio to compare with"
    elif lo > 0:
        judged = f": it beat equal weight risk-adjusted with 95% confidence ({interval})"
    elif hi < 0:
        judged = f": it did worse than equal weight risk-adjusted ({interval})"
    else:
        judged = (
            f", a difference of {d:+.2f} that is not significant ({interval} includes zero): "
            "no evidence that it beat equal weight risk-adjusted"
        )
    ds = beat.deflated
    n = ds.trials
    tried = "1 trial" if n == 1 else f"{n} trials"
    if not math.isfinite(ds.dsr):
        luck = ""
    elif a > 0 and getattr(result, "selection", "") == UNKNOWN_SELECTION:  # never silently 1
        luck = (
            f"; selection unknown: its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, "
            "which holds only if this agent was not picked from others (pass trials=N, or "
            "--trials N, if it was the best of N)"
        )
    elif a <= 0:
        unknown = getattr(result, "selection", "") == UNKNOWN_SELECTION
        luck = (
            f"; {'selection unknown: ' * unknown}its deflated Sharpe ratio over {tried} is "
            f"{ds.dsr:.2f}: no skill to deflate"
        )
    elif ds.dsr >= 0.95:
        luck = f"; its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, so luck is unlikely"
    else:
        luck = (
            f"; its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, below 0.95, so "
            "luck alone could explain its Sharpe ratio"
        )
    return f"{head}{judged}{luck}."
