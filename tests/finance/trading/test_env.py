"""The trading env's invariants (hypothesis), its episodes, and its errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from elegantpod.envs.registry import make_env
from elegantpod.finance.market.prices import load_wide
from elegantpod.finance.stats import metrics
from elegantpod.finance.trading.env import StockTradingEnv

DAYS, STOCKS = 120, 3


def _market(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0005, 0.02, size=(DAYS, STOCKS))
    prices = np.array([20.0, 75.0, 300.0]) * np.exp(np.cumsum(steps, axis=0))
    dates = pd.bdate_range("2020-01-01", periods=DAYS)
    return pd.DataFrame(prices, index=dates, columns=["AAA", "BBB", "CCC"])


DATA = load_wide(_market(), source_name="synthetic")


def _env(num_envs=4, **kw) -> StockTradingEnv:
    kw.setdefault("episode_days", 20)
    kw.setdefault("indicators", ["rsi_14", "close_10_sma"])
    return StockTradingEnv(num_envs=num_envs, seed=0, data=DATA, **kw)


accounts = st.tuples(
    st.floats(0.0, 1e6),  # cash
    st.lists(st.integers(0, 5000), min_size=STOCKS, max_size=STOCKS),  # shares held
    st.lists(st.floats(0.5, 2000.0), min_size=STOCKS, max_size=STOCKS),  # prices
    st.lists(st.floats(-1.0, 1.0), min_size=STOCKS, max_size=STOCKS),  # action
)


@settings(max_examples=200, deadline=None)
@given(account=accounts, hmax=st.one_of(st.none(), st.integers(1, 1000)))
def test_trade_invariants(account, hmax):
    cash0, held, price, action = account
    env = _env(num_envs=1, hmax=hmax)
    cash = torch.tensor([cash0], dtype=torch.float64)
    shares = torch.tensor([held], dtype=torch.float64)
    p = torch.tensor([price], dtype=torch.float64)
    a = torch.tensor([action], dtype=torch.float64)
    value = cash + (shares * p).sum(1)
    new_cash, new_shares, traded, paid = env.trade(cash, shares, p, a, value)
    # no short selling, no negative cash, whole shares
    assert float(new_cash) >= 0.0
    assert (new_shares >= 0).all()
    assert torch.equal(new_shares, new_shares.round())
    assert torch.equal(new_shares - shares, traded)
    # sells never exceed holdings; a trade has the sign of its action
    assert ((traded < 0) <= (a < 0)).all() and ((traded > 0) <= (a > 0)).all()
    # costs are charged exactly, on both sides
    sold = (-traded).clamp(min=0)
    bought = traded.clamp(min=0)
    proceeds = float((sold * p).sum())
    spent = float((bought * p).sum())
    expected = cash0 + proceeds * (1 - env.cost) - spent * (1 + env.cost)
    assert float(new_cash) == pytest.approx(max(expected, 0.0), rel=1e-9, abs=1e-6)
    assert float(paid) == pytest.approx((proceeds + spent) * env.cost, rel=1e-12, abs=1e-12)
    # per-stock caps: hmax shares, or trade_fraction of the account value
    cap = (
        torch.full_like(p, float(hmax))
        if hmax is not None
        else torch.floor(env.trade_fraction * value / p)
    )
    assert (traded.abs() <= cap).all()


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.0, 1.0))
def test_account_value_is_cash_plus_holdings_at_every_step(seed, scale):
    env = _env(num_envs=3)
    env.reset(seed=seed)
    g = torch.Generator().manual_seed(seed)
    for _ in range(45):  # crosses at least two episode boundaries
        value_before = env.account_value()
        action = (torch.rand(3, STOCKS, generator=g) * 2 - 1) * scale
        _, reward, terminated, truncated, info = env.step(action)
        assert not terminated.any()
        assert (env.cash >= 0).all() and (env.shares >= 0).all()
        # the value reported for the step is cash + holdings x the next day's close
        day_prices = env.prices[env.day]
        still = ~truncated
        recomputed = env.cash + (env.shares * day_prices).sum(1)
        torch.testing.assert_close(info["account_value"][still], recomputed[still])
        expected_reward = (info["account_value"] - value_before) * (100.0 / env.initial_amount)
        torch.testing.assert_close(reward, expected_reward.float())
        # a finished account starts again with cash only
        assert torch.all(env.cash[truncated] == env.initial_amount)
        assert torch.all(env.shares[truncated] == 0)


def test_zero_action_leaves_the_account_untouched_but_for_price_moves():
    env = _env(num_envs=2, episode_days=None)
    env.reset()
    env.step(torch.tensor([[1.0, 1.0, 1.0], [0.5, 0.0, 1.0]]))  # buy something first
    cash, shares = env.cash.clone(), env.shares.clone()
    for _ in range(10):
        before = env.day.clone()
        _, _, _, _, info = env.step(torch.zeros(2, STOCKS))
        assert torch.equal(env.cash, cash) and torch.equal(env.shares, shares)
        assert torch.all(info["shares_traded"] == 0) and torch.all(info["cost_paid"] == 0)
        expected = cash + (shares * env.prices[before + 1]).sum(1)
        torch.testing.assert_close(info["account_value"], expected)


def test_sells_execute_before_buys():
    env = _env(num_envs=1, hmax=10_000, cost=0.0)
    price = torch.tensor([[10.0, 10.0, 10.0]], dtype=torch.float64)
    cash = torch.tensor([0.0], dtype=torch.float64)
    shares = torch.tensor([[100.0, 0.0, 0.0]], dtype=torch.float64)
    value = cash + (shares * price).sum(1)
    # sell all of AAA and buy BBB: only the proceeds of the sale can pay for the buy
    action = torch.tensor([[-1.0, 1.0, 0.0]], dtype=torch.float64)
    new_cash, new_shares, _, _ = env.trade(cash, shares, price, action, value)
    assert new_shares.tolist() == [[0.0, 100.0, 0.0]]
    assert float(new_cash) == 0.0


def test_buys_are_scaled_down_together_when_cash_is_short():
    env = _env(num_envs=1, hmax=100, cost=0.0)
    price = torch.tensor([[10.0, 10.0, 10.0]], dtype=torch.float64)
    cash = torch.tensor([1500.0], dtype=torch.float64)
    shares = torch.zeros(1, 3, dtype=torch.float64)
    action = torch.ones(1, 3, dtype=torch.float64)  # wants 300 shares = 3000 of cash
    new_cash, new_shares, _, _ = env.trade(cash, shares, price, action, cash)
    assert new_shares.tolist() == [[50.0, 50.0, 50.0]]  # every stock gets half
    assert float(new_cash) == 0.0


@pytest.mark.parametrize("lag", [0, 1])
def test_hmax_maps_a_full_action_to_hmax_shares(lag):
    env = _env(num_envs=1, hmax=7, cost=0.002, execution_lag=lag)
    env.reset()
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.5, -1.0]]))
    assert info["shares_traded"].tolist() == [[7.0, 3.0, 0.0]]  # 0.5 * 7 -> 3 (whole)
    price = env.prices[env.day - 1 + lag][0]  # the observed close, or the next one
    torch.testing.assert_close(info["fill_price"][0], price)
    spent = float((torch.tensor([7.0, 3.0, 0.0], dtype=torch.float64) * price).sum())
    assert float(env.cash[0]) == pytest.approx(1e6 - spent * 1.002)
    assert float(info["cost_paid"][0]) == pytest.approx(spent * 0.002)


def test_training_windows_are_random_and_auto_reset():
    env = _env(num_envs=64, episode_days=15)
    obs = env.reset(seed=3)
    assert obs.shape == (64, env.observation_space.shape[0]) and obs.dtype == torch.float32
    starts = env.day.clone()
    assert len(set(starts.tolist())) > 10  # random start days
    assert int(starts.max()) + 15 <= env.num_days - 1
    for step in range(15):
        obs, _, _, truncated, info = env.step(torch.zeros(64, STOCKS))
        assert bool(truncated.all()) == (step == 14)
    assert torch.equal(info["episode_length"], torch.full((64,), 15))
    assert not torch.equal(info["final_obs"], obs)  # final obs kept, new episode started
    assert torch.all(env.elapsed == 0)
    env.reset(seed=3)
    assert torch.equal(env.day, starts)  # same seed, same windows


def test_full_range_episode_and_its_metrics():
    env = _env(num_envs=2, episode_days=None, start="2020-02-03", end="2020-05-29")
    assert env.dates[0] == pd.Timestamp("2020-02-03") and env.dates[-1] == pd.Timestamp(
        "2020-05-29"
    )
    env.reset()
    assert torch.all(env.day == 0)
    values = [torch.full((2,), env.initial_amount, dtype=torch.float64)]
    g = torch.Generator().manual_seed(0)
    for _ in range(env.max_episode_steps):
        _, _, _, truncated, info = env.step(torch.rand(2, STOCKS, generator=g) * 2 - 1)
        values.append(info["account_value"])
    assert truncated.all()
    recorded = torch.stack(values)
    torch.testing.assert_close(env.episode_values(), recorded)
    got = env.episode_metrics()
    want = metrics.summary(
        metrics.returns_from_values(recorded.numpy()), periods_per_year=env.periods_per_year
    )
    for key in metrics.METRICS:
        np.testing.assert_allclose(got[key], want[key])
    ret = info["episode_return"]
    torch.testing.assert_close(ret, (recorded[-1] - env.initial_amount) * 100 / 1e6)


def test_observation_layout():
    env = _env(num_envs=1, episode_days=None)
    obs = env.reset()
    # cash fraction, position weights, then per stock: log return + 2 indicators
    assert obs.shape[1] == 1 + STOCKS + STOCKS * 3
    assert float(obs[0, 0]) == 1.0 and torch.all(obs[0, 1 : 1 + STOCKS] == 0)
    assert env.feature_names == ("rsi_14", "close_10_sma")
    env.step(torch.ones(1, STOCKS))
    obs = env._observe()
    assert float(obs[0, : 1 + STOCKS].sum()) == pytest.approx(1.0, abs=1e-5)


def test_a_range_starting_in_the_warm_up_begins_after_it():
    env = _env(num_envs=1, start="2020-01-01", episode_days=None)
    assert env.dates[0] == DATA.dates[14]  # rsi_14 is defined from the 15th day
    assert env.num_days == DAYS - 14


def test_make_env_builds_it_from_json_kwargs():
    env = make_env(
        "StockTrading-v0",
        num_envs=2,
        seed=1,
        data="sp500",
        start="2019-01-02",
        end="2019-12-31",
        episode_days=100,
    )
    assert env.num_stocks == 20 and env.dates[0] == pd.Timestamp("2019-01-02")
    with pytest.raises(ValueError, match="bad keyword"):
        make_env("StockTrading-v0", data="sp500", horizon=3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(episode_days=500), "episode_days=500 does not fit"),
        (dict(start="2020-01-02", end="2020-01-10"), "warm-up"),
        (dict(cost=1.5), "cost must be a fraction"),
        (dict(cost=-0.1), "cost must be a fraction"),
        (dict(hmax=0), "hmax must be > 0"),
        (dict(trade_fraction=2.0), r"trade_fraction must be in \[0.0, 1.0\]"),
        (dict(initial_amount=-5), "initial_amount must be > 0"),
        (dict(tickers=["AAA", "ZZZ"]), "unknown tickers \\['ZZZ'\\]"),
        (dict(indicators=["rsi_1"]), "window of at least 2"),
        (dict(start="2030-01-01"), "no trading days"),
        (dict(episode_days=0), "episode_days must be >= 1"),
        (dict(num_envs=0), "num_envs must be >= 1"),
    ],
)
def test_bad_settings_fail_early_with_the_value(kwargs, match):
    kw = {"episode_days": 20, **kwargs}
    num_envs = kw.pop("num_envs", 1)
    with pytest.raises(ValueError, match=match):
        StockTradingEnv(num_envs=num_envs, data=DATA, indicators=kw.pop("indicators", None), **kw)


def test_action_shape_and_reset_order_are_checked():
    env = _env(num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, STOCKS))
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(2, STOCKS + 1))
    with pytest.raises(RuntimeError, match="episode_days=None"):
        env.episode_metrics()


def test_ticker_subset_keeps_their_order():
    env = _env(num_envs=1, tickers=["CCC", "AAA"])
    assert env.tickers == ("CCC", "AAA") and env.action_space.shape == (2,)
    torch.testing.assert_close(
        env.prices[:, 0], torch.tensor(DATA.close[-env.num_days :, 2], dtype=torch.float64)
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda():
    env = _env(num_envs=8, device="cuda")
    obs = env.reset()
    obs, reward, *_ = env.step(torch.rand(8, STOCKS, device="cuda"))
    assert obs.device.type == "cuda" and reward.device.type == "cuda"


# -- execution timing ------------------------------------------------------------------
def _zigzag() -> StockTradingEnv:
    """One stock that alternates +10% / -10% a day: whoever sells at the close of an up
    day and buys at the close of a down day profits, if the fill is that same close."""
    days = 80
    moves = np.where(np.arange(days) % 2 == 0, 1.1, 1 / 1.1)
    prices = 100.0 * np.cumprod(moves)
    frame = pd.DataFrame({"ZIG": prices}, index=pd.bdate_range("2021-01-01", periods=days))
    return load_wide(frame, source_name="zigzag")


def _contrarian(obs: torch.Tensor) -> torch.Tensor:
    """Sell everything after an up day, buy all it can after a down day: an oracle of
    the next move in this market, as long as it fills at the close it has just seen."""
    last_return = obs[:, 2]  # cash, position, then the stock's last log return (x10)
    return torch.where(last_return > 0, -1.0, 1.0).unsqueeze(1)


@pytest.mark.parametrize("lag", [0, 1])
def test_what_the_agent_sees_against_what_it_trades_at(lag):
    env = StockTradingEnv(
        data=_zigzag(), episode_days=None, indicators=[], trade_fraction=1.0,
        cost=0.0, execution_lag=lag,
    )  # fmt: skip
    obs = env.reset()
    closes = env.prices[:, 0]
    for day in range(10):
        # the observation of day d holds the log return into d's close
        seen = float(obs[0, 2]) / 10.0
        assert seen == pytest.approx(math.log(float(closes[day]) / float(closes[day - 1])))
        obs, _, _, _, info = env.step(_contrarian(obs))
        # and the order decided on it fills at d's close (lag 0) or d + 1's (lag 1)
        assert float(info["fill_price"][0, 0]) == float(closes[day + lag])


def test_a_same_close_oracle_stops_paying_with_a_realistic_lag():
    final = {}
    for lag in (0, 1):
        env = StockTradingEnv(
            data=_zigzag(), episode_days=None, indicators=[], trade_fraction=1.0,
            cost=0.0, execution_lag=lag,
        )  # fmt: skip
        obs = env.reset()
        for _ in range(env.max_episode_steps):
            obs, _, _, _, info = env.step(_contrarian(obs))
        final[lag] = float(info["account_value"][0]) / env.initial_amount
    assert final[0] > 5.0  # buys every low and sells every high: a fortune
    assert final[1] < 1.0  # one day late it buys every high and sells every low


def test_the_default_fill_is_the_next_close_and_lag_is_checked():
    assert StockTradingEnv(data=_zigzag(), indicators=[], episode_days=None).execution_lag == 1
    with pytest.raises(ValueError, match="execution_lag must be 0 .* or 1 .*, got 2"):
        StockTradingEnv(data=_zigzag(), indicators=[], execution_lag=2)


@pytest.mark.parametrize("scale", [1e155, 1e40])
def test_prices_that_overflow_are_refused_naming_the_ticker(scale):
    """Issue 29, item 10: prices above about 1e154 gave NaN observations (the
    indicators square prices) and a pod with NaN weights, with no error."""
    wide = _market()
    wide["BBB"] *= scale
    data = load_wide(wide, source_name="huge")
    with pytest.raises(ValueError, match=r"data 'huge': close .*e\+.* of 'BBB' on 2020-01-01 is"):
        StockTradingEnv(num_envs=1, data=data, episode_days=20)


def test_a_non_finite_observation_is_refused_naming_the_column(monkeypatch):
    import elegantpod.finance.trading.env as trading_env

    monkeypatch.setattr(trading_env, "MAX_PRICE", math.inf)  # only the observation check left
    wide = _market()
    wide["CCC"] *= 1e155
    data = load_wide(wide, source_name="huge")
    with pytest.raises(ValueError, match=r"boll_ub of 'CCC' on .*close .*e\+15.*not a finite"):
        StockTradingEnv(num_envs=1, data=data, episode_days=20)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(num_envs=10**9), "num_envs must be <= 16,777,216"),
        (dict(seed=2**64), "seed must be <= "),
    ],
)
def test_sizes_and_seeds_are_bounded_before_the_data_is_read(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StockTradingEnv(data="/nonexistent.csv", **kwargs)


def test_windows_split_the_range_and_each_scores_as_its_own_run():
    """Evaluation on several windows (the tournament's multi-window fitness): account i
    trades window i, and its metrics equal those of an env made on that window alone."""
    import torch

    from elegantpod.finance.market.splits import DateSplits  # noqa: F401  (the public entry point)
    from elegantpod.finance.trading.env import StockTradingEnv

    def run(env):
        env.reset(seed=0)
        while True:
            *_, truncated, _ = env.step(torch.ones(env.num_envs, env.num_stocks))
            if truncated.any():
                return env.episode_metrics()["sharpe"]

    kw = {"start": "2017-01-01", "end": "2018-12-31", "episode_days": None}
    whole = StockTradingEnv(num_envs=4, windows=4, **kw)
    length = whole.max_episode_steps
    assert length == (whole.num_days - 1) // 4
    sharpes = run(whole)
    assert len(set(sharpes)) == 4  # four different windows
    for i in (0, 3):
        first, last = whole.dates[i * length], whole.dates[(i + 1) * length]
        alone = StockTradingEnv(num_envs=1, start=first, end=last, episode_days=None)
        assert alone.max_episode_steps == length
        assert run(alone)[0] == pytest.approx(sharpes[i], rel=1e-9)
    with pytest.raises(ValueError, match="windows=2 splits a whole-range run"):
        StockTradingEnv(windows=2, episode_days=63)
    with pytest.raises(ValueError, match="windows must be an integer"):
        StockTradingEnv(windows=0, **kw)
