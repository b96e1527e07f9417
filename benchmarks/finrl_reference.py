"""FinRL-style stock-trading env: a benchmark reference, not a part of the product.

:class:`FinRLStyleStockTradingEnv` re-implements, in our own code, the per-step semantics
of FinRL's single-env ``finrl.meta.env_stock_trading.env_stocktrading.StockTradingEnv``
(FinRL 0.3.x), so that ``benchmarks/finance_env_throughput.py`` can measure what a
pandas-per-step trading env costs next to our vectorized torch
:class:`~elegantpod.finance.trading.env.StockTradingEnv`, side by side, in the same run,
without installing FinRL (and its dependency tree) into our environment. Nothing in
``elegantpod`` imports this module.

What it reproduces, step by step, as FinRL does it:

- The data is FinRL's long format (one row per date and ticker, sorted by date then
  ticker) with a per-day integer index (``df.index = df.date.factorize()[0]``); every
  step looks the day up with ``df.loc[day, :]`` and rebuilds the state as a Python list
  ``[cash] + closes + holdings + indicators (one list per indicator, summed)``.
- ``terminal = day >= len(df.index.unique()) - 1`` and ``len(df.tic.unique())`` (in the
  state update and the date lookup) are recomputed on every step, as FinRL does;
  ``cache_unique_counts=True`` computes them once instead (a leaner variant, so that a
  speed comparison does not rest on that one FinRL inefficiency).
- Actions in ``[-1, 1]`` are scaled by ``hmax`` and cast to ``int`` (truncated toward
  zero); ``np.argsort`` orders them, sells execute first (most negative first), then buys
  (largest first), each by a per-stock Python call that charges ``sell_cost_pct`` /
  ``buy_cost_pct``; a buy is capped by ``cash // (price * (1 + cost))``, a sell by the
  shares held; a stock whose first indicator value equals ``True`` (FinRL's "disabled"
  flag convention, i.e. exactly 1.0) is not traded.
- Optional turbulence rule: at or above ``turbulence_threshold`` every position is sold
  and nothing is bought.
- Reward = (total asset after the move to the next day - before) x ``reward_scaling``;
  ``asset_memory``, ``rewards_memory``, ``actions_memory``, ``date_memory`` and
  ``state_memory`` grow every step (``reset`` clears all but ``state_memory``, as FinRL
  does). The terminal step trades nothing, returns the previous reward and computes the
  episode's account-value table and Sharpe ratio with pandas.

Left out, because training runs do not use them or they are I/O: plots and CSV files,
the printed episode summary (``print_verbosity=None`` by default), starting from a
previous state (``initial=False``) and SB3's ``DummyVecEnv`` wrapper (which would add
its own per-step copies to the reference, not to ours).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np
import pandas as pd
from gymnasium import spaces

from elegantpod.finance.market.indicators import Features, compute_features
from elegantpod.finance.market.prices import MarketData, sp500_sample

FINRL_VERSION_STUDIED = "0.3.7"
"""The FinRL release whose ``env_stocktrading.py`` these semantics follow."""


def finrl_frame(
    data: MarketData, features: Features, start: Any = None, end: Any = None
) -> tuple[pd.DataFrame, list[str]]:
    """FinRL's long-format frame of ``data`` with our indicators as columns.

    Indicators are computed on all of ``data`` first (as our env does), then the days
    ``start <= date <= end`` are kept; they must not fall in the indicators' warm-up.
    Returns the frame (sorted by date and ticker, index = day number) and the indicator
    column names (``turbulence`` last when ``features`` has it, as our observation does).
    """
    i0, i1 = data.locate(start, end)
    if i0 < features.warmup:
        raise ValueError(
            f"start={start!r} falls in the indicators' warm-up: use a date from "
            f"{data.dates[features.warmup]:%Y-%m-%d}"
        )
    df = data.to_long()
    tech = list(features.names)
    for k, name in enumerate(features.names):
        df[name] = features.values[:, :, k].reshape(-1)  # same (date, ticker) order
    if features.turbulence is not None:
        df["turbulence"] = np.repeat(features.turbulence, data.num_stocks)
        tech.append("turbulence")
    first, last = data.dates[i0], data.dates[i1 - 1]
    df = df[(df.date >= first) & (df.date <= last)]
    df = df.sort_values(["date", "tic"], ignore_index=True)
    df.index = df.date.factorize()[0]
    return df, tech


class FinRLStyleStockTradingEnv(gymnasium.Env):
    """One account trading ``stock_dim`` stocks over a FinRL long-format frame.

    Parameters follow FinRL's ``StockTradingEnv`` (same names, same meaning); see the
    module docstring for the semantics. ``state_space`` and ``action_space`` are derived
    from the frame instead of passed in.

    Parameters
    ----------
    df
        Long format, sorted by date and ticker, index = day number (:func:`finrl_frame`).
    stock_dim
        Number of tickers.
    hmax
        Maximum shares traded per stock and day.
    initial_amount
        Cash at the start of an episode.
    num_stock_shares
        Holdings at the start of an episode (``None``: none).
    buy_cost_pct, sell_cost_pct
        Transaction cost fraction per stock.
    reward_scaling
        Reward = change of total asset x ``reward_scaling``.
    tech_indicator_list
        Indicator columns appended to the state.
    turbulence_threshold
        ``None``: no turbulence rule; else sell everything at or above it.
    risk_indicator_col
        Column holding the turbulence index.
    print_verbosity
        Print FinRL's episode summary every ``print_verbosity`` episodes (``None``: never).
    cache_unique_counts
        Compute ``len(df.index.unique())`` and ``len(df.tic.unique())`` once instead of
        on every step as FinRL does.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        df: pd.DataFrame,
        *,
        stock_dim: int,
        hmax: int,
        initial_amount: float,
        num_stock_shares: list[int] | None = None,
        buy_cost_pct: list[float],
        sell_cost_pct: list[float],
        reward_scaling: float,
        tech_indicator_list: list[str],
        turbulence_threshold: float | None = None,
        risk_indicator_col: str = "turbulence",
        print_verbosity: int | None = None,
        cache_unique_counts: bool = False,
    ) -> None:
        self.df = df
        self.stock_dim = int(stock_dim)
        self.hmax = int(hmax)
        self.initial_amount = initial_amount
        self.num_stock_shares = (
            [0] * self.stock_dim if num_stock_shares is None else list(num_stock_shares)
        )
        self.buy_cost_pct = list(buy_cost_pct)
        self.sell_cost_pct = list(sell_cost_pct)
        self.reward_scaling = reward_scaling
        self.tech_indicator_list = list(tech_indicator_list)
        self.turbulence_threshold = turbulence_threshold
        self.risk_indicator_col = risk_indicator_col
        self.print_verbosity = print_verbosity
        self.cache_unique_counts = bool(cache_unique_counts)
        self._counts = (len(df.index.unique()), len(df.tic.unique()))
        self.state_space = 1 + 2 * self.stock_dim + len(self.tech_indicator_list) * self.stock_dim
        self.action_space = spaces.Box(low=-1, high=1, shape=(self.stock_dim,))
        self.observation_space = spaces.Box(low=-np.inf, high=np.inf, shape=(self.state_space,))
        self.episode = 0
        self.last_episode: dict[str, float] = {}
        self.state_memory: list[list] = []
        self._start_episode()

    # ----------------------------------------------------------------- FinRL's counts
    def _num_days(self) -> int:
        return self._counts[0] if self.cache_unique_counts else len(self.df.index.unique())

    def _num_tics(self) -> int:
        return self._counts[1] if self.cache_unique_counts else len(self.df.tic.unique())

    # ----------------------------------------------------------------------- protocol
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._start_episode()
        self.episode += 1
        return self.state, {}

    def step(self, actions: np.ndarray):
        self.terminal = self.day >= self._num_days() - 1
        if self.terminal:
            self._summarize_episode()
            return self.state, self.reward, self.terminal, False, {}

        actions = (actions * self.hmax).astype(int)  # whole shares, toward zero
        if self.turbulence_threshold is not None and self.turbulence >= self.turbulence_threshold:
            actions = np.array([-self.hmax] * self.stock_dim)
        begin_total_asset = self._total_asset()

        order = np.argsort(actions)
        sell_index = order[: np.where(actions < 0)[0].shape[0]]
        buy_index = order[::-1][: np.where(actions > 0)[0].shape[0]]
        for index in sell_index:
            actions[index] = self._sell_stock(index, actions[index]) * (-1)
        for index in buy_index:
            actions[index] = self._buy_stock(index, actions[index])
        self.actions_memory.append(actions)

        self.day += 1
        self.data = self.df.loc[self.day, :]
        if self.turbulence_threshold is not None:
            turb = self.data[self.risk_indicator_col]
            self.turbulence = turb if self._num_tics() == 1 else turb.values[0]
        self.state = self._update_state()

        end_total_asset = self._total_asset()
        self.asset_memory.append(end_total_asset)
        self.date_memory.append(self._get_date())
        self.reward = end_total_asset - begin_total_asset
        self.rewards_memory.append(self.reward)
        self.reward = self.reward * self.reward_scaling
        self.state_memory.append(self.state)
        return self.state, self.reward, self.terminal, False, {}

    # ----------------------------------------------------------------------- trading
    def _is_disabled(self, index: int) -> bool:
        # FinRL's convention: the stock's first indicator slot doubles as a "cannot
        # trade" flag, compared to True (so an indicator value of exactly 1.0 blocks it).
        return self.state[index + 2 * self.stock_dim + 1] == True  # noqa: E712

    def _sell_stock(self, index: int, action) -> float:
        held_at = index + self.stock_dim + 1
        price = self.state[index + 1]
        turbulent = (
            self.turbulence_threshold is not None and self.turbulence >= self.turbulence_threshold
        )
        if turbulent:
            if price <= 0 or self.state[held_at] <= 0:
                return 0
            sell_num_shares = self.state[held_at]  # clear the whole position
        else:
            if self._is_disabled(index) or self.state[held_at] <= 0:
                return 0
            sell_num_shares = min(abs(action), self.state[held_at])
        self.state[0] += price * sell_num_shares * (1 - self.sell_cost_pct[index])
        self.state[held_at] -= sell_num_shares
        self.cost += price * sell_num_shares * self.sell_cost_pct[index]
        self.trades += 1
        return sell_num_shares

    def _buy_stock(self, index: int, action) -> float:
        if (
            self.turbulence_threshold is not None and self.turbulence >= self.turbulence_threshold
        ) or self._is_disabled(index):
            return 0
        price = self.state[index + 1]
        available_amount = self.state[0] // (price * (1 + self.buy_cost_pct[index]))
        buy_num_shares = min(available_amount, action)
        self.state[0] -= price * buy_num_shares * (1 + self.buy_cost_pct[index])
        self.state[index + self.stock_dim + 1] += buy_num_shares
        self.cost += price * buy_num_shares * self.buy_cost_pct[index]
        self.trades += 1
        return buy_num_shares

    # ----------------------------------------------------------------------- state
    def _total_asset(self) -> float:
        s = self.stock_dim
        return self.state[0] + sum(
            np.array(self.state[1 : s + 1]) * np.array(self.state[s + 1 : 2 * s + 1])
        )

    def _start_episode(self) -> None:
        self.day = 0
        self.data = self.df.loc[self.day, :]
        self.state = self._initiate_state()
        self.asset_memory = [
            self.initial_amount
            + np.sum(np.array(self.num_stock_shares) * np.array(self.state[1 : 1 + self.stock_dim]))
        ]
        self.rewards_memory: list[float] = []
        self.actions_memory: list[np.ndarray] = []
        self.date_memory = [self._get_date()]
        self.reward = 0
        self.turbulence = 0
        self.cost = 0
        self.trades = 0
        self.terminal = False

    def _indicator_lists(self) -> list:
        return sum((self.data[tech].values.tolist() for tech in self.tech_indicator_list), [])

    def _initiate_state(self) -> list:
        if self._num_tics() > 1:
            closes = self.data.close.values.tolist()
            return [self.initial_amount] + closes + self.num_stock_shares + self._indicator_lists()
        return (
            [self.initial_amount]
            + [self.data.close]
            + [0] * self.stock_dim
            + sum(([self.data[tech]] for tech in self.tech_indicator_list), [])
        )

    def _update_state(self) -> list:
        s = self.stock_dim
        holdings = list(self.state[s + 1 : 2 * s + 1])
        if self._num_tics() > 1:
            return (
                [self.state[0]]
                + self.data.close.values.tolist()
                + holdings
                + (self._indicator_lists())
            )
        return (
            [self.state[0]]
            + [self.data.close]
            + holdings
            + sum(([self.data[tech]] for tech in self.tech_indicator_list), [])
        )

    def _get_date(self):
        if self._num_tics() > 1:
            return self.data.date.unique()[0]
        return self.data.date

    def _summarize_episode(self) -> None:
        """FinRL's end-of-episode bookkeeping: account-value table, Sharpe, summary."""
        end_total_asset = self._total_asset()
        values = pd.DataFrame(self.asset_memory, columns=["account_value"])
        values["date"] = self.date_memory
        values["daily_return"] = values["account_value"].pct_change(1)
        std = values["daily_return"].std()
        sharpe = (252**0.5) * values["daily_return"].mean() / std if std != 0 else math.nan
        rewards = pd.DataFrame(self.rewards_memory, columns=["account_rewards"])
        rewards["date"] = self.date_memory[:-1]
        self.last_episode = {
            "begin_total_asset": float(self.asset_memory[0]),
            "end_total_asset": float(end_total_asset),
            "total_reward": float(end_total_asset - self.asset_memory[0]),
            "total_cost": float(self.cost),
            "total_trades": int(self.trades),
            "sharpe": float(sharpe),
        }
        if self.print_verbosity and self.episode % self.print_verbosity == 0:
            print(f"day: {self.day}, episode: {self.episode}")
            for key, val in self.last_episode.items():
                print(f"{key}: {val:0.2f}" if isinstance(val, float) else f"{key}: {val}")
            print("=================================")


def make_reference_env(
    data: MarketData | None = None,
    *,
    start: Any = None,
    end: Any = None,
    indicators=None,
    hmax: int = 100,
    initial_amount: float = 1e6,
    cost: float = 1e-3,
    reward_scaling: float = 1e-4,
    cache_unique_counts: bool = False,
) -> FinRLStyleStockTradingEnv:
    """The reference env on ``data`` (default: the shipped S&P 500 sample), with our
    indicators (:func:`~elegantpod.finance.market.indicators.compute_features`) as columns.

    ``start=None`` is the first day with every indicator defined, as in our env; the
    defaults of ``initial_amount``, ``cost`` and ``reward_scaling`` (= our
    ``reward_scale / initial_amount``) match our env's.
    """
    data = sp500_sample() if data is None else data
    features = compute_features(data, None if indicators is None else tuple(indicators))
    if start is None:
        start = data.dates[features.warmup]
    df, tech = finrl_frame(data, features, start, end)
    s = data.num_stocks
    return FinRLStyleStockTradingEnv(
        df,
        stock_dim=s,
        hmax=hmax,
        initial_amount=initial_amount,
        buy_cost_pct=[cost] * s,
        sell_cost_pct=[cost] * s,
        reward_scaling=reward_scaling,
        tech_indicator_list=tech,
        cache_unique_counts=cache_unique_counts,
    )


def sanity_check(env: FinRLStyleStockTradingEnv | None = None) -> dict[str, Any]:
    """Check the reference's bookkeeping on two steps; raise ``RuntimeError`` if wrong.

    1. A zero action leaves cash and holdings unchanged (and, holding nothing, earns 0).
    2. A buy of one share of the first stock charges ``price * (1 + cost)``, adds the
       share, books ``price * cost`` as cost, and earns
       ``(next price - price * (1 + cost)) * reward_scaling``.

    Returns the figures checked, for a benchmark's JSON.
    """
    env = make_reference_env(end="1991-12-31") if env is None else env
    state, _ = env.reset(seed=0)
    s = env.stock_dim
    cash0, held0 = state[0], list(state[s + 1 : 2 * s + 1])
    state, reward, *_ = env.step(np.zeros(s, dtype=np.float32))
    _require(state[0] == cash0, f"zero action changed cash: {cash0} -> {state[0]}")
    _require(state[s + 1 : 2 * s + 1] == held0, "zero action changed holdings")
    _require(reward == 0, f"zero action with no holdings earned {reward}")

    price, cost = state[1], env.buy_cost_pct[0]
    action = np.zeros(s, dtype=np.float32)
    action[0] = 1.5 / env.hmax  # x hmax = 1.5 -> int 1 share
    cash1, cost1 = state[0], env.cost
    state, reward, *_ = env.step(action)
    charged = cash1 - state[0]
    expected = price * (1 + cost)
    tol = 1e-12 * cash1  # cash - charge loses the low digits of a small charge
    _require(
        math.isclose(charged, expected, rel_tol=1e-12, abs_tol=tol),
        f"a 1-share buy charged {charged}, expected price * (1 + cost) = {expected}",
    )
    _require(state[s + 1] == 1, f"a 1-share buy left {state[s + 1]} shares")
    _require(math.isclose(env.cost - cost1, price * cost, rel_tol=1e-12), "cost not booked")
    expected_reward = (state[1] - expected) * env.reward_scaling
    _require(
        math.isclose(reward, expected_reward, rel_tol=1e-9, abs_tol=tol * env.reward_scaling),
        f"reward {reward} != (next price - price * (1 + cost)) * scaling = {expected_reward}",
    )
    _require(int(env.actions_memory[-1][0]) == 1, "actions_memory does not record the buy")
    return {
        "zero_action_keeps_account": True,
        "buy_one_share": {
            "price": float(price),
            "cost": float(cost),
            "charged": float(charged),
            "reward": float(reward),
        },
    }


def _require(ok: bool, msg: str) -> None:
    if not ok:
        raise RuntimeError(f"FinRL-style reference sanity check failed: {msg}")
