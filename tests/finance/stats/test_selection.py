"""Probabilistic and deflated Sharpe ratios and bootstrap intervals, against the papers'
formulas computed independently (scipy.stats moments and normal cdf) and null checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from elegantpod.finance.stats import bootstrap, metrics, selection

# A fixed, skewed, fat-tailed series: a Student-t with a negative jump now and then.
RNG = np.random.default_rng(7)
FAT = 0.0006 + 0.01 * RNG.standard_t(4, size=500) - 0.03 * (RNG.random(500) < 0.02)


def psr_by_hand(r, sr_star):
    """The 2012 paper's formula with scipy's moments (ddof=0 skew, plain kurtosis)."""
    r = np.asarray(r, dtype=float)
    sr = r.mean() / r.std(ddof=1)
    g3 = stats.skew(r)
    g4 = stats.kurtosis(r, fisher=False)
    z = (sr - sr_star) * math.sqrt(len(r) - 1) / math.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr**2)
    return float(stats.norm.cdf(z))


def test_psr_matches_the_formula():
    small = [0.01, -0.005, 0.02, 0.0, 0.015, -0.012, 0.007]
    for r in (small, FAT):
        for sr_star in (0.0, 0.02, -0.05):
            assert selection.probabilistic_sharpe_ratio(r, sr_star) == pytest.approx(
                psr_by_hand(r, sr_star), rel=1e-12, abs=1e-15
            )
    # at the observed Sharpe ratio the true one is as likely above as below
    sr = np.mean(FAT) / np.std(FAT, ddof=1)
    assert selection.probabilistic_sharpe_ratio(FAT, sr) == pytest.approx(0.5, abs=1e-12)


def test_fat_left_tails_make_the_same_sharpe_less_convincing():
    normal = np.random.default_rng(0).normal(0.0008, 0.01, 500)
    # same mean and std, heavy negative skew: mostly small gains, rare large losses
    skewed = np.where(np.arange(500) % 50 == 0, -0.06, 0.0)
    skewed = (skewed - skewed.mean()) / skewed.std(ddof=1) * normal.std(ddof=1) + normal.mean()
    assert np.mean(skewed) / np.std(skewed, ddof=1) == pytest.approx(
        np.mean(normal) / np.std(normal, ddof=1), rel=1e-9
    )
    assert stats.skew(skewed) < -5
    assert selection.probabilistic_sharpe_ratio(skewed) < selection.probabilistic_sharpe_ratio(
        normal
    )


# E[max of N standard normals], by numerical integration (Harter's 1961 tables agree).
EXACT_MAX = {10: 1.538753, 100: 2.507594, 1000: 3.241436}


def test_expected_max_sharpe():
    assert selection.expected_max_sharpe(1, 0.3) == 0.0  # one trial: no selection
    for n, exact in EXACT_MAX.items():
        # the extreme-value approximation is within 3% of the exact expectation
        assert selection.expected_max_sharpe(n, 1.0) == pytest.approx(exact, rel=0.03)
    assert selection.expected_max_sharpe(100, 4.0) == pytest.approx(
        2 * selection.expected_max_sharpe(100, 1.0)
    )
    values = [selection.expected_max_sharpe(n, 1.0) for n in (1, 2, 5, 50, 10**6, 10**15)]
    assert values == sorted(values) and all(map(math.isfinite, values))


def test_deflated_sharpe_ratio():
    one = selection.deflated_sharpe_ratio(FAT, 1, periods_per_year=252)
    assert one.dsr == one.psr == pytest.approx(psr_by_hand(FAT, 0.0), rel=1e-12)
    assert one.sr_star == 0.0 and one.periods == 500 and one.trials == 1
    assert one.sharpe * math.sqrt(252) == pytest.approx(
        metrics.sharpe_ratio(FAT, periods_per_year=252)
    )
    assert one.annual_sharpe == pytest.approx(metrics.sharpe_ratio(FAT, periods_per_year=252))
    # default V: the variance of a null Sharpe estimate over T periods, 1 / (T - 1)
    d = selection.deflated_sharpe_ratio(FAT, 20)
    assert d.sharpe_variance == pytest.approx(1 / 499)
    assert d.sr_star == pytest.approx(selection.expected_max_sharpe(20, 1 / 499))
    assert d.dsr == pytest.approx(psr_by_hand(FAT, d.sr_star), rel=1e-12)
    assert math.isnan(d.annual_sharpe)  # no periods_per_year given
    dsrs = [selection.deflated_sharpe_ratio(FAT, n).dsr for n in (1, 2, 5, 20, 100, 1000)]
    assert all(a > b for a, b in zip(dsrs, dsrs[1:], strict=False))  # falls with trials
    # the trials' own Sharpe ratios give V
    trial = [0.01, 0.05, -0.02, 0.03]
    d = selection.deflated_sharpe_ratio(FAT, 4, trial_sharpes=trial)
    assert d.sharpe_variance == pytest.approx(np.var(trial, ddof=1))
    assert selection.deflated_sharpe_ratio(FAT, 4, np.var(trial, ddof=1)).dsr == pytest.approx(
        d.dsr
    )
    flat = selection.deflated_sharpe_ratio(np.full(10, 0.001), 3)
    assert math.isnan(flat.dsr) and math.isnan(flat.sharpe)


def test_deflated_sharpe_from_a_reported_ratio():
    """A leaderboard keeps the annual Sharpe ratio, not the returns: the same DSR follows
    from it, the number of returns and their moments."""
    full = selection.deflated_sharpe_ratio(FAT, 20, periods_per_year=252)
    centered = FAT - FAT.mean()
    skew = np.mean(centered**3) / np.mean(centered**2) ** 1.5
    kurt = np.mean(centered**4) / np.mean(centered**2) ** 2
    d = selection.deflated_sharpe_of_ratio(
        full.annual_sharpe, 500, 20, periods_per_year=252, skew=skew, kurtosis=kurt
    )
    assert d.dsr == pytest.approx(full.dsr, rel=1e-12) and d.psr == pytest.approx(full.psr)
    assert d.sr_star == pytest.approx(full.sr_star) and d.sharpe == pytest.approx(full.sharpe)
    # normal returns by default: Φ((SR - SR*) sqrt(T - 1) / sqrt(1 + SR² / 2))
    n = selection.deflated_sharpe_of_ratio(1.234, 501, 12)
    sr, star = 1.234 / math.sqrt(252), selection.expected_max_sharpe(12, 1 / 500)
    assert n.dsr == pytest.approx(
        stats.norm.cdf((sr - star) * math.sqrt(500) / math.sqrt(1 + sr**2 / 2))
    )
    # four near-identical leaders of a dozen pods, one validation year: far from the bar
    assert n.dsr < 0.95
    assert math.isnan(selection.deflated_sharpe_of_ratio(math.nan, 100, 3).dsr)
    for bad, match in (
        ((1.0, 2, 3), "periods"),
        ((1.0, 100, 0), "trials"),
        ((math.inf, 100, 3), "annual_sharpe"),
    ):
        with pytest.raises(ValueError, match=match):
            selection.deflated_sharpe_of_ratio(*bad)


def test_null_selection_is_deflated():
    """The point of deflation: the best of 100 skill-less strategies looks skilled by its
    PSR against 0, and its DSR over 100 trials says it is not."""
    rng = np.random.default_rng(2024)
    psr, dsr = [], []
    for _ in range(30):
        noise = rng.normal(0.0, 0.01, size=(252, 100))  # 100 strategies, one year
        best = int(np.argmax(noise.mean(axis=0) / noise.std(axis=0, ddof=1)))
        d = selection.deflated_sharpe_ratio(noise[:, best], 100)
        psr.append(d.psr)
        dsr.append(d.dsr)
    psr, dsr = np.array(psr), np.array(dsr)
    # P(max of 100 z > 1.645) = 1 - 0.95^100 ~ 0.994: the raw PSR is "significant"
    assert np.mean(psr > 0.95) >= 0.9
    # the DSR is ~ uniform-ish around 0.5 under the null; above 0.95 needs max z > 4.2
    assert np.all(dsr < 0.95) and np.median(dsr) < 0.8


def test_inputs_are_checked():
    r = pd.Series(FAT[:10], index=pd.bdate_range("2020-01-01", periods=10))
    r.iloc[4] = np.nan
    with pytest.raises(ValueError, match=r"nan at 2020-01-07.*position 4"):
        selection.probabilistic_sharpe_ratio(r)
    with pytest.raises(ValueError, match=r"inf at position 1"):
        selection.deflated_sharpe_ratio([0.1, np.inf, 0.0], 2)
    with pytest.raises(ValueError, match="T=2"):
        selection.probabilistic_sharpe_ratio([0.01, 0.02])
    with pytest.raises(ValueError, match="shape"):
        selection.probabilistic_sharpe_ratio(np.zeros((5, 2)))
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match=f"trials must be.*{bad!r}"):
            selection.deflated_sharpe_ratio(FAT, bad)
    with pytest.raises(ValueError, match="sharpe_variance.*-1"):
        selection.expected_max_sharpe(5, -1.0)
    with pytest.raises(ValueError, match="not both"):
        selection.deflated_sharpe_ratio(FAT, 3, 0.1, trial_sharpes=[0.1, 0.2])
    with pytest.raises(ValueError, match="at least 2 finite"):
        selection.deflated_sharpe_ratio(FAT, 3, trial_sharpes=[0.1])
    with pytest.raises(ValueError, match="level"):
        bootstrap.bootstrap_sharpe_ci(FAT, 252, level=1.5)
    with pytest.raises(ValueError, match="block must be in 1..T=500, got 501"):
        bootstrap.bootstrap_sharpe_ci(FAT, 252, block=501)
    with pytest.raises(ValueError, match="periods_per_year"):
        bootstrap.bootstrap_sharpe_ci(FAT, 0)
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap.bootstrap_sharpe_difference_ci(FAT, FAT[:-1], 252)


def test_bootstrap_interval():
    ci = bootstrap.bootstrap_sharpe_ci(FAT, 252)
    assert ci.estimate == pytest.approx(metrics.sharpe_ratio(FAT, periods_per_year=252))
    assert ci.low < ci.estimate < ci.high
    # reproducible per seed, another seed moves the ends a little
    assert bootstrap.bootstrap_sharpe_ci(FAT, 252) == ci
    other = bootstrap.bootstrap_sharpe_ci(FAT, 252, seed=1)
    assert other != ci and other.low == pytest.approx(ci.low, abs=0.2)
    # 8x the data: the interval narrows about sqrt(8) ~ 2.8x
    rng = np.random.default_rng(3)
    short, long = (rng.normal(0.0005, 0.01, n) for n in (252, 2016))
    w_short = np.subtract(*bootstrap.bootstrap_sharpe_ci(short, 252)[1::-1])
    w_long = np.subtract(*bootstrap.bootstrap_sharpe_ci(long, 252)[1::-1])
    assert 2.0 < w_short / w_long < 4.0
    assert bootstrap.default_block_length(1008) == 10
    assert bootstrap.default_block_length(2) == 1


def test_bootstrap_chunks_do_not_change_the_draws(monkeypatch):
    ci = bootstrap.bootstrap_sharpe_ci(FAT, 252, samples=300)
    monkeypatch.setattr(bootstrap, "_CHUNK", 1000)  # 2 rows of 500 days per chunk
    assert bootstrap.bootstrap_sharpe_ci(FAT, 252, samples=300) == ci


def test_bootstrap_covers_the_true_sharpe():
    """Coverage of the 95% interval on i.i.d. normal returns with a known Sharpe ratio:
    ~95% up to the percentile method's small-sample bias; 100 runs put 0.85 > 3 sd below."""
    rng = np.random.default_rng(11)
    true = 0.0005 / 0.01 * math.sqrt(252)
    hits = 0
    for _ in range(100):
        r = rng.normal(0.0005, 0.01, 252)
        low, high, _ = bootstrap.bootstrap_sharpe_ci(r, 252, samples=500)
        hits += low <= true <= high
    assert hits >= 85


def test_paired_difference():
    rng = np.random.default_rng(5)
    market = rng.normal(0.0004, 0.01, 1000)
    agent = market + rng.normal(0.0002, 0.002, 1000)  # the market plus a little noise
    diff = bootstrap.bootstrap_sharpe_difference_ci(agent, market, 252)
    a = bootstrap.bootstrap_sharpe_ci(agent, 252)
    b = bootstrap.bootstrap_sharpe_ci(market, 252)
    assert diff.estimate == pytest.approx(a.estimate - b.estimate)
    assert diff.low < diff.estimate < diff.high
    # pairing cancels the market's luck: far narrower than either interval alone
    assert diff.high - diff.low < 0.5 * (a.high - a.low)
    same = bootstrap.bootstrap_sharpe_difference_ci(market, market, 252)
    assert same == (0.0, 0.0, 0.0)
