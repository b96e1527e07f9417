"""What a tear sheet shows, computed from daily returns, positions and prices.

The items of a pyfolio or quantstats tear sheet, as small pure functions the HTML report
(and a notebook) calls: rolling Sharpe ratio, volatility and beta; alpha and beta,
information ratio and tracking error against a benchmark; the excess return over it;
the worst drawdown periods; exposure, cash and position weights; concentration and the
largest position (a bet on one stock flagged in words); the return distribution; monthly
returns.

Conventions, shared with :mod:`elegantpod.finance.stats.metrics` (whose definitions follow
empyrical): simple per-period returns in a :class:`pandas.Series` indexed by dates,
zero risk-free rate unless given, sample standard deviations (``ddof=1``), annualized
with ``periods_per_year`` (keyword-only, no default: see ``metrics``). Where empyrical
has the same quantity we agree with it (``tests/finance/report/test_tearsheet.py`` checks);
where we differ, the function says how. Skewness and kurtosis are the moments of the
observed returns (``ddof=0``), the ones the probabilistic Sharpe ratio of
:mod:`elegantpod.finance.stats.selection` uses, so a report shows one definition of each.

Returns must be finite: a NaN means a gap upstream and raises ``ValueError``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike

DEFAULT_WINDOW = 126
"""Rolling window in trading days: half a year, long enough that a Sharpe ratio is not
pure noise, short enough to show regimes (pyfolio's default is the same)."""


# ---------------------------------------------------------------------------- checks
def _series(x: ArrayLike, name: str) -> pd.Series:
    """``x`` as a float64 Series (an array gets a RangeIndex), checked finite."""
    s = x.astype(np.float64) if isinstance(x, pd.Series) else pd.Series(x, dtype=np.float64)
    if s.ndim != 1 or len(s) == 0:
        raise ValueError(f"{name} must be a non-empty series")
    bad = ~np.isfinite(s.to_numpy())
    if bad.any():
        i = int(np.argmax(bad))
        label = s.index[i]
        if isinstance(label, pd.Timestamp) and label == label.normalize():
            label = f"{label:%Y-%m-%d}"
        raise ValueError(f"{name} must be finite: {float(s.iloc[i])!r} at {label}")
    return s


def _pair(returns: ArrayLike, benchmark: ArrayLike) -> tuple[pd.Series, pd.Series]:
    r, b = _series(returns, "returns"), _series(benchmark, "benchmark")
    if not r.index.equals(b.index):
        raise ValueError(
            f"returns ({len(r)} periods) and benchmark ({len(b)}) must share one index: "
            "align them first (our backtests' are the same days)"
        )
    return r, b


def _ppy(periods_per_year: float) -> float:
    if not periods_per_year > 0:
        raise ValueError(f"periods_per_year must be positive, got {periods_per_year!r}")
    return float(periods_per_year)


def _window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, int | np.integer) or window < 2:
        raise ValueError(f"window must be an integer >= 2, got {window!r}")
    return int(window)


def _rolled(index: pd.Index, window: int, values: np.ndarray) -> pd.Series:
    """One value per full window, dated by its last day; NaN before the first one."""
    out = np.full(len(index), np.nan)
    out[window - 1 :] = values
    return pd.Series(out, index=index)


# ---------------------------------------------------------------------------- rolling
def _windows(x: np.ndarray, window: int) -> np.ndarray:
    if len(x) < window:
        return np.empty((0, window))
    return sliding_window_view(x, window)


def rolling_volatility(
    returns: ArrayLike, *, periods_per_year: float, window: int = DEFAULT_WINDOW
) -> pd.Series:
    """Annualized volatility over each trailing ``window`` periods.

    ``std(r, ddof=1) * sqrt(periods_per_year)`` per window, dated by the window's last
    day; NaN for the first ``window - 1`` days (an all-NaN series if there are fewer).
    Each window is computed directly rather than by running sums, which lose digits
    over long series.
    """
    r = _series(returns, "returns")
    w = _windows(r.to_numpy(), _window(window))
    return _rolled(r.index, window, w.std(axis=1, ddof=1) * math.sqrt(_ppy(periods_per_year)))


def rolling_sharpe(
    returns: ArrayLike, *, periods_per_year: float, window: int = DEFAULT_WINDOW
) -> pd.Series:
    """Annualized Sharpe ratio over each trailing ``window`` periods.

    As :func:`~elegantpod.finance.stats.metrics.sharpe_ratio` of the window: NaN for a window
    without variation (an agent sitting in cash), where empyrical gives ``inf``.
    """
    r = _series(returns, "returns")
    w = _windows(r.to_numpy(), _window(window))
    std = w.std(axis=1, ddof=1)
    std[w.max(axis=1) == w.min(axis=1)] = np.nan
    return _rolled(r.index, window, w.mean(axis=1) / std * math.sqrt(_ppy(periods_per_year)))


def rolling_beta(
    returns: ArrayLike, benchmark: ArrayLike, *, window: int = DEFAULT_WINDOW
) -> pd.Series:
    """Beta to ``benchmark`` over each trailing ``window`` periods, ``cov(r, b) / var(b)``.

    NaN for a window in which the benchmark does not move (no beta to measure).
    """
    r, b = _pair(returns, benchmark)
    wr, wb = _windows(r.to_numpy(), _window(window)), _windows(b.to_numpy(), window)
    cb = wb - wb.mean(axis=1, keepdims=True)
    var = np.mean(cb**2, axis=1)
    var[wb.max(axis=1) == wb.min(axis=1)] = np.nan
    return _rolled(r.index, window, np.mean(cb * wr, axis=1) / var)


# ---------------------------------------------------------------------------- vs benchmark
def alpha_beta(
    returns: ArrayLike, benchmark: ArrayLike, *, periods_per_year: float, risk_free: float = 0.0
) -> tuple[float, float]:
    """Annualized alpha and beta of ``returns`` against ``benchmark`` (CAPM regression).

    ``beta = cov(r - rf, b - rf) / var(b - rf)`` and the per-period alpha is the mean of
    ``(r - rf) - beta (b - rf)``, annualized by compounding, ``(1 + alpha)^ppy - 1``, as
    empyrical and pyfolio report it, so the number matches a pyfolio tear sheet (the
    arithmetic ``alpha * ppy`` differs by a few basis points at typical sizes).

    Parameters
    ----------
    returns, benchmark : pandas.Series
        Simple per-period returns on the same dates.
    periods_per_year : float
        Periods in a year.
    risk_free : float, default 0.0
        Risk-free return per period.

    Returns
    -------
    (float, float)
        ``(alpha, beta)``; NaN for fewer than 2 periods or a benchmark that never moves.
    """
    r, b = _pair(returns, benchmark)
    ppy = _ppy(periods_per_year)
    if len(r) < 2 or b.max() == b.min():
        return math.nan, math.nan
    ar, ab = r.to_numpy() - risk_free, b.to_numpy() - risk_free
    cb = ab - ab.mean()
    beta = float(np.mean(cb * ar) / np.mean(cb**2))
    alpha = float(np.mean(ar - beta * ab))
    return float((1.0 + alpha) ** ppy - 1.0), beta


def tracking_error(returns: ArrayLike, benchmark: ArrayLike, *, periods_per_year: float) -> float:
    """Annualized standard deviation of the active return ``r - b`` (``ddof=1``).

    How far the strategy strays from the benchmark, a year at a time; empyrical's
    ``annual_volatility`` of the active return. NaN for fewer than 2 periods.
    """
    r, b = _pair(returns, benchmark)
    if len(r) < 2:
        return math.nan
    return float((r - b).std(ddof=1) * math.sqrt(_ppy(periods_per_year)))


def information_ratio(
    returns: ArrayLike, benchmark: ArrayLike, *, periods_per_year: float
) -> float:
    """Annualized information ratio, ``mean(r - b) / std(r - b, ddof=1) * sqrt(ppy)``.

    The Sharpe ratio of the active return: reward per unit of tracking error. empyrical's
    ``excess_sharpe`` is the same ratio per period; we annualize it like every other ratio
    in the report. NaN when the active return never varies (it tracks exactly).
    """
    r, b = _pair(returns, benchmark)
    active = (r - b).to_numpy()
    if len(active) < 2 or active.max() == active.min():
        return math.nan
    return float(active.mean() / active.std(ddof=1) * math.sqrt(_ppy(periods_per_year)))


def excess_return(returns: ArrayLike, benchmark: ArrayLike) -> pd.Series:
    """Cumulative excess return: the strategy's wealth over the benchmark's, minus 1.

    ``prod(1 + r) / prod(1 + b) - 1`` up to each day: the strategy's value measured in
    units of the benchmark. Unlike the difference of cumulative returns it compounds
    correctly (0.10 means 10% more money than the benchmark would have made), and its
    drawdowns are the periods the strategy lost ground against it.
    """
    r, b = _pair(returns, benchmark)
    return np.expm1(np.log1p(r).cumsum() - np.log1p(b).cumsum())


# ---------------------------------------------------------------------------- drawdowns
def drawdown_periods(values: pd.Series, top: int = 5) -> pd.DataFrame:
    """The ``top`` deepest drawdown periods of an account, deepest first.

    A period runs from a peak (a value at the running maximum) through its lowest point
    (the valley) to the first day the value is back at that peak (the recovery). Periods
    never overlap: each is one stretch below the running maximum, as in pyfolio.

    Parameters
    ----------
    values : pandas.Series
        Account values (or any positive wealth index) by date, the first one the
        starting value, so a loss on the first day is a drawdown from it.
    top : int, default 5
        How many periods to return (fewer if there are fewer).

    Returns
    -------
    pandas.DataFrame
        Columns ``peak``, ``valley``, ``recovery`` (dates; ``NaT`` while not recovered
        by the last day), ``depth`` (the fall from the peak to the valley, a negative
        fraction) and ``duration`` (trading days from the peak to the recovery, or to
        the last day when not recovered).
    """
    v = _series(values, "values")
    if (v <= 0).any():
        raise ValueError("values must be positive")
    if isinstance(top, bool) or not isinstance(top, int | np.integer) or top < 1:
        raise ValueError(f"top must be an integer >= 1, got {top!r}")
    x = v.to_numpy()
    # Compare in logs against the running peak: exact for a value back at its peak.
    logs = np.log(x)
    dd = logs - np.maximum.accumulate(logs)
    under = dd < 0
    edges = np.diff(np.concatenate([[0], under.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # ends: exclusive
    depth = np.minimum.reduceat(dd, starts) if len(starts) else np.empty(0)
    order = np.argsort(depth, kind="stable")[:top]
    rows = []
    dates = v.index
    for k in order:
        s, e = starts[k], ends[k]
        valley = s + int(np.argmin(dd[s:e]))
        recovered = e < len(x)
        rows.append(
            {
                "peak": dates[s - 1],  # the day before the first one below it
                "valley": dates[valley],
                "recovery": dates[e] if recovered else pd.NaT,
                "depth": float(np.expm1(depth[k])),
                "duration": int((e if recovered else len(x) - 1) - (s - 1)),
            }
        )
    frame = pd.DataFrame(rows, columns=["peak", "valley", "recovery", "depth", "duration"])
    day = v.index.dtype if isinstance(v.index, pd.DatetimeIndex) else "datetime64[ns]"
    return frame.astype(
        {"peak": day, "valley": day, "recovery": day, "depth": "float64", "duration": "int64"}
    )


# ---------------------------------------------------------------------------- positions
def position_weights(
    positions: pd.DataFrame, prices: pd.DataFrame, account_value: pd.Series
) -> pd.DataFrame:
    """Each holding's value as a fraction of the account value, per day.

    Parameters
    ----------
    positions : pandas.DataFrame
        Shares held at each day's close (dates x tickers).
    prices : pandas.DataFrame
        Close prices, the same dates and tickers.
    account_value : pandas.Series
        Cash plus holdings at each close, the same dates.

    Returns
    -------
    pandas.DataFrame
        Dates x tickers. ``1 - weights.sum(axis=1)`` is the cash fraction: see
        :func:`exposure`.
    """
    if not (positions.index.equals(prices.index) and positions.columns.equals(prices.columns)):
        raise ValueError("positions and prices must have the same dates and tickers")
    if not positions.index.equals(account_value.index):
        raise ValueError("positions and account_value must have the same dates")
    account = _series(account_value, "account_value")
    if (account <= 0).any():
        raise ValueError("account values must be positive")
    held = positions.to_numpy(dtype=np.float64) * prices.to_numpy(dtype=np.float64)
    if not np.isfinite(held).all():
        raise ValueError("positions or prices contain NaN or inf")
    return pd.DataFrame(
        held / account.to_numpy()[:, None], index=positions.index, columns=positions.columns
    )


def exposure(weights: pd.DataFrame) -> pd.DataFrame:
    """Gross and net invested fractions and the cash fraction, per day.

    ``gross = sum |w|`` (what is at risk in the market), ``net = sum w`` and
    ``cash = 1 - net`` (cash over the account value: the account is holdings plus cash).
    Without short positions gross and net are equal. pyfolio's gross leverage is the
    same ``gross``.
    """
    w = weights.to_numpy(dtype=np.float64)
    net = w.sum(axis=1)
    return pd.DataFrame(
        {"gross": np.abs(w).sum(axis=1), "net": net, "cash": 1.0 - net}, index=weights.index
    )


def concentration(weights: pd.DataFrame) -> pd.DataFrame:
    """How concentrated the holdings are, per day.

    Returns
    -------
    pandas.DataFrame
        ``largest``: the largest absolute weight, a fraction of the account (the most
        one name can lose you); ``herfindahl``: ``sum(s_i^2)`` over the holdings' shares
        ``s_i = |w_i| / sum |w|`` of the *invested* money, from ``1/N`` (equal weights in
        N names) to 1 (one name); leaving cash out keeps it a measure of concentration,
        not of exposure; ``effective_holdings``: ``1 / herfindahl``, the number of equal
        positions with that concentration. NaN on days nothing is held.
    """
    a = np.abs(weights.to_numpy(dtype=np.float64))
    gross = a.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = a / gross[:, None]
        hhi = np.where(gross > 0, (share**2).sum(axis=1), np.nan)
    largest = a.max(axis=1) if a.shape[1] else np.zeros(len(a))
    return pd.DataFrame(
        {"largest": largest, "herfindahl": hhi, "effective_holdings": 1.0 / hhi},
        index=weights.index,
    )


# ---------------------------------------------------------------------------- distribution
def monthly_returns(returns: pd.Series) -> pd.Series:
    """Compounded return of each calendar month with a return in it, ``prod(1 + r) - 1``.

    Indexed by month (a monthly :class:`pandas.PeriodIndex`); empyrical's
    ``aggregate_returns(returns, "monthly")`` gives the same values.
    """
    r = _series(returns, "returns")
    if not isinstance(r.index, pd.DatetimeIndex):
        raise ValueError("returns must be indexed by dates for monthly returns")
    months = r.index.to_period("M")
    return np.expm1(np.log1p(r).groupby(months).sum())


def return_stats(returns: pd.Series, *, level: float = 0.95) -> dict[str, float]:
    """The shape of the return distribution, for a tear sheet's table.

    Parameters
    ----------
    returns : pandas.Series
        Daily simple returns indexed by dates (months are calendar months).
    level : float, default 0.95
        Confidence level of the value at risk.

    Returns
    -------
    dict
        ``skew`` and ``kurtosis`` (excess: 0 for a normal distribution), the moments of
        the observed returns (``ddof=0``, as ``scipy.stats``); ``var``: the historical
        value at risk, the ``1 - level`` quantile of the returns with linear
        interpolation (a return, negative for a loss: the sign and interpolation of
        empyrical's ``value_at_risk``); ``cvar``: the mean of the returns at or below
        ``var``, the average of the bad days VaR does not describe (equal to empyrical's
        ``conditional_value_at_risk`` unless returns tie at the cutoff); ``best_day``,
        ``worst_day``, ``best_month``, ``worst_month`` (compounded calendar months);
        ``win_rate``: the share of days with a positive return, over *all* days, so
        days in cash count as not winning (quantstats leaves zero days out).
    """
    r = _series(returns, "returns")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    x = r.to_numpy()
    skew = kurtosis = math.nan
    if x.max() > x.min():
        c = x - x.mean()
        m2 = float(np.mean(c**2))
        skew = float(np.mean(c**3)) / m2**1.5
        kurtosis = float(np.mean(c**4)) / m2**2 - 3.0
    var = float(np.quantile(x, 1.0 - level))
    months = monthly_returns(r)
    return {
        "skew": skew,
        "kurtosis": kurtosis,
        "var": var,
        "cvar": float(x[x <= var].mean()),
        "best_day": float(x.max()),
        "worst_day": float(x.min()),
        "best_month": float(months.max()),
        "worst_month": float(months.min()),
        "win_rate": float(np.mean(x > 0)),
    }
