"""Bootstrap intervals of Sharpe ratios: a circular block bootstrap of daily returns.

Percentile intervals that keep the short-range dependence of daily returns (volatility
clusters) that an i.i.d. bootstrap would destroy: :func:`bootstrap_sharpe_ci` for one
strategy, :func:`bootstrap_sharpe_difference_ci` for two resampled on the same days
(paired). Seeded, so a report is reproducible; also importable from
:mod:`~elegantpod.finance.stats.selection`.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from elegantpod.finance.market.series_checks import check_periods_per_year, check_returns

_CHUNK = 1 << 22
"""Bootstrap values gathered at once (32 MB of float64): caps memory for long series."""


class BootstrapInterval(NamedTuple):
    """A percentile bootstrap interval and the statistic on the original sample."""

    low: float
    high: float
    estimate: float


def default_block_length(periods: int) -> int:
    """``round(T ** (1/3))``, at least 1: 10 trading days for 4 years, 6 for one.

    For a block bootstrap of a variance-like statistic (a Sharpe ratio's spread is set
    by the variance of returns) the error-minimizing block length grows like ``T^(1/3)``
    (Hall, Horowitz and Jing, 1995). A length that grows with the sample keeps the
    bootstrap consistent, which a fixed month (21 days) does not: on a 3-month backtest
    that would leave 3 blocks, too few distinct resamples for a 95% interval.
    """
    return max(1, round(periods ** (1.0 / 3.0)))


def _block_indices(rng: np.random.Generator, periods: int, block: int, samples: int):
    """Start indices ``(samples, k)`` of circular blocks, ``k * block >= periods``."""
    k = -(-periods // block)
    return rng.integers(0, periods, size=(samples, k))


def _gather(starts: np.ndarray, periods: int, block: int) -> np.ndarray:
    """The ``(rows, periods)`` resampled positions: consecutive ``block``-long runs from
    each start, wrapping past the end (circular), cut to ``periods``."""
    idx = (starts[:, :, None] + np.arange(block)) % periods
    return idx.reshape(starts.shape[0], -1)[:, :periods]


def _sharpe_rows(x: np.ndarray, ppy: float) -> np.ndarray:
    """Annualized Sharpe ratio of each row; NaN for a constant row."""
    std = x.std(axis=1, ddof=1)
    std[x.max(axis=1) == x.min(axis=1)] = np.nan
    return x.mean(axis=1) / std * math.sqrt(ppy)


def _check_bootstrap(periods: int, level: float, samples: int, block: int | None) -> int:
    if not (isinstance(level, numbers.Real) and 0.0 < level < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    if block is None:
        return default_block_length(periods)
    if isinstance(block, bool) or not isinstance(block, int | np.integer):
        raise ValueError(f"block must be an integer or None, got {block!r}")
    if not 1 <= block <= periods:
        raise ValueError(f"block must be in 1..T={periods}, got {block!r}")
    return int(block)


def _bootstrap(series, ppy, level, samples, block, seed) -> BootstrapInterval:
    """Percentile interval of ``sharpe(series[0]) - sharpe(series[1]) - ...`` (one series:
    its Sharpe ratio), every series resampled on the same days."""
    periods = series[0].shape[0]
    block = _check_bootstrap(periods, level, samples, block)
    ppy = check_periods_per_year(ppy)
    signs = [1.0] + [-1.0] * (len(series) - 1)

    def stat(rows):
        return sum(s * _sharpe_rows(x[rows], ppy) for s, x in zip(signs, series, strict=True))

    estimate = float(stat(np.arange(periods)[None, :])[0])
    starts = _block_indices(np.random.default_rng(seed), periods, block, samples)
    # Chunks only bound memory: the draws are made above, so a seed gives the same
    # interval whatever the chunk size.
    rows_per_chunk = max(1, _CHUNK // periods)
    stats = np.concatenate(
        [
            stat(_gather(starts[i : i + rows_per_chunk], periods, block))
            for i in range(0, samples, rows_per_chunk)
        ]
    )
    stats = stats[np.isfinite(stats)]  # resamples of constant days have no Sharpe ratio
    if stats.size == 0:
        return BootstrapInterval(math.nan, math.nan, estimate)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return BootstrapInterval(float(low), float(high), estimate)


def bootstrap_sharpe_ci(
    returns: ArrayLike,
    periods_per_year: float,
    level: float = 0.95,
    samples: int = 2000,
    block: int | None = None,
    seed: int = 0,
) -> BootstrapInterval:
    """Circular block bootstrap percentile interval of the annualized Sharpe ratio.

    Each resample glues random blocks of ``block`` consecutive days, wrapping from the
    last day to the first (Politis and Romano, 1992), until it is ``T`` days long. Blocks
    keep the volatility clustering of daily returns, which sets how much a Sharpe ratio
    can vary; wrapping gives every day the same chance to be drawn (plain moving blocks
    under-sample the first and last days). Fixed-length blocks estimate variances with
    a smaller error than the stationary bootstrap's random lengths (Lahiri, 1999).

    Parameters
    ----------
    returns : array_like, shape (T,)
        Simple per-period returns, finite, ``T >= 3``.
    periods_per_year : float
        Periods in a year (252 for trading days).
    level : float, default 0.95
        Coverage of the interval.
    samples : int, default 2000
        Bootstrap resamples; 2000 leaves 50 draws beyond each end of a 95% interval.
    block : int, optional
        Block length in periods; default :func:`default_block_length`.
    seed : int, default 0
        The same seed gives the same interval.

    Returns
    -------
    BootstrapInterval
        ``(low, high, estimate)``; the estimate is the Sharpe ratio of ``returns``, as
        :func:`~elegantpod.finance.stats.metrics.sharpe_ratio` gives it. Resamples without
        variation are left out; all NaN for a constant series.
    """
    r = check_returns(returns)
    return _bootstrap([r], periods_per_year, level, samples, block, seed)


def bootstrap_sharpe_difference_ci(
    returns: ArrayLike,
    benchmark: ArrayLike,
    periods_per_year: float,
    level: float = 0.95,
    samples: int = 2000,
    block: int | None = None,
    seed: int = 0,
) -> BootstrapInterval:
    """Paired block bootstrap interval of ``sharpe(returns) - sharpe(benchmark)``.

    Both series are resampled on the *same* days (as :func:`bootstrap_sharpe_ci` draws
    them), so what the market did on a day moves both: the interval measures the
    difference's own uncertainty, far narrower than two separate intervals suggest when
    the strategies are correlated. An interval above 0 says the strategy beat the
    benchmark risk-adjusted at that confidence.

    Parameters
    ----------
    returns, benchmark : array_like, shape (T,)
        Simple per-period returns on the same periods, finite, ``T >= 3``.
    periods_per_year, level, samples, block, seed
        As in :func:`bootstrap_sharpe_ci`.

    Returns
    -------
    BootstrapInterval
        ``(low, high, estimate)`` of the annualized Sharpe difference.
    """
    r = check_returns(returns)
    b = check_returns(benchmark, "benchmark")
    if r.shape != b.shape:
        raise ValueError(f"returns ({r.shape[0]}) and benchmark ({b.shape[0]}) differ in length")
    return _bootstrap([r, b], periods_per_year, level, samples, block, seed)
