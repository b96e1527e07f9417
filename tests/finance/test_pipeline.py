"""End to end on the shipped data: a tournament ranked by validation Sharpe on a real
LocalCluster, a backtest of its best agent on later dates, and the HTML report opened
in headless Chromium."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import pytest

import elegantpod
from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.market.splits import DateSplits
from elegantpod.finance.stats import metrics
from elegantpod.finance.trading.env import StockTradingEnv
from tests.helpers import need_chromium, open_report

SPLITS = DateSplits(
    train=("2012-01-01", "2016-12-31"),
    validation=("2017-01-01", "2018-12-31"),
    backtest=("2019-01-01", "2020-12-31"),
)
TICKERS = ["AAPL", "JNJ", "JPM", "KO", "XOM"]


@pytest.fixture(scope="module")
def tournament(client, tmp_path_factory):
    store = tmp_path_factory.mktemp("fin") / "store"
    t = elegantpod.Tournament(
        "StockTrading-v0",
        algos=["ppo", "sac"],
        pods=2,
        store=str(store),
        client=client,
        max_steps=24_000,
        segment_steps=4_000,
        **SPLITS.tournament_options(
            fitness="sharpe", data="sp500", tickers=TICKERS, episode_days=63
        ),
    )
    t.start()
    t.wait(timeout=300)
    return t


def test_tournament_ranks_by_validation_sharpe(tournament):
    t = tournament
    assert t.status == "finished"
    board = t.leaderboard
    assert len(board) >= 2 and board["score_mean"].map(math.isfinite).all()
    best = t.best()
    # the leaderboard's score is the best agent's Sharpe over the validation range
    env = StockTradingEnv(
        num_envs=1,
        data="sp500",
        tickers=TICKERS,
        episode_days=None,
        start=SPLITS.validation[0],
        end=SPLITS.validation[1],
    )
    obs = env.reset()
    import torch

    with torch.inference_mode():
        for _ in range(env.max_episode_steps):
            obs, *_ = env.step(best.learner.act(obs, deterministic=True))
    sharpe = metrics.sharpe_ratio(
        metrics.returns_from_values(env.episode_values()[:, 0].numpy()), periods_per_year=252
    )
    assert board["score_mean"].iloc[0] == pytest.approx(sharpe, rel=1e-6)
    # the finance view deflates each Sharpe by every evaluation scored (not the pods),
    # over the validation days
    from elegantpod.finance.stats.selection import deflated_sharpe_of_ratio

    trials = len(t.history().dropna(subset=["score"]))
    assert trials > t.history().dropna(subset=["score"])["pod"].nunique()  # pods re-scored
    days = env.max_episode_steps
    assert board.attrs == {
        "trials": trials,
        "validation_days": days,
        "env_columns": ["validation_dsr"],  # what a view shows beside the score
    }
    want = deflated_sharpe_of_ratio(board["score_mean"].iloc[0], days, trials).dsr
    assert board["validation_dsr"].iloc[0] == pytest.approx(want)
    assert f"validation_dsr {board['validation_dsr'].iloc[0]:.4g}" in t._repr_html_()
    assert f"best of {trials} luck-only evaluations over {days} validation days" in t._repr_html_()


def test_backtest_of_the_best_agent_and_its_report(tournament, tmp_path):
    res = backtest(tournament, start=SPLITS.backtest[0], end=SPLITS.backtest[1], index="sp500")
    assert res.dates[0].year == 2019 and res.dates[-1].year == 2020
    table = res.metrics()
    assert len(table) == 3 and table.notna().all().all()
    assert res.agent["fitness"] == "sharpe" and res.agent["lineage"]
    assert res.agent["lineage"][0]["pod"] == tournament.leaderboard["pod"].iloc[0]
    path = res.to_html(tmp_path / "report.html")
    need_chromium()
    page = open_report(path, tmp_path / "report.png")
    assert [r[0] for r in page["rows"]] == [res.name, "Equal-weight buy & hold", "S&P 500"]
    assert all(len(r) == 1 + len(metrics.METRICS) for r in page["rows"])
    assert page["chart_loaded"] and page["chart_std"] > 10
    assert all(u.startswith(("file://", "data:")) for u in page["requests"])
    keep = os.environ.get("ELEGANTPOD_ARTIFACTS")
    if keep:
        shutil.copy(tmp_path / "report.png", os.path.join(keep, "pipeline_report.png"))


def test_cli_backtest_of_the_best_checkpoint(tournament, tmp_path):
    ckpt = tournament.summary()["best_checkpoint"]
    html = tmp_path / "cli.html"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "elegantpod.cli.main",
            "backtest",
            "--checkpoint",
            ckpt,
            "--start",
            SPLITS.backtest[0],
            "--end",
            SPLITS.backtest[1],
            "--index",
            "sp500",
            "--html",
            str(html),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["start"] == "2019-01-02" and d["html"] == str(html) and html.exists()
    assert set(d["metrics"]) == {d["agent"]["name"], "Equal-weight buy & hold", "S&P 500"}
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "elegantpod.cli.main",
            "backtest",
            "--checkpoint",
            ckpt,
            "--start",
            "2019-01-01",
            "--html",
            str(tmp_path / "x.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "x.txt" in bad.stderr

    def cli_backtest(*args):
        cmd = [sys.executable, "-m", "elegantpod.cli", "backtest", "--checkpoint", ckpt]
        return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120)

    # an unwritable report folder is refused before the backtest runs (/proc refuses even
    # root, who ignores permission bits)
    unwritable = "/proc" if os.path.isdir("/proc") else None
    if unwritable:
        p = cli_backtest("--html", f"{unwritable}/report.html")
        assert p.returncode == 2 and "is not writable" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1  # one error line, no backtest output
    # built-in indexes by name in any case; a wrong one names them
    p = cli_backtest("--index", "SP500", "--json")
    assert p.returncode == 0 and "S&P 500" in json.loads(p.stdout)["metrics"], p.stderr
    p = cli_backtest("--index", "nasdaq")
    assert p.returncode == 2 and "neither a built-in index (sp500)" in p.stderr


def test_bad_finance_settings_fail_before_any_cluster_work(tmp_path):
    base = dict(algos=["ppo"], pods=2, max_steps=1000, client=None)
    with pytest.raises(ValueError, match="unknown fitness 'sharp'"):
        elegantpod.Tournament("StockTrading-v0", store=str(tmp_path / "a"), fitness="sharp", **base)
    with pytest.raises(ValueError, match=r"unknown fitness 'sharpe' for 'CartPole-v1'; choose one"):
        elegantpod.Tournament("CartPole-v1", store=str(tmp_path / "b"), fitness="sharpe", **base)
    with pytest.raises(ValueError, match="--eval-env-arg episode_days=null"):  # says how
        elegantpod.Tournament(
            "StockTrading-v0",
            store=str(tmp_path / "b"),
            fitness="sharpe",
            eval_env_kwargs={"start": "2017-01-03", "end": "2018-12-31"},
            **base,
        )
    with pytest.raises(ValueError, match="JSON"):
        elegantpod.Tournament(
            "StockTrading-v0",
            store=str(tmp_path / "c"),
            env_kwargs={"data": elegantpod.finance.sp500_sample()},
            **base,
        )
    with pytest.raises(ValueError, match="unknown tickers"):
        elegantpod.Tournament(
            "StockTrading-v0", store=str(tmp_path / "d"), env_kwargs={"tickers": ["NOPE"]}, **base
        )
    assert not any((tmp_path / n).exists() for n in "abcd")
