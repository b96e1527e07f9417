"""Time to solve CartPole-v1 with PPO by torch thread count: the new default vs the old.

Why: ``train()`` and ``elegantpod train`` now run a CPU pod with one torch thread unless
told otherwise (``threads=None``: ``OMP_NUM_THREADS`` where set, else 1). Torch's own
default is one intra-op thread per core; on a small machine shared with other busy
processes each op then waits for a descheduled thread. This measures what that costs.

Each run is ``elegantpod train --env CartPole-v1 --algo ppo --target-reward 475 --json
--quiet`` in a fresh subprocess (so each variant starts torch from scratch), with
``OMP_NUM_THREADS`` removed from its environment unless the variant sets it:

* ``default``: no thread option, the new default (one thread on a CPU).
* ``omp1``: ``OMP_NUM_THREADS=1`` in the environment, no thread option (what the default
  follows when a user sets it; the number to compare ``default`` with).
* ``torch_default``: ``--threads 0``, which leaves torch's own setting alone: one thread
  per core, the behaviour before this default existed.

Variants alternate within each repeat (default, omp1, torch_default, default, ...) so that
machine noise hits them alike. Recorded per variant: the subprocess wall time (imports and
building included) and the ``wall_seconds`` of the result (training and evaluation only),
the env steps and whether the run solved; medians, minimums and maximums over repeats.
Partial results are written after every run.

Usage::

    python benchmarks/threads.py [--repeats 3] [--seed 0] [--timeout 240] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _common import (
    BENCH_DIR,
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

NAME = "threads"
VARIANTS = {
    "default": ({}, []),
    "omp1": ({"OMP_NUM_THREADS": "1"}, []),
    "torch_default": ({}, ["--threads", "0"]),
}
"""Variant name -> (environment additions, extra CLI arguments)."""


def run_once(variant: str, seed: int, target: float, timeout: float) -> dict:
    """One ``elegantpod train`` subprocess; its wall time and result."""
    extra_env, extra_args = VARIANTS[variant]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(extra_env)
    cmd = [
        sys.executable,
        "-m",
        "elegantpod.cli.main",
        "train",
        "--env",
        "CartPole-v1",
        "--algo",
        "ppo",
        "--target-reward",
        str(target),
        "--seed",
        str(seed),
        "--json",
        "--quiet",
        *extra_args,
    ]
    start = time.perf_counter()
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=BENCH_DIR.parent
        )
    except subprocess.TimeoutExpired:
        return {"variant": variant, "ok": False, "process_seconds": timeout, "error": "timeout"}
    seconds = time.perf_counter() - start
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or [""])[-1]
        return {"variant": variant, "ok": False, "process_seconds": seconds, "error": tail}
    result = json.loads(p.stdout.strip().splitlines()[-1])
    return {
        "variant": variant,
        "ok": True,
        "process_seconds": seconds,
        "train_seconds": result["wall_seconds"],
        "env_steps": result["env_steps"],
        "solved": result["solved"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per run")
    ap.add_argument("--quick", action="store_true", help="1 repeat, target 100")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    repeats, target = (1, 100.0) if args.quick else (args.repeats, args.target)
    out = args.out or default_out(NAME, args.quick)
    runs: list[dict] = []
    record = {
        "name": NAME,
        "when": now_iso(),
        "machine": machine_info(),
        "settings": {
            "repeats": repeats,
            "seed": args.seed,
            "target_reward": target,
            "timeout": args.timeout,
            "variants": {k: {"env": e, "args": a} for k, (e, a) in VARIANTS.items()},
        },
        "runs": runs,
    }
    for r in range(repeats):
        for variant in VARIANTS:
            run = run_once(variant, args.seed, target, args.timeout)
            run["repeat"] = r
            runs.append(run)
            log(f"[{r}] {variant}: {json.dumps({k: v for k, v in run.items() if k != 'variant'})}")
            write_json_atomic(out, record)
    summary = {}
    for variant in VARIANTS:
        mine = [x for x in runs if x["variant"] == variant]
        summary[variant] = {
            "process_seconds": summarize([x["process_seconds"] for x in mine]),
            "train_seconds": summarize([x["train_seconds"] for x in mine if x["ok"]]),
            "solved": sum(bool(x.get("solved")) for x in mine),
            "runs": len(mine),
        }
    base = summary["default"]["process_seconds"]["median"]
    record["summary"] = summary
    record["torch_default_over_default"] = safe_ratio(
        summary["torch_default"]["process_seconds"]["median"], base
    )
    record["loadavg_at_end"] = os.getloadavg()
    write_json_atomic(out, record)
    rows = [
        (
            v,
            fmt_range(s["process_seconds"]),
            fmt_range(s["train_seconds"]),
            f"{s['solved']}/{s['runs']}",
        )
        for v, s in summary.items()
    ]
    print(format_table(["variant", "process s", "train s", "solved"], rows))
    print(f"torch_default / default: {record['torch_default_over_default']:.2f}x; wrote {out}")


if __name__ == "__main__":
    main()
