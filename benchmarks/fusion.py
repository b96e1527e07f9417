"""Does learner fusion (K learners on shards, averaged every epoch) pay on Pendulum-v1?

Why: the paper's pods may run several learners that fuse parameters instead of
synchronising gradients. This measures, side by side in one run, the wall seconds and
env steps a SAC pod needs to reach a deterministic evaluation mean of -200 on
Pendulum-v1 with K = 1, 2 and 4 fused learners (same seeds, same defaults, same machine,
interleaved), so the README can say honestly whether it speeds anything up here.

On one CPU the K learners share the same cores and take turns, so fusion can only win
by sample efficiency (averaging as a variance reduction); on a pod that owns K GPUs each
learner runs on its own device.

Usage::

    python benchmarks/fusion.py [--seeds 3] [--ks 1 2 4] [--algo sac] [--quick]
"""

from __future__ import annotations

import argparse
import time

import torch
from _common import (
    apply_threads,
    default_out,
    fmt_range,
    format_table,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod

NAME = "fusion"
ENV, TARGET = "Pendulum-v1", -200.0


def run_once(algo: str, k: int, seed: int, max_steps: int) -> dict:
    spec = PodSpec(
        env_id=ENV, algo=algo, learners=k, seed=seed, target_reward=TARGET, max_steps=max_steps
    )
    torch.manual_seed(seed)
    pod = Pod(spec)
    t0 = time.perf_counter()
    result = pod.run()
    return {
        "k": k,
        "seed": seed,
        "solved": result.solved,
        "seconds": result.wall_seconds if result.solved else float("nan"),
        "env_steps": result.env_steps if result.solved else float("nan"),
        "final_eval": result.eval_return_mean,
        "wall": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--algo", default="sac")
    ap.add_argument("--max-steps", type=int, default=60_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="1 seed, K=1,2, results to temp")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.ks, args.max_steps = 1, [1, 2], 20_000
    threads = apply_threads(args.threads)
    runs = []
    for seed in range(args.seeds):
        for k in args.ks:  # interleaved: machine drift hits every K alike
            r = run_once(args.algo, k, seed, args.max_steps)
            log(f"seed {seed} K={k}: solved={r['solved']} {r['seconds']:.1f}s {r['env_steps']}")
            runs.append(r)
    by_k = {}
    for k in args.ks:
        mine = [r for r in runs if r["k"] == k and r["solved"]]  # unsolved: counted below
        by_k[k] = {
            "seconds": summarize([r["seconds"] for r in mine]),
            "env_steps": summarize([r["env_steps"] for r in mine]),
            "solved": len(mine),
        }
    base = by_k[args.ks[0]]["seconds"]["median"]
    rows = [
        [
            k,
            f"{v['solved']}/{args.seeds}",
            fmt_range(v["seconds"], "{:.1f}"),
            fmt_range(v["env_steps"], "{:.0f}"),
            f"{safe_ratio(v['seconds']['median'], base):.2f}x",
        ]
        for k, v in by_k.items()
    ]
    print(format_table(["K", "solved", "seconds to -200", "env steps", "time vs K=1"], rows))
    data = {
        "name": NAME,
        "when": now_iso(),
        "machine": machine_info(),
        "torch_threads": threads,
        "quick": args.quick,
        "env": ENV,
        "algo": args.algo,
        "target": TARGET,
        "max_steps": args.max_steps,
        "runs": runs,
        "by_k": {str(k): v for k, v in by_k.items()},
        "ratios_vs_k1": {str(k): safe_ratio(v["seconds"]["median"], base) for k, v in by_k.items()},
    }
    out = default_out(NAME, args.quick) if args.out is None else args.out
    write_json_atomic(out, data)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
