"""pyfolio export: the three frames' formats, their accounting, and a headless tear sheet."""

from __future__ import annotations

import dataclasses
import socket
import warnings

import numpy as np
import pandas as pd
import pytest

from elegantpod.config import PodSpec
from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.backtests.result import BacktestResult
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.report.pyfolio_export import benchmark_returns, to_pyfolio
from elegantpod.pod.pod import Pod
from tests.finance.backtests.test_backtest import write_market

TICKERS = ["AAA", "BBB", "CCC"]


def simulated_result(days=40, seed=0, cost=0.001) -> tuple[BacktestResult, np.ndarray]:
    """A hand-built backtest that buys and sells at random, and its true cash per day."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2020-01-01", periods=days)
    prices = 50.0 * np.exp(np.cumsum(rng.normal(0.0, 0.02, size=(days, 3)), axis=0))
    shares, cash = np.zeros(3), 1e5
    held, cash_track, rows = np.zeros((days, 3)), np.empty(days), []
    for d in range(days):
        if d > 0:  # day 0 is the start: cash only, as in a backtest with execution_lag=1
            order = rng.integers(-20, 30, size=3).astype(float)
            order = np.maximum(order, -shares)  # no short sales
            for i in np.flatnonzero(order):
                value = order[i] * prices[d, i]
                rows.append(
                    (dates[d], TICKERS[i], order[i], prices[d, i], value, abs(value) * cost)
                )
                cash -= value + abs(value) * cost
                shares[i] += order[i]
        held[d], cash_track[d] = shares, cash
    account = cash_track + (held * prices).sum(1)
    result = BacktestResult(
        account_value=pd.Series(account, index=dates, name="Random trader"),
        benchmarks={EQUAL_WEIGHT: pd.Series(prices.mean(1) * 2000.0, index=dates)},
        trades=pd.DataFrame(rows, columns=["date", "tic", "shares", "price", "value", "cost"]),
        positions=pd.DataFrame(held, index=dates, columns=TICKERS),
        periods_per_year=252,
        initial_amount=1e5,
        cost=cost,
        agent={"name": "Random trader"},
        prices=pd.DataFrame(prices, index=dates, columns=TICKERS),
    )
    return result, cash_track


@pytest.fixture(scope="module")
def simulated():
    return simulated_result()


@pytest.fixture(scope="module")
def backtested(tmp_path_factory):
    """A real backtest of an untrained agent: no training, its deterministic policy trades."""
    market = write_market(tmp_path_factory.mktemp("pyfolio") / "closes.csv", tickers=TICKERS)
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="sac",
        env_kwargs={"data": str(market), "end": "2015-12-31", "episode_days": 40},
    )
    return backtest(Pod(spec), start="2016-01-04", end="2016-09-30")


def share_changes(transactions: pd.DataFrame, index: pd.DatetimeIndex) -> pd.DataFrame:
    """Shares held after each day's fills, rebuilt from the transactions alone."""
    daily = transactions.pivot_table(
        index=transactions.index, columns="symbol", values="amount", aggfunc="sum"
    )
    return daily.reindex(index=index, columns=TICKERS).fillna(0.0).cumsum()


def test_the_three_frames_are_in_pyfolio_formats(simulated):
    result, _ = simulated
    returns, positions, transactions = to_pyfolio(result)
    for frame in (returns, positions, transactions):
        assert isinstance(frame.index, pd.DatetimeIndex) and str(frame.index.tz) == "UTC"
    # returns: daily simple returns from the second day, as result.returns() has them
    assert returns.dtype == np.float64 and returns.name == "Random trader"
    expected = result.returns()["Random trader"]
    np.testing.assert_allclose(returns.to_numpy(), expected.to_numpy(), rtol=1e-12)
    assert (returns.index == expected.index.tz_localize("UTC")).all()
    # positions: every day, a dollar value per ticker then cash
    assert list(positions.columns) == [*TICKERS, "cash"]
    assert (positions.dtypes == np.float64).all()
    assert (positions.index == result.dates.tz_localize("UTC")).all()
    # transactions: one row per trade, in pyfolio's column order
    assert list(transactions.columns) == ["amount", "price", "symbol"]
    assert transactions["amount"].dtype == np.float64
    assert transactions["price"].dtype == np.float64
    assert all(isinstance(s, str) for s in transactions["symbol"])
    assert len(transactions) == len(result.trades) > 0
    assert (transactions["amount"] < 0).any() and (transactions["amount"] > 0).any()
    assert transactions.index.is_monotonic_increasing


def test_positions_are_dollar_values_and_cash_balances_the_account(simulated):
    result, cash = simulated
    _, positions, _ = to_pyfolio(result)
    stocks = positions[TICKERS].to_numpy()
    np.testing.assert_allclose(stocks, result.positions.to_numpy() * result.prices.to_numpy())
    # the derived cash is the cash the trader really had (after costs)
    np.testing.assert_allclose(positions["cash"].to_numpy(), cash, rtol=1e-10)
    np.testing.assert_allclose(
        positions.sum(axis=1).to_numpy(), result.account_value.to_numpy(), rtol=1e-6
    )


def test_transactions_reproduce_the_positions(simulated):
    result, _ = simulated
    _, positions, transactions = to_pyfolio(result)
    rebuilt = share_changes(transactions, positions.index)
    np.testing.assert_allclose(rebuilt.to_numpy(), result.positions.to_numpy())
    np.testing.assert_allclose(
        (transactions["amount"] * transactions["price"]).to_numpy(), result.trades["value"]
    )


def test_a_real_backtest_exports_consistently(backtested):
    result = backtested
    returns, positions, transactions = result.to_pyfolio()
    assert len(transactions) > 0
    np.testing.assert_allclose(
        positions.sum(axis=1).to_numpy(), result.account_value.to_numpy(), rtol=1e-6
    )
    # cash from the trades alone: the initial amount less what was paid, fees included
    paid = (result.trades["value"] + result.trades["cost"]).groupby(result.trades["date"]).sum()
    cash = result.initial_amount - paid.reindex(result.dates, fill_value=0.0).cumsum()
    np.testing.assert_allclose(positions["cash"].to_numpy(), cash.to_numpy(), rtol=1e-9)
    assert (positions["cash"] >= 0).all()
    rebuilt = share_changes(transactions, positions.index)
    np.testing.assert_allclose(rebuilt.to_numpy(), result.positions.to_numpy())
    assert returns.index.equals(positions.index[1:])


def test_benchmark_returns(simulated, backtested):
    result, _ = simulated
    bench = benchmark_returns(result)
    assert bench.name == EQUAL_WEIGHT and str(bench.index.tz) == "UTC"
    np.testing.assert_allclose(bench.to_numpy(), result.returns()[EQUAL_WEIGHT].to_numpy())
    assert bench.index.equals(to_pyfolio(result)[0].index)
    assert benchmark_returns(backtested, EQUAL_WEIGHT).index.equals(
        backtested.to_pyfolio()[0].index
    )
    with pytest.raises(ValueError, match="no benchmark named 'S&P 500'"):
        benchmark_returns(result, "S&P 500")


def test_no_trades_give_an_empty_transactions_frame(simulated):
    result, _ = simulated
    quiet = dataclasses.replace(
        result,
        trades=result.trades.iloc[:0],
        positions=result.positions * 0.0,
        account_value=pd.Series(1e5, index=result.dates),
    )
    returns, positions, transactions = to_pyfolio(quiet)
    assert transactions.empty and list(transactions.columns) == ["amount", "price", "symbol"]
    assert str(transactions.index.tz) == "UTC"
    assert (returns == 0.0).all() and (positions["cash"] == 1e5).all()


def test_bad_results_are_named(simulated):
    result, _ = simulated
    one_day = dataclasses.replace(
        result,
        account_value=result.account_value.iloc[:1],
        positions=result.positions.iloc[:1],
        trades=result.trades.iloc[:0],
    )
    with pytest.raises(ValueError, match="1 day.*at least two days"):
        to_pyfolio(one_day)
    empty = dataclasses.replace(one_day, account_value=result.account_value.iloc[:0])
    with pytest.raises(ValueError, match="0 day"):
        to_pyfolio(empty)
    with pytest.raises(ValueError, match="no close prices"):
        to_pyfolio(dataclasses.replace(result, prices=None))
    with pytest.raises(ValueError, match=r"no column for ticker\(s\) \['CCC'\]"):
        to_pyfolio(dataclasses.replace(result, prices=result.prices[["AAA", "BBB"]]))
    with pytest.raises(ValueError, match="every backtest day"):
        to_pyfolio(dataclasses.replace(result, prices=result.prices.iloc[1:]))
    cash_ticker = result.positions.rename(columns={"CCC": "cash"})
    with pytest.raises(ValueError, match="named 'cash'"):
        to_pyfolio(dataclasses.replace(result, positions=cash_ticker))


def test_pyfolio_draws_tear_sheets_offline(backtested, monkeypatch):
    """pyfolio reads the frames as they are: the returns, positions and transactions
    sheets draw without a network (the benchmark is passed, so none is downloaded), and
    its statistics agree with the report's."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg", force=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipline absent; pandas deprecations in pyfolio
        pf = pytest.importorskip("pyfolio")
    import matplotlib.pyplot as plt

    def no_network(*args, **kwargs):
        raise AssertionError(f"pyfolio tried to connect to {args[1:]}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    result = backtested
    returns, positions, transactions = to_pyfolio(result)
    bench = benchmark_returns(result)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            figs = [
                pf.create_returns_tear_sheet(
                    returns,
                    positions=positions,
                    transactions=transactions,
                    benchmark_rets=bench,
                    return_fig=True,
                ),
                pf.create_position_tear_sheet(returns, positions, return_fig=True),
                pf.create_txn_tear_sheet(returns, positions, transactions, return_fig=True),
            ]
            stats = pf.timeseries.perf_stats(
                returns, positions=positions, transactions=transactions
            )
    finally:
        plt.close("all")
    for fig in figs:
        assert isinstance(fig, matplotlib.figure.Figure)
        assert sum(ax.has_data() for ax in fig.axes) >= 3
    table = result.metrics().loc[result.name]
    assert stats["Sharpe ratio"] == pytest.approx(table["sharpe"], rel=1e-9)
    assert stats["Max drawdown"] == pytest.approx(table["max_drawdown"], rel=1e-9)
    # gross leverage: the stocks' share of the account, which pyfolio reads from the rows
    held = positions[TICKERS].abs().sum(axis=1) / positions.sum(axis=1)
    assert stats["Gross leverage"] == pytest.approx(held.mean(), rel=1e-9)


@pytest.mark.parametrize("evil", ['=HYPERLINK("http://x","y")', "@SUM(A1)", "+1", "-2", "\tX"])
def test_formula_like_names_never_reach_pyfolio_frames(simulated, evil):
    result, _ = simulated
    renamed = {TICKERS[0]: evil}
    hostile = dataclasses.replace(
        result,
        positions=result.positions.rename(columns=renamed),
        prices=result.prices.rename(columns=renamed),
        trades=result.trades.replace({"tic": renamed}),
    )
    with pytest.raises(ValueError, match="spreadsheet would run it as a formula"):
        to_pyfolio(hostile)
    with pytest.raises(ValueError, match="agent name"):
        to_pyfolio(dataclasses.replace(result, agent={"name": evil}))
    returns, positions, _ = to_pyfolio(result)  # the honest names still go through
    assert list(positions.columns) == [*TICKERS, "cash"]
