"""Backtests: replayed trades, benchmarks, metrics tables and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from elegantpod.config import PodSpec
from elegantpod.finance import EQUAL_WEIGHT, backtest, metrics
from elegantpod.finance.trading_env import StockTradingEnv
from elegantpod.pod import Pod

TICKERS = ["AAA", "BBB", "<b>CCC</b>"]


def write_market(path, days=530, seed=0, tickers=TICKERS):
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0004, 0.015, size=(days, len(tickers)))
    prices = np.linspace(20.0, 200.0, len(tickers)) * np.exp(np.cumsum(steps, axis=0))
    dates = pd.bdate_range("2015-01-01", periods=days)
    pd.DataFrame(prices, index=dates.rename("date"), columns=tickers).to_csv(path)
    return path


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    return str(write_market(tmp_path_factory.mktemp("market") / "closes.csv"))


@pytest.fixture(scope="module")
def pod(market, tmp_path_factory):
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        max_steps=2048,
        eval_episodes=1,
        env_kwargs={"data": market, "end": "2016-01-29", "episode_days": 40},
        eval_env_kwargs={"start": "2016-02-01", "end": "2016-04-29", "episode_days": None},
        fitness="sharpe",
    )
    p = Pod(spec, out_dir=tmp_path_factory.mktemp("pod"))
    p.run()
    return p


def test_backtest_replays_the_deterministic_policy(pod):
    res = backtest(pod, start="2016-05-02", end="2016-07-29")
    assert res.dates[0] == pd.Timestamp("2016-05-02") and res.dates[-1] == pd.Timestamp(
        "2016-07-29"
    )
    assert res.account_value.iloc[0] == res.initial_amount == 1e6
    # the same policy over the same days in a fresh env gives the same account values
    env = StockTradingEnv(
        num_envs=1,
        data=pod.spec.env_kwargs["data"],
        start="2016-05-02",
        end="2016-07-29",
        episode_days=None,
    )
    obs = env.reset()
    values = [1e6]
    with torch.inference_mode():
        for _ in range(env.max_episode_steps):
            obs, *_, info = env.step(pod.learner.act(obs, deterministic=True))
            values.append(float(info["account_value"][0]))
    np.testing.assert_allclose(res.account_value.to_numpy(), values)
    # trades add up to the positions, and costs to the fee on the traded value
    net = res.trades.groupby("tic")["shares"].sum().reindex(TICKERS, fill_value=0.0)
    np.testing.assert_allclose(res.positions.iloc[-1].to_numpy(), net.to_numpy())
    assert res.trades["cost"].sum() == pytest.approx(res.trades["value"].abs().sum() * res.cost)
    summary = res.trades_summary()
    assert summary.loc["total", "buys"] == (res.trades["shares"] > 0).sum()
    assert summary.loc["total", "costs"] == pytest.approx(res.trades["cost"].sum())


def test_benchmarks_and_metrics(pod, market):
    closes = pd.read_csv(market, index_col=0, parse_dates=True)
    index = closes.mean(axis=1).rename("My index")
    res = backtest(pod, start="2016-05-02", end="2016-12-30", index=index, name="Agent X")
    table = res.metrics()
    assert list(table.index) == ["Agent X", EQUAL_WEIGHT, "My index"]
    assert list(table.columns) == list(metrics.METRICS)
    # equal weight: a third of the cash (less the fee) in each stock on day one, held
    window = closes.loc["2016-05-02":"2016-12-30"]
    shares = 1e6 * (1 - res.cost) / 3 / window.iloc[0]
    np.testing.assert_allclose(res.benchmarks[EQUAL_WEIGHT].to_numpy(), window @ shares)
    # the index is rescaled to the initial amount
    assert res.benchmarks["My index"].iloc[0] == pytest.approx(1e6)
    r = metrics.returns_from_values(res.account_value.to_numpy())
    assert table.loc["Agent X", "sharpe"] == pytest.approx(
        metrics.sharpe_ratio(r, periods_per_year=252)
    )
    d = json.loads(res.to_json())
    assert d["metrics"]["Agent X"]["sharpe"] == pytest.approx(table.loc["Agent X", "sharpe"])
    assert d["tickers"] == TICKERS and d["agent"]["spec"]["env_id"] == "StockTrading-v0"


def test_backtest_from_a_checkpoint_file(pod, market):
    path = pod.save()
    # the checkpoint names a local file: read only when the user names it too
    with pytest.raises(ValueError, match="spec.env_kwargs.data"):
        backtest(path, start="2016-05-02", end="2016-06-30")
    a = backtest(path, data=market, start="2016-05-02", end="2016-06-30")
    b = backtest(pod, start="2016-05-02", end="2016-06-30")
    pd.testing.assert_series_equal(a.account_value, b.account_value, check_names=False)
    assert a.agent["checkpoint"] == str(path)


def test_the_sample_index_is_aligned(tmp_path):
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="sac",
        max_steps=64,
        eval_episodes=1,
        env_kwargs={"data": "sp500", "tickers": ["AAPL", "MSFT"], "end": "2018-12-31"},
    )
    res = backtest(Pod(spec), start="2019-01-02", end="2019-03-29", index="sp500")
    assert "S&P 500" in res.benchmarks
    assert res.benchmarks["S&P 500"].index.equals(res.dates)


def test_bad_input_is_named(pod, market, tmp_path):
    other = write_market(tmp_path / "other.csv", tickers=["AAA", "BBB", "ZZZ"])
    with pytest.raises(ValueError, match="tickers"):
        backtest(pod, data=str(other), start="2016-05-02")
    with pytest.raises(ValueError, match="no trading days"):
        backtest(pod, start="2031-01-01")
    with pytest.raises(ValueError, match="covers"):
        short = pd.Series([1.0, 2.0], index=pd.to_datetime(["2016-05-02", "2016-05-03"]))
        backtest(pod, start="2016-05-02", end="2016-06-30", index=short)
    with pytest.raises(ValueError, match="index must be"):
        backtest(pod, start="2016-05-02", index=[1, 2, 3])
    with pytest.raises(TypeError, match="agent must be"):
        backtest(42)
    cartpole = Pod(PodSpec(env_id="CartPole-v1", algo="ppo"))
    with pytest.raises(ValueError, match="StockTrading-v0"):
        backtest(cartpole)
    with pytest.raises(ValueError, match="does not exist"):
        backtest(str(tmp_path / "missing.pt"))


# -- in-sample guard ---------------------------------------------------------------------
def test_a_range_the_agent_trained_or_was_selected_on_is_refused(pod):
    """The pod trained to 2016-01-29 and was validated 2016-02-01..2016-04-29."""
    with pytest.raises(ValueError, match=r"overlaps its training dates \(the start\.\.2016-01-29"):
        backtest(pod, start="2015-06-01", end="2015-12-31")
    with pytest.raises(ValueError, match=r"its validation dates \(2016-02-01\.\.2016-04-29\)"):
        backtest(pod, start="2016-03-01", end="2016-06-30")
    with pytest.raises(ValueError, match="backtest after 2016-04-29.*allow_in_sample=True"):
        backtest(pod, start="2016-03-01")
    result = backtest(pod, start="2015-06-01", end="2015-12-31", allow_in_sample=True)
    assert "training dates" in result.in_sample and "memory, not skill" in result.in_sample
    assert "validation" not in result.in_sample


def test_the_default_range_starts_after_the_validation_end(pod):
    result = backtest(pod, end="2016-06-30")
    assert result.dates[0] == pd.Timestamp("2016-05-02")  # the first trading day after
    assert result.in_sample == "" and result.execution_lag == 1
    assert result.prices is not None and list(result.prices.columns) == TICKERS


def test_the_cli_refuses_an_in_sample_range_unless_asked(pod, market):
    from tests.test_cli import run as cli

    path = str(pod.save())
    args = ["backtest", "--checkpoint", path, "--data", market, "--end", "2015-12-31"]
    refused = cli(*args, "--start", "2015-06-01")
    assert refused.returncode == 2, refused.stderr
    assert "elegantpod: error:" in refused.stderr and "--allow-in-sample" in refused.stderr
    assert "Traceback" not in refused.stderr
    ran = cli(*args, "--start", "2015-06-01", "--allow-in-sample", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1])["in_sample"].startswith("The backtest range")
