"""``StockTradingEnv``: a portfolio of stocks traded daily, vectorized in torch.

One sub-env is one account (cash and whole-share holdings) trading a fixed set of stocks
at each day's close. ``num_envs`` accounts step together as tensor ops on any device, so
thousands of trading episodes cost about what one does in a pandas-based env.

Rules (FinRL's ``StockTradingEnv`` semantics, made vectorized and exact):

- An action is one number per stock in ``[-1, 1]``; it maps to a whole number of shares,
  up to ``hmax`` shares per stock and day (FinRL's convention), or by default up to
  ``trade_fraction`` of the account's value per stock and day (a cap that means the same
  in 1990 and 2020, when the same stock costs 100 times more).
- **Execution timing.** The agent decides on day d having seen d's close. With
  ``execution_lag=1`` (the default) its orders fill at the *next* day's close, d + 1:
  a decision cannot use a price and trade at that same price. ``execution_lag=0``
  fills at d's close itself, FinRL's optimistic same-bar fill, kept for comparison
  with FinRL and older runs: a strategy that reacts to the last move can look
  profitable that way and lose with a realistic lag (``tests/finance/`` pins both).
- Sells execute before buys, at the fill day's close, with a transaction cost fraction
  ``cost`` on both sides. No short selling (a sell is capped by the shares held) and no
  borrowing: when the buys would cost more than the cash, all buys are scaled down by the
  same factor and rounded down to whole shares, so cash never goes negative. (FinRL buys
  stock by stock in column order until cash runs out, which favours the first columns.)
- The reward is the change of account value from one close to the next, in percent of
  the initial amount (``reward_scale=100``), costs included.
- Training episodes start on a random day and last ``episode_days`` trading days;
  ``episode_days=None`` runs the whole date range from its first day (evaluation and
  backtests). The end of the data, or of a window, is a time limit: ``truncated``.

Observation of one account, float32: cash as a fraction of the account value, each
stock's position as a fraction of the account value, each stock's last daily log return
(x10), then the scaled indicators of each stock (see
:func:`~elegantpod.finance.market.indicators.scaled_features`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from elegantpod.envs.base import StepResult, Tensor
from elegantpod.envs.hooks import EnvHooks
from elegantpod.envs.limits import check_seed
from elegantpod.finance.market.indicators import scaled_features
from elegantpod.finance.market.prices import SAMPLES, MarketData
from elegantpod.finance.market.trading_inputs import (
    check_params,
    market_and_features,
    trading_range,
)
from elegantpod.finance.stats import metrics

ENV_ID = "StockTrading-v0"


class StockTradingEnv(EnvHooks):
    """Vectorized stock-trading accounts over a date range of :class:`MarketData`.

    Parameters
    ----------
    num_envs
        Accounts simulated in lock-step.
    device
        Torch device of prices, state and returned tensors.
    seed
        Seed of the start-day sampler.
    data
        ``"sp500"`` (the shipped sample), a path or URL of a CSV/parquet file, or a
        :class:`MarketData`. Pass a string in specs that travel to Dask workers.
    start, end
        First and last trading day of the range episodes are drawn from (inclusive).
        Indicators are computed on all the data first, so the first day may use earlier
        history; a range that starts before every indicator is defined (``None``, or the
        data's first days) begins on the first day that they all are.
    tickers
        A subset of the data's tickers, in this order (``None``: all).
    indicators
        Indicator names (``None``: FinRL's defaults that the data supports).
    episode_days
        Trading days per training episode, from a random start; ``None``: the whole
        range from ``start``, the same for every account (evaluation, backtest).
    initial_amount
        Cash at the start of each episode.
    hmax
        Maximum shares bought or sold per stock and day; ``None``: use ``trade_fraction``.
    trade_fraction
        With ``hmax=None``: maximum value traded per stock and day, as a fraction of the
        account value.
    cost
        Transaction cost as a fraction of the traded value, charged on buys and sells.
    reward_scale
        Reward = change of account value / ``initial_amount`` x ``reward_scale``.
    periods_per_year
        Trading days per year, for the Sharpe/Calmar/... of :meth:`episode_metrics`.
    execution_lag
        Days from the close a decision sees to the close its orders fill at: 1
        (default, realistic) or 0 (the same close, as FinRL does).
    windows
        With ``episode_days=None``: split the range into this many consecutive windows
        of equal length; account ``i`` trades window ``i mod windows``. An evaluation
        with ``windows`` accounts then scores the agent on each window for the cost of
        one run of the whole range, and the spread of those scores is the noise that a
        tournament weighs before it replaces a pod (one whole-range Sharpe has none to
        show). 1: the whole range (default).
    """

    env_id = ENV_ID
    fitnesses = ("return", *metrics.FITNESS_METRICS)
    """What a leaderboard may rank by: the return, or a finance metric of the evaluation
    episodes' daily values, as its evaluations report them (higher is better for each)."""

    @classmethod
    def fitness_advice(cls) -> str:
        """Its metrics need whole evaluation episodes over the validation range."""
        return (
            "evaluate over the whole range: eval_env_kwargs={'episode_days': None} "
            "(--eval-env-arg episode_days=null on the command line)"
        )

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        *,
        data: Any = "sp500",
        start: Any = None,
        end: Any = None,
        tickers=None,
        indicators=None,
        episode_days: int | None = 252,
        initial_amount: float = 1e6,
        hmax: int | None = None,
        trade_fraction: float = 0.1,
        cost: float = 1e-3,
        reward_scale: float = 100.0,
        periods_per_year: int = 252,
        execution_lag: int = 1,
        windows: int = 1,
    ) -> None:
        seed = check_seed(seed)
        if isinstance(windows, bool) or not isinstance(windows, int) or not 1 <= windows <= 64:
            raise ValueError(f"windows must be an integer in [1, 64], got {windows!r}")
        if windows > 1 and episode_days is not None:
            raise ValueError(
                f"windows={windows} splits a whole-range run: use it with episode_days=None, "
                f"not episode_days={episode_days!r}"
            )
        check_params(
            num_envs, episode_days, initial_amount, hmax, trade_fraction, cost, reward_scale
        )
        if isinstance(periods_per_year, bool) or int(periods_per_year) < 1:
            raise ValueError(f"periods_per_year must be an integer >= 1, got {periods_per_year!r}")
        if isinstance(execution_lag, bool) or execution_lag not in (0, 1):
            raise ValueError(
                f"execution_lag must be 0 (fill at the observed close) or 1 (at the next "
                f"day's close), got {execution_lag!r}"
            )
        market, features = market_and_features(data, indicators, tickers)
        i0, i1 = trading_range(market, features, start, end, episode_days)
        days = i1 - i0
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.data = market
        self.dates = market.dates[i0:i1]
        self.tickers = market.tickers
        self.num_stocks = market.num_stocks
        self.episode_days = episode_days
        self.initial_amount = float(initial_amount)
        self.hmax = None if hmax is None else int(hmax)
        self.trade_fraction = float(trade_fraction)
        self.cost = float(cost)
        self.reward_scale = float(reward_scale)
        self.periods_per_year = int(periods_per_year)
        self.execution_lag = int(execution_lag)
        self.feature_names = features.names + (
            ("turbulence",) if features.turbulence is not None else ()
        )
        dev = self.device
        close = market.close[i0 - 1 : i1]  # one day before the range for the first return
        log_ret = np.log(close[1:] / close[:-1]) * 10.0
        feats = scaled_features(features, market.close)[i0:i1]
        per_stock = np.concatenate([log_ret[:, :, None].astype(np.float32), feats], axis=2)
        _check_window(market, i0, i1, per_stock, ("log_return", *self.feature_names))
        market_obs = per_stock.reshape(days, -1)
        self._prices = torch.tensor(close[1:], dtype=torch.float64, device=dev)
        self._market_obs = torch.as_tensor(market_obs, dtype=torch.float32, device=dev)
        self.num_days = days
        if episode_days is None and (days - 1) // windows < 2:
            raise ValueError(
                f"windows={windows} leaves fewer than 2 trading days per window in the "
                f"{days} days of the range"
            )
        self.windows = windows
        self.max_episode_steps = episode_days if episode_days is not None else (days - 1) // windows
        obs_dim = 1 + self.num_stocks + market_obs.shape[1]
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (self.num_stocks,), np.float32)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(0 if seed is None else seed)
        n, s = self.num_envs, self.num_stocks
        self.cash = torch.full((n,), self.initial_amount, dtype=torch.float64, device=dev)
        self.shares = torch.zeros(n, s, dtype=torch.float64, device=dev)
        self.day = torch.zeros(n, dtype=torch.int64, device=dev)
        self.end_day = torch.zeros(n, dtype=torch.int64, device=dev)
        self.elapsed = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, dtype=torch.float64, device=dev)
        self.record = episode_days is None
        self._sparse = self.device.type == "cpu"
        if self.record:
            self._values = torch.zeros(days, n, dtype=torch.float64, device=dev)
            self._last_values: Tensor | None = None
        self._needs_reset = True

    # ----------------------------------------------------------------------- protocol
    def reset(self, seed: int | None = None) -> Tensor:
        """Start a fresh episode in every account and return the first observations."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._restart(everyone)
        self.elapsed = torch.zeros_like(self.elapsed)
        self.episode_return = torch.zeros_like(self.episode_return)
        self._needs_reset = False
        return self._observe()

    @torch.no_grad()
    def step(self, action: Tensor) -> StepResult:
        """Trade (at today's close, or tomorrow's with ``execution_lag=1``), move to the
        next day, auto-reset finished accounts."""
        if self._needs_reset:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        a = torch.as_tensor(action, device=self.device).to(torch.float64)
        if a.shape != (self.num_envs, self.num_stocks):
            raise ValueError(
                f"action must have shape {(self.num_envs, self.num_stocks)}, got {tuple(a.shape)}"
            )
        price = self._prices.index_select(0, self.day)
        value = self.cash + (self.shares * price).sum(1)
        day = self.day + 1
        next_price = self._prices.index_select(0, day)
        if self.execution_lag:  # the day's move on what is held, then the fill at d + 1
            held_value = self.cash + (self.shares * next_price).sum(1)
            fill = (next_price, held_value)
        else:
            fill = (price, value)
        cash, shares, traded, paid = self.trade(self.cash, self.shares, fill[0], a, fill[1])
        new_value = cash + (shares * next_price).sum(1)
        reward = (new_value - value) * (self.reward_scale / self.initial_amount)
        elapsed = self.elapsed + 1
        episode_return = self.episode_return + reward
        truncated = day >= self.end_day
        terminated = torch.zeros_like(truncated)
        self.cash, self.shares, self.day = cash, shares, day
        final_obs = self._observe(next_price)
        info = {
            "final_obs": final_obs,
            "episode_return": episode_return,
            "episode_length": elapsed,
            "account_value": new_value,
            "shares_traded": traded,
            "cost_paid": paid,
            "fill_price": fill[0],
        }
        # One host check of "did any account finish?": on CPU it skips the restart in the
        # many steps where none did; on accelerators the branch-free restart avoids the
        # sync (only a recording env, evaluation, pays it).
        any_done = bool(truncated.any()) if self._sparse or self.record else True
        if self.record:
            rows = torch.arange(self.num_envs, device=self.device)
            self._values[elapsed.clamp(max=self.num_days - 1), rows] = new_value
            if any_done:
                finished = self._values.clone()
                if self._last_values is None:
                    self._last_values = finished
                else:
                    self._last_values = torch.where(truncated, finished, self._last_values)
        self.elapsed = elapsed.masked_fill(truncated, 0)
        self.episode_return = episode_return.masked_fill(truncated, 0.0)
        if not any_done:
            obs = final_obs
        else:
            self._restart(truncated)
            obs = self._observe()
        return obs, reward.float(), terminated, truncated, info

    def close(self) -> None:
        """Nothing to release: prices and state are tensors."""

    # ----------------------------------------------------------------------- trading
    def trade(
        self, cash: Tensor, shares: Tensor, price: Tensor, action: Tensor, value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Execute ``action`` at ``price``: returns new cash, shares, shares traded, costs.

        A pure function of its inputs (and the env's constants), so property tests can
        drive it with any account and price.
        """
        a = action.clamp(-1.0, 1.0)
        if self.hmax is not None:
            cap = torch.full_like(price, float(self.hmax))
        else:
            cap = torch.floor(self.trade_fraction * value.unsqueeze(1) / price)
        order = (a * cap).to(torch.int64).to(price.dtype)  # whole shares, toward zero
        sell = torch.minimum((-order).clamp(min=0.0), shares)
        proceeds = (sell * price).sum(1)
        cash = cash + proceeds * (1.0 - self.cost)
        shares = shares - sell
        buy = order.clamp(min=0.0)
        need = (buy * price).sum(1) * (1.0 + self.cost)
        short = need > cash
        if not self._sparse or bool(short.any()):
            ratio = torch.where(short, cash / need.clamp(min=1e-300), torch.ones_like(cash))
            buy = torch.where(short.unsqueeze(1), torch.floor(buy * ratio.unsqueeze(1)), buy)
        bought = (buy * price).sum(1)
        # float rounding can leave -1e-10 of "dust" after spending everything
        cash = (cash - bought * (1.0 + self.cost)).clamp(min=0.0)
        shares = shares + buy
        return cash, shares, buy - sell, (proceeds + bought) * self.cost

    # ----------------------------------------------------------------------- helpers
    def _restart(self, rows: Tensor) -> None:
        n = self.num_envs
        if self.episode_days is None:  # the whole range, or account i's window
            length = self.max_episode_steps
            start = (torch.arange(n, device=self.device) % self.windows) * length
        else:
            high = self.num_days - self.episode_days
            start = torch.randint(
                0, high, (n,), generator=self.generator, device=self.device, dtype=torch.int64
            )
            length = self.episode_days
        self.day = torch.where(rows, start, self.day)
        self.end_day = torch.where(rows, self.day + length, self.end_day)
        self.cash = torch.where(rows, self.initial_amount, self.cash)
        self.shares = torch.where(rows.unsqueeze(1), 0.0, self.shares)
        if self.record:
            self._values[0, rows] = self.initial_amount

    def _observe(self, price: Tensor | None = None) -> Tensor:
        if price is None:
            price = self._prices.index_select(0, self.day)
        held = self.shares * price
        value = (self.cash + held.sum(1)).clamp(min=1e-9).unsqueeze(1)
        return torch.cat(
            [
                (self.cash.unsqueeze(1) / value).float(),
                (held / value).float(),
                self._market_obs.index_select(0, self.day),
            ],
            dim=1,
        )

    @property
    def prices(self) -> Tensor:
        """Close prices of the range, ``(num_days, num_stocks)`` float64 on ``device``:
        what orders fill at and accounts are valued with (read, do not modify)."""
        return self._prices

    def account_value(self) -> Tensor:
        """Current account values, ``(num_envs,)`` float64, at today's close."""
        return self.cash + (self.shares * self._prices.index_select(0, self.day)).sum(1)

    def episode_values(self) -> Tensor:
        """Daily account values of each account's last finished full-range (or window)
        episode, ``(max_episode_steps + 1, num_envs)`` (only with ``episode_days=None``)."""
        if not self.record:
            raise RuntimeError("account values are recorded only with episode_days=None")
        if self._last_values is None:
            raise RuntimeError("no episode has finished yet")
        return self._last_values[: self.max_episode_steps + 1]

    def episode_metrics(self) -> dict[str, list[float]]:
        """Cumulative/annual return, volatility, max drawdown, Sharpe, Calmar and Sortino
        of each account's last finished episode (the finance fitness of a tournament)."""
        values = self.episode_values().cpu().numpy()
        out = metrics.summary(
            metrics.returns_from_values(values), periods_per_year=self.periods_per_year
        )
        return {k: [float(x) for x in np.atleast_1d(v)] for k, v in out.items()}

    # ------------------------------------------------------------ hooks (EnvHooks)
    def layout(self) -> dict[str, list[str]]:
        """The tickers, in the order the policy trades them, and the per-stock features
        it reads (after the log return): saved in every checkpoint of an agent."""
        return {"tickers": list(self.tickers), "features": list(self.feature_names)}

    @classmethod
    def fit_layout(cls, env_kwargs: dict[str, Any], layout: dict[str, list[str]]) -> dict[str, Any]:
        """``env_kwargs`` with ``tickers`` set to the agent's, in its order, so that data
        with its columns in another order, or with more tickers, is traded stock by stock
        as the agent learned; a ``ValueError`` naming the tickers or features the data
        lacks (and the tickers the agent never traded) otherwise."""
        from elegantpod.finance.market.trading_inputs import market_and_features

        tickers = list(layout.get("tickers", []))
        features = list(layout.get("features", []))
        market, found = market_and_features(
            env_kwargs.get("data", "sp500"), env_kwargs.get("indicators"), None
        )
        missing = [t for t in tickers if t not in market.tickers]
        if missing:
            extra = [t for t in market.tickers if t not in tickers]
            others = f"; it has {_names(extra)}, which the agent never traded" if extra else ""
            raise ValueError(
                f"the agent trades the tickers {_names(tickers)} (in that order), and the "
                f"data lacks {_names(missing)}{others}: a policy acts per stock, by position"
            )
        names = list(found.names) + (["turbulence"] if found.turbulence is not None else [])
        if names != features:
            lacking = [f for f in features if f not in names]
            said = f"lacks {_names(lacking)}" if lacking else f"gives {_names(names)}"
            raise ValueError(
                f"the agent reads the features {_names(features)} of each stock, and this "
                f"data {said}: an agent reads exactly the features it was trained with "
                "(indicators= cannot change them), so pass data that gives them all, with "
                "the columns the training data had (indicators that need high and low "
                "prices, or volume, cannot be computed from closes alone)"
            )
        return {**env_kwargs, "tickers": tickers}

    @classmethod
    def shipped_values(cls, key: str) -> frozenset[str]:
        """The shipped samples (``"sp500"``) for ``data``: they name no file."""
        return frozenset(SAMPLES) if key == "data" else frozenset()

    @classmethod
    def baselines(cls, env_kwargs, eval_env_kwargs, fitness: str) -> dict[str, float]:
        """Equal-weight buy & hold of the same stocks (and the S&P 500 index for the
        shipped sample) on the evaluation range (:mod:`~elegantpod.finance.trading.baselines`)."""
        from elegantpod.finance.trading.baselines import baseline_scores

        return baseline_scores({**env_kwargs, **eval_env_kwargs}, fitness)

    @classmethod
    def leaderboard_columns(cls, board, trials: int, spec) -> dict[str, list]:
        """``validation_dsr`` on a Sharpe-ranked leaderboard (see
        :func:`~elegantpod.finance.trading.leaderboard.deflated_sharpe_column`)."""
        from elegantpod.finance.trading.leaderboard import deflated_sharpe_column

        return deflated_sharpe_column(board, trials, spec)

    @classmethod
    def leaderboard_notes(cls, board) -> list[str]:
        """What ``validation_dsr`` means, with the trials and days it was deflated by."""
        from elegantpod.finance.trading.leaderboard import notes

        return notes(board)

    def __repr__(self) -> str:
        return (
            f"StockTradingEnv(num_envs={self.num_envs}, stocks={self.num_stocks}, "
            f"days={self.num_days} {self.dates[0]:%Y-%m-%d}..{self.dates[-1]:%Y-%m-%d}, "
            f"device={self.device})"
        )


MAX_PRICE = 1e30
"""Largest price a trading env takes: prices above about 1e154 overflowed the
indicators' squares into NaN observations (a pod trained to NaN weights, no error), and
well below that an account of whole shares overflows float32 rewards."""


def _check_window(market: MarketData, i0: int, i1: int, per_stock: np.ndarray, names) -> None:
    """Raise ``ValueError`` naming the ticker, day and value where the data gives a price
    above :data:`MAX_PRICE` or a non-finite observation (``per_stock``: ``(days,
    stocks, features)`` float32 for the days ``i0:i1``)."""
    from elegantpod.finance.market.prices import FIELDS

    for field in FIELDS:
        arr = getattr(market, field)
        if arr is None or field == "volume":
            continue
        big = arr > MAX_PRICE
        if big.any():
            t, k = np.argwhere(big)[0]
            raise ValueError(
                f"data {market.source!r}: {field} {float(arr[t, k])!r} of "
                f"{market.tickers[k]!r} on {market.dates[t]:%Y-%m-%d} is above {MAX_PRICE:g}, "
                "where observations and rewards overflow: rescale the prices"
            )
    bad = ~np.isfinite(per_stock)
    if bad.any():
        t, k, f = np.argwhere(bad)[0]
        close = float(market.close[i0 + t, k])
        raise ValueError(
            f"data {market.source!r}: {names[f]} of {market.tickers[k]!r} on "
            f"{market.dates[i0 + t]:%Y-%m-%d} (close {close!r}) is not a finite number "
            "in float32: the prices are too large or too small to observe; rescale them"
        )


def _names(items: list[str], most: int = 12) -> str:
    """``AAPL, MSFT, ...`` for a message: the first ``most`` names, then how many more."""
    shown = ", ".join(str(i)[:64] for i in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")
