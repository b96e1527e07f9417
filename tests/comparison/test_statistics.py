"""The statistics of a comparison against hand-computed values and known properties."""

import math
import tracemalloc

import numpy as np
import pytest

from elegantpod.comparison import statistics as st


def test_wilson_interval_matches_the_hand_computed_value():
    # 7 of 10: p = 0.7, z^2 = 3.8415; centre (0.7 + 0.19207) / 1.38415 = 0.64449,
    # half-width 1.96 * sqrt(0.021 + 0.0096037) / 1.38415 = 0.24772
    iv = st.wilson(7, 10)
    assert iv.value == 0.7
    assert iv.low == pytest.approx(0.39677, abs=1e-4)
    assert iv.high == pytest.approx(0.89222, abs=1e-4)


def test_wilson_interval_at_the_edges_stays_in_zero_one_and_is_not_empty():
    none, every = st.wilson(0, 10), st.wilson(10, 10)
    assert none.low == 0.0 and 0.2 < none.high < 0.35
    assert every.high == 1.0 and 0.65 < every.low < 0.8
    assert math.isnan(st.wilson(0, 0).value)
    with pytest.raises(ValueError, match="between 0 and n=3, got 4"):
        st.wilson(4, 3)


def test_iqm_drops_the_lowest_and_highest_quarter():
    assert st.iqm([1, 2, 3, 4, 5, 6, 7, 8, 9, 100]) == 5.5  # 3..8
    assert st.iqm([5.0, 1.0, 3.0]) == 3.0  # under 4 runs nothing is dropped
    assert st.iqm([1, 2, 3, 4]) == 2.5  # one each side
    assert math.isnan(st.iqm([]))
    rows = np.array([[1, 2, 3, 4, 5, 6, 7, 8, 9, 100], [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]], float)
    assert st._iqm_rows(rows).tolist() == [5.5, 5.5]


def test_probability_of_improvement_counts_ties_half():
    # x > y in 2 of 9 pairs, tied in 2: (2 + 1) / 9
    assert st.probability_of_improvement([1, 2, 3], [2, 2, 4]) == pytest.approx(1 / 3)
    # for times, lower is better: x < y in 5 pairs (1 < 2, 2, 4; 2 < 4; 3 < 4), tied in 2
    assert st.probability_of_improvement(
        [1, 2, 3], [2, 2, 4], lower_is_better=True
    ) == pytest.approx(6 / 9)
    assert st.probability_of_improvement([1, 1], [1, 1]) == 0.5
    assert math.isnan(st.probability_of_improvement([], [1]))


def _pairwise(x, y) -> float:
    """``P(X > Y)``, ties counting half, pair by pair: the definition itself."""
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    return wins / (len(x) * len(y))


def test_probability_of_improvement_is_the_pairwise_count_to_the_last_bit():
    """Rows of few distinct values (ties everywhere), of each size from one run up: the
    counted probability equals the n x m comparison it replaced bit for bit (so every
    interval printed before is printed again) and the pairwise definition."""
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (1, 4), (3, 5), (7, 4), (12, 12), (30, 17)]:
        x = rng.integers(-3, 4, size=(50, n)).astype(float)
        y = rng.integers(-3, 4, size=(50, m)).astype(float)
        y[:, 0] = -0.0  # equal to 0.0, as the comparison says
        for lower in (False, True):
            sx, sy = (-x, -y) if lower else (x, y)
            diff = sx[:, :, None] - sy[:, None, :]
            cube = (diff > 0).mean(axis=(1, 2)) + 0.5 * (diff == 0).mean(axis=(1, 2))
            got = st._poi_rows(x, y, lower)
            assert got.tolist() == cube.tolist()
            pairwise = [_pairwise(a, b) for a, b in zip(sx, sy, strict=True)]
            assert got.tolist() == pytest.approx(pairwise)
    x, y = rng.normal(size=(20, 9)), rng.normal(size=(20, 6))
    diff = x[:, :, None] - y[:, None, :]
    assert st._poi_rows(x, y, False).tolist() == (diff > 0).mean(axis=(1, 2)).tolist()
    # the pairwise definition where a difference is NaN: inf ties inf, NaN beats nothing
    odd = [math.inf, 2.0, math.nan, -math.inf, 2.0]
    other = [math.inf, 2.0, math.nan, 1.0]
    for a, b in ((odd, other), (other, odd)):
        assert st.probability_of_improvement(a, b) == _pairwise(a, b)


def test_probability_of_improvement_of_many_runs_never_holds_runs_squared():
    """Every resample's n x m comparison was 5,000 x n x m floats: 400 MB at 100 runs a
    method, 3.6 GB at 300 and 40 GB at 1,000 (an outside review's finding). Counted by
    sorting, 100 runs take the resamples themselves and little more."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=100), rng.normal(0.5, size=100)
    tracemalloc.start()
    try:
        iv = st.improvement_interval(x, y, lower_is_better=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # the cube alone was 400 MB
    assert iv.value == _pairwise(-x, -y) and iv.low < iv.value < iv.high


def test_bootstrap_intervals_are_seeded_and_contain_the_point():
    x = np.arange(10.0)
    a, b = st.iqm_interval(x, seed=3), st.iqm_interval(x, seed=3)
    assert a == b and a.low <= a.value <= a.high and a.low < a.high
    assert st.iqm_interval(x, seed=4) != a
    # a constant sample has a point interval; an empty one has none
    assert st.iqm_interval([2.0] * 5).as_list() == [2.0, 2.0, 2.0]
    assert math.isnan(st.iqm_interval([]).low)


def test_iqm_interval_covers_the_true_centre_about_95_percent_of_the_time():
    """A broken resampling (no replacement, one stratum for both samples, the wrong
    quantiles) shows as coverage far from 95%."""
    rng = np.random.default_rng(0)
    hits = 0
    trials = 200
    for i in range(trials):
        x = rng.normal(10.0, 2.0, size=20)
        iv = st.iqm_interval(x, reps=1000, seed=i)
        hits += iv.low <= 10.0 <= iv.high
    assert 0.85 <= hits / trials <= 0.99, hits


def test_the_difference_is_stratified_each_sample_resampled_on_its_own():
    x, y = np.full(10, 5.0), np.arange(10.0)
    d = st.iqm_difference(x, y, seed=1)
    assert d.value == 5.0 - st.iqm(y)
    # x is constant, so the difference's spread is y's own IQM spread alone
    own = st.iqm_interval(y, seed=1)
    assert d.high - d.low == pytest.approx(own.high - own.low, rel=0.15)
    far = st.iqm_difference(np.arange(10.0) + 100, np.arange(10.0))
    assert far.excludes(0.0) and far.low > 90
    assert not st.iqm_difference(np.arange(10.0), np.arange(10.0)).excludes(0.0)


def test_improvement_interval_and_profiles():
    iv = st.improvement_interval([10, 11, 12], [1, 2, 3])
    assert iv.as_list() == [1.0, 1.0, 1.0]
    fast = st.improvement_interval([1, 2, 3, 4], [5, 6, 7, 8], lower_is_better=True)
    assert fast.value == 1.0
    assert st.performance_profile([1, 2, 3, 4], [0, 2, 4]).tolist() == [1.0, 0.5, 0.0]
    assert st.solved_by([1.0, math.inf, 3.0, math.nan], [0.5, 1, 3, 10]).tolist() == [
        0.0,
        0.25,
        0.5,
        0.5,
    ]


def test_holm_matches_the_hand_worked_example():
    # sorted 0.01, 0.03, 0.04: 3 * 0.01 = 0.03, 2 * 0.03 = 0.06, 1 * 0.04 -> at least 0.06
    assert st.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # 2 * 0.5 capped at 1; 1 * 0.9 raised to the 1 before it (the step-down is monotone)
    assert st.holm([0.5, 0.9]).tolist() == [1.0, 1.0]
    assert st.holm([0.04, 0.001]).tolist() == pytest.approx([0.04, 0.002])
    assert st.holm([0.02]).tolist() == [0.02] and st.holm([]).size == 0
    with pytest.raises(ValueError, match=r"p-values must lie in \[0, 1\], got \[0.1, nan\]"):
        st.holm([0.1, math.nan])
