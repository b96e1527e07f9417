"""What an agent is compared with: equal-weight buy & hold and an index, as values.

A backtest (:mod:`~elegantpod.finance.backtests.backtest`), a tournament's baselines
(:mod:`~elegantpod.finance.trading.baselines`), the verdict and the report put these
beside an agent, on the same dates and scaled to the same initial amount; they are
values of the market, so they live with it, below every one of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from elegantpod.finance.market.names import check_name
from elegantpod.finance.market.prices import sp500_index

EQUAL_WEIGHT = "Equal-weight buy & hold"
"""The name of the equal-weight benchmark in results, tables and charts."""


def equal_weight(prices: np.ndarray, amount: float, cost: float, dates) -> pd.Series:
    """Invest ``amount`` equally in every stock on day one (paying ``cost``) and hold.

    ``prices`` are the closes, ``(days, stocks)``; ``dates`` index the result. Fractional
    shares, so the benchmark is not handicapped by rounding.
    """
    shares = amount * (1.0 - cost) / prices.shape[1] / prices[0]
    return pd.Series(prices @ shares, index=dates, name=EQUAL_WEIGHT)


def index_series(index: Any, dates: pd.DatetimeIndex) -> pd.Series:
    """The levels of ``index`` (``"sp500"``, the shipped series, or a date-indexed
    Series) on ``dates``, a missing day carrying the last level forward.

    Raises
    ------
    ValueError
        For anything else, an index that does not cover ``dates``, or missing or
        non-positive levels in the range.
    """
    series = sp500_index() if isinstance(index, str) and index == "sp500" else index
    if not isinstance(series, pd.Series) or not isinstance(series.index, pd.DatetimeIndex):
        raise ValueError(
            f"index must be 'sp500' or a pandas Series indexed by dates, got {type(index).__name__}"
        )
    check_name(str(series.name or "Index"), "index name")
    series = series.sort_index()
    if series.index[0] > dates[0] or series.index[-1] < dates[-1]:
        raise ValueError(
            f"index {series.name!r} covers {series.index[0]:%Y-%m-%d}..{series.index[-1]:%Y-%m-%d}"
            f", not the backtest's {dates[0]:%Y-%m-%d}..{dates[-1]:%Y-%m-%d}"
        )
    aligned = series.reindex(series.index.union(dates)).ffill().reindex(dates)
    if aligned.isna().any() or (aligned <= 0).any():
        raise ValueError(f"index {series.name!r} has missing or non-positive levels in the range")
    return aligned.astype(np.float64).rename(series.name or "Index")
