"""Env and PPO-training throughput of native envs on one accelerator, plus a torch.compile A/B.

Three measurements, every one time-boxed, the whole run kept under ``--budget`` seconds:

1. **env steps/s**: ``make_env(env_id, num_envs=N, device=dev, seed=0)`` stepped with
   random actions drawn on the device beforehand (a ring of ``RING`` batches, so neither
   sampling nor a host round-trip is timed), under ``torch.inference_mode()``.
2. **PPO training steps/s**: a real ``Collector`` rollout plus ``PPO.update`` loop, with a
   ``PPOConfig`` sized for the batch (``num_envs=N``, ``--horizon`` steps, ``--epochs``
   passes, ``--minibatches`` minibatches per pass); counted as ``N * horizon`` env steps
   per iteration over a window that includes the update, split into rollout and update.
3. **torch.compile A/B** (keep it only where it wins): the env step with the class's
   ``dynamics`` compiled, and PPO training with actor and critic compiled, against the
   eager rows of the same env and size. Each job runs in a child process killed at its
   time limit, so a slow or hung compile cannot break the budget; compile seconds are
   reported apart from throughput, and a failure is recorded as its error string.

Timed windows run whole chunks of steps (or whole iterations) between device
synchronizations, until ``--seconds`` have passed; a warm-up precedes each. Rows that no
longer fit in the budget are skipped and listed as such; a CUDA out-of-memory error is
recorded for its row and the run goes on. The JSON is rewritten after every row, so an
interrupted run still leaves its finished rows.

Usage::

    python benchmarks/gpu_throughput.py [--device cuda] [--sizes N ...] [--envs ID ...]
        [--seconds 2] [--budget 270] [--smoke] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _common import (
    apply_threads,
    default_out,
    format_table,
    loadavg,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    write_json_atomic,
)

from elegantpod.agents import PPO, PPOConfig
from elegantpod.envs import make_env
from elegantpod.pod.collector import Collector

NAME = "gpu_throughput"
ENVS = ("CartPole-v1", "Pendulum-v1")
SIZES = (4096, 16384, 65536, 262144)
SMOKE_SIZES = (256, 1024)
SECONDS, SMOKE_SECONDS = 2.0, 0.5
BUDGET, SMOKE_BUDGET = 270.0, 50.0
RING = 16  # action batches pre-drawn on the device and cycled through
WARMUP_FRACTION = 0.25  # untimed env stepping before each window, as a share of --seconds
PPO_WARMUP_ITERS = 2  # the first iteration allocates (and compiles, when asked)
FINAL_RESERVE_S = 5.0  # kept back for cleanup and the last JSON write
WIN_THRESHOLD = 1.05  # compiled must beat eager by 5% (more than run-to-run noise) to be kept
RESULT_TAG = "GPU_THROUGHPUT_RESULT "


def process_start() -> float:
    """Wall-clock start of this process, so that imports count against the budget too."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # psutil missing or unreadable /proc: count from here instead
        return time.time()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_actions(env, count: int) -> list[torch.Tensor]:
    """``count`` batches of uniform random actions, drawn on the env's device."""
    gen = torch.Generator(device=env.device).manual_seed(0)
    n, dev, space = env.num_envs, env.device, env.action_space
    if hasattr(space, "n"):  # Discrete
        return [
            torch.randint(0, int(space.n), (n,), generator=gen, device=dev) for _ in range(count)
        ]
    low = torch.as_tensor(space.low, device=dev)
    width = torch.as_tensor(space.high, device=dev) - low
    return [
        torch.rand(n, *space.shape, generator=gen, device=dev) * width + low for _ in range(count)
    ]


def step_for(env, actions: list[torch.Tensor], seconds: float) -> tuple[int, float]:
    """Step until ``seconds`` have passed; sync only between chunks, whose size adapts."""
    dev, steps, chunk = env.device, 0, 4
    sync(dev)
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            env.step(actions[steps % len(actions)])
            steps += 1
        sync(dev)
        now = time.perf_counter()
        if now - start >= seconds:
            return steps, now - start
        if now - t0 < seconds / 20 and chunk < 512:
            chunk *= 2


def measure_env_step(env, seconds: float) -> dict[str, Any]:
    """Sub-env steps per second of ``env`` with pre-drawn device actions."""
    actions = random_actions(env, RING)
    with torch.inference_mode():
        env.reset(seed=0)
        t0 = time.perf_counter()
        env.step(actions[0])  # a compiled ``dynamics`` compiles here
        sync(env.device)
        first_step_s = time.perf_counter() - t0
        step_for(env, actions, WARMUP_FRACTION * seconds)
        steps, elapsed = step_for(env, actions, seconds)
    return {
        "steps_per_s": env.num_envs * steps / elapsed,
        "timed_vector_steps": steps,
        "timed_seconds": elapsed,
        "first_step_seconds": first_step_s,
    }


def measure_ppo(
    env, seconds: float, horizon: int, epochs: int, minibatches: int, compile_mode=None
):
    """Env steps per second of PPO training: ``Collector.rollout`` + ``PPO.update`` each."""
    n, dev = env.num_envs, env.device
    config = PPOConfig(
        num_envs=n,
        horizon=horizon,
        epochs=epochs,
        minibatch_size=max(n * horizon // minibatches, 1),
    )
    torch.manual_seed(0)
    learner = PPO(env.observation_space, env.action_space, config, dev, seed=0)
    if compile_mode is not None:
        learner.actor = torch.compile(learner.actor, mode=compile_mode)
        learner.critic = torch.compile(learner.critic, mode=compile_mode)
    worker = Collector(env, learner, horizon, seed=0)
    t0 = time.perf_counter()
    for _ in range(PPO_WARMUP_ITERS):
        learner.update(worker.rollout())
    sync(dev)
    warmup_s = time.perf_counter() - t0
    iters, rollout_s, update_s = 0, 0.0, 0.0
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        batch = worker.rollout()
        sync(dev)  # one sync per iteration buys the rollout / update split
        t1 = time.perf_counter()
        learner.update(batch)  # returns host floats: it synchronizes anyway
        sync(dev)
        t2 = time.perf_counter()
        iters, rollout_s, update_s = iters + 1, rollout_s + t1 - t0, update_s + t2 - t1
        if t2 - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    return {
        "steps_per_s": n * horizon * iters / elapsed,
        "iterations": iters,
        "timed_seconds": elapsed,
        "seconds_per_iteration": elapsed / iters,
        "rollout_fraction": rollout_s / elapsed,
        "update_fraction": update_s / elapsed,
        "warmup_seconds": warmup_s,
        "ppo_config": {
            "num_envs": n,
            "horizon": horizon,
            "epochs": epochs,
            "minibatch_size": config.minibatch_size,
            "hidden": list(config.hidden),
        },
    }


def run_row(row: dict[str, Any], device: torch.device, measure) -> dict[str, Any]:
    """Fill ``row`` from ``measure(env)``, recording OOM or any error instead of raising."""
    is_cuda = device.type == "cuda"
    row["device_name"] = torch.cuda.get_device_name(device) if is_cuda else "cpu"
    row["torch"] = torch.__version__
    gc.collect()
    if is_cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    try:
        env = make_env(row["env_id"], num_envs=row["num_envs"], device=device, seed=0)
        row.update(measure(env), status="ok")
    except torch.cuda.OutOfMemoryError as exc:
        row.update(status="oom", error=str(exc).splitlines()[0][:300])
    except Exception as exc:  # record and go on: one bad row must not lose the run
        row.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000])
    finally:
        env = None
        gc.collect()
    row["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device) if is_cuda else None
    if is_cuda:
        torch.cuda.empty_cache()
    return row


# -- torch.compile jobs, each in a child process ----------------------------------------
def child_main(spec: dict[str, Any]) -> int:
    """Run one compile job (all its sizes); print one tagged JSON line per finished row."""
    device = torch.device(spec["device"])
    apply_threads(spec["threads"])
    for n in spec["sizes"]:
        row = {"kind": spec["kind"], "mode": spec["mode"], "env_id": spec["env_id"], "num_envs": n}
        if spec["kind"] == "env_step_compiled":

            def measure(env):
                env.dynamics = torch.compile(type(env).dynamics, mode=spec["mode"], dynamic=False)
                out = measure_env_step(env, spec["seconds"])
                out["compile_seconds"] = out["first_step_seconds"]
                return out

        else:

            def measure(env):
                out = measure_ppo(env, spec["seconds"], *spec["ppo"], compile_mode=spec["mode"])
                # compile time ~ warm-up time less what those iterations cost when warm
                steady = PPO_WARMUP_ITERS * out["seconds_per_iteration"]
                out["compile_seconds"] = max(out["warmup_seconds"] - steady, 0.0)
                return out

        run_row(row, device, measure)
        print(RESULT_TAG + json.dumps(row), flush=True)
    return 0


def run_child(spec: dict[str, Any], timeout: float) -> tuple[list[dict[str, Any]], str | None]:
    """Run a compile job with a hard time limit; returns its rows and a failure note."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    # A process group of its own, in this session: on timeout the whole group goes,
    # inductor's compile workers too, and an outer `timeout` or the device tool still
    # reaches it (a session of its own outlived both).
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=os.setpgrp
    )
    note = None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a child blocked in the driver: not waited for
            out, err = "", ""
        note = f"timeout after {timeout:.0f} s (compile included)"
    rows = [
        json.loads(line[len(RESULT_TAG) :])
        for line in out.splitlines()
        if line.startswith(RESULT_TAG)
    ]
    if note is None and proc.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:])
        note = f"child exited {proc.returncode}: {tail}"[:2000]
    return rows, note


# -- the run ----------------------------------------------------------------------------
class Budget:
    """The run's deadline; ``reserve`` seconds are held back for later phases."""

    def __init__(self, start: float, seconds: float):
        self.start, self.deadline = start, start + seconds

    def left(self) -> float:
        return self.deadline - time.time()

    def fits(self, estimate: float, reserve: float = 0.0) -> bool:
        return self.left() - FINAL_RESERVE_S - reserve >= estimate


def run(args, device: torch.device, budget: Budget, result: dict[str, Any], out: Path) -> None:
    rows, crows, skipped = result["rows"], result["compile"]["rows"], result["skipped"]
    ppo_args = (args.horizon, args.epochs, args.minibatches)
    compile_reserve = min(0.45 * args.budget, 120.0) if args.compile else 0.0
    last_iter: dict[str, float] = {}  # per env: the last PPO size's seconds per iteration

    def save() -> None:
        result["wall_seconds"] = time.time() - budget.start
        write_json_atomic(out, result)

    def skip(what: str) -> None:
        log(f"skip (budget): {what}")
        skipped.append(what)
        result["budget_exhausted"] = True

    for kind in ("env_step", "ppo_train"):
        for env_id in args.envs:
            for n in args.sizes:
                what = f"{kind} {env_id} N={n}"
                if kind == "env_step":
                    estimate = (1 + WARMUP_FRACTION) * args.seconds + 1.0
                else:  # the next size is ~4x the work of the last; 2 warm-up iterations
                    estimate = args.seconds + 2.0 + 3 * 4 * last_iter.get(env_id, 0.0)
                if not budget.fits(estimate, compile_reserve):
                    skip(what)
                    continue
                row = {"kind": kind, "env_id": env_id, "num_envs": n}
                if kind == "env_step":
                    run_row(row, device, lambda env: measure_env_step(env, args.seconds))
                else:
                    run_row(row, device, lambda env: measure_ppo(env, args.seconds, *ppo_args))
                    if row["status"] == "ok":
                        last_iter[env_id] = row["seconds_per_iteration"]
                rows.append(row)
                log(f"{what}: {row['status']} {row.get('steps_per_s', float('nan')):.3e} steps/s")
                save()

    if not args.compile:
        return
    sizes = args.compile_sizes or sorted({min(args.sizes), max(args.sizes)})
    jobs = [("env_step_compiled", m) for m in args.compile_modes]
    jobs.insert(1, ("ppo_train_compiled", "default"))
    eager = {(r["kind"], r["env_id"], r["num_envs"]): r.get("steps_per_s") for r in rows}
    for kind, mode in jobs:
        what = f"{kind} mode={mode} {args.compile_env} N={sizes}"
        if not budget.fits(args.min_compile_s):
            skip(what)
            continue
        timeout = min(args.compile_timeout, budget.left() - FINAL_RESERVE_S)
        spec = {
            "kind": kind,
            "mode": mode,
            "env_id": args.compile_env,
            "sizes": sizes,
            "device": str(device),
            "seconds": args.seconds,
            "ppo": ppo_args,
            "threads": args.threads,
        }
        log(f"{what}: child process, limit {timeout:.0f} s")
        got, note = run_child(spec, timeout)
        done = {r["num_envs"]: r for r in got}
        for n in sizes:
            row = done.get(n) or {
                "kind": kind,
                "mode": mode,
                "env_id": args.compile_env,
                "num_envs": n,
                "status": "timeout" if note and note.startswith("timeout") else "error",
                "error": note or "no result",
            }
            base = eager.get((kind.removesuffix("_compiled"), args.compile_env, n))
            speedup = safe_ratio(row.get("steps_per_s") or float("nan"), base or float("nan"))
            row.update(eager_steps_per_s=base, speedup=speedup, keep=speedup >= WIN_THRESHOLD)
            crows.append(row)
            log(f"{kind} mode={mode} N={n}: {row['status']} speedup {speedup:.2f}x")
        save()


def _fmt(x, spec: str = "{:.3e}") -> str:
    return "-" if x is None or x != x else spec.format(x)


def print_tables(result: dict[str, Any]) -> None:
    print(
        f"\n{NAME}: {result['device_name']}, torch {result['torch']}, "
        f"{result['seconds_per_measurement']:g} s windows, {result['date']}"
    )
    rows = []
    for r in result["rows"]:
        mib = r.get("peak_memory_bytes")
        split = "-"
        if r["kind"] == "ppo_train" and r["status"] == "ok":
            split = f"{r['rollout_fraction']:.0%}/{r['update_fraction']:.0%}"
        rows.append(
            [
                r["env_id"],
                r["kind"],
                r["num_envs"],
                _fmt(r.get("steps_per_s")),
                split,
                _fmt(r.get("timed_seconds"), "{:.2f}"),
                "-" if mib is None else f"{mib / 2**20:.0f}",
                r["status"],
            ]
        )
    heads = ["env", "kind", "num_envs", "env steps/s", "roll/upd", "timed s", "peak MiB", "status"]
    print(format_table(heads, rows))
    crows = []
    for r in result["compile"]["rows"]:
        crows.append(
            [
                r["env_id"],
                r["kind"],
                r["mode"],
                r["num_envs"],
                _fmt(r.get("compile_seconds"), "{:.1f}"),
                _fmt(r.get("eager_steps_per_s")),
                _fmt(r.get("steps_per_s")),
                _fmt(r.get("speedup"), "{:.2f}x"),
                "yes" if r.get("keep") else "no",
                r["status"],
            ]
        )
    if crows:
        heads = ["env", "kind", "mode", "num_envs", "compile s", "eager/s", "compiled/s"]
        print(format_table([*heads, "speedup", "keep", "status"], crows))
    if result["skipped"]:
        print(f"skipped to stay within the {result['budget_s']:g} s budget: {result['skipped']}")
    print(f"wall {result['wall_seconds']:.1f} s of {result['budget_s']:g} s budget")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    ap.add_argument("--device", default=default_device, help=f"default {default_device}")
    ap.add_argument("--envs", nargs="+", default=list(ENVS), help="native env ids")
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="num_envs values")
    ap.add_argument("--seconds", type=float, default=None, help="timed window per measurement")
    ap.add_argument("--budget", type=float, default=None, help="deadline of the whole run, s")
    ap.add_argument("--horizon", type=int, default=16, help="PPO rollout length (default 16)")
    ap.add_argument("--epochs", type=int, default=2, help="PPO passes per rollout (default 2)")
    ap.add_argument("--minibatches", type=int, default=4, help="PPO minibatches per pass")
    ap.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=True, help="compile A/B"
    )
    ap.add_argument("--compile-env", default="CartPole-v1", help="env of the compile A/B")
    ap.add_argument("--compile-sizes", type=int, nargs="+", default=None)
    ap.add_argument(
        "--compile-modes",
        nargs="+",
        default=None,
        help="torch.compile modes for the env step (default: default, plus reduce-overhead "
        "(CUDA graphs) on CUDA); PPO is compiled in mode default",
    )
    ap.add_argument("--compile-timeout", type=float, default=90.0, help="limit per compile job")
    ap.add_argument("--min-compile-s", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--smoke",
        "--quick",
        dest="smoke",
        action="store_true",
        help="tiny sizes, short windows, output under the temp dir",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: torch's own choice); matters on CPU only",
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON path")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return args
    smoke = args.smoke
    args.sizes = args.sizes or list(SMOKE_SIZES if smoke else SIZES)
    args.seconds = args.seconds or (SMOKE_SECONDS if smoke else SECONDS)
    args.budget = args.budget or (SMOKE_BUDGET if smoke else BUDGET)
    args.min_compile_s = args.min_compile_s or (8.0 if smoke else 20.0)
    is_cuda = torch.device(args.device).type == "cuda"
    args.compile_modes = args.compile_modes or (
        ["default", "reduce-overhead"] if is_cuda else ["default"]
    )
    if smoke and args.compile_sizes is None:
        args.compile_sizes = [min(args.sizes)]
    if min(args.sizes) < 1 or args.seconds <= 0 or args.budget <= 0 or args.horizon < 1:
        ap.error("--sizes, --seconds, --budget and --horizon must be positive")
    args.out = args.out or default_out(NAME, smoke)
    return args


def main(argv: list[str] | None = None) -> int:
    start = process_start()
    args = parse_args(argv)
    if args.child is not None:
        return child_main(json.loads(args.child))
    device = torch.device(args.device)
    is_cuda = device.type == "cuda"
    threads = apply_threads(args.threads)
    machine = machine_info()
    result: dict[str, Any] = {
        "benchmark": NAME,
        "date": now_iso(),
        "smoke": args.smoke,
        "complete": False,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if is_cuda else machine["cpu_model"],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "machine": machine,
        "torch_threads": {"requested": args.threads, "in_effect": threads},
        "budget_s": args.budget,
        "budget_exhausted": False,
        "seconds_per_measurement": args.seconds,
        "unit": "sub-env steps per second (num_envs * vector steps / wall seconds); for "
        "ppo_train, num_envs * horizon per rollout+update iteration",
        "env_step": f"make_env(id, num_envs=N, device, seed=0), a ring of {RING} random "
        "action batches pre-drawn on the device, torch.inference_mode()",
        "ppo_train": f"Collector(env, PPO, horizon, seed=0).rollout() + PPO.update(batch); "
        f"PPOConfig(num_envs=N, horizon={args.horizon}, epochs={args.epochs}, "
        f"minibatch_size=N*horizon//{args.minibatches}); {PPO_WARMUP_ITERS} warm-up iterations",
        "rows": [],
        "compile": {
            "env_id": args.compile_env,
            "what": "env_step_compiled: the env class's dynamics wrapped by torch.compile "
            "(dynamic=False); ppo_train_compiled: PPO actor and critic wrapped by torch.compile; "
            "compared with the eager rows of the same env and size",
            "keep_rule": f"keep where compiled / eager >= {WIN_THRESHOLD}",
            "cuda_graphs": "only through torch.compile mode reduce-overhead on the dynamics; "
            "the whole step is not captured (its reset noise uses the env's own generator)",
            "rows": [],
        },
        "skipped": [],
    }
    run(args, device, Budget(start, args.budget), result, args.out)
    machine["loadavg_at_end"] = loadavg()
    result["complete"] = True
    result["wall_seconds"] = time.time() - start
    path = write_json_atomic(args.out, result)
    print_tables(result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
