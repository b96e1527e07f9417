"""Backtests: replayed trades, benchmarks, metrics tables and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from elegantpod.config import PodSpec
from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.stats import metrics
from elegantpod.finance.trading.env import StockTradingEnv
from elegantpod.pod.pod import Pod

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


def test_the_largest_position_is_read_from_the_replayed_holdings(pod):
    res = backtest(pod, start="2016-05-02", end="2016-07-29")
    held = res.positions.to_numpy() * res.prices.to_numpy()  # value of each holding
    share = held / res.account_value.to_numpy()[:, None]
    c = res.concentration
    np.testing.assert_allclose(c.largest.to_numpy(), share.max(axis=1))
    assert c.end == pytest.approx(share[-1].max()) and c.max == pytest.approx(share.max())
    assert c.dominated_days == pytest.approx(np.mean(share.max(axis=1) > 0.5))
    last = TICKERS[int(share[-1].argmax())] if share[-1].max() > 0 else ""
    assert c.end_ticker == last
    d = json.loads(res.to_json())["concentration"]
    assert d["end"] == pytest.approx(c.end) and d["is_concentrated"] == c.is_concentrated


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


def test_backtest_from_a_checkpoint_file(pod, market, tmp_path, monkeypatch):
    path = pod.save()
    b = backtest(pod, start="2016-05-02", end="2016-06-30")
    # this user's own checkpoint naming this user's own CSV: no flag, no --data needed
    own = backtest(path, start="2016-05-02", end="2016-06-30")
    pd.testing.assert_series_equal(own.account_value, b.account_value, check_names=False)
    a = backtest(path, data=market, start="2016-05-02", end="2016-06-30")
    pd.testing.assert_series_equal(a.account_value, b.account_value, check_names=False)
    assert a.agent["checkpoint"] == str(path)
    # a checkpoint someone else could have written names data it must not make us read
    foreign = tmp_path / "foreign.pt"
    foreign.write_bytes(Path(path).read_bytes())
    foreign.chmod(0o666)
    with pytest.raises(ValueError, match="spec.env_kwargs.data"):
        backtest(foreign, start="2016-05-02", end="2016-06-30")
    assert backtest(foreign, data=market, start="2016-05-02", end="2016-06-30").dates[0]
    assert backtest(foreign, allow_remote=True, start="2016-05-02", end="2016-06-30").dates[0]
    # ... and so does one owned by another user
    monkeypatch.setattr("os.getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(ValueError, match="spec.env_kwargs.data"):
        backtest(path, start="2016-05-02", end="2016-06-30")


def test_only_this_users_own_data_tables_count_as_own(tmp_path, market):
    from elegantpod.provenance import is_own_data, is_own_file, own_sources

    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"x")
    secret = tmp_path / "id_rsa"
    secret.write_text("KEY")
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    assert is_own_file(ckpt) and is_own_data(market)
    assert not is_own_data(str(secret))  # not named like a data table
    assert not is_own_data(str(fifo))  # not a regular file (never opened)
    assert not is_own_data("https://example.com/p.csv") and not is_own_data(str(tmp_path))
    assert own_sources({"data": market}, ckpt) == {"data": market}
    link = tmp_path / "link.pt"
    link.symlink_to(ckpt)
    assert own_sources({"data": market}, link) == {}  # the naming file itself: no links
    ckpt.chmod(0o620)
    assert own_sources({"data": market}, ckpt) == {}  # the group could have written it


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


# -- the agent's tickers, by name and order (issue 42, item 1) ---------------------------
def _columns(market, tmp_path, name, order=None, rename=None, extra=False):
    """The same prices with the columns in ``order``, renamed, or with one more ticker."""
    frame = pd.read_csv(market, index_col=0)
    if extra:
        frame["ZZZ"] = frame.iloc[:, 0] * 1.5
    frame = frame[order] if order else frame
    frame = frame.rename(columns=rename or {})
    frame.to_csv(tmp_path / name)
    return str(tmp_path / name)


def test_other_data_is_traded_in_the_agents_ticker_order_or_refused(pod, market, tmp_path):
    """A quant's file with the same prices in another column order (or with more
    tickers) trades each stock by its own slot, through every path; a file where a
    ticker was renamed is refused, naming what it lacks and what the agent never traded."""
    from tests.cli.test_main import run as cli

    days = {"start": "2016-05-02", "end": "2016-06-30"}
    expected = backtest(pod, **days).account_value
    path = str(pod.save())
    shuffled = _columns(market, tmp_path, "sorted.csv", order=["<b>CCC</b>", "AAA", "BBB"])
    wider = _columns(market, tmp_path, "wider.csv", order=["ZZZ", "BBB", "<b>CCC</b>", "AAA"],
                     extra=True)  # fmt: skip
    for data in (shuffled, wider):
        for agent in (pod, path):  # a pod, and a checkpoint rebuilt on the caller's data
            got = backtest(agent, data=data, **days).account_value
            pd.testing.assert_series_equal(got, expected, check_names=False)
    renamed = _columns(market, tmp_path, "renamed.csv", rename={"<b>CCC</b>": "TSLA"})
    for agent in (pod, path):
        with pytest.raises(ValueError, match=r"lacks <b>CCC</b>; it has TSLA, which the agent"):
            backtest(agent, data=renamed, **days)
    # the command line: the same figures, and the refusal as one line
    ran = cli("backtest", "--checkpoint", path, "--data", shuffled, "--start", days["start"],
              "--end", days["end"], "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    final = json.loads(ran.stdout.splitlines()[-1])
    assert final["tickers"] == TICKERS
    agent_value = [v for k, v in final["final_value"].items() if k.endswith("agent")]
    assert agent_value == [pytest.approx(float(expected.iloc[-1]), rel=1e-9)], final
    refused = cli("backtest", "--checkpoint", path, "--data", renamed, "--start", days["start"])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "the data lacks <b>CCC</b>; it has TSLA" in refused.stderr


def test_a_checkpoint_records_its_tickers_and_features_in_order(pod):
    from elegantpod.pod.saved import SavedPod

    saved = SavedPod.read(pod.save())
    assert saved.layout == {
        "tickers": tuple(TICKERS),
        "features": tuple(pod.env.feature_names),
    }


def test_data_without_the_agents_features_names_them(pod, market, tmp_path):
    env = StockTradingEnv(data=market)
    layout = {"tickers": TICKERS, "features": [*env.feature_names, "atr_14"]}
    with pytest.raises(ValueError, match=r"lacks atr_14: an agent reads exactly the features"):
        StockTradingEnv.fit_layout({"data": market}, layout)


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
    from tests.cli.test_main import run as cli

    path = str(pod.save())
    args = ["backtest", "--checkpoint", path, "--data", market, "--end", "2015-12-31"]
    refused = cli(*args, "--start", "2015-06-01")
    assert refused.returncode == 2, refused.stderr
    assert "elegantpod: error:" in refused.stderr and "--allow-in-sample" in refused.stderr
    assert "Traceback" not in refused.stderr
    ran = cli(*args, "--start", "2015-06-01", "--allow-in-sample", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1])["in_sample"].startswith("The backtest range")


# -- the selection a store records (issue 29, item 13) -----------------------------------
SCORED = 26


def make_store(root, pod, *, scored=SCORED, best="p020", evaluations=1):
    """A tournament's store as a run leaves it, written directly (no cluster): its spec,
    one snapshot in which ``scored`` pods have ``evaluations`` scored segments each, and
    ``pod``'s checkpoint as the leader's ``pods/<best>/seg-00002.pt``."""
    from elegantpod.tournament.core.leaderboard import Entry
    from elegantpod.tournament.core.record import PodRecord
    from elegantpod.tournament.core.spec import make_spec
    from elegantpod.tournament.store.store import Store

    s = pod.spec
    spec = make_spec(
        env="StockTrading-v0",
        algos=("ppo",),
        pods=4,
        max_steps=10_000,
        env_kwargs=s.env_kwargs,
        eval_env_kwargs=s.eval_env_kwargs,
        fitness="sharpe",
    )
    root.mkdir(parents=True)
    store = Store(root)
    store.write_json("tournament.json", spec.to_dict())
    records = [
        PodRecord(
            pod_id=f"p{i:03d}",
            algo="ppo",
            hparams={},
            seed=i,
            parent=None if i < 4 else "p001",
            status="idle",
            segment=2,
            history=[
                {"segment": k + 1, "env_steps": 2048, "score": 0.01 * i - k, "time": float(i)}
                for k in range(evaluations)
            ],
        )
        for i in range(scored)
    ]
    name = f"pods/{best}/seg-00002.pt"
    entry = Entry(
        pod_id=best, algo="ppo", hparams={}, score_mean=1.5, score_std=0.0, env_steps=4096,
        wall_seconds=3.0, checkpoint=name, segment=2, parent="p001",
    )  # fmt: skip
    store.save_state(
        {
            "leaderboard": [entry.to_dict()],
            "pods": [r.to_dict() for r in records],
            "state": {"elapsed_seconds": 100.0},
        }
    )
    ckpt = root / "pods" / best / "seg-00002.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(Path(pod.save()).read_bytes())
    return ckpt


def files_of(root):
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def store(pod, tmp_path):
    root = tmp_path / "store"
    return root, make_store(root, pod)


def test_a_checkpoint_in_a_store_is_deflated_by_the_stores_selection(store, market):
    from elegantpod.finance.stats.verdict import verdict

    root, ckpt = store
    before = files_of(root)
    held_out = {"start": "2016-05-02", "end": "2016-07-29"}
    r = backtest(ckpt, **held_out)
    assert r.trials == SCORED and str(root) in r.selection
    assert r.to_dict()["trials"] == SCORED and r.agent["pod"] == "p020"
    assert f"over {SCORED} trials is" in verdict(r)
    # the store itself: its best agent, the same selection
    best = backtest(root, **held_out)
    assert best.trials == SCORED and best.agent["pod"] == "p020"
    assert best.agent["checkpoint"] == str(ckpt) and best.agent["lineage"][0]["parent"] == "p001"
    pd.testing.assert_series_equal(best.account_value, r.account_value)
    # trials=N overrides
    assert backtest(ckpt, trials=5, **held_out).trials == 5
    with pytest.raises(ValueError, match="trials must be"):
        backtest(ckpt, trials=0, **held_out)
    # read only: no lease taken, nothing written or touched
    assert files_of(root) == before and not (root / "lease.json").exists()


def test_the_selection_counts_evaluations_not_pods(pod, tmp_path):
    """Found: the winner was the best of 171 segment evaluations over 34 pods, but its
    deflated Sharpe ratio used 34 trials. Every evaluation compared is a trial."""
    root = tmp_path / "many"
    ckpt = make_store(root, pod, scored=34, evaluations=5)
    held_out = {"start": "2016-05-02", "end": "2016-07-29"}
    r = backtest(ckpt, **held_out)
    assert r.trials == 170 and r.selection.startswith("the 170 evaluations")
    assert backtest(root, **held_out).trials == 170


def test_an_unknown_selection_is_said_never_assumed(pod):
    from elegantpod.finance.stats.verdict import verdict

    r = backtest(pod, start="2016-05-02", end="2016-07-29")
    assert r.selection == "unknown" and r.to_dict()["trials"] is None
    said = verdict(r)
    assert "selection unknown: its deflated Sharpe ratio over 1 trial" in said
    if r.metrics().iloc[0]["sharpe"] > 0:  # a skill that the selection could explain
        assert "--trials N" in said and "luck is unlikely" not in said


def test_a_store_checkpoint_that_is_not_the_recorded_agent_is_refused(store, tmp_path):
    root, ckpt = store
    kwargs = {"data": "sp500", "tickers": ["AAPL"], "end": "2018-12-31"}
    other = Pod(PodSpec(env_id="StockTrading-v0", algo="sac", max_steps=64, env_kwargs=kwargs))
    ckpt.write_bytes(Path(other.save(tmp_path / "sac.pt")).read_bytes())
    with pytest.raises(
        ValueError, match="holds a 'sac' agent .* its record in the store says 'ppo'"
    ):
        backtest(root)
    with pytest.raises(ValueError, match="its record in the store says 'ppo'"):
        backtest(ckpt)  # the checkpoint itself, inside its store, is checked too


def test_the_users_own_store_resumes_without_a_flag(store):
    from elegantpod.tournament.orchestrator import Tournament

    root, _ = store
    t = Tournament.resume(root)  # names this user's own CSV: no allow_remote needed
    assert t.spec.env_kwargs["data"]
    (root / "tournament.json").chmod(0o666)  # now anyone could have written what it names
    with pytest.raises(ValueError, match="names data to read"):
        Tournament.resume(root)
    assert Tournament.resume(root, allow_remote=True).spec.env_id == "StockTrading-v0"


def test_the_cli_backtest_deflates_by_the_store_and_says_so(store, market, capsys, monkeypatch):
    from tests.cli.test_main import main_in_process

    root, ckpt = store
    status, out, err = main_in_process(
        ["backtest", "--checkpoint", ckpt, "--end", "2016-07-29"], capsys, monkeypatch
    )
    assert status == 0, err
    said = [ln for ln in out.splitlines() if ln.startswith("verdict: ")]
    assert len(said) == 1 and f"over {SCORED} trials is" in said[0]
    # the store folder: its best agent; --trials overrides; --json shows the dates
    args = ["backtest", "--checkpoint", root, "--trials", "3", "--end", "2016-07-29", "--json"]
    status, out, err = main_in_process(args, capsys, monkeypatch)
    d = json.loads(out.splitlines()[-1])
    assert status == 0 and d["trials"] == 3 and "over 3 trials is" in d["verdict"]
    assert d["agent"]["spec"]["env_kwargs"]["end"] == "2016-01-29"
    assert d["agent"]["sample_ranges"] == {
        "training": [None, "2016-01-29"],
        "validation": ["2016-02-01", "2016-04-29"],
    }
    # in-sample, said in the terminal
    args = ["backtest", "--checkpoint", ckpt, "--start", "2016-02-01", "--end", "2016-04-29"]
    status, out, err = main_in_process([*args, "--allow-in-sample"], capsys, monkeypatch)
    assert status == 0 and out.startswith("IN-SAMPLE: The backtest range 2016-02-01")
    assert "In-sample" in [ln for ln in out.splitlines() if ln.startswith("verdict: ")][0]


def test_the_cli_allow_remote_reads_what_a_foreign_checkpoint_names(pod, tmp_path, capsys,
                                                                     monkeypatch):  # fmt: skip
    from tests.cli.test_main import main_in_process

    foreign = tmp_path / "foreign.pt"
    foreign.write_bytes(Path(pod.save()).read_bytes())
    foreign.chmod(0o666)  # anyone could have written it
    args = ["backtest", "--checkpoint", foreign, "--end", "2016-07-29"]
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert status == 2 and "spec.env_kwargs.data" in err and len(err.splitlines()) == 1
    status, out, err = main_in_process([*args, "--allow-remote"], capsys, monkeypatch)
    assert status == 0, err
    assert "selection unknown" in out  # a bare checkpoint: never silently 1 trial


def test_a_deployment_and_export_take_a_store_as_its_best_agent(
    store, tmp_path, capsys, monkeypatch
):
    """As backtest does: a store means its best agent, checked to be what its record
    says; ``Policy.load`` reads files and run folders, and names the way to a store."""
    from elegantpod.pod.checkpoint import CheckpointError
    from elegantpod.policy.policy import Policy
    from elegantpod.tournament.deployment import Deployment
    from tests.cli.test_main import main_in_process

    root, ckpt = store
    from_store, from_file = Deployment.of(root), Deployment.of(ckpt)
    assert from_store.checkpoint == str(ckpt) and from_store.selection.trials >= 1
    assert from_file.selection.pod == from_store.selection.pod  # it lies in the store
    with pytest.raises(CheckpointError, match=r"Deployment\.of\(store\)"):
        Policy.load(root)
    from_store, from_file = from_store.policy, Policy.load(ckpt)
    obs = torch.zeros(3, *from_file.obs_shape)
    assert torch.equal(torch.as_tensor(from_store.predict(obs)[0]),
                       torch.as_tensor(from_file.predict(obs)[0]))  # fmt: skip
    out = tmp_path / "best.onnx"
    status, said, err = main_in_process(
        ["export", "--checkpoint", root, "--out", out], capsys, monkeypatch
    )
    assert status == 0 and out.is_file(), err
