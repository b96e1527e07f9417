"""Env steps per second of our batched torch CartPole vs gymnasium's numpy vector CartPole.

Measures raw simulation throughput (sub-env steps per second, random actions, no policy)
of ``elegantpod.envs.make_env("CartPole-v1", num_envs=N)`` against
``gymnasium.make_vec("CartPole-v1", num_envs=N, vectorization_mode="vector_entry_point")``
(gymnasium's own vectorized, numpy CartPole: the fastest peer that gymnasium ships) at
several batch sizes. Why: the claim that a native batched env is cheap enough that
simulation is never the bottleneck of on-policy training needs a number measured side by
side with the obvious alternative, on the same machine in the same run.

Both sides step pre-generated int64 actions (torch tensor / numpy array of shape
``(steps, N)``), so action sampling is not timed; ours runs under
``torch.inference_mode()``. Each repeat (seed) warms up, then times ``--steps`` vector
steps; the two frameworks alternate order from one repeat to the next so that machine
noise and warm caches hit both alike. Figures are medians over seeds with min-max, and the
headline ratio is ours / gymnasium (a speedup). Targets (issue 17), with one torch
thread as a CPU pod runs: >= 2x at 4,096 envs and >= 1x at 1,024. From 512 sub-envs our
CPU env compiles its whole step (``TorchVecEnv``'s ``compile``); the warm-up steps absorb
that compile, which is timed apart and reported as ``ours_compile_s``.

Usage::

    python benchmarks/env_throughput.py [--seeds 3] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from _common import (
    apply_threads,
    default_out,
    fmt_range,
    format_table,
    loadavg,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

from elegantpod.envs import make_env

NAME = "env_throughput"
ENV_ID = "CartPole-v1"
SIZES = (1024, 4096, 65536)
WARMUP = 20
STEPS = 256
QUICK_STEPS = 64
QUICK_STEPS_LARGE = 16  # --quick at N >= 65536
TARGETS = {1024: 1.0, 4096: 2.0}
"""num_envs -> the speedup over gymnasium required there (issue 17)."""
TARGET_N = 4096


def steps_for(n: int, quick: bool, steps: int | None) -> int:
    """Timed vector steps for ``n`` envs (``--steps`` overrides)."""
    if steps is not None:
        return steps
    if quick:
        return QUICK_STEPS_LARGE if n >= 65536 else QUICK_STEPS
    return STEPS


def bench_ours(n: int, steps: int, warmup: int, seed: int) -> tuple[float, float]:
    """Sub-env steps per second of our native batched CartPole (CPU), and the seconds
    of the first step (which compiles the step where the env compiles it)."""
    env = make_env(ENV_ID, num_envs=n, device="cpu", seed=seed)
    gen = torch.Generator().manual_seed(seed)
    actions = torch.randint(0, 2, (warmup + steps, n), generator=gen, dtype=torch.int64)
    try:
        with torch.inference_mode():
            env.reset(seed=seed)
            start = time.perf_counter()
            env.step(actions[0])
            first = time.perf_counter() - start
            for t in range(1, warmup):
                env.step(actions[t])
            start = time.perf_counter()
            for t in range(warmup, warmup + steps):
                env.step(actions[t])
            elapsed = time.perf_counter() - start
    finally:
        env.close()
    return n * steps / elapsed, first


def bench_gymnasium(n: int, steps: int, warmup: int, seed: int) -> float:
    """Sub-env steps per second of gymnasium's vector-entry-point (numpy) CartPole."""
    env = gymnasium.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point")
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=(warmup + steps, n), dtype=np.int64)
    try:
        env.reset(seed=seed)
        for t in range(warmup):
            env.step(actions[t])
        start = time.perf_counter()
        for t in range(warmup, warmup + steps):
            env.step(actions[t])
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return n * steps / elapsed


def run(sizes: list[int], seeds: int, quick: bool, steps: int | None, warmup: int) -> dict:
    configs: list[dict[str, Any]] = []
    for n in sizes:
        n_steps = steps_for(n, quick, steps)
        ours: list[float] = []
        peer: list[float] = []
        first_steps: list[float] = []
        for s in range(seeds):
            # Alternate who goes first so ordering effects (caches, turbo, neighbours)
            # do not systematically favour one side.
            order = ("ours", "gymnasium") if s % 2 == 0 else ("gymnasium", "ours")
            for who in order:
                gc.collect()
                if who == "ours":
                    rate, first = bench_ours(n, n_steps, warmup, s)
                    ours.append(rate)
                    first_steps.append(first)
                else:
                    peer.append(bench_gymnasium(n, n_steps, warmup, s))
            log(
                f"N={n:>6} seed={s}: ours {ours[-1]:.3e}/s  gymnasium {peer[-1]:.3e}/s  "
                f"({ours[-1] / peer[-1]:.2f}x)"
            )
        o, p = summarize(ours), summarize(peer)
        ratio = safe_ratio(o["median"], p["median"])
        entry: dict[str, Any] = {
            "num_envs": n,
            "timed_steps": n_steps,
            "warmup_steps": warmup,
            "ours_steps_per_s": o,
            "gymnasium_steps_per_s": p,
            "ratio_ours_over_gymnasium": ratio,
            "paired_ratios": [a / b for a, b in zip(ours, peer, strict=True)],
            "ours_compiles": make_env(ENV_ID, num_envs=n)._fused,
            "ours_compile_s": first_steps,
        }
        if n in TARGETS:
            entry["target"] = f"ours >= {TARGETS[n]:g}x gymnasium at {n} envs"
            entry["target_met"] = bool(ratio >= TARGETS[n])
        configs.append(entry)
    target = next((c for c in configs if c["num_envs"] == TARGET_N), None)
    return {
        "benchmark": NAME,
        "date": now_iso(),
        "quick": quick,
        "env_id": ENV_ID,
        "seeds": seeds,
        "unit": "sub-env steps per second (num_envs * vector steps / wall seconds)",
        "ours": f"elegantpod.envs.make_env({ENV_ID!r}, num_envs=N, device='cpu', seed=s), "
        "int64 torch actions, torch.inference_mode()",
        "peer": f"gymnasium.make_vec({ENV_ID!r}, num_envs=N, "
        "vectorization_mode='vector_entry_point'), int64 numpy actions",
        "target": {
            "description": f"ours >= {TARGETS[TARGET_N]:g}x gymnasium at {TARGET_N} envs "
            "(medians); see each config's own target too",
            "num_envs": TARGET_N,
            "required_ratio": TARGETS[TARGET_N],
            "ratio": target["ratio_ours_over_gymnasium"] if target else None,
            "met": target["target_met"] if target else None,
        },
        "configs": configs,
    }


def print_table(result: dict) -> None:
    rows = []
    for c in result["configs"]:
        met = c.get("target_met")
        rows.append(
            [
                c["num_envs"],
                c["timed_steps"],
                fmt_range(c["ours_steps_per_s"], "{:.3e}"),
                fmt_range(c["gymnasium_steps_per_s"], "{:.3e}"),
                f"{c['ratio_ours_over_gymnasium']:.2f}x",
                "-" if met is None else ("yes" if met else "NO"),
            ]
        )
    headers = [
        "num_envs",
        "steps",
        "ours steps/s median [min, max]",
        "gymnasium steps/s median [min, max]",
        "ours/gym",
        "target met",
    ]
    m = result["machine"]
    print(
        f"\n{NAME}: {ENV_ID}, random actions, {result['seeds']} seed(s), "
        f"torch threads {m['torch_num_threads']}, {m['cpu_count']} CPUs, {result['date']}"
    )
    print(format_table(headers, rows))
    t = result["target"]
    if t["ratio"] is not None:
        print(
            f"target: {t['description']}: {t['ratio']:.2f}x -> {'MET' if t['met'] else 'NOT MET'}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seeds", type=int, default=None, help="repeats per size (default 3; 1 with --quick)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: fewer steps, 1 seed, output under the temp dir",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON path (default benchmarks/results/{NAME}.json; "
        "/tmp/elegantpod-bench/ with --quick)",
    )
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(SIZES),
        help=f"num_envs values (default {' '.join(map(str, SIZES))})",
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"timed vector steps per repeat (default {STEPS}; fewer with --quick)",
    )
    ap.add_argument("--warmup", type=int, default=WARMUP, help=f"untimed steps (default {WARMUP})")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch.set_num_threads for our env (default 1, what a CPU pod uses); "
        "gymnasium's numpy CartPole is single-threaded either way",
    )
    args = ap.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    if seeds < 1 or any(n < 1 for n in args.sizes) or (args.steps is not None and args.steps < 1):
        ap.error("--seeds, --sizes and --steps must be >= 1")
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    out = args.out if args.out is not None else default_out(NAME, args.quick)

    threads = apply_threads(args.threads)
    machine = machine_info()
    result = run(args.sizes, seeds, args.quick, args.steps, args.warmup)
    machine["loadavg_at_end"] = loadavg()
    result = {
        "benchmark": result.pop("benchmark"),
        "machine": machine,
        "torch_threads": {"requested": args.threads, "in_effect": threads},
        **result,
    }
    path = write_json_atomic(out, result)
    print_table(result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
