"""Tear-sheet quantities against empyrical(-reloaded) and against hand-computed examples.

Tolerances: where we and empyrical compute the same formula, results differ only by the
order of floating-point sums (a window at a time here, running or vectorized there), so
we ask for agreement to 1e-12 relative (returns are ~1e-2; a few ulps of a sum of a few
hundred terms is ~1e-14).
"""

from __future__ import annotations

import math

import empyrical
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from elegantpod.finance.report import tearsheet
from elegantpod.finance.stats import metrics

TIGHT = {"rel": 1e-12, "abs": 1e-14}
DATES = pd.bdate_range("2019-01-01", periods=600)


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(0)
    bench = pd.Series(rng.normal(0.0004, 0.011, 600), index=DATES)
    agent = 0.8 * bench + pd.Series(rng.standard_t(5, 600) * 0.004 + 0.0001, index=DATES)
    return agent, bench


def test_rolling_against_empyrical(pair):
    agent, bench = pair
    for window in (126, 21):
        ours = tearsheet.rolling_sharpe(agent, periods_per_year=252, window=window)
        theirs = empyrical.roll_sharpe_ratio(agent, window)  # one value per full window
        assert ours.index.equals(agent.index)
        assert ours.iloc[: window - 1].isna().all()
        assert ours.iloc[window - 1 :].index.equals(theirs.index)
        np.testing.assert_allclose(ours.dropna(), theirs, rtol=1e-12)
        ours = tearsheet.rolling_volatility(agent, periods_per_year=252, window=window)
        theirs = empyrical.roll_annual_volatility(agent, window)
        np.testing.assert_allclose(ours.dropna(), theirs, rtol=1e-12)
        ours = tearsheet.rolling_beta(agent, bench, window=window)
        theirs = empyrical.roll_beta(agent, bench, window)
        np.testing.assert_allclose(ours.dropna(), np.asarray(theirs), rtol=1e-12)
    # fewer days than the window: nothing to show, not an error
    assert tearsheet.rolling_sharpe(agent.iloc[:50], periods_per_year=252).isna().all()


def test_rolling_sharpe_of_a_flat_window_is_nan(pair):
    agent, _ = pair
    flat = agent.copy()
    flat.iloc[100:200] = 0.0  # 100 days in cash
    ours = tearsheet.rolling_sharpe(flat, periods_per_year=252, window=50)
    # empyrical's Sharpe of a constant window is inf (or nan); ours is NaN, as in metrics,
    # so a chart or ranking never shows a "perfect" window of doing nothing
    assert ours.iloc[149:200].isna().all() and ours.iloc[200:].notna().all()


def test_alpha_beta_against_empyrical(pair):
    agent, bench = pair
    for rf in (0.0, 0.0001):
        alpha, beta = tearsheet.alpha_beta(agent, bench, periods_per_year=252, risk_free=rf)
        e_alpha, e_beta = empyrical.alpha_beta(agent, bench, risk_free=rf)
        # the same convention: alpha compounded, (1 + daily alpha)^252 - 1
        assert alpha == pytest.approx(e_alpha, **TIGHT)
        assert beta == pytest.approx(e_beta, **TIGHT)
    assert beta == pytest.approx(0.8, abs=0.05)  # what the fixture built in
    alpha, beta = tearsheet.alpha_beta(bench, bench, periods_per_year=252)
    assert beta == pytest.approx(1.0) and alpha == pytest.approx(0.0, abs=1e-15)
    flat = pd.Series(0.001, index=DATES)
    assert all(map(math.isnan, tearsheet.alpha_beta(agent, flat, periods_per_year=252)))


def test_information_ratio_and_tracking_error(pair):
    agent, bench = pair
    ir = tearsheet.information_ratio(agent, bench, periods_per_year=252)
    # empyrical's excess_sharpe is the same ratio per period; we annualize it
    assert ir == pytest.approx(empyrical.excess_sharpe(agent, bench) * math.sqrt(252), **TIGHT)
    te = tearsheet.tracking_error(agent, bench, periods_per_year=252)
    assert te == pytest.approx(empyrical.annual_volatility(agent - bench), **TIGHT)
    assert ir == pytest.approx(metrics.sharpe_ratio(agent - bench, periods_per_year=252))
    assert math.isnan(tearsheet.information_ratio(bench, bench, periods_per_year=252))


def test_excess_return(pair):
    agent, bench = pair
    ex = tearsheet.excess_return(agent, bench)
    assert ex.index.equals(agent.index)
    want = (1 + empyrical.cum_returns_final(agent)) / (1 + empyrical.cum_returns_final(bench)) - 1
    assert ex.iloc[-1] == pytest.approx(want, rel=1e-10)
    assert ex.iloc[0] == pytest.approx((1 + agent.iloc[0]) / (1 + bench.iloc[0]) - 1)
    assert (tearsheet.excess_return(bench, bench) == 0).all()


def test_return_stats_against_empyrical_and_scipy(pair):
    agent, _ = pair
    s = tearsheet.return_stats(agent)
    assert s["var"] == pytest.approx(empyrical.value_at_risk(agent, cutoff=0.05), **TIGHT)
    # same sign (a return) and the same days averaged, without ties at the cutoff
    assert s["cvar"] == pytest.approx(
        empyrical.conditional_value_at_risk(agent, cutoff=0.05), **TIGHT
    )
    assert s["cvar"] < s["var"] < 0
    assert s["skew"] == pytest.approx(stats.skew(agent), **TIGHT)
    assert s["kurtosis"] == pytest.approx(stats.kurtosis(agent), **TIGHT)  # excess
    months = empyrical.aggregate_returns(agent, "monthly")
    np.testing.assert_allclose(tearsheet.monthly_returns(agent), months, rtol=1e-10)
    assert s["best_month"] == pytest.approx(months.max(), rel=1e-10)
    assert s["worst_month"] == pytest.approx(months.min(), rel=1e-10)
    assert s["best_day"] == agent.max() and s["worst_day"] == agent.min()
    assert s["win_rate"] == pytest.approx((agent > 0).mean())
    # days in cash count as days not won
    cash = pd.Series([0.01, 0.0, 0.0, -0.01], index=DATES[:4])
    assert tearsheet.return_stats(cash)["win_rate"] == 0.25
    flat = tearsheet.return_stats(pd.Series(0.0, index=DATES[:30]))
    assert math.isnan(flat["skew"]) and flat["var"] == 0.0 and flat["win_rate"] == 0.0


def test_drawdown_periods_by_hand():
    d = pd.bdate_range("2020-01-01", periods=12)
    values = pd.Series([100, 90, 95, 100, 110, 99, 88, 99, 121, 120, 110, 115.0], index=d)
    table = tearsheet.drawdown_periods(values)
    assert list(table.columns) == ["peak", "valley", "recovery", "depth", "duration"]
    # deepest first: 110 -> 88 (-20%), recovered on the day it passes 110
    first = table.iloc[0]
    assert (first.peak, first.valley, first.recovery) == (d[4], d[6], d[8])
    assert first.depth == pytest.approx(-0.2) and first.duration == 4
    # a first-day loss is a drawdown from the starting value
    second = table.iloc[1]
    assert (second.peak, second.valley, second.recovery) == (d[0], d[1], d[3])
    assert second.depth == pytest.approx(-0.1) and second.duration == 3
    # not recovered by the last day: NaT, duration to the last day
    third = table.iloc[2]
    assert (third.peak, third.valley) == (d[8], d[10]) and pd.isna(third.recovery)
    assert third.depth == pytest.approx(110 / 121 - 1) and third.duration == 3
    assert len(tearsheet.drawdown_periods(values, top=2)) == 2
    rising = tearsheet.drawdown_periods(pd.Series([1.0, 2.0, 3.0], index=d[:3]))
    assert rising.empty and list(rising.columns) == list(table.columns)


def test_worst_drawdown_is_the_max_drawdown(pair):
    agent, _ = pair
    start = DATES[0] - pd.offsets.BDay(1)
    values = pd.Series(
        np.concatenate([[1.0], np.cumprod(1 + agent.to_numpy())]),
        index=DATES.insert(0, start),
    )
    table = tearsheet.drawdown_periods(values, top=10)
    assert table.depth.iloc[0] == pytest.approx(empyrical.max_drawdown(agent), rel=1e-10)
    assert table.depth.is_monotonic_increasing  # deepest first
    # periods never overlap: each starts at or after the previous one's recovery
    spans = table.sort_values("peak")
    assert (spans.peak.iloc[1:].to_numpy() >= spans.recovery.iloc[:-1].to_numpy()).all()


def test_positions():
    d = pd.bdate_range("2021-03-01", periods=3)
    shares = pd.DataFrame({"A": [0, 10, 10], "B": [0, 0, 30]}, index=d)
    prices = pd.DataFrame({"A": [50.0, 50.0, 60.0], "B": [10.0, 10.0, 10.0]}, index=d)
    account = pd.Series([1000.0, 1000.0, 1100.0], index=d)
    w = tearsheet.position_weights(shares, prices, account)
    np.testing.assert_allclose(w.to_numpy(), [[0, 0], [0.5, 0], [600 / 1100, 300 / 1100]])
    e = tearsheet.exposure(w)
    np.testing.assert_allclose(e["gross"], [0, 0.5, 900 / 1100])
    np.testing.assert_allclose(e["cash"], [1, 0.5, 200 / 1100])  # cash / account value
    c = tearsheet.concentration(w)
    np.testing.assert_allclose(c["largest"], [0, 0.5, 600 / 1100])
    # Herfindahl of the invested money: one name is 1; 2/3 and 1/3 is 5/9
    assert math.isnan(c["herfindahl"].iloc[0])
    np.testing.assert_allclose(c["herfindahl"].iloc[1:], [1.0, 5 / 9])
    np.testing.assert_allclose(c["effective_holdings"].iloc[1:], [1.0, 9 / 5])
    with pytest.raises(ValueError, match="same dates and tickers"):
        tearsheet.position_weights(shares, prices[["B", "A"]], account)


def test_inputs_are_checked(pair):
    agent, bench = pair
    with pytest.raises(ValueError, match="share one index"):
        tearsheet.alpha_beta(agent, bench.iloc[1:], periods_per_year=252)
    bad = agent.copy()
    bad.iloc[3] = np.nan
    with pytest.raises(ValueError, match="nan at 2019-01-04"):
        tearsheet.rolling_sharpe(bad, periods_per_year=252)
    with pytest.raises(ValueError, match="window"):
        tearsheet.rolling_sharpe(agent, periods_per_year=252, window=1)
    with pytest.raises(ValueError, match="periods_per_year"):
        tearsheet.tracking_error(agent, bench, periods_per_year=0)
    with pytest.raises(ValueError, match="top"):
        tearsheet.drawdown_periods(agent + 1, top=0)
