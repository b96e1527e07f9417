"""Tournament env steps per second on 1, 2 (and more) Dask workers: does it scale?

Why: pods are independent, so a tournament should turn N workers into N times the env
steps. Each side runs the same tournament (PPO on CartPole-v1, default hyperparameters,
a population of 8 pods so that every worker always has a pod) on an embedded
``elegantpod.cluster(n_workers=k)`` for ``--seconds`` after a warm-up, and counts the
env steps its finished segments report. The peer of k workers is the 1-worker run in
the same script: efficiency(k) = steps/s(k) / (k x steps/s(1)). Worker counts alternate
over ``--repeats`` rounds (1, 2, 1, 2...) so that machine noise hits both; medians.

The orchestrator, scheduler and client share the machine's cores with the workers, so
on a 2-core machine 2 workers cannot reach 2.0x; the figure says how close they come.

Usage::

    python benchmarks/tournament_scaling.py [--workers 1 2] [--seconds 60] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import (
    default_out,
    format_table,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

from elegantpod import Tournament, cluster

NAME = "tournament_scaling"


def one_run(k: int, pods: int, warmup: float, seconds: float, seed: int) -> float:
    client = cluster(n_workers=k, dashboard_address=None)
    try:
        client.run(lambda: __import__("elegantpod.tournament.worker.segment"))
        t = Tournament(
            "CartPole-v1",
            ["ppo"],
            pods=pods,
            store=tempfile.mkdtemp(prefix="elegantpod-scaling-"),
            client=client,
            seed=seed,
        )
        t.start()
        time.sleep(warmup)
        s0, w0 = t.summary()["env_steps_total"], time.perf_counter()
        time.sleep(seconds)
        s1, w1 = t.summary()["env_steps_total"], time.perf_counter()
        t.stop()
        t.wait(180)
        return (s1 - s0) / (w1 - w0)
    finally:
        cl = client.cluster
        client.close()
        cl.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--pods", type=int, default=8)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="15 s per side, 1 repeat, to temp")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.warmup, a.repeats = 15.0, 10.0, 1
    if 1 not in a.workers:
        raise SystemExit("--workers must include 1 (the peer every efficiency is measured against)")
    out_path = Path(a.out) if a.out else default_out(NAME, a.quick)
    info = machine_info()
    rates: dict[int, list[float]] = {k: [] for k in a.workers}
    for r in range(a.repeats):
        for k in a.workers:
            sps = one_run(k, a.pods, a.warmup, a.seconds, seed=r)
            log(f"round {r}: {k} worker(s): {sps:,.0f} env steps/s")
            rates[k].append(sps)
    base = summarize(rates[1])["median"]
    per_k = {
        str(k): {
            "env_steps_per_second": summarize(v),
            "speedup_vs_1": safe_ratio(summarize(v)["median"], base),
            "efficiency": safe_ratio(summarize(v)["median"], k * base),
        }
        for k, v in rates.items()
    }
    write_json_atomic(
        out_path,
        {
            "benchmark": NAME,
            "date": now_iso(),
            "machine": info,
            "config": {
                "env": "CartPole-v1",
                "algo": "ppo (default hyperparameters)",
                "pods": a.pods,
                "threads_per_worker": 1,
                "warmup_seconds": a.warmup,
                "seconds": a.seconds,
                "repeats": a.repeats,
            },
            "workers": per_k,
        },
    )
    rows = [
        [
            k,
            f"{d['env_steps_per_second']['median']:,.0f}",
            f"{d['speedup_vs_1']:.2f}x",
            f"{d['efficiency']:.2f}",
        ]
        for k, d in per_k.items()
    ]
    print(format_table(["workers", "env steps/s", "speed-up", "efficiency"], rows))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
