"""Censored time to target: Kaplan-Meier, RMST, log-rank and permutation tests against
textbook values, hand computation and brute force."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from elegantpod.comparison import survival as sv

# Freireich et al. (1963), remission weeks of leukaemia patients (Gehan 1965; the worked
# example of Kleinbaum & Klein, "Survival Analysis", ch. 2): 6-MP with censoring, placebo
# without.
MP6 = [6, 6, 6, 6, 7, 9, 10, 10, 11, 13, 16, 17, 19, 20, 22, 23, 25, 32, 32, 34, 35]
MP6_EVENT = [1, 1, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]
PLACEBO = [1, 1, 2, 2, 3, 4, 4, 5, 5, 8, 8, 8, 8, 11, 11, 12, 12, 15, 17, 22, 23]


def _steps() -> dict[int, Fraction]:
    """The 6-MP group's Kaplan-Meier steps, by hand: (at risk - events) / at risk."""
    s, out = Fraction(1), {}
    for t, at_risk, d in [(6, 21, 3), (7, 17, 1), (10, 15, 1), (13, 12, 1), (16, 11, 1)]:
        s *= Fraction(at_risk - d, at_risk)
        out[t] = s
    for t, at_risk in [(22, 7), (23, 6)]:
        s *= Fraction(at_risk - 1, at_risk)
        out[t] = s
    return out


def test_kaplan_meier_matches_the_textbook_example():
    km = sv.kaplan_meier(MP6, MP6_EVENT)
    steps = _steps()
    # the published table: 0.857, 0.807, 0.753, 0.690, 0.627, 0.538, 0.448
    assert [round(float(x), 3) for x in steps.values()] == [
        0.857,
        0.807,
        0.753,
        0.690,
        0.627,
        0.538,
        0.448,
    ]
    for t, s in steps.items():
        assert km.at([t])[0] == pytest.approx(float(s), abs=1e-12)
    assert km.at([5.9, 35])[0] == 1.0 and km.at([35])[0] == pytest.approx(float(steps[23]))
    # at 6: three events and one censored, all four at risk (censoring comes just after)
    i = km.times.index(6.0)
    assert (km.at_risk[i], km.events[i], km.censored[i]) == (21, 3, 1)


def test_rmst_is_the_area_under_the_hand_computed_curve():
    steps = _steps()
    edges = [0, 6, 7, 10, 13, 16, 22, 23, 35]
    levels = [Fraction(1), *steps.values()]
    area = sum(
        (b - a) * s for a, b, s in zip(edges[:-1], edges[1:], levels, strict=True)
    )  # 23.287 weeks (the published RMST of the 6-MP arm at 35 weeks)
    assert sv.rmst(MP6, MP6_EVENT, 35.0) == pytest.approx(float(area), rel=1e-12)
    assert round(float(area), 3) == 23.287
    # past the last time the curve stays flat; before tau it is cut there
    assert sv.rmst(MP6, MP6_EVENT, 40.0) == pytest.approx(float(area + 5 * steps[23]))
    assert sv.rmst(MP6, MP6_EVENT, 6.5) == pytest.approx(6 + 0.5 * float(steps[6]))


def test_rmst_rows_agree_with_the_curve_and_with_the_plain_mean():
    """The vectorised rows against the integral of :func:`kaplan_meier`'s own curve, with
    ties and censoring before tau; and without censoring before tau, the mean of
    ``min(t, tau)`` exactly."""
    rng = np.random.default_rng(0)
    tau = 10.0
    for _ in range(30):
        t = rng.integers(0, 14, size=9).astype(float)
        e = rng.random(9) < 0.6
        grid = np.linspace(0, tau, 100_001)
        km = sv.kaplan_meier(t, e)
        integral = np.trapezoid(km.at(grid), grid)
        assert sv.rmst(t, e, tau) == pytest.approx(integral, abs=2e-3)
    t = rng.uniform(0, 20, size=(50, 7))
    e = t < tau  # censored only at (or past) tau: the budget's censoring
    assert sv.rmst_rows(t, e, tau).tolist() == np.minimum(t, tau).mean(axis=1).tolist()


def test_logrank_matches_the_hand_computation():
    # a: 1, 2, 3 all reach the target; b: 2, 4 reach it, 5 is censored.
    # t=1: n=6 (3 of a), d=1 (a): E=1/2,  V=3*3*1*5/(36*5)=1/4
    # t=2: n=5 (2 of a), d=2 (1 a): E=4/5, V=2*3*2*3/(25*4)=9/25
    # t=3: n=3 (1 of a), d=1 (a): E=1/3,  V=1*2*1*2/(9*2)=2/9
    # t=4: n=2 (0 of a): E=0, V=0.  O=3, E=49/30, V=749/900: chi2 = 1681/749
    lr = sv.logrank([1, 2, 3], [1, 1, 1], [2, 4, 5], [1, 1, 0])
    assert lr.chi2 == pytest.approx(1681 / 749, rel=1e-12)
    assert lr.z == pytest.approx(math.sqrt(1681 / 749))  # a reaches it sooner: z > 0
    assert lr.p == pytest.approx(math.erfc(math.sqrt(1681 / 749 / 2)), rel=1e-12)
    assert lr.p == pytest.approx(0.13408, abs=1e-4)
    assert lr.p_less == pytest.approx(lr.p / 2) and lr.p_greater == pytest.approx(1 - lr.p / 2)
    assert lr.p_value("less") == lr.p_less
    # no event at all: nothing to test
    assert sv.logrank([5, 5], [0, 0], [5], [0]).p == 1.0


def test_logrank_matches_the_published_leukaemia_example():
    """Kleinbaum & Klein: 6-MP against placebo, log-rank chi-square 16.79."""
    lr = sv.logrank(MP6, MP6_EVENT, PLACEBO, [1] * len(PLACEBO))
    assert lr.chi2 == pytest.approx(16.79, abs=0.01)
    assert lr.z < 0  # 6-MP's patients stay in remission longer: fewer events than expected
    scipy_stats = pytest.importorskip("scipy.stats")  # an independent chi-square tail
    assert lr.p == pytest.approx(scipy_stats.chi2.sf(lr.chi2, 1), rel=1e-9)


def _brute_rmst(t, e, tau) -> float:
    """The area under a Kaplan-Meier curve built by a plain loop over distinct times."""
    area, s, last = 0.0, 1.0, 0.0
    for x in sorted(set(t)):
        if x >= tau:
            break
        area += s * (x - last)
        at_risk = sum(1 for y in t if y >= x)
        d = sum(1 for y, ev in zip(t, e, strict=True) if y == x and ev)
        s *= 1 - d / at_risk
        last = x
    return area + s * (tau - last)


@pytest.mark.parametrize("censored_early", [False, True])
def test_the_paired_test_is_the_brute_force_enumeration(censored_early):
    tau = 10.0
    a = [2.0, 4.0, 10.0, 3.0, 7.0, 6.0]
    b = [5.0, 4.0, 10.0, 9.0, 6.0, 10.0]
    ea = [x < tau for x in a]
    eb = [x < tau for x in b]
    if censored_early:  # two runs stopped being watched before the budget
        ea[3], eb[1] = False, False
    observed = _brute_rmst(a, ea, tau) - _brute_rmst(b, eb, tau)
    diffs = []
    for swap in itertools.product([False, True], repeat=len(a)):
        # seed i's labels swapped where swap[i]: the first sample takes b's run
        x = [(b[i], eb[i]) if s else (a[i], ea[i]) for i, s in enumerate(swap)]
        y = [(a[i], ea[i]) if s else (b[i], eb[i]) for i, s in enumerate(swap)]
        diffs.append(
            _brute_rmst([r[0] for r in x], [r[1] for r in x], tau)
            - _brute_rmst([r[0] for r in y], [r[1] for r in y], tau)
        )
    tol = 1e-9
    want_less = sum(d <= observed + tol for d in diffs) / 64
    want_greater = sum(d >= observed - tol for d in diffs) / 64
    want_two = sum(abs(d) >= abs(observed) - tol for d in diffs) / 64
    got = sv.paired_permutation_test(a, ea, b, eb, tau)
    assert got.exact and got.paired and got.permutations == 64
    assert got.difference == pytest.approx(observed)
    assert (got.p_less, got.p_greater, got.p) == (want_less, want_greater, want_two)
    assert got.p_less < 0.5 < got.p_greater  # a is faster on these pairs


def test_the_monte_carlo_paired_test_is_seeded_and_never_zero():
    n = sv.EXACT_PAIRS + 1
    a = np.arange(1.0, n + 1)
    b = a + 50.0  # every pair: a faster; only the identity swap is as extreme
    got = sv.paired_permutation_test(a, a < 100, b, b < 100, 100.0, permutations=2_000, seed=3)
    assert not got.exact and got.permutations == 2_000
    assert got.p_less == 1 / 2_001 and got.p_greater == 1.0
    same = sv.paired_permutation_test(a, a < 100, a, a < 100, 100.0, permutations=2_000)
    assert same.p == 1.0 and same.difference == 0.0
    again = sv.paired_permutation_test(a, a < 100, b, b < 100, 100.0, permutations=2_000, seed=3)
    assert again == got


def test_the_unpaired_test_agrees_with_every_split():
    tau = 10.0
    a, b = [1.0, 2.0, 6.0], [4.0, 10.0, 8.0]
    t, e = a + b, [x < tau for x in a + b]
    observed = np.mean(a) - np.mean(b)
    diffs = []
    for idx in itertools.combinations(range(6), 3):
        rest = [i for i in range(6) if i not in idx]
        diffs.append(np.mean([t[i] for i in idx]) - np.mean([t[i] for i in rest]))
    exact_less = sum(d <= observed + 1e-9 for d in diffs) / 20  # 2/20
    exact_two = sum(abs(d) >= abs(observed) - 1e-9 for d in diffs) / 20
    got = sv.permutation_test(a, e[:3], b, e[3:], tau, permutations=40_000, seed=1)
    assert not got.paired and got.difference == pytest.approx(observed)
    assert got.p_less == pytest.approx(exact_less, abs=0.01)
    assert got.p == pytest.approx(exact_two, abs=0.01)


def test_bad_samples_are_refused_naming_the_value():
    with pytest.raises(ValueError, match="3 times but 2 event flags"):
        sv.kaplan_meier([1, 2, 3], [1, 0])
    with pytest.raises(ValueError, match=r"finite and >= 0, got \[-1.\]"):
        sv.rmst([-1.0, 2.0], [1, 1], 5.0)
    with pytest.raises(ValueError, match="equal, non-zero runs, got 2 and 1"):
        sv.paired_permutation_test([1, 2], [1, 1], [1], [1], 5.0)
