"""A tournament on one GPU against one pod trained alone there: does packing pay?

Why: one small pod leaves a big GPU mostly idle (an H200 ran at 17% for one CartPole pod,
and a trading tournament reached 6% of a lone pod's speed when it trained its pods on the
CPU, one at a time). With the defaults (device "auto", several pods per GPU, resident
pods) a tournament of 8 pods should keep the GPU busy and beat one pod. For each task,
side by side in one run:

* **lone pod**: ``elegantpod.train`` of one PPO pod in this process for ``--seconds``
  with the task's settings (env steps / wall second, evaluations included);
* **tournament**: 8 pods of the same settings, default device, on the GPU worker(s) for
  ``--seconds`` after a warm-up; env steps / wall second over the timed window, and the
  GPU's utilisation sampled by ``nvidia-smi`` every half second over that window.

Targets (one H200): utilisation mean >= 70%, tournament >= 1.5x the lone pod. Tasks:
CartPole-v1 (16,384 sub-envs per pod) and StockTrading-v0 (1,024 accounts per pod,
validation Sharpe as fitness). Without a GPU it runs on the CPU as a dry run (``--quick``
shrinks it) and says so in the JSON: those figures are not the GPU result.

The cluster is ``elegantpod.cluster(gpu=True)``: a ``GPUCluster`` of single-thread worker
processes, ``pods_per_gpu`` of them per GPU (one pod per process, one Inductor compile
thread each; :mod:`elegantpod.clusters.gpu`). Without a GPU, a CPU ``LocalCluster``.

Usage::

    python benchmarks/gpu_tournament.py [--seconds 90] [--task cartpole trading] [--quick]
    bash benchmarks/gpu_run.sh gpu_tournament.py --seconds 60   # on the GPU machine
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import torch
from _common import default_out, log, machine_info, now_iso, safe_ratio, write_json_atomic

import elegantpod
from elegantpod.tournament import GeneratorConfig

NAME = "gpu_tournament"
TRADING = {
    "data": "sp500",
    "start": "2010-01-01",
    "end": "2016-12-31",
    "episode_days": 63,
}
TRADING_EVAL = {"start": "2017-01-01", "end": "2018-12-31", "episode_days": None}


def task_settings(task: str, quick: bool) -> dict:
    """Env, hyperparameters and tournament options of one task."""
    if task == "cartpole":
        return {
            "env": "CartPole-v1",
            "hparams": {"num_envs": 256 if quick else 16384, "horizon": 16},
            "options": {},
        }
    return {
        "env": "StockTrading-v0",
        "hparams": {"num_envs": 64 if quick else 1024, "horizon": 16},
        "options": {
            "env_kwargs": TRADING,
            "eval_env_kwargs": TRADING_EVAL,
            "fitness": "sharpe",
            "eval_episodes": 1,
        },
    }


class GpuSampler:
    """``nvidia-smi`` utilisation samples every half second, in a background thread."""

    def __init__(self):
        self.samples: list[float] = []
        self.proc = None
        exe = shutil.which("nvidia-smi")
        if exe and torch.cuda.is_available():
            self.proc = subprocess.Popen(
                [
                    exe,
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "500",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.samples.append(float(line.split(",")[0]))

    def window(self) -> int:
        return len(self.samples)

    def stats(self, since: int) -> dict | None:
        s = self.samples[since:]
        if self.proc is None or not s:
            return None
        return {"mean": sum(s) / len(s), "max": max(s), "samples": len(s)}

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:  # a wedged nvidia-smi: killed, and waited for within a bound
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)


def gpu_client():
    """``elegantpod.cluster(gpu=True)`` where there is a GPU, two CPU workers otherwise."""
    if torch.cuda.is_available():
        client = elegantpod.cluster(gpu=True, dashboard_address=None)
        return client, "GPUCluster (single-thread processes per GPU)"
    return elegantpod.cluster(n_workers=2, dashboard_address=None), "LocalCluster (CPU)"


def lone_pod(settings: dict, seconds: float) -> float:
    """Env steps per second of one pod trained alone here, evaluations included."""
    opts = settings["options"]
    result = elegantpod.train(
        settings["env"],
        "ppo",
        max_seconds=seconds,
        env_kwargs=opts.get("env_kwargs"),
        eval_env_kwargs=opts.get("eval_env_kwargs"),
        fitness=opts.get("fitness", "return"),
        progress=False,
        **settings["hparams"],
    )
    return result.env_steps / result.wall_seconds


def tournament(client, settings: dict, pods: int, warmup: float, seconds: float, gpu) -> dict:
    """Env steps per second of a tournament over a timed window, and the GPU's use."""
    t = elegantpod.Tournament(
        settings["env"],
        ["ppo"],
        pods,
        store=tempfile.mkdtemp(prefix="elegantpod-gpu-tournament-"),
        client=client,
        max_seconds=warmup + seconds + 60,
        hparams={"ppo": settings["hparams"]},
        generator=GeneratorConfig(ready_segments=10**6),  # the same pods throughout
        **settings["options"],
    )
    t.start()
    time.sleep(warmup)
    s0, w0, g0 = t.summary()["env_steps_total"], time.perf_counter(), gpu.window()
    time.sleep(seconds)
    s1, w1 = t.summary()["env_steps_total"], time.perf_counter()
    utilisation = gpu.stats(g0)
    info = t.cluster_info()
    t.stop()
    end = t.wait(180)
    return {
        "steps_per_second": (s1 - s0) / (w1 - w0),
        "gpu_utilisation": utilisation,
        "pods_per_gpu": info.get("pods_per_gpu"),
        "slots": info.get("slots"),
        "eval_share": end.get("eval_share"),
        "resident_share": end.get("resident_share"),
        "best_score": end["best_score"],
        "status": end["status"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", nargs="+", default=["cartpole", "trading"])
    ap.add_argument("--pods", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--warmup", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="small and short: a dry run")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.warmup = 15.0, 10.0
    on_gpu = torch.cuda.is_available()
    out = Path(a.out) if a.out else default_out(NAME, a.quick or not on_gpu)
    gpu = GpuSampler()
    client, kind = gpu_client()
    results = {}
    try:
        for task in a.task:
            settings = task_settings(task, a.quick)
            log(f"{task}: lone pod for {a.seconds:.0f} s")
            lone = lone_pod(settings, a.seconds)
            log(f"{task}: tournament of {a.pods} pods ({kind})")
            tour = tournament(client, settings, a.pods, a.warmup, a.seconds, gpu)
            ratio = safe_ratio(tour["steps_per_second"], lone)
            util = (tour["gpu_utilisation"] or {}).get("mean")
            results[task] = {
                "settings": settings,
                "lone_pod_steps_per_second": lone,
                "tournament": tour,
                "tournament_over_lone_pod": ratio,
                "targets": {
                    "ratio >= 1.5": ratio >= 1.5,
                    "gpu utilisation mean >= 70%": None if util is None else util >= 70,
                },
            }
            log(
                f"{task}: lone {lone:,.0f} steps/s, tournament "
                f"{tour['steps_per_second']:,.0f} steps/s ({ratio:.2f}x), GPU "
                f"{'-' if util is None else f'{util:.0f}%'}, eval share {tour['eval_share']}"
            )
    finally:
        gpu.close()
        cl = client.cluster
        client.close()
        cl.close()
    data = {
        "benchmark": NAME,
        "date": now_iso(),
        "machine": machine_info(),
        "gpu": torch.cuda.get_device_name(0) if on_gpu else None,
        "dry_run_on_cpu": not on_gpu,
        "cluster": kind,
        "pods": a.pods,
        "seconds": a.seconds,
        "results": results,
    }
    write_json_atomic(out, data)
    print(f"wrote {out}" + ("" if on_gpu else " (no GPU: a CPU dry run, not the GPU figures)"))


if __name__ == "__main__":
    main()
