"""Time to target as censored data: Kaplan-Meier, RMST, the log-rank and permutation tests.

Why these: a run that never reaches the target by the budget has no time-to-target,
only "more than the budget". Counting it at the budget and taking an IQM gives a figure
that is a lower bound whose bias grows with each method's censored fraction (at 75%
censored an IQM of ten runs *is* the budget), so two such figures cannot be compared. The
estimands of survival analysis are made for this:

- the **Kaplan-Meier** estimate (Kaplan & Meier 1958) of ``S(t) = P(not yet at the target
  by t)``, which uses every run, solved or not, for as long as it was watched;
- the **restricted mean time to target** at the budget ``tau`` (RMST; Royston & Parmar
  2013), the area under ``S`` from 0 to ``tau``: the mean of ``min(T, tau)``, a figure
  defined for every method whatever it censors, in seconds, lower is better. Where no
  run is censored before ``tau`` (every unsolved run watched up to the budget, as
  :func:`~elegantpod.comparison.comparison.compare` judges them) the Kaplan-Meier curve
  on ``[0, tau]`` is the runs' own step curve and the RMST is exactly the mean of
  ``min(T, tau)``; the general formula is used where a run was censored earlier;
- the **log-rank test** (Mantel 1966; Peto & Peto 1972) of equal curves, its statistic
  ``(O - E) / sqrt(V)`` standard normal under the null (its square a chi-square with one
  degree of freedom);
- a **permutation test of the RMST difference**: under the null that the method does not
  matter, the labels of the runs are exchangeable, within each seed where the design
  pairs runs by seed (the same starting pods for both methods), over all runs where it
  does not. Exact enumeration of the ``2**n`` label swaps up to :data:`EXACT_PAIRS`
  pairs, a seeded Monte Carlo past it.

Pure NumPy (the package has no SciPy): arrays in, numbers out, seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EXACT_PAIRS = 20
"""Pairs up to which the paired permutation test enumerates all ``2**n`` swaps (about a
million at 20) rather than drawing them."""
PERMUTATIONS = 100_000
"""Monte Carlo permutations by default: the p-value's standard error is then at most
0.0016, a hundredth of the 0.025 level the pre-registered family uses."""
ROWS_AT_ONCE = 1 << 20
"""Values held per block of permutations (8 MiB of floats per array)."""

ALTERNATIVES = ("two-sided", "less", "greater")
"""``less``: the first method's times are shorter (it is faster); ``greater``: longer."""


@dataclass(frozen=True)
class KaplanMeier:
    """The Kaplan-Meier estimate of ``P(not yet at the target by t)``, as its steps.

    Attributes
    ----------
    times
        Each distinct time at which a run reached the target or was censored, ascending.
    survival
        ``S`` just after each of ``times`` (the fraction of runs not yet at the target).
    at_risk, events, censored
        Runs still watched and not yet at the target just before each time, those that
        reached it then, and those censored then (counted at risk at their own time).
    """

    times: tuple[float, ...]
    survival: tuple[float, ...]
    at_risk: tuple[int, ...]
    events: tuple[int, ...]
    censored: tuple[int, ...]

    def at(self, t) -> np.ndarray:
        """``S(t)`` at each time of ``t`` (1 before the first step; a right-continuous
        step function)."""
        grid = np.asarray(t, dtype=float)
        steps = np.concatenate([[1.0], self.survival])
        return steps[np.searchsorted(np.asarray(self.times), grid, side="right")]


def _checked(times, events) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times, dtype=float).ravel()
    e = np.asarray(events, dtype=bool).ravel()
    if t.shape != e.shape:
        raise ValueError(f"{t.size} times but {e.size} event flags")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(
            f"times must be finite and >= 0, got {t[~(np.isfinite(t) & (t >= 0))][:3]}"
        )
    return t, e


def kaplan_meier(times, events) -> KaplanMeier:
    """The Kaplan-Meier estimate from each run's observed time and whether it was an event.

    ``times[i]`` is when run ``i`` reached the target (``events[i]`` true) or when it
    stopped being watched without reaching it (false: censored). At a time where runs
    both reach the target and are censored, the censored ones count as at risk (the
    usual convention: censoring happens just after).
    """
    t, e = _checked(times, events)
    distinct = np.unique(t)
    at_risk = (t[None, :] >= distinct[:, None]).sum(axis=1)
    hit = (t[None, :] == distinct[:, None]) & e[None, :]
    out = (t[None, :] == distinct[:, None]) & ~e[None, :]
    d = hit.sum(axis=1)
    survival = np.cumprod(1.0 - d / at_risk)
    return KaplanMeier(
        times=tuple(distinct.tolist()),
        survival=tuple(survival.tolist()),
        at_risk=tuple(int(x) for x in at_risk),
        events=tuple(int(x) for x in d),
        censored=tuple(int(x) for x in out.sum(axis=1)),
    )


def rmst_rows(times: np.ndarray, events: np.ndarray, tau: float) -> np.ndarray:
    """The restricted mean time to target at ``tau`` (the area under the Kaplan-Meier
    curve from 0 to ``tau``) of every row: runs of shape ``(rows, n)``.

    Where no run of a row is censored before ``tau``, the curve is the runs' own step
    curve on ``[0, tau]`` and its area is the mean of ``min(t, tau)``, which is what is
    returned (the same number, without sorting). Otherwise each row is sorted by time,
    events before censorings at a tie, and the curve built a run at a time: a run
    reaching the target among ``k`` at risk multiplies ``S`` by ``1 - 1/k``, and tied
    events telescope to the Kaplan-Meier step ``1 - d/n``.
    """
    t = np.minimum(np.asarray(times, dtype=float), tau)
    e = np.asarray(events, dtype=bool)
    if not np.any(~e & (t < tau)):
        return t.mean(axis=1)
    order = np.lexsort((~e, t), axis=1)
    ts = np.take_along_axis(t, order, axis=1)
    es = np.take_along_axis(e, order, axis=1)
    n = t.shape[1]
    factor = np.where(es, 1.0 - 1.0 / (n - np.arange(n)), 1.0)
    after = np.cumprod(factor, axis=1)
    before = np.concatenate([np.ones((t.shape[0], 1)), after[:, :-1]], axis=1)
    widths = np.diff(ts, axis=1, prepend=0.0)
    return (before * widths).sum(axis=1) + after[:, -1] * (tau - ts[:, -1])


def rmst(times, events, tau: float) -> float:
    """:func:`rmst_rows` of one sample: the restricted mean time to target at ``tau``."""
    t, e = _checked(times, events)
    if t.size == 0:
        return math.nan
    return float(rmst_rows(t[None, :], e[None, :], tau)[0])


@dataclass(frozen=True)
class LogRank:
    """The log-rank test of equal time-to-target curves (first sample against second)."""

    z: float
    """``(O - E) / sqrt(V)`` of the first sample: below zero, it reached the target less
    often than equal curves would have it (it is slower)."""
    chi2: float
    """``z**2``, a chi-square with one degree of freedom under the null."""
    p: float
    """The two-sided p-value, ``P(chi2_1 >= chi2)``."""
    p_less: float
    """The one-sided p-value for "the first sample's times are shorter"."""
    p_greater: float
    """The one-sided p-value for "the first sample's times are longer"."""

    def p_value(self, alternative: str) -> float:
        """The p-value for ``alternative`` (one of :data:`ALTERNATIVES`)."""
        return {"two-sided": self.p, "less": self.p_less, "greater": self.p_greater}[alternative]


def _normal_sf(z: float) -> float:
    """``P(N(0, 1) > z)``."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def logrank(times_a, events_a, times_b, events_b) -> LogRank:
    """The log-rank test of sample ``a`` against ``b`` (each run's observed time and
    whether it reached the target then).

    At each distinct time ``t_j`` at which some run reached the target, with ``n_j`` runs
    at risk (``n_aj`` of ``a``) and ``d_j`` reaching it (``d_aj`` of ``a``):
    ``O = sum d_aj``, ``E = sum d_j n_aj / n_j`` and
    ``V = sum d_j (n_aj / n_j) (1 - n_aj / n_j) (n_j - d_j) / (n_j - 1)`` (the
    hypergeometric variance, ties handled exactly). Without any event there is nothing
    to test: ``z = 0`` and every p-value is 1.
    """
    ta, ea = _checked(times_a, events_a)
    tb, eb = _checked(times_b, events_b)
    t = np.concatenate([ta, tb])
    e = np.concatenate([ea, eb])
    is_a = np.arange(t.size) < ta.size
    moments = np.unique(t[e])
    at_risk = t[None, :] >= moments[:, None]
    hit = (t[None, :] == moments[:, None]) & e[None, :]
    n, n_a = at_risk.sum(axis=1), (at_risk & is_a).sum(axis=1)
    d, d_a = hit.sum(axis=1), (hit & is_a).sum(axis=1)
    expected = d * n_a / n
    several = n > 1
    var = np.where(
        several, d * (n_a / n) * (1 - n_a / n) * (n - d) / np.where(several, n - 1, 1), 0.0
    ).sum()
    if var <= 0:
        return LogRank(0.0, 0.0, 1.0, 1.0, 1.0)
    z = float((d_a.sum() - expected.sum()) / math.sqrt(var))
    # more events than expected for a means a reaches the target sooner: "less" time
    return LogRank(
        z=z,
        chi2=z * z,
        p=math.erfc(abs(z) / math.sqrt(2.0)),
        p_less=_normal_sf(z),
        p_greater=_normal_sf(-z),
    )


@dataclass(frozen=True)
class PermutationTest:
    """A permutation test of the RMST difference (the first method minus the other)."""

    difference: float
    """``RMST(first) - RMST(other)`` in seconds: below zero, the first is faster."""
    p: float
    """Two-sided: the share of relabellings with ``|difference|`` at least as large."""
    p_less: float
    """One-sided for "the first is faster": relabellings with a difference as low."""
    p_greater: float
    """One-sided for "the first is slower": relabellings with a difference as high."""
    paired: bool
    """Whether labels were swapped within seeds (paired design) or over all runs."""
    permutations: int
    """Relabellings counted (``2**pairs`` when exact)."""
    exact: bool
    """Whether every relabelling was enumerated (else a seeded Monte Carlo sample, whose
    p-values count the observed labelling too: ``(k + 1) / (N + 1)``, never 0)."""

    def p_value(self, alternative: str) -> float:
        """The p-value for ``alternative`` (one of :data:`ALTERNATIVES`)."""
        return {"two-sided": self.p, "less": self.p_less, "greater": self.p_greater}[alternative]


def _tolerance(x: float) -> float:
    # a relabelling equal to the observed one must count as "as extreme" even where
    # float sums in another order differ in the last bits
    return 1e-9 * max(1.0, abs(x))


def paired_permutation_test(
    a_times,
    a_events,
    b_times,
    b_events,
    tau: float,
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> PermutationTest:
    """The paired permutation test of ``RMST(a) - RMST(b)`` at ``tau``: run ``i`` of ``a``
    and run ``i`` of ``b`` share a seed, and under the null each pair's two labels are
    exchangeable. Every one of the ``2**n`` swaps is counted up to :data:`EXACT_PAIRS`
    pairs; past it ``permutations`` random swaps (seeded) are.
    """
    at, ae = _checked(a_times, a_events)
    bt, be = _checked(b_times, b_events)
    if at.size != bt.size or at.size == 0:
        raise ValueError(f"a paired test needs equal, non-zero runs, got {at.size} and {bt.size}")
    n = at.size
    observed = rmst(at, ae, tau) - rmst(bt, be, tau)
    exact = n <= EXACT_PAIRS
    total = 2**n if exact else permutations
    rng = np.random.default_rng(seed)
    step = max(1, ROWS_AT_ONCE // n)
    low = high = extreme = 0
    tol = _tolerance(observed)
    for start in range(0, total, step):
        rows = min(step, total - start)
        if exact:
            codes = np.arange(start, start + rows, dtype=np.int64)
            swap = (codes[:, None] >> np.arange(n)) & 1 == 1
        else:
            swap = rng.random((rows, n)) < 0.5
        d = rmst_rows(np.where(swap, bt, at), np.where(swap, be, ae), tau) - rmst_rows(
            np.where(swap, at, bt), np.where(swap, ae, be), tau
        )
        low += int((d <= observed + tol).sum())
        high += int((d >= observed - tol).sum())
        extreme += int((np.abs(d) >= abs(observed) - tol).sum())
    return _result(observed, low, high, extreme, total, paired=True, exact=exact)


def permutation_test(
    a_times,
    a_events,
    b_times,
    b_events,
    tau: float,
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> PermutationTest:
    """The unpaired permutation test of ``RMST(a) - RMST(b)`` at ``tau``: under the null
    every split of the pooled runs into ``len(a)`` and ``len(b)`` is as likely;
    ``permutations`` random splits (seeded) are counted."""
    at, ae = _checked(a_times, a_events)
    bt, be = _checked(b_times, b_events)
    if at.size == 0 or bt.size == 0:
        raise ValueError(f"each sample needs a run, got {at.size} and {bt.size}")
    t, e = np.concatenate([at, bt]), np.concatenate([ae, be])
    n = at.size
    observed = rmst(at, ae, tau) - rmst(bt, be, tau)
    rng = np.random.default_rng(seed)
    step = max(1, ROWS_AT_ONCE // t.size)
    low = high = extreme = 0
    tol = _tolerance(observed)
    for start in range(0, permutations, step):
        rows = min(step, permutations - start)
        order = rng.permuted(np.broadcast_to(np.arange(t.size), (rows, t.size)), axis=1)
        ts, es = t[order], e[order]
        d = rmst_rows(ts[:, :n], es[:, :n], tau) - rmst_rows(ts[:, n:], es[:, n:], tau)
        low += int((d <= observed + tol).sum())
        high += int((d >= observed - tol).sum())
        extreme += int((np.abs(d) >= abs(observed) - tol).sum())
    return _result(observed, low, high, extreme, permutations, paired=False, exact=False)


def _result(observed, low, high, extreme, total, *, paired, exact) -> PermutationTest:
    if exact:  # the observed labelling is one of those enumerated
        share = [k / total for k in (extreme, low, high)]
    else:
        share = [(k + 1) / (total + 1) for k in (extreme, low, high)]
    return PermutationTest(
        difference=float(observed),
        p=share[0],
        p_less=share[1],
        p_greater=share[2],
        paired=paired,
        permutations=total,
        exact=exact,
    )
