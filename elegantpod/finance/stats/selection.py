"""Selection that accounts for luck: probabilistic and deflated Sharpe ratios, bootstrap CIs.

A Sharpe ratio measured on a few years of daily returns is an estimate with a wide
sampling error, and the agent a tournament hands over is the *best* of many such
estimates: the best of 100 agents with no skill at all still shows a Sharpe ratio that
looks like skill. The functions here turn a Sharpe ratio into statements that survive
that:

- :func:`probabilistic_sharpe_ratio` (Bailey and López de Prado, 2012): the probability
  that the true Sharpe ratio is above a benchmark, given the sample's length, skewness
  and kurtosis (fat tails make a Sharpe estimate less reliable).
- :func:`deflated_sharpe_ratio` (Bailey and López de Prado, 2014): the same probability
  against the Sharpe ratio that the best of ``trials`` luck-only strategies would be
  expected to show (:func:`expected_max_sharpe`).
- :func:`~elegantpod.finance.stats.bootstrap.bootstrap_sharpe_ci` and
  :func:`~elegantpod.finance.stats.bootstrap.bootstrap_sharpe_difference_ci`, in their
  own module, ``bootstrap``: percentile intervals from a circular block bootstrap,
  which keeps the short-range dependence of daily returns (volatility clusters) that an
  i.i.d. bootstrap would destroy.

The probabilistic and deflated ratios work with the *per-period* Sharpe ratio
``mean(r) / std(r, ddof=1)`` (no annualization, zero risk-free rate), as the papers do;
``sqrt(periods_per_year)`` times it is the annualized Sharpe ratio of
:func:`elegantpod.finance.stats.metrics.sharpe_ratio`. Skewness and kurtosis are the sample
moments (``ddof=0``: the moments of the observed returns, as in the papers and in
``scipy.stats.skew`` / ``kurtosis(fisher=False)``); the kurtosis is the plain one, 3 for a
normal distribution.

Pure functions of their inputs; the normal distribution comes from the standard library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from elegantpod.finance.market.series_checks import check_periods_per_year, check_returns

EULER_GAMMA = 0.5772156649015329
"""The Euler–Mascheroni constant, in the expected maximum of normal draws."""
_NORMAL = NormalDist()


def _check_trials(trials: int) -> int:
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
    return int(trials)


# ---------------------------------------------------------------------------- PSR and DSR
class _Moments(NamedTuple):
    sharpe: float
    skew: float
    kurtosis: float
    periods: int


def _moments(r: np.ndarray) -> _Moments:
    """Per-period Sharpe ratio, skewness and (plain) kurtosis; NaN for a constant series,
    which has no risk to price (as :func:`~elegantpod.finance.stats.metrics.sharpe_ratio`)."""
    if r.max() == r.min():
        return _Moments(math.nan, math.nan, math.nan, r.shape[0])
    centered = r - r.mean()
    m2 = float(np.mean(centered**2))
    skew = float(np.mean(centered**3)) / m2**1.5
    kurtosis = float(np.mean(centered**4)) / m2**2
    sharpe = float(r.mean() / r.std(ddof=1))
    return _Moments(sharpe, skew, kurtosis, r.shape[0])


def _psr(m: _Moments, benchmark_sharpe: float) -> float:
    """Φ((SR - SR*) sqrt(T - 1) / sqrt(1 - γ3 SR + (γ4 - 1) / 4 SR²))."""
    if not math.isfinite(m.sharpe):
        return math.nan
    # The variance factor is >= 0 for any SR because a distribution's kurtosis is at
    # least its squared skewness plus one; it reaches 0 only for a two-point distribution
    # at one particular SR, where the estimate has no sampling error to speak of.
    var = 1.0 - m.skew * m.sharpe + (m.kurtosis - 1.0) / 4.0 * m.sharpe**2
    if var <= 0.0:
        return math.nan
    z = (m.sharpe - benchmark_sharpe) * math.sqrt(m.periods - 1) / math.sqrt(var)
    return _NORMAL.cdf(z)


def probabilistic_sharpe_ratio(returns: ArrayLike, benchmark_sharpe: float = 0.0) -> float:
    """Probability that the true Sharpe ratio exceeds ``benchmark_sharpe`` (PSR).

    Bailey and López de Prado (2012), "The Sharpe ratio efficient frontier":
    ``PSR = Φ((SR - SR*) sqrt(T - 1) / sqrt(1 - γ3 SR + (γ4 - 1) / 4 SR²))``, where SR is
    the per-period Sharpe ratio of ``returns``, γ3 their skewness and γ4 their kurtosis.
    The denominator is the standard error of a Sharpe estimate for non-normal returns
    (Mertens, 2002): negative skew and fat tails widen it, so the same Sharpe ratio is
    less convincing for a strategy that sells crash insurance.

    Parameters
    ----------
    returns : array_like, shape (T,)
        Simple per-period returns, finite, ``T >= 3``.
    benchmark_sharpe : float, default 0.0
        The Sharpe ratio to beat, *per period* (an annual 1.0 on daily data is
        ``1 / sqrt(252)``).

    Returns
    -------
    float
        In ``[0, 1]``; NaN for a constant series (no Sharpe ratio).

    Raises
    ------
    ValueError
        For NaN or inf returns, or fewer than 3 periods.
    """
    r = check_returns(returns)
    return _psr(_moments(r), float(benchmark_sharpe))


def expected_max_sharpe(trials: int, sharpe_variance: float) -> float:
    """Expected maximum of ``trials`` independent Sharpe estimates whose true value is 0.

    ``sqrt(V) ((1 - γ) Φ⁻¹(1 - 1/N) + γ Φ⁻¹(1 - 1/(N e)))`` with ``γ`` the Euler–Mascheroni
    constant (Bailey and López de Prado, 2014, from extreme value theory): what the best
    of ``N`` skill-less strategies shows by luck alone, the bar a selected strategy must
    clear. It grows like ``sqrt(2 V log N)``: trying more strategies always raises it.

    Parameters
    ----------
    trials : int
        ``N >= 1``, the number of strategies the winner was chosen from. One trial has
        no selection: the expected value of a single null estimate, 0.
    sharpe_variance : float
        ``V``, the variance of the trials' Sharpe estimates (same units as the Sharpe
        ratio compared against it, per period in :func:`deflated_sharpe_ratio`).

    Returns
    -------
    float
    """
    n = _check_trials(trials)
    v = float(sharpe_variance)
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"sharpe_variance must be finite and >= 0, got {sharpe_variance!r}")
    if n == 1:
        return 0.0
    # Φ⁻¹(1 - p) = -Φ⁻¹(p): exact for large N, where 1 - 1/N would round to 1.
    z = -(1.0 - EULER_GAMMA) * _NORMAL.inv_cdf(1.0 / n) - EULER_GAMMA * _NORMAL.inv_cdf(
        1.0 / (n * math.e)
    )
    return math.sqrt(v) * z


@dataclass(frozen=True)
class DeflatedSharpe:
    """The deflated Sharpe ratio of a selected strategy, with what went into it."""

    dsr: float
    """Probability that the true Sharpe ratio exceeds :attr:`sr_star`, the best luck-only
    Sharpe ratio of :attr:`trials` strategies; 0.95 or more is the usual bar."""
    psr: float
    """Probability that the true Sharpe ratio exceeds 0 (no deflation)."""
    sr_star: float
    """The expected maximum null Sharpe ratio, per period (0 for one trial)."""
    sharpe: float
    """The observed Sharpe ratio, per period."""
    annual_sharpe: float
    """``sharpe * sqrt(periods_per_year)``; NaN when no ``periods_per_year`` was given."""
    periods: int
    """``T``, the number of returns."""
    trials: int
    """``N``, the number of strategies the selection tried."""
    sharpe_variance: float
    """``V``, the variance of the trials' per-period Sharpe estimates used for
    :attr:`sr_star`."""


def deflated_sharpe_ratio(
    returns: ArrayLike,
    trials: int,
    sharpe_variance: float | None = None,
    *,
    trial_sharpes: ArrayLike | None = None,
    periods_per_year: float | None = None,
) -> DeflatedSharpe:
    """The deflated Sharpe ratio (DSR) of the best of ``trials`` strategies.

    Bailey and López de Prado (2014), "The deflated Sharpe ratio": the
    :func:`probabilistic_sharpe_ratio` against ``SR* = expected_max_sharpe(trials, V)``
    instead of 0. It answers: how likely is the true Sharpe ratio above what the best of
    that many skill-less strategies would show? With ``trials=1`` it is the PSR against 0.

    ``V`` is the variance of the trials' Sharpe estimates. When it is not known it
    defaults to ``1 / (T - 1)``, the variance of a per-period Sharpe estimate over ``T``
    periods when the true Sharpe ratio is 0 (the PSR's own standard error at SR = 0, which
    holds whatever the skewness and kurtosis). That is the null hypothesis the deflation
    tests: every trial was luck, measured over as many periods as these returns. The DSR
    is then ``Φ((SR sqrt(T - 1) - E[max of N standard normals]) / sqrt(1 - γ3 SR + ...))``.

    Two caveats make it conservative for a tournament's winner backtested out of sample:
    the trials (mutations of each other) are correlated, so fewer independent ones were
    tried than ``trials`` says; and the backtest range took no part in the selection.

    Parameters
    ----------
    returns : array_like, shape (T,)
        Simple per-period returns of the selected strategy, finite, ``T >= 3``.
    trials : int
        ``N >= 1``: how many strategies the selection tried.
    sharpe_variance : float, optional
        ``V`` per period squared; default ``1 / (T - 1)`` (see above).
    trial_sharpes : array_like, optional
        The per-period Sharpe ratios of the trials on these same periods; ``V`` is then
        their sample variance (``ddof=1``). Not with ``sharpe_variance``.
    periods_per_year : float, optional
        Only for :attr:`DeflatedSharpe.annual_sharpe`; the ratios do not depend on it.

    Returns
    -------
    DeflatedSharpe
        NaN ``dsr``, ``psr`` and ``sharpe`` for a constant series.

    Raises
    ------
    ValueError
        For NaN or inf returns, ``T < 3``, ``trials < 1``, a negative or non-finite
        variance, fewer than 2 finite ``trial_sharpes``, or both variance arguments.
    """
    r = check_returns(returns)
    n = _check_trials(trials)
    if sharpe_variance is not None and trial_sharpes is not None:
        raise ValueError("pass sharpe_variance or trial_sharpes, not both")
    if trial_sharpes is not None:
        s = np.asarray(trial_sharpes, dtype=np.float64).ravel()
        if s.shape[0] < 2 or not np.isfinite(s).all():
            raise ValueError(
                f"trial_sharpes must hold at least 2 finite Sharpe ratios, got {s.tolist()!r}"
            )
        v = float(s.var(ddof=1))
    elif sharpe_variance is not None:
        v = float(sharpe_variance)
    else:
        v = 1.0 / (r.shape[0] - 1)
    sr_star = expected_max_sharpe(n, v)  # checks v
    m = _moments(r)
    annual = math.nan
    if periods_per_year is not None:
        annual = m.sharpe * math.sqrt(check_periods_per_year(periods_per_year))
    return DeflatedSharpe(
        dsr=_psr(m, sr_star),
        psr=_psr(m, 0.0),
        sr_star=sr_star,
        sharpe=m.sharpe,
        annual_sharpe=annual,
        periods=m.periods,
        trials=n,
        sharpe_variance=v,
    )


def deflated_sharpe_of_ratio(
    annual_sharpe: float,
    periods: int,
    trials: int,
    *,
    periods_per_year: float = 252.0,
    skew: float = 0.0,
    kurtosis: float = 3.0,
) -> DeflatedSharpe:
    """The deflated Sharpe ratio from a reported Sharpe ratio, when the returns are gone.

    Why: a leaderboard keeps each agent's validation Sharpe ratio, not its daily returns,
    yet it should still say how much of the leader's score the number of agents tried
    explains. Given the annualized ratio, the number of returns it was measured on and
    the moments (default: normal returns, skewness 0 and kurtosis 3), this is
    :func:`deflated_sharpe_ratio` with ``V = 1 / (T - 1)``, the null variance.

    Parameters
    ----------
    annual_sharpe : float
        The annualized Sharpe ratio (``sqrt(periods_per_year)`` times the per-period one).
    periods : int
        ``T >= 3``, the number of returns the ratio was measured on.
    trials : int
        ``N >= 1``, how many agents the selection tried.
    periods_per_year : float, default 252
    skew, kurtosis : float
        The returns' skewness and plain kurtosis, if known.

    Returns
    -------
    DeflatedSharpe
        NaN ratios for a NaN Sharpe ratio.
    """
    if isinstance(periods, bool) or not isinstance(periods, int | np.integer) or periods < 3:
        raise ValueError(f"periods must be an integer >= 3, got {periods!r}")
    n = _check_trials(trials)
    ppy = check_periods_per_year(periods_per_year)
    annual = float(annual_sharpe)
    if math.isinf(annual):
        raise ValueError(f"annual_sharpe must be finite or NaN, got {annual_sharpe!r}")
    v = 1.0 / (int(periods) - 1)
    sr_star = expected_max_sharpe(n, v)
    m = _Moments(annual / math.sqrt(ppy), float(skew), float(kurtosis), int(periods))
    return DeflatedSharpe(
        dsr=_psr(m, sr_star),
        psr=_psr(m, 0.0),
        sr_star=sr_star,
        sharpe=m.sharpe,
        annual_sharpe=annual,
        periods=m.periods,
        trials=n,
        sharpe_variance=v,
    )
