"""Finance metrics: against empyrical-reloaded on random series, and by hand on tiny ones."""

import math

import empyrical
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from elegantpod.finance.stats.metrics import (
    METRICS,
    annual_return,
    annual_volatility,
    calmar_ratio,
    cumulative_return,
    drawdown_series,
    max_drawdown,
    monthly_returns,
    returns_from_values,
    sharpe_ratio,
    sortino_ratio,
    summary,
)

RTOL = 1e-10
# Absolute slack only for values that are themselves ~0, where a relative bound is meaningless.
ATOL = 1e-14


def _random_returns(seed: int, ppy: int, shape) -> np.ndarray:
    """Fat-tailed returns with a drift, scaled to the period length; first period a loss."""
    rng = np.random.default_rng(seed)
    scale = 0.2 / math.sqrt(ppy)
    r = 0.1 / ppy + scale * rng.standard_t(df=4, size=shape)
    r = np.clip(r, -0.9, None)
    r[0] = -abs(r[0])
    return r


CASES = [
    (seed, ppy, shape)
    for seed in (0, 1, 2)
    for ppy in (252, 12)
    for shape in ((2,), (37,), (1000,), (250, 4))
]


def _case_id(case):
    seed, ppy, shape = case
    return f"seed{seed}-ppy{ppy}-{'x'.join(map(str, shape))}"


@pytest.fixture(params=CASES, ids=[_case_id(c) for c in CASES])
def case(request):
    seed, ppy, shape = request.param
    return _random_returns(seed, ppy, shape), ppy


# --- against empyrical ---------------------------------------------------------------


def test_returns_from_values_matches_empyrical():
    rng = np.random.default_rng(3)
    values = 100 * np.cumprod(1 + rng.normal(0, 0.01, size=(300, 3)), axis=0)
    assert_allclose(returns_from_values(values), empyrical.simple_returns(values), rtol=RTOL)


def test_cumulative_return_matches_empyrical(case):
    r, _ = case
    expected = empyrical.cum_returns_final(r)
    assert_allclose(cumulative_return(r), expected, rtol=RTOL, atol=ATOL)


def test_annual_return_matches_empyrical(case):
    r, ppy = case
    expected = empyrical.annual_return(r, annualization=ppy)
    assert_allclose(annual_return(r, periods_per_year=ppy), expected, rtol=RTOL, atol=ATOL)


def test_annual_volatility_matches_empyrical(case):
    r, ppy = case
    expected = empyrical.annual_volatility(r, annualization=ppy)
    assert_allclose(annual_volatility(r, periods_per_year=ppy), expected, rtol=RTOL)


def test_drawdowns_match_empyrical(case):
    r, _ = case
    assert_allclose(drawdown_series(r), empyrical.stats.drawdown_series(r), rtol=RTOL, atol=ATOL)
    assert_allclose(max_drawdown(r), empyrical.max_drawdown(r), rtol=RTOL, atol=ATOL)


def test_sharpe_ratio_matches_empyrical(case):
    r, ppy = case
    for rf in (0.0, 0.01 / ppy):
        expected = empyrical.sharpe_ratio(r, risk_free=rf, annualization=ppy)
        got = sharpe_ratio(r, periods_per_year=ppy, risk_free=rf)
        assert_allclose(got, expected, rtol=RTOL)


def test_sortino_ratio_matches_empyrical(case):
    r, ppy = case
    for req in (0.0, 0.05 / ppy):
        expected = empyrical.sortino_ratio(r, required_return=req, annualization=ppy)
        got = sortino_ratio(r, periods_per_year=ppy, required_return=req)
        assert_allclose(got, expected, rtol=RTOL)


def test_calmar_ratio_matches_empyrical(case):
    r, ppy = case
    # empyrical's calmar_ratio takes one series at a time.
    columns = r.reshape(len(r), -1).T
    expected = [empyrical.calmar_ratio(c, annualization=ppy) for c in columns]
    got = np.atleast_1d(calmar_ratio(r, periods_per_year=ppy))
    assert_allclose(got, expected, rtol=RTOL)


def test_monthly_returns_match_empyrical_aggregate():
    rng = np.random.default_rng(4)
    index = pd.bdate_range("2023-11-13", "2025-02-20")
    values = pd.Series(100 * np.cumprod(1 + rng.normal(0, 0.01, len(index))), index=index)
    table = monthly_returns(values)
    # empyrical aggregates the daily returns, whose first one is measured from the first value.
    expected = empyrical.aggregate_returns(values.pct_change().iloc[1:], "monthly")
    got = table.stack().dropna()
    assert list(got.index) == list(expected.index)
    assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=RTOL)


def test_zero_downside_sortino_matches_empyrical():
    for r in (np.array([0.01, 0.02, 0.03]), np.zeros(4)):
        expected = empyrical.sortino_ratio(r, annualization=252)
        assert_allclose(sortino_ratio(r, periods_per_year=252), expected)


# --- shapes, types, pandas -----------------------------------------------------------


def test_one_series_gives_floats_many_give_arrays():
    r = _random_returns(5, 252, (50, 3))
    one = summary(r[:, 0], periods_per_year=252)
    many = summary(r, periods_per_year=252)
    assert tuple(one) == METRICS == tuple(many)
    for key in METRICS:
        assert type(one[key]) is float
        assert isinstance(many[key], np.ndarray) and many[key].shape == (3,)
        assert_allclose(many[key][0], one[key], rtol=1e-13)


def test_summary_agrees_with_the_functions():
    r = _random_returns(6, 12, (60,))
    s = summary(r, periods_per_year=12)
    assert s["cumulative_return"] == cumulative_return(r)
    assert s["annual_return"] == annual_return(r, periods_per_year=12)
    assert s["annual_volatility"] == annual_volatility(r, periods_per_year=12)
    assert s["max_drawdown"] == max_drawdown(r)
    assert s["sharpe"] == sharpe_ratio(r, periods_per_year=12)
    assert s["calmar"] == calmar_ratio(r, periods_per_year=12)
    assert s["sortino"] == sortino_ratio(r, periods_per_year=12)


def test_pandas_inputs_are_accepted():
    r = _random_returns(7, 252, (40, 2))
    frame = pd.DataFrame(r, index=pd.bdate_range("2024-01-01", periods=40), columns=["a", "b"])
    assert_allclose(
        sharpe_ratio(frame, periods_per_year=252), sharpe_ratio(r, periods_per_year=252)
    )
    assert sharpe_ratio(frame["a"], periods_per_year=252) == sharpe_ratio(
        r[:, 0], periods_per_year=252
    )


def test_periods_per_year_is_required():
    r = [0.01, -0.02, 0.03]
    for fn in (
        annual_return,
        annual_volatility,
        sharpe_ratio,
        sortino_ratio,
        calmar_ratio,
        summary,
    ):
        with pytest.raises(TypeError):
            fn(r)
        with pytest.raises(TypeError):
            fn(r, 252)  # keyword-only


# --- by hand -------------------------------------------------------------------------


def test_tiny_series_by_hand():
    r = [0.1, -0.2, 0.05]
    ppy = 12
    # Wealth from 1: 1.1, then 1.1 * 0.8 = 0.88, then 0.88 * 1.05 = 0.924.
    assert cumulative_return(r) == pytest.approx(0.924 - 1, rel=1e-12)
    # Three months are a quarter of a year: the CAGR compounds the quarter four times.
    cagr = 0.924**4 - 1
    assert annual_return(r, periods_per_year=ppy) == pytest.approx(cagr, rel=1e-12)
    # Peak 1.1 after the first month; 0.88 / 1.1 - 1 = -0.2; 0.924 / 1.1 - 1 = -0.16.
    assert_allclose(drawdown_series(r), [0.0, -0.2, -0.16], rtol=1e-12, atol=1e-15)
    assert max_drawdown(r) == pytest.approx(-0.2, rel=1e-12)
    assert calmar_ratio(r, periods_per_year=ppy) == pytest.approx(cagr / 0.2, rel=1e-12)

    mean = (0.1 - 0.2 + 0.05) / 3
    var = ((0.1 - mean) ** 2 + (-0.2 - mean) ** 2 + (0.05 - mean) ** 2) / (3 - 1)
    vol = math.sqrt(var) * math.sqrt(ppy)
    assert annual_volatility(r, periods_per_year=ppy) == pytest.approx(vol, rel=1e-12)
    assert sharpe_ratio(r, periods_per_year=ppy) == pytest.approx(
        mean / math.sqrt(var) * math.sqrt(ppy), rel=1e-12
    )
    # Only -0.2 falls short of 0; the mean of squared shortfalls is over all 3 months.
    downside = math.sqrt((0.0 + 0.2**2 + 0.0) / 3) * math.sqrt(ppy)
    assert sortino_ratio(r, periods_per_year=ppy) == pytest.approx(mean * ppy / downside, rel=1e-12)


def test_risk_free_and_required_return_shift_by_hand():
    r = np.array([0.03, 0.01, 0.02])
    # Excess over 0.01: 0.02, 0, 0.01 -> mean 0.01, sample std 0.01.
    assert sharpe_ratio(r, periods_per_year=4, risk_free=0.01) == pytest.approx(0.01 / 0.01 * 2)
    # Excess over 0.02: 0.01, -0.01, 0 -> mean 0, so the Sortino ratio is 0.
    assert sortino_ratio(r, periods_per_year=4, required_return=0.02) == pytest.approx(0.0)


def test_first_period_loss_is_a_drawdown():
    # From 1: 0.9 (10% below the starting peak), then 0.9 * 1.05 = 0.945.
    assert_allclose(drawdown_series([-0.1, 0.05]), [-0.1, 0.945 - 1], rtol=1e-12)
    assert max_drawdown([-0.1, 0.05]) == pytest.approx(-0.1, rel=1e-12)


def test_drawdowns_of_many_series_by_hand():
    r = np.array([[0.1, -0.5], [-0.1, 1.0], [0.0, 0.5]])
    # Column 0: 1.1, 0.99, 0.99 (peak 1.1). Column 1: 0.5, 1.0, 1.5 (peak 1, then 1.5).
    expected = [[0.0, -0.5], [0.99 / 1.1 - 1, 0.0], [0.99 / 1.1 - 1, 0.0]]
    assert_allclose(drawdown_series(r), expected, rtol=1e-12, atol=1e-15)
    assert_allclose(max_drawdown(r), [0.99 / 1.1 - 1, -0.5], rtol=1e-12)


def test_total_loss():
    assert_allclose(drawdown_series([0.5, -1.0, 0.0]), [0.0, -1.0, -1.0])
    assert cumulative_return([0.5, -1.0]) == -1.0
    assert annual_return([0.5, -1.0], periods_per_year=12) == -1.0


def test_no_drawdown_gives_zero_and_nan_calmar():
    r = [0.01, 0.0, 0.02]
    assert max_drawdown(r) == 0.0
    assert math.isnan(calmar_ratio(r, periods_per_year=252))
    both = calmar_ratio(np.array([[0.01, -0.01], [0.02, 0.02]]), periods_per_year=252)
    assert math.isnan(both[0]) and both[1] > 0


def test_constant_returns_give_nan_sharpe():
    # std of identical values; empyrical-reloaded answers inf here, we deliberately say NaN.
    assert math.isnan(sharpe_ratio([0.01] * 5, periods_per_year=252))
    assert math.isnan(sharpe_ratio([0.0] * 5, periods_per_year=252))
    got = sharpe_ratio(np.array([[0.1, 0.01], [0.2, 0.01]]), periods_per_year=252)
    assert np.isfinite(got[0]) and math.isnan(got[1])


def test_zero_downside_sortino():
    assert sortino_ratio([0.01, 0.02], periods_per_year=252) == math.inf
    assert math.isnan(sortino_ratio([0.0, 0.0], periods_per_year=252))


def test_single_period_spreads_are_nan():
    r = [0.05]
    assert math.isnan(annual_volatility(r, periods_per_year=12))
    assert math.isnan(sharpe_ratio(r, periods_per_year=12))
    assert math.isnan(sortino_ratio(r, periods_per_year=12))
    # One month compounded twelve times.
    assert annual_return(r, periods_per_year=12) == pytest.approx(1.05**12 - 1, rel=1e-12)


def test_tiny_returns_keep_precision():
    # 1 + 1e-12 - 1 loses ~4 digits in a plain product; log1p / expm1 keeps them.
    r = np.full(3, 1e-12)
    assert cumulative_return(r) == pytest.approx(3e-12 + 3e-24, rel=1e-12)


def test_returns_from_values_by_hand_and_round_trip():
    values = np.array([100.0, 110.0, 88.0, 92.4])
    assert_allclose(returns_from_values(values), [0.1, -0.2, 0.05], rtol=1e-12)
    assert cumulative_return(returns_from_values(values)) == pytest.approx(92.4 / 100 - 1)
    many = np.column_stack([values, values[::-1]])
    assert returns_from_values(many).shape == (3, 2)


def test_monthly_returns_across_a_month_boundary():
    index = pd.to_datetime(["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-02"])
    values = pd.Series([100.0, 102.0, 99.0, 105.06], index=index)
    table = monthly_returns(values)
    assert list(table.index) == [2024]
    assert list(table.columns) == list(range(1, 13))
    # January from the first value: 102 / 100 - 1. February from January's last value.
    assert table.loc[2024, 1] == pytest.approx(0.02, rel=1e-12)
    assert table.loc[2024, 2] == pytest.approx(105.06 / 102 - 1, rel=1e-12)
    assert table.loc[2024, 3:].isna().all()


def test_monthly_returns_across_a_year_boundary():
    index = pd.to_datetime(["2023-12-28", "2023-12-29", "2024-01-02", "2024-01-03"])
    table = monthly_returns(pd.Series([100.0, 99.0, 101.0, 103.02], index=index))
    assert list(table.index) == [2023, 2024]
    # December from the first value: 99 / 100 - 1. January from December's last value.
    assert table.loc[2023, 12] == pytest.approx(-0.01, rel=1e-12)
    assert table.loc[2024, 1] == pytest.approx(103.02 / 99 - 1, rel=1e-12)
    assert table.loc[2023, :11].isna().all() and table.loc[2024, 2:].isna().all()


def test_monthly_returns_skip_a_first_month_with_only_the_first_value():
    # December holds only the starting value: no return to report, as empyrical leaves it out.
    index = pd.to_datetime(["2023-12-29", "2024-01-02", "2024-01-03"])
    table = monthly_returns(pd.Series([100.0, 101.0, 103.02], index=index))
    assert list(table.index) == [2024]
    assert table.loc[2024, 1] == pytest.approx(103.02 / 100 - 1, rel=1e-12)


# --- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([100.0, 0.0, 50.0], "positive"),
        ([100.0, -5.0], "positive"),
        ([100.0, np.nan, 90.0], "NaN"),
        ([100.0, np.inf], "NaN or inf"),
        ([100.0], "at least 2"),
        (np.ones((2, 2, 2)), "1-D"),
    ],
)
def test_returns_from_values_rejects_bad_values(values, message):
    with pytest.raises(ValueError, match=message):
        returns_from_values(values)


@pytest.mark.parametrize("name", METRICS)
def test_metrics_reject_bad_returns(name):
    fn = {
        "cumulative_return": cumulative_return,
        "annual_return": annual_return,
        "annual_volatility": annual_volatility,
        "max_drawdown": max_drawdown,
        "sharpe": sharpe_ratio,
        "calmar": calmar_ratio,
        "sortino": sortino_ratio,
    }[name]
    kwargs = {} if name in ("cumulative_return", "max_drawdown") else {"periods_per_year": 252}
    with pytest.raises(ValueError, match="NaN"):
        fn([0.01, np.nan, 0.02], **kwargs)
    with pytest.raises(ValueError, match="NaN or inf"):
        fn(np.array([[0.01, np.inf]]), **kwargs)
    with pytest.raises(ValueError, match="empty"):
        fn([], **kwargs)
    with pytest.raises(ValueError, match="below -1"):
        fn([0.01, -1.5], **kwargs)
    with pytest.raises(ValueError, match="1-D"):
        fn(np.zeros((2, 2, 2)), **kwargs)
    if kwargs:
        with pytest.raises(ValueError, match="positive"):
            fn([0.01, 0.02], periods_per_year=0)


def test_drawdown_series_and_summary_reject_nan():
    with pytest.raises(ValueError, match="NaN"):
        drawdown_series([np.nan])
    with pytest.raises(ValueError, match="NaN"):
        summary([0.01, np.nan], periods_per_year=252)


def test_monthly_returns_rejects_bad_input():
    with pytest.raises(ValueError, match="DatetimeIndex"):
        monthly_returns(pd.Series([100.0, 101.0]))
    unsorted = pd.to_datetime(["2024-01-02", "2024-01-01"])
    with pytest.raises(ValueError, match="increasing"):
        monthly_returns(pd.Series([100.0, 101.0], index=unsorted))
    dates = pd.to_datetime(["2024-01-01", "2024-01-02"])
    with pytest.raises(ValueError, match="positive"):
        monthly_returns(pd.Series([100.0, 0.0], index=dates))


# --- declared once ---------------------------------------------------------------------


def test_each_metric_is_declared_once_and_every_list_reads_the_declaration():
    """A metric's name, function, label, unit and whether pods may be ranked by it are
    one line of ``DECLARED``: the summary, the metrics table, the trading env's fitnesses
    and the report's columns all follow it."""
    from elegantpod.finance.report.report import fmt_metric
    from elegantpod.finance.stats.metrics import BY_NAME, DECLARED, FITNESS_METRICS
    from elegantpod.finance.trading.env import StockTradingEnv

    assert tuple(m.name for m in DECLARED) == METRICS and set(BY_NAME) == set(METRICS)
    r = _random_returns(7, 252, (60,))
    values = summary(r, periods_per_year=252)
    for m in DECLARED:
        assert values[m.name] == pytest.approx(m.of(r, periods_per_year=252), nan_ok=True)
        assert (m.name in FITNESS_METRICS) == m.fitness
        assert (m.name in StockTradingEnv.fitnesses) == m.fitness
        assert m.unit in ("pct", "ratio") and m.label
        shown = fmt_metric(0.1234, m.unit)
        assert shown == ("12.34%" if m.unit == "pct" else "0.12")
    # the signs say which way is better: volatility and drawdown never rank pods
    assert not BY_NAME["annual_volatility"].fitness and not BY_NAME["max_drawdown"].fitness
