"""A backtest in pyfolio's formats: returns, positions and transactions.

pyfolio (``pip install elegantpod[finance]`` installs pyfolio-reloaded, the maintained
fork that works with numpy 2) reads three frames, all indexed by tz-aware UTC
timestamps: its "interesting periods" (market crises it slices returns by) are UTC
timestamps, which a naive index silently matches none of, and its transaction-time chart
converts the transactions' index to New York time, which raises on a naive index.
:func:`to_pyfolio` builds them from a :class:`~elegantpod.finance.backtests.result.BacktestResult`
(read, not imported: the result's ``to_pyfolio`` calls this module):

>>> returns, positions, transactions = to_pyfolio(result)  # doctest: +SKIP
>>> pyfolio.create_full_tear_sheet(returns, positions=positions,  # doctest: +SKIP
...     transactions=transactions, benchmark_rets=benchmark_returns(result))

(``result`` is a backtest's; ``tests/finance/report/test_pyfolio_export.py`` runs
the tear sheet on one.) With ``benchmark_rets`` pyfolio adds the beta and benchmark
charts; pass it, since it has no data of its own (the original pyfolio downloaded SPY
returns when it was missing, pyfolio-reloaded leaves those charts out).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CASH = "cash"
"""pyfolio's name for the positions column of uninvested money."""
TRANSACTION_COLUMNS = ("amount", "price", "symbol")
"""The columns pyfolio reads from a transactions frame, in its order."""


def to_pyfolio(result) -> tuple[pd.Series, pd.DataFrame, pd.DataFrame]:
    """``(returns, positions, transactions)`` of a backtest, as pyfolio reads them.

    Parameters
    ----------
    result : BacktestResult
        A backtest with at least two days, and its close prices (``result.prices``):
        positions are worth shares times the day's close.

    Returns
    -------
    returns : pd.Series
        The agent's daily simple (non-cumulative) returns, float64, from the second
        backtest day on (the first has no previous close). These are the returns that
        ``result.metrics()`` summarizes, so pyfolio's Sharpe ratio and drawdowns agree
        with the report's.
    positions : pd.DataFrame
        For every backtest day: the dollar value held in each ticker at the close
        (shares times close price), then a ``cash`` column, float64. pyfolio wants cash
        as a column: it computes leverage and exposure as a fraction of the row's sum.
        Cash is the account value less the value of the stocks held, so each row sums to
        that day's account value.
    transactions : pd.DataFrame
        One row per executed order, indexed by the day it filled: ``amount`` (shares,
        positive for a buy, negative for a sell, float64), ``price`` (the fill price,
        float64) and ``symbol`` (the ticker, str). Orders fill at a day's close, and
        the daily data carries no time of day, so the timestamps are midnight UTC like
        the other two frames (pyfolio's transaction-time chart shows none of them).

    Raises
    ------
    ValueError
        For a backtest of fewer than two days (no return), one without close prices,
        prices that do not cover its days and tickers, a ticker named ``"cash"``, or a
        ticker or agent name a spreadsheet would run as a formula
        (:func:`~elegantpod.finance.market.names.check_name`).

    Notes
    -----
    All three are indexed by a ``DatetimeIndex`` in UTC, at midnight of each trading
    day. pyfolio annualizes as if the returns were daily (252 a year): for data of
    another frequency (``result.periods_per_year``) its annual figures are off.
    """
    dates = result.dates
    if len(dates) < 2:
        raise ValueError(
            f"the backtest has {len(dates)} day(s): pyfolio needs at least one daily "
            "return, so at least two days"
        )
    tickers = list(result.positions.columns)
    from elegantpod.finance.market.names import check_name

    for tic in tickers:  # column names of frames users export to CSV and sheets
        check_name(tic, "ticker")
    check_name(result.name, "agent name")
    if CASH in tickers:
        raise ValueError(f"a ticker is named {CASH!r}, pyfolio's name for the cash column")
    prices = _prices(result, dates, tickers)
    values = result.account_value.to_numpy(dtype=np.float64)
    shares = result.positions.reindex(index=dates, columns=tickers).to_numpy(dtype=np.float64)
    held = shares * prices
    utc = _utc(dates)

    returns = pd.Series(values[1:] / values[:-1] - 1.0, index=utc[1:], name=result.name)
    positions = pd.DataFrame(held, index=utc, columns=tickers)
    positions[CASH] = values - held.sum(axis=1)
    transactions = _transactions(result.trades)
    return returns, positions, transactions


def benchmark_returns(result, name: str | None = None) -> pd.Series:
    """A benchmark's daily simple returns, in the format of :func:`to_pyfolio`'s returns.

    For pyfolio's ``benchmark_rets``, on the same days as the agent's returns.

    Parameters
    ----------
    result : BacktestResult
        The backtest.
    name
        One of ``result.benchmarks`` (``None``: the first, the equal-weight buy-and-hold
        of the same stocks).

    Raises
    ------
    ValueError
        For a name that is not one of the backtest's benchmarks, or a backtest of
        fewer than two days.
    """
    if not result.benchmarks:
        raise ValueError("the backtest has no benchmarks")
    if name is None:
        name = next(iter(result.benchmarks))
    if name not in result.benchmarks:
        raise ValueError(f"no benchmark named {name!r}; the backtest has {list(result.benchmarks)}")
    from elegantpod.finance.market.names import check_name

    check_name(name, "benchmark name")
    series = result.benchmarks[name].reindex(result.dates)
    if len(series) < 2:
        raise ValueError(f"the backtest has {len(series)} day(s): no daily return")
    v = series.to_numpy(dtype=np.float64)
    return pd.Series(v[1:] / v[:-1] - 1.0, index=_utc(result.dates)[1:], name=name)


def _prices(result, dates: pd.DatetimeIndex, tickers: list) -> np.ndarray:
    """The close prices (days x tickers) that value the positions, checked."""
    prices = result.prices
    if prices is None:
        raise ValueError(
            "the backtest has no close prices (result.prices): pyfolio's positions are "
            "dollar values, shares times the day's close; rerun it with backtest()"
        )
    missing = [t for t in tickers if t not in prices.columns]
    if missing:
        raise ValueError(f"result.prices has no column for ticker(s) {missing}")
    aligned = prices.reindex(index=dates, columns=tickers).to_numpy(dtype=np.float64)
    if not np.isfinite(aligned).all():
        raise ValueError("result.prices does not cover every backtest day with a finite price")
    return aligned


def _transactions(trades: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "amount": trades["shares"].to_numpy(dtype=np.float64),
            "price": trades["price"].to_numpy(dtype=np.float64),
            "symbol": trades["tic"].astype(str).to_numpy(dtype=object),
        },
        index=_utc(pd.DatetimeIndex(trades["date"])),
        columns=list(TRANSACTION_COLUMNS),
    )
    return out.sort_index(kind="stable")


def _utc(dates: pd.DatetimeIndex) -> pd.DatetimeIndex:
    """Day dates as midnight UTC; pyfolio compares them with its own UTC timestamps."""
    dates = pd.DatetimeIndex(dates)
    return dates.tz_localize("UTC") if dates.tz is None else dates.tz_convert("UTC")
