"""What doing nothing scores: buy-and-hold baselines on the range agents are ranked on.

Why: a leaderboard of trading agents ranked by validation Sharpe says which agent is best
among those tried, not whether any of them is worth trading. Equal-weight buy-and-hold of
the same stocks (and the index, for the shipped S&P 500 sample) on the *same* validation
range, measured with the same metric, answers that, so the leaderboard, the dashboard and
the CLI show them beside the agents.

The daily values of a range are read once per set of env keywords and kept (the data is
read from files): a tournament's leaderboard asks for their length on every read.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np

from elegantpod.checks.text import short
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT, equal_weight, index_series
from elegantpod.finance.stats import metrics

INDEX_NAME = "S&P 500 index"


def baseline_values(env_kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Daily values of each baseline over the range ``env_kwargs`` describes.

    ``env_kwargs`` are a trading env's keyword arguments (``data``, ``start``, ``end``,
    ``tickers``, ``cost``, ``initial_amount``...), as a spec's validation env gets them.
    Equal weight buys every stock with an equal share of the initial amount on the first
    day (paying ``cost``) and holds; the index, where the data is the shipped ``"sp500"``
    sample, is scaled to start at the initial amount. The arrays are read-only: they are
    kept for the next call with the same keywords.
    """
    kwargs = {k: v for k, v in env_kwargs.items() if k != "episode_days"}
    try:
        key = json.dumps(kwargs, sort_keys=True)
    except (TypeError, ValueError):  # a MarketData object, say: nothing to key it by
        return _values(kwargs)
    return dict(_cached_values(key))


@functools.lru_cache(maxsize=8)
def _cached_values(key: str) -> dict[str, np.ndarray]:
    return _values(json.loads(key))


def _values(kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    # built through the registry, by id: this module stays below the env class, whose
    # tournament hooks call it
    from elegantpod.envs.registry import make_env

    env = make_env("StockTrading-v0", num_envs=1, episode_days=None, **kwargs)
    prices = env.prices.cpu().numpy()
    values = {EQUAL_WEIGHT: equal_weight(prices, env.initial_amount, env.cost, env.dates)}
    if kwargs.get("data", "sp500") == "sp500":
        index = index_series("sp500", env.dates)
        values[INDEX_NAME] = index * (env.initial_amount / float(index.iloc[0]))
    out = {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}
    for array in out.values():
        array.setflags(write=False)
    return out


def validation_days(env_kwargs: dict[str, Any]) -> int:
    """Daily returns in the range ``env_kwargs`` describe: its trading days less one."""
    return len(next(iter(baseline_values(env_kwargs).values()))) - 1


def baseline_scores(
    env_kwargs: dict[str, Any],
    fitness: str,
    values: dict[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """Each baseline's ``fitness`` over the range: what an agent must beat.

    ``fitness`` is a leaderboard fitness (``StockTradingEnv.fitnesses``):
    ``"return"`` is the env's episode return (the change of value in percent of the
    initial amount, times ``reward_scale / 100``), the others the finance metric of the
    daily values, computed as the trading env computes an agent's. ``values`` are
    :func:`baseline_values` of these ``env_kwargs`` when the caller has them already.
    """
    names = ("return", *metrics.FITNESS_METRICS)  # the trading env's fitnesses
    if fitness not in names:
        raise ValueError(f"unknown fitness {short(fitness)}; choose one of {list(names)}")
    scale = float(env_kwargs.get("reward_scale", 100.0))
    amount = float(env_kwargs.get("initial_amount", 1e6))
    periods = int(env_kwargs.get("periods_per_year", 252))
    out = {}
    if values is None:
        values = baseline_values(env_kwargs)
    for name, series in values.items():
        if fitness == "return":
            out[name] = float((series[-1] - amount) / amount * scale)
        else:
            returns = metrics.returns_from_values(series)
            out[name] = float(metrics.summary(returns, periods_per_year=periods)[fitness])
    return out
