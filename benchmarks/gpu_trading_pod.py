"""One PPO pod on ``StockTrading-v0`` entirely on a GPU: training steps/s and its score.

Why: the trading env, rollouts, buffers, PPO updates and the full-range validation
episode (with its recorded account values and Sharpe) should all stay on the device.
This runs a real pod there for a fixed wall budget, then reports env steps/s over the
whole run (updates and evaluations included) and the validation Sharpe of the result.
It is the device-side check of the finance stack; on a CPU it runs too, just slower.

Usage::

    python benchmarks/gpu_trading_pod.py [--device cuda] [--num-envs 4096] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from finance_pipeline import SPLITS  # the same dates as the CPU pipeline benchmark

import elegantpod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    minibatch = args.num_envs * args.horizon // 4
    t0 = time.perf_counter()
    result = elegantpod.train(
        "StockTrading-v0",
        "ppo",
        device=args.device,
        num_envs=args.num_envs,
        max_seconds=args.seconds,
        eval_every_steps=args.num_envs * args.horizon * 20,
        horizon=args.horizon,
        minibatch_size=minibatch,
        **SPLITS.tournament_options(fitness="sharpe", data="sp500"),
    )
    wall = time.perf_counter() - t0
    row = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "torch": torch.__version__,
        "num_envs": args.num_envs,
        "horizon": args.horizon,
        "minibatch_size": minibatch,
        "env_steps": result.env_steps,
        "train_seconds": result.wall_seconds,
        "env_steps_per_second": result.env_steps / max(result.wall_seconds, 1e-9),
        "validation_sharpe": result.score,
        "validation_return_pct": result.eval_return_mean,
        "evaluations": len(result.curve),
        "wall_seconds_total": wall,
        "peak_memory_mib": torch.cuda.max_memory_allocated() / 2**20
        if args.device.startswith("cuda")
        else None,
    }
    print(json.dumps(row, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
