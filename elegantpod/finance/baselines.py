"""What doing nothing scores: buy-and-hold baselines on the range agents are ranked on.

Why: a leaderboard of trading agents ranked by validation Sharpe says which agent is best
among those tried, not whether any of them is worth trading. Equal-weight buy-and-hold of
the same stocks (and the index, for the shipped S&P 500 sample) on the *same* validation
range, measured with the same metric, answers that, so the leaderboard, the dashboard and
the CLI show them beside the agents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from elegantpod.finance import metrics

INDEX_NAME = "S&P 500 index"


def baseline_values(env_kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Daily values of each baseline over the range ``env_kwargs`` describes.

    ``env_kwargs`` are a trading env's keyword arguments (``data``, ``start``, ``end``,
    ``tickers``, ``cost``, ``initial_amount``...), as a spec's validation env gets them.
    Equal weight buys every stock with an equal share of the initial amount on the first
    day (paying ``cost``) and holds; the index, where the data is the shipped ``"sp500"``
    sample, is scaled to start at the initial amount.
    """
    from elegantpod.finance.backtest import EQUAL_WEIGHT, _equal_weight, _index_series
    from elegantpod.finance.trading_env import StockTradingEnv

    kwargs = {k: v for k, v in env_kwargs.items() if k != "episode_days"}
    env = StockTradingEnv(num_envs=1, episode_days=None, **kwargs)
    prices = env._prices.cpu().numpy()
    values = {EQUAL_WEIGHT: _equal_weight(prices, env.initial_amount, env.cost, env.dates)}
    if kwargs.get("data", "sp500") == "sp500":
        index = _index_series("sp500", env.dates)
        values[INDEX_NAME] = index * (env.initial_amount / float(index.iloc[0]))
    return {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}


def baseline_scores(
    env_kwargs: dict[str, Any],
    fitness: str,
    values: dict[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """Each baseline's ``fitness`` over the range: what an agent must beat.

    ``fitness`` is a leaderboard fitness (:data:`~elegantpod.checks.FITNESSES`):
    ``"return"`` is the env's episode return (the change of value in percent of the
    initial amount, times ``reward_scale / 100``), the others the finance metric of the
    daily values, computed as the trading env computes an agent's. ``values`` are
    :func:`baseline_values` of these ``env_kwargs`` when the caller has them already.
    """
    from elegantpod.checks import check_fitness

    check_fitness(fitness)
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
