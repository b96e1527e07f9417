"""The statistics of a comparison between training methods, run over seeds.

Why these and not a mean over five seeds: a few runs of deep RL are a small, skewed and
often censored sample (a run that never reaches the target has no time-to-target, only
"more than the budget"), and a table of means or medians with their ranges lets most
differences sit inside each other's noise. Agarwal et al. (2021), "Deep Reinforcement
Learning at the Edge of the Statistical Precipice" (NeurIPS), propose what a reviewer
now expects, computed here with NumPy alone (their library, rliable, is archived):

- the **interquartile mean** (IQM): the mean after dropping the lowest and the highest
  ``floor(n / 4)`` runs (the middle half when ``n`` is a multiple of 4; of 10 runs, the
  middle six), as robust as a median to a lucky or broken seed yet using half the runs
  or more rather than one or two;
- **stratified bootstrap confidence intervals**: each stratum (one method's runs on one
  task) is resampled with replacement on its own, so every resample keeps the design's
  number of runs per method and task; percentile intervals;
- the **probability of improvement** ``P(X > Y)``: how likely a run of method X beats a
  run of method Y (the Mann-Whitney U statistic over ``n * m``, ties counted half), with
  its bootstrap interval;
- **performance profiles**: for each threshold, the fraction of runs scoring above it
  (the whole distribution, not a point);

for "did it solve the task", a proportion from few trials, the **Wilson score
interval** (Wilson 1927), which, unlike the normal approximation, stays inside [0, 1]
and is not empty at 0 of 10 or 10 of 10; and for a family of tests, **Holm's** step-down
adjustment (Holm 1979), which holds the family-wise error rate at the level without
assuming the tests independent, and rejects at least what Bonferroni rejects.

Time to target, a censored quantity, has its own module:
:mod:`~elegantpod.comparison.survival`.

Everything here is pure (arrays in, numbers out) and seeded, so a report computed twice
from the same runs prints the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
"""The standard normal quantile of 0.975: two-sided 95% intervals."""

MIN_RUNS = 3
"""Runs of each method below which two methods get no verdict ("too few runs"): the
bootstrap interval of one run is a point (every resample is that run), and of two runs
has at most three values."""
BOOTSTRAP_REPS = 5_000
"""Bootstrap resamples per interval: the percentile interval's endpoints then move by
well under 1% of the interval's width from one seed of the resampling to the next."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its 95% interval. ``low`` and ``high`` are NaN where the
    sample cannot give one (no runs)."""

    value: float
    low: float
    high: float

    def excludes(self, x: float = 0.0) -> bool:
        """Whether ``x`` lies outside the interval (a difference "excludes zero")."""
        return bool(self.low > x or self.high < x)

    def as_list(self) -> list[float]:
        """``[value, low, high]`` (a JSON-friendly form)."""
        return [self.value, self.low, self.high]


NAN_INTERVAL = Interval(math.nan, math.nan, math.nan)


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """The fraction ``successes / n`` with its Wilson score interval.

    Raises ``ValueError`` for counts that are not ``0 <= successes <= n``.
    """
    if not (0 <= successes <= n):
        raise ValueError(f"successes must be between 0 and n={n}, got {successes}")
    if n == 0:
        return NAN_INTERVAL
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 and n the bounds are exactly 0 and 1 (rounding would leave 1e-17 outside)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high)


def iqm(x: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean: the mean after dropping the lowest and the highest
    ``floor(n / 4)`` values (``scipy.stats.trim_mean(x, 0.25)``; with fewer than 4 runs
    nothing is dropped). NaN for an empty sample."""
    a = np.sort(np.asarray(x, dtype=float).ravel())
    if a.size == 0:
        return math.nan
    cut = int(0.25 * a.size)
    return float(a[cut : a.size - cut].mean())


def _iqm_rows(a: np.ndarray) -> np.ndarray:
    """:func:`iqm` of every row of a 2-D array (the bootstrap's resamples at once)."""
    a = np.sort(a, axis=1)
    cut = int(0.25 * a.shape[1])
    return a[:, cut : a.shape[1] - cut].mean(axis=1)


def probability_of_improvement(x, y, *, lower_is_better: bool = False) -> float:
    """``P(X > Y)`` for a random run ``X`` of one method and ``Y`` of the other (ties count
    one half): the Mann-Whitney U statistic over ``len(x) * len(y)``. With
    ``lower_is_better`` (seconds to a target), ``P(X < Y)``. 0.5 means neither is better."""
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.size == 0 or y.size == 0:
        return math.nan
    return float(_poi_rows(x[None, :], y[None, :], lower_is_better)[0])


SORTED_AT_ONCE = 1 << 18
"""Values :func:`_poi_rows` sorts in one block of resamples (2 MiB of floats; the block
and its sort's arrays take a few times that)."""


def _poi_rows(x: np.ndarray, y: np.ndarray, lower_is_better: bool) -> np.ndarray:
    """:func:`probability_of_improvement` of every pair of rows (resamples): rows of
    ``x`` of shape ``(reps, n)`` against the same rows of ``y``, ``(reps, m)``.

    Why by sorting and not by comparing every run of ``x`` with every run of ``y``: that
    comparison is ``reps x n x m`` floats, 3.6 GB at 5,000 resamples of 300 runs a
    method and 40 GB at 1,000. Sorting each row of ``x`` and ``y`` together counts, for
    every run of ``x``, the runs of ``y`` below it and those tied with it (the
    Mann-Whitney U statistic) in ``O((n + m) log(n + m))``, a bounded block of rows at a
    time. The counts are integers and the probability is made from them as the
    comparison made it (``wins / nm + 0.5 * ties / nm``), so every figure is the same
    to the last bit.
    """
    if lower_is_better:
        x, y = -x, -y
    reps, n = x.shape
    pairs = n * y.shape[1]
    out = np.empty(reps)
    step = max(1, SORTED_AT_ONCE // (n + y.shape[1]))
    for start in range(0, reps, step):
        a, b = x[start : start + step], y[start : start + step]
        below = _ys_before(a, b, ties_before=False)
        ties = _ys_before(a, b, ties_before=True) - below
        out[start : start + step] = below / pairs + 0.5 * (ties / pairs)
    return out


def _ys_before(x: np.ndarray, y: np.ndarray, *, ties_before: bool) -> np.ndarray:
    """Per row, the runs of ``y`` sorted before each run of ``x``, summed over ``x``:
    those below it, and with ``ties_before`` those equal to it too.

    A stable sort keeps equal values in the order given, so ``y`` put first places its
    ties before ``x``'s and ``y`` put last after them. NaN sorts last and beats nothing
    (as no comparison with it holds), so a NaN of ``x`` counts nothing.
    """
    n, m = x.shape[1], y.shape[1]
    both = np.concatenate([y, x] if ties_before else [x, y], axis=1)
    column = np.arange(n + m)
    is_y = column < m if ties_before else column >= n
    order = np.argsort(both, axis=1, kind="stable")
    y_at = is_y[order]
    ys_so_far = np.cumsum(y_at, axis=1)
    counted = ~y_at & ~np.isnan(np.take_along_axis(both, order, axis=1))
    return np.where(counted, ys_so_far, 0).sum(axis=1)


def _resample(sample: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` resamples of ``sample`` with replacement, one per row."""
    idx = rng.integers(0, sample.size, size=(reps, sample.size))
    return sample[idx]


def _percentile(values: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_interval(
    statistic: Callable[..., np.ndarray],
    *strata: Sequence[float],
    point: float,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """A stratified percentile bootstrap interval around ``point``.

    ``statistic(*resampled)`` gets one 2-D array per stratum (a row per resample, each
    resampled with replacement on its own) and returns one value per row. NaN bounds
    when a stratum is empty.
    """
    arrays = [np.asarray(s, dtype=float).ravel() for s in strata]
    if any(a.size == 0 for a in arrays) or not math.isfinite(point):
        return Interval(point, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    values = statistic(*(_resample(a, reps, rng) for a in arrays))
    low, high = _percentile(np.asarray(values, dtype=float), level)
    return Interval(point, low, high)


def iqm_interval(x, *, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Interval:
    """The IQM of ``x`` with its bootstrap 95% interval."""
    return bootstrap_interval(_iqm_rows, x, point=iqm(x), reps=reps, seed=seed)


def iqm_difference(x, y, *, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> Interval:
    """``IQM(x) - IQM(y)`` with its stratified bootstrap 95% interval (``x`` and ``y``
    resampled each on its own: two methods' independent runs)."""
    return bootstrap_interval(
        lambda a, b: _iqm_rows(a) - _iqm_rows(b),
        x,
        y,
        point=iqm(x) - iqm(y),
        reps=reps,
        seed=seed,
    )


def improvement_interval(
    x, y, *, lower_is_better: bool = False, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> Interval:
    """:func:`probability_of_improvement` with its stratified bootstrap 95% interval."""
    return bootstrap_interval(
        lambda a, b: _poi_rows(a, b, lower_is_better),
        x,
        y,
        point=probability_of_improvement(x, y, lower_is_better=lower_is_better),
        reps=reps,
        seed=seed,
    )


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order given.

    Sorted ascending, the ``i``-th smallest of ``m`` (from 1) is multiplied by
    ``m - i + 1``, capped at 1, and made non-decreasing (each is at least the one before
    it). A hypothesis is rejected at family-wise level ``alpha`` where its adjusted
    p-value is ``<= alpha``. ``[0.01, 0.04, 0.03]`` becomes ``[0.03, 0.06, 0.06]``.

    Raises ``ValueError`` for a p-value outside [0, 1] or NaN.
    """
    p = np.asarray(p_values, dtype=float).ravel()
    if np.any(~(p >= 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()[:8]}")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out


def performance_profile(scores, thresholds) -> np.ndarray:
    """The fraction of runs whose score is above each threshold (Agarwal et al.'s
    score distribution: a run counts at ``tau`` when its score is ``> tau``)."""
    s = np.asarray(scores, dtype=float).ravel()
    t = np.asarray(thresholds, dtype=float).ravel()
    if s.size == 0:
        return np.full(t.shape, math.nan)
    return (s[None, :] > t[:, None]).mean(axis=1)


def solved_by(times, grid) -> np.ndarray:
    """The fraction of runs that reached the target by each time of ``grid``
    (``times``: each run's seconds to the target, ``inf`` or NaN where it never did)."""
    s = np.asarray(times, dtype=float).ravel()
    g = np.asarray(grid, dtype=float).ravel()
    if s.size == 0:
        return np.full(g.shape, math.nan)
    s = np.where(np.isfinite(s), s, np.inf)
    return (s[None, :] <= g[:, None]).mean(axis=1)
