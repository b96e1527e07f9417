"""The largest single position of an account: a bet on one stock, said in words.

What a tear sheet's weights chart shows but a reader may miss: an agent that ends a
backtest with all its money in one stock made a bet on that stock, whatever its Sharpe
ratio says. :func:`largest_position` finds it from the position weights
(:func:`~elegantpod.finance.report.tearsheet.position_weights`); the verdict and the report say
it in words (:meth:`Concentration.sentence`). Also importable from
:mod:`~elegantpod.finance.report.tearsheet`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

DOMINANT_SHARE = 0.5
"""A position worth more than this share of the account value dominates it: one stock
is then more of the account than everything else, cash included, together."""
MOST_DAYS = 0.5
"""A backtest is a bet on one stock when a single position dominates on more than this
share of its trading days, or on its last day (:attr:`Concentration.is_concentrated`)."""


@dataclass(frozen=True, eq=False)
class Concentration:
    """The largest single position of an account, per day, and what it adds up to.

    What a tear sheet's weights chart shows but a reader may miss: an agent that ends a
    backtest with all its money in one stock made a bet on that stock, whatever its
    Sharpe ratio says. Built by :func:`largest_position`; a backtest's is
    ``result.concentration``.
    """

    largest: pd.Series
    """Per day: the largest position's value over the account value (cash included), 0
    on a day nothing is held."""
    ticker: pd.Series
    """Per day: the ticker of that position ("" on a day nothing is held)."""
    num_tickers: int
    """How many stocks the account could hold."""
    threshold: float = DOMINANT_SHARE

    @property
    def mean(self) -> float:
        """The largest position's average share of the account over the days."""
        return float(self.largest.mean())

    @property
    def max(self) -> float:
        """The largest share one position ever held."""
        return float(self.largest.max())

    @property
    def end(self) -> float:
        """The largest position's share of the account on the last day."""
        return float(self.largest.iloc[-1])

    @property
    def end_ticker(self) -> str:
        """The ticker of the largest position on the last day ("" when all in cash)."""
        return str(self.ticker.iloc[-1])

    @property
    def dominated_days(self) -> float:
        """The share of the days on which one position held more than :attr:`threshold`
        of the account."""
        return float(self._over(self.largest).mean())

    def _over(self, share):
        # a hair above the threshold: a position of exactly half is not "over half"
        # because of the last bit of a float product
        return share > self.threshold + 1e-12

    @property
    def is_concentrated(self) -> bool:
        """One stock held more than :attr:`threshold` of the account on the last day or
        on most days (more than :data:`MOST_DAYS` of them). Never with a single ticker:
        there was nothing to diversify into."""
        if self.num_tickers < 2:
            return False
        return bool(self._over(self.end)) or self.dominated_days > MOST_DAYS

    def sentence(self) -> str:
        """The plain sentence that flags a bet on one stock; "" when there is none.

        ``At the end 100% of the portfolio was in AAPL; for 80% of the 1,006 trading days
        one stock held over half of it: this is a bet on one stock, not a diversified
        portfolio.`` Unescaped: a ticker is user data, escape it for HTML.
        """
        if not self.is_concentrated:
            return ""
        days, over = len(self.largest), self.dominated_days
        at_end = (
            f"At the end {self.end:.0%} of the portfolio was in {self.end_ticker}"
            if self.end_ticker
            else "At the end the portfolio was all in cash"
        )
        share = "half" if self.threshold == 0.5 else f"{self.threshold:.0%}"
        at_the_end = self._over(self.end)
        if at_the_end and over > MOST_DAYS:
            bet = "this is a bet on one stock"
        elif at_the_end:
            bet = "at the end this is a bet on one stock"
        else:
            bet = "for most of the period this was a bet on one stock"
        return (
            f"{at_end}; for {over:.0%} of the {days:,} trading days one stock held over "
            f"{share} of it: {bet}, not a diversified portfolio."
        )

    def to_dict(self) -> dict[str, float | str | bool]:
        """The summary as plain values (for JSON)."""
        return {
            "mean": self.mean,
            "max": self.max,
            "end": self.end,
            "end_ticker": self.end_ticker,
            "dominated_days": self.dominated_days,
            "threshold": self.threshold,
            "is_concentrated": self.is_concentrated,
        }


def largest_position(weights: pd.DataFrame, *, threshold: float = DOMINANT_SHARE) -> Concentration:
    """The largest single position of each day and whether one stock dominates.

    Parameters
    ----------
    weights : pandas.DataFrame
        Each holding's value over the account value, dates x tickers
        (:func:`~elegantpod.finance.report.tearsheet.position_weights`).
    threshold : float, default :data:`DOMINANT_SHARE`
        The share of the account above which one position dominates.

    Returns
    -------
    Concentration
        Per day the largest absolute weight and its ticker, and the summary figures.
    """
    if len(weights) == 0:
        raise ValueError("weights must hold at least one day")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
    a = np.abs(weights.to_numpy(dtype=np.float64))
    if not np.isfinite(a).all():
        raise ValueError("weights contain NaN or inf")
    if a.shape[1] == 0:
        largest, names = np.zeros(len(a)), np.full(len(a), "", dtype=object)
    else:
        at = a.argmax(axis=1)
        largest = a[np.arange(len(a)), at]
        names = np.array([str(c) for c in weights.columns], dtype=object)[at]
        names[largest == 0] = ""
    return Concentration(
        largest=pd.Series(largest, index=weights.index, name="largest"),
        ticker=pd.Series(names, index=weights.index, name="ticker"),
        num_tickers=int(a.shape[1]),
        threshold=float(threshold),
    )
