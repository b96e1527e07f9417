"""Rollout workers in subprocesses vs in-process: MuJoCo Hopper-v5 steps per second.

For envs that simulate on the CPU (MuJoCo through gymnasium), a pod can step its sub-envs
in the learner's process (``vectorization_mode="sync"``, gymnasium's ``SyncVectorEnv``) or
in one worker process per sub-env (``"async"``, ``AsyncVectorEnv``: observations come
back through shared memory). Why measure: whether the extra processes pay for their
messaging depends on how expensive one step is and on how many cores there are, and the
claim that a pod "uses the cores it has" needs the figure on a small machine.

Two measurements, each at ``num_envs`` in (1, 2, 4, 8), sync and async alternating:

- ``env``: random actions (pre-generated torch tensors) stepped through our adapter,
  ``make_env("Hopper-v5", num_envs=N, vectorization_mode=mode)``; sub-env steps per
  second.
- ``rollout``: a SAC pod's rollout phase, ``pod.collector.rollout()`` (actor forward pass,
  env step, buffer write for ``horizon`` vector steps), learning not timed; SAC's
  ``learning_starts=0`` so that the actor, not uniform noise, picks the actions.

Each repeat warms up, then times about ``--steps`` sub-env steps. Figures are medians
over repeats with min-max; the headline is the ratio async / sync per ``num_envs``.

Usage::

    python benchmarks/worker_parallelism.py [--repeats 3] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.metadata
import time
from pathlib import Path
from typing import Any

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

from elegantpod.agents import SACConfig
from elegantpod.config import PodSpec
from elegantpod.envs import make_env
from elegantpod.pod.pod import Pod

NAME = "worker_parallelism"
ENV_ID = "Hopper-v5"
SIZES = (1, 2, 4, 8)
MODES = ("sync", "async")
STEPS = 4000
QUICK_STEPS = 400
WARMUP_VECTOR_STEPS = 20
HORIZON = 16


def bench_env(n: int, mode: str, sub_steps: int, seed: int) -> float:
    """Sub-env steps per second of random stepping through the adapter."""
    env = make_env(ENV_ID, num_envs=n, seed=seed, vectorization_mode=mode)
    try:
        steps = max(1, sub_steps // n)
        low = torch.as_tensor(env.action_space.low)
        high = torch.as_tensor(env.action_space.high)
        gen = torch.Generator().manual_seed(seed)
        total = WARMUP_VECTOR_STEPS + steps
        actions = low + torch.rand(total, n, low.shape[0], generator=gen) * (high - low)
        env.reset()
        for t in range(WARMUP_VECTOR_STEPS):
            env.step(actions[t])
        start = time.perf_counter()
        for t in range(WARMUP_VECTOR_STEPS, total):
            env.step(actions[t])
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return n * steps / elapsed


def bench_rollout(n: int, mode: str, sub_steps: int, seed: int) -> float:
    """Sub-env steps per second of a SAC pod's rollout phase (no learning)."""
    hparams = dataclasses.replace(SACConfig(), num_envs=n, horizon=HORIZON, learning_starts=0)
    spec = PodSpec(
        env_id=ENV_ID,
        algo="sac",
        hparams=hparams,
        seed=seed,
        eval_episodes=1,
        env_kwargs={"vectorization_mode": mode},
        eval_env_kwargs={"vectorization_mode": "sync"},
    )
    pod = Pod(spec)
    try:
        rollouts = max(1, sub_steps // (n * HORIZON))
        for _ in range(max(1, WARMUP_VECTOR_STEPS // HORIZON)):
            pod.collector.rollout()
        start = time.perf_counter()
        for _ in range(rollouts):
            pod.collector.rollout()
        elapsed = time.perf_counter() - start
    finally:
        pod.env.close()
        pod.evaluator.env.close()
    return n * HORIZON * rollouts / elapsed


BENCHES = {"env": bench_env, "rollout": bench_rollout}


def run(sizes: list[int], repeats: int, sub_steps: int) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = []
    for part, fn in BENCHES.items():
        for n in sizes:
            rates: dict[str, list[float]] = {m: [] for m in MODES}
            for r in range(repeats):
                # alternate who goes first so neighbours and warm caches hit both alike
                order = MODES if r % 2 == 0 else MODES[::-1]
                for mode in order:
                    gc.collect()
                    rates[mode].append(fn(n, mode, sub_steps, seed=r))
                log(
                    f"{part:>7} N={n}: sync {rates['sync'][-1]:8.0f}/s  "
                    f"async {rates['async'][-1]:8.0f}/s  "
                    f"({rates['async'][-1] / rates['sync'][-1]:.2f}x)"
                )
            s, a = summarize(rates["sync"]), summarize(rates["async"])
            configs.append(
                {
                    "part": part,
                    "num_envs": n,
                    "sync_steps_per_s": s,
                    "async_steps_per_s": a,
                    "ratio_async_over_sync": safe_ratio(a["median"], s["median"]),
                    "paired_ratios": [
                        y / x for x, y in zip(rates["sync"], rates["async"], strict=True)
                    ],
                }
            )
    return configs


def print_table(result: dict) -> None:
    rows = [
        [
            c["part"],
            c["num_envs"],
            fmt_range(c["sync_steps_per_s"], "{:.0f}"),
            fmt_range(c["async_steps_per_s"], "{:.0f}"),
            f"{c['ratio_async_over_sync']:.2f}x",
        ]
        for c in result["configs"]
    ]
    headers = [
        "part",
        "num_envs",
        "sync steps/s median [min, max]",
        "async steps/s median [min, max]",
        "async/sync",
    ]
    m = result["machine"]
    print(
        f"\n{NAME}: {ENV_ID}, {result['repeats']} repeat(s) of ~{result['sub_env_steps']} "
        f"sub-env steps, {m['cpu_affinity'] or m['cpu_count']} usable CPUs, "
        f"torch threads {m['torch_num_threads']}, {result['date']}"
    )
    print(format_table(headers, rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=None, help="default 3; 1 with --quick")
    ap.add_argument(
        "--quick", action="store_true", help="smoke test: few steps, 1 repeat, temp-dir output"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON path (default benchmarks/results/{NAME}.json; temp dir with --quick)",
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="num_envs values")
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"timed sub-env steps per measurement (default {STEPS}; {QUICK_STEPS} quick)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads of the learner's process (default 1, as on a Dask worker)",
    )
    args = ap.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    sub_steps = args.steps if args.steps is not None else (QUICK_STEPS if args.quick else STEPS)
    if repeats < 1 or sub_steps < 1 or any(n < 1 for n in args.sizes):
        ap.error("--repeats, --steps and --sizes must be >= 1")
    out = args.out if args.out is not None else default_out(NAME, args.quick)

    threads = apply_threads(args.threads)
    machine = machine_info()
    started = time.perf_counter()
    configs = run(args.sizes, repeats, sub_steps)
    machine["loadavg_at_end"] = loadavg()
    machine["mujoco"] = importlib.metadata.version("mujoco")
    result = {
        "benchmark": NAME,
        "machine": machine,
        "torch_threads": {"requested": args.threads, "in_effect": threads},
        "date": now_iso(),
        "quick": args.quick,
        "env_id": ENV_ID,
        "repeats": repeats,
        "sub_env_steps": sub_steps,
        "wall_seconds": time.perf_counter() - started,
        "unit": "sub-env steps per second (num_envs * vector steps / wall seconds)",
        "sync": "gymnasium SyncVectorEnv: sub-envs stepped one after another in this process",
        "async": "gymnasium AsyncVectorEnv: one worker process per sub-env, shared memory",
        "parts": {
            "env": "random actions through make_env(ENV_ID, N, vectorization_mode=mode)",
            "rollout": f"SAC pod (learning_starts=0, horizon {HORIZON}): pod.collector.rollout()",
        },
        "configs": configs,
    }
    path = write_json_atomic(out, result)
    print_table(result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
