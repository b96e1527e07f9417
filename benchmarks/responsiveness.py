"""How long the notebook waits: dashboard refresh, tracker feed, report rendering.

Why a benchmark and not a test: these are latencies, and a loaded 2-core CI box can
stretch any of them several times over. The tests check what must hold whatever the
load (no lost events, a feed that never waits on a logger, a report with every chart);
the figures live here, measured on a named machine, with the targets the tests once
asserted as wall-clock bounds:

* **dashboard**: a live :class:`~elegantpod.widgets.dashboard.Dashboard` over a
  tournament of 32 tiny PPO pods on a 2-worker ``LocalCluster``, refreshed by hand
  every 50 ms while it runs, as its thread would. Reported: each refresh's time and
  each ``leaderboard`` + ``summary()`` call's (the client calls a notebook makes).
  Targets: a refresh under 2 s, client calls under 0.5 s.
* **tracker**: a :class:`~elegantpod.tracking.Tracker` feeding a logger that takes
  0.3 s a call (a slow tracking server): the time 10 ``observe`` calls take (target
  under 0.2 s: the feed never waits on the logger) and ``close()`` with
  ``close_seconds=0.2`` (target under 1 s).
* **report**: ``finance.report.render_html`` of a four-year (1,008-day) backtest with
  every chart. Target: seconds, not tens of seconds (a quadratic slip shows).

There is no peer: no other RL library has this dashboard, tracker or report. Results go
to ``benchmarks/results/responsiveness.json`` with the machine.

Usage::

    python benchmarks/responsiveness.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import default_out, log, machine_info, now_iso, write_json_atomic


def _stats(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "n": len(values),
        "median_s": statistics.median(values) if values else None,
        "p95_s": values[int(0.95 * (len(values) - 1))] if values else None,
        "max_s": values[-1] if values else None,
    }


def dashboard(pods: int) -> dict:
    """Refresh and client-call latencies while ``pods`` tiny pods run."""
    import elegantpod
    from elegantpod import Tournament
    from elegantpod.widgets.dashboard import Dashboard

    client = elegantpod.cluster(n_workers=2, dashboard_address=None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = Tournament(
                env="CartPole-v1",
                algos=["ppo"],
                pods=pods,
                segment_steps=256,
                max_steps=pods * 256 * 2,
                eval_episodes=2,
                hparams={"ppo": {"num_envs": 8, "horizon": 16}},
                store=Path(tmp) / "s",
                client=client,
            )
            t.start()
            dash = Dashboard(t, refresh_seconds=0)
            refresh, calls = [], []
            while t.status == "running":
                t0 = time.perf_counter()
                dash.refresh()
                refresh.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                _ = t.leaderboard
                t.summary()
                calls.append(time.perf_counter() - t0)
                time.sleep(0.05)
            summary = t.wait(300)
            dash.close()
    finally:
        elegantpod.shutdown(client)
    return {
        "pods": pods,
        "status": summary["status"],
        "refresh": _stats(refresh),
        "client_calls": _stats(calls),
        "targets": {"refresh_max_s": 2.0, "client_calls_max_s": 0.5},
    }


def tracker(repeats: int) -> dict:
    """The feed's and close's time with a logger that takes 0.3 s a call."""
    from elegantpod.tournament.core.record import PodRecord
    from elegantpod.tracking import Logger, Tracker

    class Slow(Logger):
        name = "slow"

        def log_metrics(self, run_id, metrics, step):
            time.sleep(0.3)

    feed, close = [], []
    for _ in range(repeats):
        rec = {"p000": PodRecord("p000", "ppo", {"lr": 0.1}, 0, origin={"kind": "start"})}
        tr = Tracker([Slow()], queue_items=3, close_seconds=0.2)
        tr.open("g", {})
        t0 = time.perf_counter()
        for i in range(1, 11):
            row = {"segment": i, "env_steps": 100 * i, "score": float(i), "time": 1.5 * i}
            rec["p000"].history.append(row)
            tr.observe(rec, {})
        feed.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tr.close()
        close.append(time.perf_counter() - t0)
    return {
        "observe_10": _stats(feed),
        "close": _stats(close),
        "targets": {"observe_10_max_s": 0.2, "close_max_s": 1.0},
    }


def report(repeats: int) -> dict:
    """``render_html`` of a 1,008-day backtest, every chart."""
    from elegantpod.finance import EQUAL_WEIGHT, BacktestResult
    from elegantpod.finance.report.report import render_html

    rng = np.random.default_rng(1)
    market = rng.normal(0.0004, 0.012, 1008)
    agent = 0.6 * market + rng.normal(0.0001, 0.005, 1008)
    dates = pd.bdate_range("2019-01-02", periods=1009)
    value = 1e6 * np.concatenate([[1.0], np.cumprod(1.0 + agent)])
    ew = 1e6 * np.concatenate([[1.0], np.cumprod(1.0 + market)])
    prices = pd.DataFrame({"AAA": 100 * ew / 1e6, "BBB": 110 * ew / 1e6}, index=dates)
    shares = pd.DataFrame(0.0, index=dates, columns=["AAA", "BBB"])
    shares.iloc[:, 0] = np.floor(0.5 * value / prices.iloc[:, 0].to_numpy())
    res = BacktestResult(
        account_value=pd.Series(value, index=dates, name="Agent"),
        benchmarks={EQUAL_WEIGHT: pd.Series(ew, index=dates, name=EQUAL_WEIGHT)},
        trades=pd.DataFrame(columns=["date", "tic", "shares", "price", "value", "cost"]),
        positions=shares,
        periods_per_year=252,
        initial_amount=1e6,
        cost=0.001,
        agent={"name": "Agent"},
        data_source="synthetic.csv",
        execution_lag=1,
        prices=prices,
    )
    seconds, size = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        size = len(render_html(res))
        seconds.append(time.perf_counter() - t0)
    return {"days": 1008, "html_bytes": size, "render": _stats(seconds), "target_max_s": 15.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pods", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="a smoke run, results to /tmp")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    out = args.out or default_out("responsiveness", args.quick)
    result = {"benchmark": "responsiveness", "when": now_iso(), "machine": machine_info()}
    log("report rendering ...")
    result["report"] = report(repeats)
    log("tracker feed with a slow logger ...")
    result["tracker"] = tracker(repeats)
    log(f"dashboard refresh over {args.pods} pods ...")
    result["dashboard"] = dashboard(8 if args.quick else args.pods)
    write_json_atomic(out, result)
    d, tr, r = result["dashboard"], result["tracker"], result["report"]
    log(
        f"dashboard refresh median {d['refresh']['median_s']:.3f} s, max "
        f"{d['refresh']['max_s']:.3f} s; client calls max {d['client_calls']['max_s']:.3f} s; "
        f"tracker feed max {tr['observe_10']['max_s']:.3f} s, close max "
        f"{tr['close']['max_s']:.3f} s; report median {r['render']['median_s']:.2f} s"
    )
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
