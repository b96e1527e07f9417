"""A trading env's inputs, checked and cut to size: its numbers, its stocks, its dates.

Each error names the value and what is accepted, before any tensor is made. The market
data and indicators of a named source (``"sp500"``, a file) are loaded once per process
and indicator set: a tournament builds the same env again at every segment.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from elegantpod.envs.limits import check_num_envs
from elegantpod.finance.market.indicators import Features, compute_features
from elegantpod.finance.market.prices import MarketData, cached_load, load


def check_params(num_envs, episode_days, initial_amount, hmax, trade_fraction, cost, scale):
    """Raise ``ValueError`` for a size, episode length, amount, trade cap, cost or reward
    scale a trading env cannot use."""
    from elegantpod.checks.limits import in_range, positive

    check_num_envs(num_envs)
    if episode_days is not None and (isinstance(episode_days, bool) or int(episode_days) < 1):
        raise ValueError(f"episode_days must be >= 1 or None, got {episode_days!r}")
    positive("initial_amount", initial_amount)
    positive("hmax", hmax, allow_none=True)
    positive("trade_fraction", trade_fraction)
    in_range("trade_fraction", trade_fraction, 0.0, 1.0)
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not 0.0 <= cost < 1.0:
        raise ValueError(f"cost must be a fraction in [0, 1), got {cost!r}")
    positive("reward_scale", scale)


@functools.lru_cache(maxsize=8)
def _cached_market(source: str, indicators: tuple[str, ...] | None):
    data = cached_load(source)
    return data, compute_features(data, indicators)


def market_and_features(data: Any, indicators, tickers) -> tuple[MarketData, Features]:
    """The market data (a source name or :class:`MarketData`) and its indicators, cut to
    ``tickers`` (``None``: all; a list, or a comma-separated string) in that order."""
    ind = None if indicators is None else tuple(str(n) for n in indicators)
    if isinstance(data, str):
        market, features = _cached_market(data, ind)
    else:
        market = load(data)
        features = compute_features(market, ind)
    if tickers is not None:
        cols = _ticker_columns(market, tickers)
        market = market.select([market.tickers[c] for c in cols])
        features = dataclasses.replace(features, values=features.values[:, cols])
    return market, features


def trading_range(
    market: MarketData, features: Features, start: Any, end: Any, episode_days: int | None
) -> tuple[int, int]:
    """Row indices ``[i0, i1)`` of the days from ``start`` to ``end`` that can be traded.

    Days before the indicators' warm-up ends cannot be traded on: a range that starts
    there begins on the first day with every indicator defined. ``ValueError`` for a
    range with fewer than 2 days, or shorter than ``episode_days`` + 1.
    """
    i0, i1 = market.locate(start, end)
    i0 = max(i0, features.warmup)
    if i0 >= i1:
        raise ValueError(
            f"the range start={start!r}..end={end!r} ends within the indicators' warm-up; "
            f"the first trading day with every indicator defined is "
            f"{market.dates[features.warmup]:%Y-%m-%d}"
        )
    days = i1 - i0
    if days < 2:
        raise ValueError(
            f"the range {market.dates[i0]:%Y-%m-%d}..{market.dates[i1 - 1]:%Y-%m-%d} has "
            f"{days} trading day(s); at least 2 are needed to trade"
        )
    if episode_days is not None and episode_days > days - 1:
        raise ValueError(
            f"episode_days={episode_days} does not fit in the {days} trading days from "
            f"{market.dates[i0]:%Y-%m-%d} to {market.dates[i1 - 1]:%Y-%m-%d}; use at most "
            f"{days - 1}, or episode_days=None for the whole range"
        )
    return i0, i1


def _ticker_columns(market: MarketData, tickers) -> list[int]:
    if isinstance(tickers, str):
        tickers = [t.strip() for t in tickers.split(",") if t.strip()]
    market.select(tickers)  # raises naming unknown or repeated tickers
    return [market.tickers.index(str(t)) for t in tickers]
