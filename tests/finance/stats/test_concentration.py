"""A bet on one stock is flagged: the largest position's share, the verdict and the report."""

from __future__ import annotations

import dataclasses
import html
import json

import numpy as np
import pandas as pd
import pytest

from elegantpod.finance.report.report import render_html
from elegantpod.finance.stats import concentration
from elegantpod.finance.stats.verdict import verdict
from tests.finance.report.test_report import EVIL, synthetic

BET = "this is a bet on one stock, not a diversified portfolio."


def holding(result, shares_by_ticker):
    """``result`` with its positions replaced: ``{ticker: fraction of the account}`` per
    day (a callable of the day's index) turned into whole shares at that day's close."""
    days = len(result.dates)
    pos = pd.DataFrame(0.0, index=result.dates, columns=result.positions.columns)
    value = result.account_value.to_numpy()
    for tic, frac in shares_by_ticker.items():
        f = np.array([frac(t) for t in range(days)])
        pos[tic] = np.floor(f * value / result.prices[tic].to_numpy())
    return dataclasses.replace(result, positions=pos)


@pytest.fixture(scope="module")
def base():
    rng = np.random.default_rng(4)
    market = rng.normal(0.0005, 0.01, 199)  # 200 trading days
    return synthetic(market + rng.normal(0, 0.002, 199), market, tickers=("AAA", EVIL, "CCC"))


def test_largest_position_on_known_weights():
    dates = pd.bdate_range("2020-01-01", periods=5)
    w = pd.DataFrame(
        {
            "A": [0.0, 0.2, 0.6, 0.0, 0.0],
            "B": [0.0, 0.3, 0.1, 0.7, 1.0],
        },
        index=dates,
    )
    c = concentration.largest_position(w)
    np.testing.assert_allclose(c.largest.to_numpy(), [0.0, 0.3, 0.6, 0.7, 1.0])
    assert list(c.ticker) == ["", "B", "A", "B", "B"]
    assert c.mean == pytest.approx(0.52) and c.max == 1.0 and c.end == 1.0
    assert c.end_ticker == "B" and c.dominated_days == pytest.approx(0.6)
    assert c.is_concentrated
    assert c.sentence() == (
        "At the end 100% of the portfolio was in B; for 60% of the 5 trading days one stock "
        "held over half of it: this is a bet on one stock, not a diversified portfolio."
    )
    assert c.to_dict()["dominated_days"] == pytest.approx(0.6)
    # exactly half is not over half; a spread account is not flagged
    spread = concentration.largest_position(pd.DataFrame({"A": [0.5] * 5, "B": [0.5] * 5}))
    assert spread.dominated_days == 0.0 and not spread.is_concentrated
    assert spread.sentence() == ""
    # over half on most days, not at the end: still a bet, said for the period
    most = concentration.largest_position(pd.DataFrame({"A": [0.9, 0.9, 0.9, 0.1], "B": [0.0] * 4}))
    assert most.is_concentrated and "for most of the period this was a bet" in most.sentence()
    # at the end only
    late = concentration.largest_position(pd.DataFrame({"A": [0.1, 0.1, 0.1, 0.8], "B": [0.0] * 4}))
    assert late.is_concentrated and "at the end this is a bet on one stock" in late.sentence()
    # one ticker: nothing to diversify into
    alone = concentration.largest_position(pd.DataFrame({"A": [1.0, 1.0]}))
    assert alone.end == 1.0 and not alone.is_concentrated and alone.sentence() == ""
    with pytest.raises(ValueError, match="threshold"):
        concentration.largest_position(w, threshold=1.5)


def test_an_agent_that_ends_all_in_one_stock_is_flagged(base, tmp_path):
    # spread over three stocks for the first quarter, then all in the second one
    cut = 50
    bet = holding(
        base,
        {
            "AAA": lambda t: 0.3 if t < cut else 0.0,
            EVIL: lambda t: 0.3 if t < cut else 0.99,
            "CCC": lambda t: 0.3 if t < cut else 0.0,
        },
    )
    c = bet.concentration
    assert c.end == pytest.approx(0.99, abs=1e-3) and c.end_ticker == EVIL
    assert c.dominated_days == pytest.approx((200 - cut) / 200)
    assert c.max == pytest.approx(0.99, abs=1e-3)
    assert c.mean == pytest.approx((cut * 0.3 + (200 - cut) * 0.99) / 200, abs=2e-3)
    # the same figure as the weights the report draws
    w = bet.positions * bet.prices / bet.account_value.to_numpy()[:, None]
    np.testing.assert_allclose(c.largest.to_numpy(), w.max(axis=1).to_numpy())
    said = (
        f"At the end 99% of the portfolio was in {EVIL}; for 75% of the 200 trading days one "
        f"stock held over half of it: {BET}"
    )
    assert c.sentence() == said
    assert verdict(bet).endswith(" " + said)  # after the Sharpe sentence
    text = render_html(bet)
    escaped = html.escape(said, quote=True)
    assert escaped in text and EVIL not in text
    assert text.count(escaped) == 2  # the verdict, and the positions section
    assert '<p class="flag" id="one-stock">' in text
    d = json.loads(bet.to_json())["concentration"]
    assert d["is_concentrated"] and d["end_ticker"] == EVIL
    assert d["end"] == pytest.approx(c.end) and d["dominated_days"] == pytest.approx(0.75)


def test_a_diversified_agent_is_not_flagged(base):
    spread = holding(base, {t: (lambda t: 0.32) for t in base.positions.columns})
    c = spread.concentration
    assert c.max < 0.33 and c.dominated_days == 0.0 and not c.is_concentrated
    assert c.sentence() == ""
    assert "a bet on one stock" not in verdict(spread)
    text = render_html(spread)
    assert "a bet on one stock" not in text and 'class="flag"' not in text
    assert "No single stock dominated the portfolio." in text
    assert json.loads(spread.to_json())["concentration"]["is_concentrated"] is False


def test_a_result_without_prices_has_no_concentration(base):
    bare = dataclasses.replace(base, prices=None)
    assert bare.concentration is None and bare.weights is None
    assert "bet on one stock" not in verdict(bare)
    assert json.loads(bare.to_json())["concentration"] is None
