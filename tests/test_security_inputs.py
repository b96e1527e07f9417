"""Untrusted inputs: a checkpoint that names URLs or files, hostile hyperparameters.

A checkpoint may come from anyone. Loading one must not fetch a URL or read a local file
that only its spec names; the tests craft such checkpoints from a real one and watch a
real HTTP server on 127.0.0.1 for requests.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from elegantpod.agents.ppo import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.finance.backtests.backtest import backtest
from elegantpod.pod.checkpoint import CheckpointError
from elegantpod.pod.pod import Pod
from tests.finance.backtests.test_backtest import write_market


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    return write_market(tmp_path_factory.mktemp("market") / "closes.csv")


@pytest.fixture(scope="module")
def server(market):
    """A real HTTP server on 127.0.0.1 that serves the market CSV and records requests."""
    requests: list[str] = []
    body = Path(market).read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            requests.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def trading_checkpoint(market, tmp_path_factory):
    """A real checkpoint of a tiny trading agent that trained on a local CSV."""
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        hparams=PPOConfig(num_envs=4, horizon=8),
        max_steps=32,
        eval_episodes=1,
        env_kwargs={"data": str(market), "end": "2016-01-29", "episode_days": 20},
        eval_env_kwargs={"start": "2016-02-01", "end": "2016-04-29", "episode_days": None},
    )
    pod = Pod(spec)
    pod.run()
    return pod.save(tmp_path_factory.mktemp("agent") / "checkpoint.pt")


def craft(source, target, **env_kwargs) -> Path:
    """``source`` with ``env_kwargs`` (and ``eval_env_kwargs`` under ``eval_``) changed."""
    data = torch.load(source, weights_only=True)
    spec = json.loads(data["spec"])
    for key, value in env_kwargs.items():
        if key.startswith("eval_"):
            spec["eval_env_kwargs"][key.removeprefix("eval_")] = value
        else:
            spec["env_kwargs"][key] = value
    data["spec"] = json.dumps(spec)
    torch.save(data, target)
    return Path(target)


def test_a_url_in_a_checkpoint_is_never_fetched(trading_checkpoint, server, market, tmp_path):
    base, requests = server
    url = f"{base}/x.csv"
    evil = craft(trading_checkpoint, tmp_path / "evil.pt", data=url)
    with pytest.raises(CheckpointError, match=r"names '.*/x\.csv' as spec\.env_kwargs\.data"):
        Pod.from_checkpoint(evil)
    with pytest.raises(CheckpointError, match="env_kwargs=\\{'data': ...\\}"):
        backtest(str(evil), start="2016-05-02", end="2016-06-30")
    eval_only = craft(
        trading_checkpoint, tmp_path / "eval.pt", data="sp500", eval_data=f"{base}/y.csv"
    )
    with pytest.raises(CheckpointError, match=r"spec\.eval_env_kwargs\.data"):
        Pod.from_checkpoint(eval_only)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "backtest", "--checkpoint", str(evil)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "--data" in p.stderr and url in p.stderr
    assert requests == []  # nothing reached the server
    # the user's own data stands in for the checkpoint's URL
    res = backtest(str(evil), data=str(market), start="2016-05-02", end="2016-06-30")
    assert len(res.account_value) > 20 and requests == []
    # and a URL the user passes is theirs to fetch
    pod = Pod.from_checkpoint(evil, env_kwargs={"data": f"{base}/mine.csv"})
    assert pod.env_steps == 32 and set(requests) == {"/mine.csv"}


def test_a_local_path_in_a_checkpoint_is_read_only_when_the_user_names_it(
    trading_checkpoint, market, tmp_path
):
    # This user's own checkpoint naming this user's own table needs no flag (issue 29,
    # item 14); one that came from someone else (another owner) does.
    assert Pod.from_checkpoint(trading_checkpoint).spec.env_kwargs["data"] == str(market)
    foreign = tmp_path / "checkpoint.pt"
    shutil.copy(trading_checkpoint, foreign)
    os.chown(foreign, 12345, 12345)
    with pytest.raises(CheckpointError, match="closes.csv' as spec.env_kwargs.data"):
        Pod.from_checkpoint(foreign)
    mine = Pod.from_checkpoint(trading_checkpoint, env_kwargs={"data": str(market)})
    trusted = Pod.from_checkpoint(trading_checkpoint, allow_remote=True)
    assert mine.spec.env_kwargs == trusted.spec.env_kwargs
    obs = torch.randn(5, mine.learner.obs_shape[0])
    torch.testing.assert_close(mine.learner.act(obs), trusted.learner.act(obs))
    a = backtest(trading_checkpoint, data=str(market), start="2016-05-02", end="2016-06-30")
    b = backtest(trading_checkpoint, allow_remote=True, start="2016-05-02", end="2016-06-30")
    assert a.account_value.tolist() == b.account_value.tolist()


def test_shipped_sample_data_needs_nothing_from_the_user(tmp_path):
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        hparams=PPOConfig(num_envs=2, horizon=4),
        eval_episodes=1,
        env_kwargs={"data": "sp500", "tickers": ["AAPL", "MSFT"], "end": "2012-12-31"},
    )
    path = Pod(spec).save(tmp_path / "ck.pt")
    assert Pod.from_checkpoint(path).spec.env_kwargs["data"] == "sp500"


# -- budgets and sizes: hard limits and a memory estimate, before any allocation ------
def test_a_tournament_mutation_cannot_set_absurd_budgets(tmp_path):
    from elegantpod.tournament.orchestrator import Tournament

    t = Tournament("CartPole-v1", "ppo", 2, store=str(tmp_path / "store"), max_steps=10_000)
    pod = t.add_pod("ppo")
    with pytest.raises(ValueError, match=r"epochs must be <= 1,000 \(a hard limit\)"):
        t.mutate(pod, epochs=10**9)
    with pytest.raises(ValueError, match=r"lr must be <= 1.0 \(a hard limit\), got 1e\+308"):
        t.mutate(pod, lr=1e308)
    assert t.pod(pod)["hparams"]["epochs"] == PPOConfig().epochs  # untouched
    assert t.mutate(pod, epochs=1000)["epochs"] == 1000  # the limit itself is allowed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-envs", "1000000000"], "num_envs must be <= 4,194,304"),
        (["--set", "hidden=1000000,1000000"], "hidden layer size 1,000,000 exceeds 65,536"),
        (["--set", "horizon=1000000000"], "horizon must be <= 100,000"),
        (["--set", "epochs=1000000000"], "epochs must be <= 1,000"),
        # within every limit, but terabytes together: the estimate refuses it
        (["--num-envs", "4194304", "--set", "horizon=100000"], "would need about"),
    ],
)
def test_cli_refuses_sizes_that_cannot_be_allocated(args, message, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "train", "--env", "CartPole-v1"]
        + ["--algo", "ppo", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr


def test_memory_estimate_names_the_sizes_before_allocating():
    huge = PPOConfig(num_envs=2**22, horizon=100_000)
    with pytest.raises(ValueError, match=r"num_envs=4194304, horizon=100000.*GiB"):
        Pod(PodSpec(env_id="CartPole-v1", algo="ppo", hparams=huge))
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=PPOConfig())
    from elegantpod.pod.memory import estimate_pod_bytes

    small = estimate_pod_bytes(spec, obs_dim=4, act_dim=2)
    assert 100_000 < small < 50 * 2**20  # defaults: a few MiB
    wider = dataclasses.replace(spec, hparams=PPOConfig(hidden=(4096, 4096)))
    assert estimate_pod_bytes(wider, 4, 2) > 16 * 4096 * 4096  # weights, grads, moments
