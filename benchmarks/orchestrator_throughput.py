"""What the orchestrator itself costs per finished segment, with 256 tiny pods.

Why: at the paper's scale (80 GPUs; hundreds of pods) the notebook's orchestrator must
never be what the cluster waits for. Each finished segment costs it a leaderboard
update, a generator decision, a store snapshot (at most once a second) and a resubmit.
Here pods do almost no training (PPO on CartPole-v1, 4 sub-envs x 8 steps per segment,
a 16-unit network, one evaluation episode), so segments finish as fast as the cluster
can turn them over and the orchestrator's own cost shows.

Cluster: a scheduler and ``--workers`` worker processes with ``--threads`` threads each,
started as separate processes on 127.0.0.1 (a local cluster whose scheduler is not in
the client's process, so that the client's CPU time is the orchestrator's alone).

Two sides, side by side in one run on the same cluster, each for ``--seconds`` after a
warm-up:

* **tournament**: ``Tournament(pods=256)`` with its leaderboard, generator (replacing
  weak pods by mutated children), store snapshots and control variables;
* **bare Dask loop** (the peer): the same ``run_segment`` tasks for 256 pods, resubmitted
  by a minimal ``as_completed`` loop with no leaderboard, generator or store state: what
  Dask alone can turn over on this machine.

Reported: sustained segment completions per second, the client process's CPU time per
segment (and the orchestrator thread's alone), the scheduler's and workers' CPU per
segment, and the ratio tournament / bare loop. Target: >= 100 completions/s.

Usage::

    python benchmarks/orchestrator_throughput.py [--pods 256] [--seconds 60] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _common import (
    default_out,
    format_table,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    write_json_atomic,
)
from distributed import Client, as_completed

from elegantpod import Tournament
from elegantpod.agents import PPOConfig
from elegantpod.clusters.local import TRIM_THRESHOLD
from elegantpod.config import PodSpec
from elegantpod.tournament.worker.segment import SegmentTask, run_segment

NAME = "orchestrator_throughput"
TINY = {"num_envs": 4, "horizon": 8, "epochs": 1, "minibatch_size": 32, "hidden": [16]}
SEGMENT_STEPS = 32
ENV_KWARGS = {"max_episode_steps": 32}
"""Episodes (evaluation included) end after 32 steps: however good a pod gets, its segment
does the same work, so both sides and every pod cost the workers alike."""


class Cluster:
    """``dask scheduler`` + ``dask worker`` processes on loopback."""

    def __init__(self, workers: int, threads: int):
        self.dir = tempfile.mkdtemp(prefix="elegantpod-orch-")
        sfile = os.path.join(self.dir, "scheduler.json")
        dask = str(Path(sys.executable).parent / "dask")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD), "OMP_NUM_THREADS": "1"}
        self.scheduler = subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
            + ["--scheduler-file", sfile],
            **quiet,
        )
        while not os.path.exists(sfile):
            time.sleep(0.05)
        self.workers = [
            subprocess.Popen(
                [dask, "worker", "--nthreads", str(threads), "--no-nanny", "--no-dashboard"]
                + ["--host", "127.0.0.1", "--scheduler-file", sfile],
                env=env,
                **quiet,
            )
            for _ in range(workers)
        ]
        self.client = Client(scheduler_file=sfile)
        self.client.wait_for_workers(workers, timeout=120)
        self.client.run(lambda: __import__("elegantpod.tournament.worker.segment"))  # warm imports

    def cpu(self) -> dict[str, float]:
        def t(p):
            c = psutil.Process(p.pid).cpu_times()
            return c.user + c.system

        return {"scheduler": t(self.scheduler), "workers": sum(t(w) for w in self.workers)}

    def close(self) -> None:
        self.client.close()
        for p in [*self.workers, self.scheduler]:
            p.terminate()
        for p in [*self.workers, self.scheduler]:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def _process_cpu() -> float:
    c = psutil.Process().cpu_times()
    return c.user + c.system


def _thread_cpu(native_id: int) -> float:
    for th in psutil.Process().threads():
        if th.id == native_id:
            return th.user_time + th.system_time
    return 0.0


def measure(cl: Cluster, count_segments, warmup: float, seconds: float, thread_id=None):
    time.sleep(warmup)
    s0, w0, c0, k0 = count_segments(), time.perf_counter(), _process_cpu(), cl.cpu()
    o0 = _thread_cpu(thread_id()) if thread_id else 0.0
    time.sleep(seconds)
    s1, w1, c1, k1 = count_segments(), time.perf_counter(), _process_cpu(), cl.cpu()
    o1 = _thread_cpu(thread_id()) if thread_id else 0.0
    n = max(1, s1 - s0)
    return {
        "segments": s1 - s0,
        "seconds": w1 - w0,
        "segments_per_second": (s1 - s0) / (w1 - w0),
        "client_cpu_ms_per_segment": 1000 * (c1 - c0) / n,
        "orchestrator_thread_cpu_ms_per_segment": 1000 * (o1 - o0) / n if thread_id else None,
        "scheduler_cpu_ms_per_segment": 1000 * (k1["scheduler"] - k0["scheduler"]) / n,
        "workers_cpu_ms_per_segment": 1000 * (k1["workers"] - k0["workers"]) / n,
    }


def run_tournament(cl: Cluster, pods: int, warmup: float, seconds: float) -> dict:
    store = tempfile.mkdtemp(prefix="elegantpod-orch-store-")
    t = Tournament(
        "CartPole-v1",
        ["ppo"],
        pods=pods,
        store=store,
        client=cl.client,
        segment_steps=SEGMENT_STEPS,
        eval_episodes=1,
        hparams={"ppo": TINY},
        env_kwargs=ENV_KWARGS,
        leaderboard_size=16,
    )

    def count():
        return t.summary()["env_steps_total"] // SEGMENT_STEPS

    t.start()
    try:
        out = measure(cl, count, warmup, seconds, thread_id=lambda: t.engine.thread.native_id)
    finally:
        t.stop()
        t.wait(180)
    s = t.summary()
    out.update(pods_total=s["pods_total"], pods_failed=s["pods_failed"], status=s["status"])
    return out


def run_bare(cl: Cluster, pods: int, warmup: float, seconds: float) -> dict:
    """The peer: the same segment tasks kept in flight by a minimal resubmit loop."""
    root = tempfile.mkdtemp(prefix="elegantpod-orch-bare-")
    cfg = PPOConfig(**{**TINY, "hidden": tuple(TINY["hidden"])})
    specs = [
        PodSpec(
            env_id="CartPole-v1",
            algo="ppo",
            hparams=cfg,
            seed=i,
            eval_episodes=1,
            env_kwargs=ENV_KWARGS,
        )
        for i in range(pods)
    ]
    seg = [0] * pods
    latest: list[str | None] = [None] * pods
    finished = [0]
    stop = threading.Event()
    capacity = sum(
        w["nthreads"] for w in cl.client.scheduler_info(n_workers=-1)["workers"].values()
    )

    def task(i):
        seg[i] += 1
        return SegmentTask(
            tournament_id="bare",
            pod_id=f"p{i:03d}",
            segment=seg[i],
            spec_json=specs[i].to_json(),
            checkpoint=f"{root}/p{i:03d}-{seg[i]:05d}.pt",
            resume_from=latest[i],
            segment_steps=SEGMENT_STEPS,
        )

    def loop():
        queue = list(range(pods))
        ac = as_completed()
        owner = {}
        for _ in range(min(capacity, pods)):
            i = queue.pop(0)
            f = cl.client.submit(run_segment, task(i), pure=False)
            owner[f.key] = i
            ac.add(f)
        for f in ac:
            i = owner.pop(f.key)
            res = f.result()
            latest[i] = res.checkpoint
            finished[0] += 1
            queue.append(i)
            if stop.is_set():
                continue
            j = queue.pop(0)
            g = cl.client.submit(run_segment, task(j), pure=False)
            owner[g.key] = j
            ac.add(g)

    th = threading.Thread(target=loop, daemon=True)
    th.start()
    try:
        out = measure(cl, lambda: finished[0], warmup, seconds, thread_id=lambda: th.native_id)
    finally:
        stop.set()
        th.join(120)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="64 pods, 10 s, results to temp")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.quick:
        a.pods, a.seconds, a.warmup = 64, 10.0, 5.0
    out_path = Path(a.out) if a.out else default_out(NAME, a.quick)
    info = machine_info()
    cl = Cluster(a.workers, a.threads)
    try:
        log(f"bare Dask loop: {a.pods} pods on {a.workers}x{a.threads} threads")
        bare = run_bare(cl, a.pods, a.warmup, a.seconds)
        log(json.dumps(bare))
        log(f"tournament: {a.pods} pods")
        tour = run_tournament(cl, a.pods, a.warmup, a.seconds)
        log(json.dumps(tour))
    finally:
        cl.close()
    rate = tour["segments_per_second"]
    cpu = tour["client_cpu_ms_per_segment"]
    at_scale = 1000 / 60.0  # 1,000 GPU pods, one-minute segments
    result = {
        "benchmark": NAME,
        "date": now_iso(),
        "machine": info,
        "config": {
            "pods": a.pods,
            "workers": a.workers,
            "threads_per_worker": a.threads,
            "segment_steps": SEGMENT_STEPS,
            "ppo_hparams": TINY,
            "eval_episodes": 1,
            "env_kwargs": ENV_KWARGS,
            "warmup_seconds": a.warmup,
            "seconds": a.seconds,
        },
        "tournament": tour,
        "bare_dask_loop": bare,
        "ratio_tournament_vs_bare_rate": safe_ratio(rate, bare["segments_per_second"]),
        "target_segments_per_second": 100,
        "target_met": rate >= 100,
        "at_scale": {
            "pods": 1000,
            "segment_seconds": 60,
            "segments_per_second": at_scale,
            "client_cpu_fraction_of_one_core": at_scale * cpu / 1000,
            "client_bound_segments_per_second": 1000 / cpu if cpu > 0 else None,
        },
    }
    write_json_atomic(out_path, result)
    rows = [
        [
            name,
            f"{r['segments_per_second']:.1f}",
            f"{r['client_cpu_ms_per_segment']:.2f}",
            f"{r['orchestrator_thread_cpu_ms_per_segment']:.2f}",
            f"{r['scheduler_cpu_ms_per_segment']:.2f}",
            f"{r['workers_cpu_ms_per_segment']:.2f}",
        ]
        for name, r in (("tournament", tour), ("bare Dask loop", bare))
    ]
    print(
        format_table(
            [
                "side",
                "segments/s",
                "client ms/seg",
                "loop thread ms/seg",
                "scheduler ms/seg",
                "workers ms/seg",
            ],
            rows,
        )
    )
    print(
        f"ratio {result['ratio_tournament_vs_bare_rate']:.2f}; at 1,000 pods x 60 s segments "
        f"the client would use {100 * result['at_scale']['client_cpu_fraction_of_one_core']:.1f}% "
        f"of one core; wrote {out_path}"
    )


if __name__ == "__main__":
    main()
