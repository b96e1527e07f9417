"""Performance metrics of a trading account: returns, drawdowns and risk-adjusted ratios.

Every metric takes simple per-period returns, either one series ``(T,)`` or ``N`` series
side by side ``(T, N)`` (time-major, as the rollouts are), and reduces over time: a float
for one series, an ``(N,)`` array for many. Definitions follow empyrical(-reloaded), the
reference the tests compare against, so numbers reported here agree with what a quant
reading a pyfolio tear sheet expects.

``periods_per_year`` is keyword-only and has no default wherever a metric is annualized:
a daily Sharpe ratio annualized as if monthly is off by a factor of about 4.6 and looks
plausible, so the caller must say which it is.

Returns must be finite. Our returns come from account values, which have no gaps, so a
NaN means a bug upstream; empyrical would skip it silently, here it raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike


def _as_returns(returns: ArrayLike) -> np.ndarray:
    """``returns`` as a float64 ``(T,)`` or ``(T, N)`` array, checked once for all metrics."""
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim not in (1, 2):
        raise ValueError(f"returns must be 1-D (T,) or 2-D (T, N), got shape {r.shape}")
    if r.shape[0] == 0:
        raise ValueError("returns are empty: need at least one period")
    if not np.isfinite(r).all():
        raise ValueError("returns contain NaN or inf; account values should have no gaps")
    if (r < -1.0).any():
        raise ValueError("returns below -1 (a loss of more than 100%) are impossible")
    return r


def _check_periods(periods_per_year: float) -> float:
    if not periods_per_year > 0:
        raise ValueError(f"periods_per_year must be positive, got {periods_per_year!r}")
    return float(periods_per_year)


def _result(x, r: np.ndarray):
    """A float for one series, an ``(N,)`` array for many."""
    return float(x) if r.ndim == 1 else np.asarray(x, dtype=np.float64)


def _nan_like(r: np.ndarray) -> np.ndarray:
    return np.full(r.shape[1:], np.nan)


def _log_growth(r: np.ndarray) -> np.ndarray:
    """Total log growth ``sum(log1p(r))``.

    Summing logs instead of multiplying ``1 + r`` keeps full relative precision when the
    cumulative return is close to zero and cannot overflow over long horizons. A total
    loss (``r == -1``) gives ``-inf``, which ``expm1`` maps back to exactly ``-1``.
    """
    with np.errstate(divide="ignore"):
        return np.log1p(r).sum(axis=0)


def returns_from_values(values: ArrayLike) -> np.ndarray:
    """Simple returns from account values.

    Parameters
    ----------
    values : array_like, shape (T+1,) or (T+1, N)
        Account values, one row per time step, starting with the initial value.

    Returns
    -------
    numpy.ndarray, shape (T,) or (T, N)
        ``values[t+1] / values[t] - 1``.

    Raises
    ------
    ValueError
        If there are fewer than 2 values or any value is non-finite or non-positive: a
        return is undefined after a value of zero, and a negative account is not one we
        can compound.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise ValueError(f"values must be 1-D (T+1,) or 2-D (T+1, N), got shape {v.shape}")
    if v.shape[0] < 2:
        raise ValueError(f"need at least 2 account values for a return, got {v.shape[0]}")
    if not np.isfinite(v).all():
        raise ValueError("account values contain NaN or inf")
    if (v <= 0).any():
        raise ValueError("account values must be positive")
    # diff / previous rather than ratio - 1: the subtraction of two nearby values is exact,
    # so small returns keep their relative precision.
    return np.diff(v, axis=0) / v[:-1]


def cumulative_return(returns: ArrayLike) -> float | np.ndarray:
    """Total compounded return, ``prod(1 + r) - 1``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.

    Returns
    -------
    float or numpy.ndarray of shape (N,)
    """
    r = _as_returns(returns)
    return _result(np.expm1(_log_growth(r)), r)


def annual_return(returns: ArrayLike, *, periods_per_year: float) -> float | np.ndarray:
    """Compound annual growth rate, ``(1 + cumulative)^(periods_per_year / T) - 1``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year (252 for trading days, 12 for months).

    Returns
    -------
    float or numpy.ndarray of shape (N,)
    """
    r = _as_returns(returns)
    ppy = _check_periods(periods_per_year)
    return _result(np.expm1(_log_growth(r) * (ppy / r.shape[0])), r)


def annual_volatility(returns: ArrayLike, *, periods_per_year: float) -> float | np.ndarray:
    """Annualized standard deviation, ``std(r, ddof=1) * sqrt(periods_per_year)``.

    The sample deviation (``ddof=1``) is undefined for one period, hence NaN when ``T < 2``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year.

    Returns
    -------
    float or numpy.ndarray of shape (N,)
    """
    r = _as_returns(returns)
    ppy = _check_periods(periods_per_year)
    if r.shape[0] < 2:
        return _result(_nan_like(r), r)
    return _result(r.std(axis=0, ddof=1) * np.sqrt(ppy), r)


def drawdown_series(returns: ArrayLike) -> np.ndarray:
    """Drawdown after each period: the fall from the running peak, as a fraction of it.

    The peak starts at the initial account value, so a loss in the first period is a
    drawdown (as in empyrical), not a new peak.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.

    Returns
    -------
    numpy.ndarray, shape (T,) or (T, N)
        Values in ``[-1, 0]``; exactly 0 at a new peak.
    """
    r = _as_returns(returns)
    with np.errstate(divide="ignore"):
        log_wealth = np.cumsum(np.log1p(r), axis=0)
    # Log wealth of the starting value is 0; the peak can only rise from there.
    log_peak = np.maximum(np.maximum.accumulate(log_wealth, axis=0), 0.0)
    # After a total loss log wealth is -inf and stays there: expm1(-inf) is a drawdown of -1.
    return np.expm1(log_wealth - log_peak)


def max_drawdown(returns: ArrayLike) -> float | np.ndarray:
    """Largest drawdown, ``min(drawdown_series(returns))``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.

    Returns
    -------
    float or numpy.ndarray of shape (N,)
        A negative fraction (-0.25 for a 25% fall), or 0 if the account never fell
        below a previous peak.
    """
    r = _as_returns(returns)
    return _result(drawdown_series(r).min(axis=0), r)


def sharpe_ratio(
    returns: ArrayLike, *, periods_per_year: float, risk_free: float = 0.0
) -> float | np.ndarray:
    """Annualized Sharpe ratio, ``mean(r - rf) / std(r - rf, ddof=1) * sqrt(periods_per_year)``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year.
    risk_free : float, default 0.0
        Risk-free return per period (not per year).

    Returns
    -------
    float or numpy.ndarray of shape (N,)
        NaN when ``T < 2`` or the excess returns do not vary. A constant series has no
        risk to price; empyrical-reloaded returns ``inf`` there, which would top any
        leaderboard ranked by Sharpe, so we return NaN.
    """
    r = _as_returns(returns)
    ppy = _check_periods(periods_per_year)
    if r.shape[0] < 2:
        return _result(_nan_like(r), r)
    excess = r - risk_free
    # Test for equal values rather than std == 0: the std of identical values can come
    # out as ~1e-18 from rounding in the mean, which would give a ratio near 1e16.
    is_constant = excess.max(axis=0) == excess.min(axis=0)
    std = np.where(is_constant, np.nan, excess.std(axis=0, ddof=1))
    return _result(excess.mean(axis=0) / std * np.sqrt(ppy), r)


def sortino_ratio(
    returns: ArrayLike, *, periods_per_year: float, required_return: float = 0.0
) -> float | np.ndarray:
    """Annualized Sortino ratio: mean excess return over downside risk.

    ``mean(r - req) * periods_per_year / downside_risk`` with
    ``downside_risk = sqrt(mean(min(r - req, 0)^2)) * sqrt(periods_per_year)``. The
    downside mean is over all ``T`` periods, not only the losing ones: periods above the
    target count as zero shortfall.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year.
    required_return : float, default 0.0
        Target return per period; only shortfalls below it count as risk.

    Returns
    -------
    float or numpy.ndarray of shape (N,)
        NaN when ``T < 2``. With no period below the target the downside risk is 0 and,
        as in empyrical-reloaded, the ratio is ``+inf`` (mean excess above 0) or NaN
        (every return equals the target).
    """
    r = _as_returns(returns)
    ppy = _check_periods(periods_per_year)
    if r.shape[0] < 2:
        return _result(_nan_like(r), r)
    excess = r - required_return
    shortfall = np.minimum(excess, 0.0)
    downside_risk = np.sqrt(np.mean(shortfall**2, axis=0)) * np.sqrt(ppy)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = excess.mean(axis=0) * ppy / downside_risk
    return _result(ratio, r)


def calmar_ratio(returns: ArrayLike, *, periods_per_year: float) -> float | np.ndarray:
    """Calmar ratio, ``annual_return / |max_drawdown|``.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year.

    Returns
    -------
    float or numpy.ndarray of shape (N,)
        NaN when there was no drawdown (the ratio is undefined, not infinitely good) and,
        as in empyrical, when the annual return overflows, which only a very short,
        explosive series does.
    """
    r = _as_returns(returns)
    mdd = np.asarray(max_drawdown(r))
    cagr = np.asarray(annual_return(r, periods_per_year=periods_per_year))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = cagr / np.abs(mdd)
    return _result(np.where((mdd < 0) & np.isfinite(ratio), ratio, np.nan), r)


@dataclass(frozen=True)
class Metric:
    """One metric of an account's returns, declared once: what computes it, how a
    report shows it, and whether a leaderboard may rank by it.

    Everything that lists metrics reads :data:`DECLARED`: :func:`summary` and a
    backtest's metrics table (:data:`METRICS`), the trading env's fitnesses
    (:data:`FITNESS_METRICS`) and the report's column labels and number formats. A new
    metric is its function and one line there.

    Examples
    --------
    >>> from elegantpod.finance.stats.metrics import BY_NAME
    >>> sharpe = BY_NAME["sharpe"]
    >>> sharpe.label, sharpe.unit, sharpe.fitness
    ('Sharpe', 'ratio', True)
    >>> round(float(sharpe.of([0.01, -0.005, 0.02, 0.0], periods_per_year=252)), 2)
    8.95
    """

    name: str
    """The key in :func:`summary`, a metrics table and ``fitness=`` (a Python name)."""
    fn: Callable[..., float | np.ndarray]
    """The function of ``(returns)``, or of ``(returns, *, periods_per_year)`` when
    :attr:`annualized`."""
    label: str
    """The column heading of a report."""
    unit: str
    """``"pct"``: a fraction shown in percent; ``"ratio"``: a number with 2 decimals."""
    annualized: bool
    """Whether it needs ``periods_per_year``."""
    fitness: bool
    """Whether a leaderboard may rank by it: higher is better (not so for volatility or
    drawdown as these signs go)."""

    def of(self, returns: ArrayLike, *, periods_per_year: float) -> float | np.ndarray:
        """The metric of ``returns`` (``(T,)`` or ``(T, N)``)."""
        if self.annualized:
            return self.fn(returns, periods_per_year=periods_per_year)
        return self.fn(returns)


DECLARED: tuple[Metric, ...] = (
    Metric("cumulative_return", cumulative_return, "Cumulative return", "pct", False, True),
    Metric("annual_return", annual_return, "Annual return", "pct", True, True),
    Metric("annual_volatility", annual_volatility, "Annual volatility", "pct", True, False),
    Metric("max_drawdown", max_drawdown, "Max drawdown", "pct", False, False),
    Metric("sharpe", sharpe_ratio, "Sharpe", "ratio", True, True),
    Metric("calmar", calmar_ratio, "Calmar", "ratio", True, True),
    Metric("sortino", sortino_ratio, "Sortino", "ratio", True, True),
)
"""Every metric, in display order: the one declaration the rest reads."""
BY_NAME: dict[str, Metric] = {m.name: m for m in DECLARED}
METRICS: tuple[str, ...] = tuple(m.name for m in DECLARED)
"""The keys of :func:`summary`, in display order."""
FITNESS_METRICS: tuple[str, ...] = tuple(m.name for m in DECLARED if m.fitness)
"""The metrics a trading env's leaderboard may rank by besides the return (higher is
better for each): its ``fitnesses``."""


def summary(returns: ArrayLike, *, periods_per_year: float) -> dict[str, float | np.ndarray]:
    """All of :data:`METRICS` at once, for a report row or a leaderboard.

    Parameters
    ----------
    returns : array_like, shape (T,) or (T, N)
        Simple per-period returns.
    periods_per_year : float
        Periods in a year.

    Returns
    -------
    dict
        Keys in the order of :data:`METRICS`; floats for one series, ``(N,)`` arrays for
        many.
    """
    r = _as_returns(returns)
    ppy = _check_periods(periods_per_year)
    return {m.name: m.of(r, periods_per_year=ppy) for m in DECLARED}


def monthly_returns(values: pd.Series) -> pd.DataFrame:
    """Compounded return of each calendar month, as a year-by-month table.

    Each period's return is dated by the value it ends on, and a month compounds the
    returns dated in it; so the first month is measured from the first value, and later
    months from the previous month's last value. A month with no return in it is NaN:
    this includes a first month that holds only the first value, which has nothing to
    measure yet (as empyrical's ``aggregate_returns`` leaves it out). After a month
    without data, the next one spans the gap (our account values have none).

    Parameters
    ----------
    values : pandas.Series
        Account values indexed by an increasing :class:`pandas.DatetimeIndex`.

    Returns
    -------
    pandas.DataFrame
        Index ``year``, columns ``month`` 1..12, NaN where there is no return.

    Raises
    ------
    ValueError
        If the index is not a strictly increasing DatetimeIndex, or for values that
        :func:`returns_from_values` rejects.
    """
    index = values.index
    if not isinstance(index, pd.DatetimeIndex):
        raise ValueError(f"values must have a DatetimeIndex, got {type(index).__name__}")
    if not (index.is_monotonic_increasing and index.is_unique):
        raise ValueError("values must have a strictly increasing DatetimeIndex")
    log_growth = pd.Series(np.log1p(returns_from_values(values.to_numpy())), index=index[1:])
    month = [log_growth.index.year.rename("year"), log_growth.index.month.rename("month")]
    table = np.expm1(log_growth.groupby(month).sum()).unstack("month")
    return table.reindex(columns=pd.RangeIndex(1, 13, name="month"))
