"""Env steps per second of our vectorized StockTradingEnv vs a FinRL-style pandas env.

Measures raw simulation throughput (sub-env steps per second, random actions, no policy)
of ``elegantpod.finance.trading.env.StockTradingEnv(num_envs=N)`` at several ``N``
against :class:`finrl_reference.FinRLStyleStockTradingEnv`, our re-implementation of
FinRL's single-env ``StockTradingEnv`` semantics (a pandas ``df.loc`` lookup, Python lists
and per-stock Python loops every step; see ``benchmarks/finrl_reference.py``). Why: the
claim that one vectorized env replaces thousands of pandas-based envs needs a number
measured side by side, on the same machine, in the same run. Target (the issue): ours at
1,024 envs >= 100x the FinRL-style env's steps/s.

Setup, the same on both sides: the shipped S&P 500 sample (20 stocks), the same date
range (default FinRL's tutorial training window, 2009-01-01..2020-06-30), our default
indicators (6 per stock; state/observation 161 numbers), ``hmax=100`` shares, cost 0.1%
on buys and sells, initial cash 1e6, reward scaled by 1e-4. Ours runs 252-day episodes
from random days (its training default) with auto-reset; the reference runs the whole
range from its first day and is reset when it reports ``terminated``, as SB3 would.

Fairness choices (recorded in the JSON):

- Both sides run in this one process, on one core: ``torch.set_num_threads(1)`` by
  default (``--threads``). The reference is single-threaded Python/pandas; this machine
  has 2 cores shared with other work, and one core each is the like-for-like budget. A
  reference gets no faster with more envs in one process, so its steps/s is one figure
  whatever our ``N``; ``ratio = ours(N) / reference``.
- Actions: uniform in [-1, 1], pre-generated pools (ours: torch, on the env's device,
  ``(64, N, 20)`` float32; reference: numpy ``(256, 20)`` float32) cycled through, so
  action sampling is not timed. Ours runs under ``torch.inference_mode()``.
- Two references: ``finrl`` recomputes ``len(df.index.unique())`` and
  ``len(df.tic.unique())`` on every step, as FinRL does (about 85% of its step time
  here); ``finrl_cached`` computes them once, so the target is also judged against a
  leaner pandas env and does not rest on that one FinRL inefficiency.
- Time windows, not step counts: each measurement warms up for ``--warmup`` seconds,
  then steps for ``--seconds``; every repeat builds fresh envs, and the order of the
  measurements reverses from one repeat to the next. Figures are medians over
  ``--repeats`` with min-max; ``paired_ratios`` divide within a repeat.

Before timing, :func:`finrl_reference.sanity_check` checks the reference's bookkeeping
(a zero action keeps the account; a 1-share buy charges ``price * (1 + cost)``) and
:func:`cross_check` that one step of both envs buying one share earns the same reward.

Usage::

    python benchmarks/finance_env_throughput.py [--repeats 3] [--seconds 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import math
import time
from pathlib import Path
from typing import Any

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
from finrl_reference import (
    FINRL_VERSION_STUDIED,
    FinRLStyleStockTradingEnv,
    make_reference_env,
    sanity_check,
)

from elegantpod.finance.market.prices import sp500_sample
from elegantpod.finance.trading.env import StockTradingEnv

NAME = "finance_env_throughput"
SIZES = (1, 64, 1024, 4096)
START, END = "2009-01-01", "2020-06-30"  # FinRL's tutorial training window
HMAX = 100
COST = 1e-3
INITIAL_AMOUNT = 1e6
REWARD_SCALE = 100.0  # ours: % of the initial amount, i.e. FinRL's reward_scaling 1e-4
EPISODE_DAYS = 252
SECONDS, QUICK_SECONDS = 3.0, 0.4
WARMUP, QUICK_WARMUP = 0.5, 0.1
OURS_POOL = 64
REF_POOL = 256
TARGET_N = 1024
TARGET_SPEEDUP = 100.0
REFERENCES = ("finrl", "finrl_cached")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_ours(n: int, device: str, seed: int, start: str, end: str) -> StockTradingEnv:
    return StockTradingEnv(
        n,
        device,
        seed,
        data="sp500",
        start=start,
        end=end,
        episode_days=EPISODE_DAYS,
        initial_amount=INITIAL_AMOUNT,
        hmax=HMAX,
        cost=COST,
        reward_scale=REWARD_SCALE,
    )


def make_reference(start: str, end: str, cached: bool) -> FinRLStyleStockTradingEnv:
    return make_reference_env(
        sp500_sample(),
        start=start,
        end=end,
        hmax=HMAX,
        initial_amount=INITIAL_AMOUNT,
        cost=COST,
        reward_scaling=REWARD_SCALE / INITIAL_AMOUNT,
        cache_unique_counts=cached,
    )


def bench_ours(
    n: int, device: str, seed: int, seconds: float, warmup: float, start: str, end: str
) -> dict[str, float]:
    """Sub-env steps per second of ours with ``n`` accounts."""
    env = make_ours(n, device, seed, start, end)
    gen = torch.Generator(device=env.device).manual_seed(seed)
    pool = torch.rand((OURS_POOL, n, env.num_stocks), generator=gen, device=env.device)
    pool = pool * 2.0 - 1.0
    with torch.inference_mode():
        env.reset(seed=seed)
        i = 0
        _sync(env.device)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < warmup or i < 2:
            env.step(pool[i % OURS_POOL])
            i += 1
        _sync(env.device)
        steps = 0
        t0 = time.perf_counter()
        while True:
            env.step(pool[i % OURS_POOL])
            i += 1
            steps += 1
            _sync(env.device)
            if time.perf_counter() - t0 >= seconds:
                break
        elapsed = time.perf_counter() - t0
    env.close()
    return {"steps_per_s": n * steps / elapsed, "vector_steps": steps, "seconds": elapsed}


def bench_reference(
    cached: bool, seed: int, seconds: float, warmup: float, start: str, end: str
) -> dict[str, float]:
    """Steps per second of one FinRL-style env (reset on ``terminated``)."""
    env = make_reference(start, end, cached)
    rng = np.random.default_rng(seed)
    pool = rng.uniform(-1.0, 1.0, size=(REF_POOL, env.stock_dim)).astype(np.float32)
    env.reset(seed=seed)
    i = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup or i < 2:
        if env.step(pool[i % REF_POOL])[2]:
            env.reset()
        i += 1
    steps = 0
    t0 = time.perf_counter()
    while True:
        if env.step(pool[i % REF_POOL])[2]:
            env.reset()
        i += 1
        steps += 1
        if time.perf_counter() - t0 >= seconds:
            break
    elapsed = time.perf_counter() - t0
    return {"steps_per_s": steps / elapsed, "vector_steps": steps, "seconds": elapsed}


def cross_check(start: str, end: str) -> dict[str, Any]:
    """One step of each env from the same first day, buying 1 share of every stock:
    the same reward (ours is float32) and the same cash left."""
    ref = make_reference(start, end, cached=True)
    ours = StockTradingEnv(
        1,
        "cpu",
        0,
        data="sp500",
        start=start,
        end=end,
        episode_days=None,  # starts on the range's first day, like the reference
        initial_amount=INITIAL_AMOUNT,
        hmax=HMAX,
        cost=COST,
        reward_scale=REWARD_SCALE,
    )
    s = ref.stock_dim
    if tuple(ref.df.loc[0, "tic"]) != ours.tickers:
        raise RuntimeError("cross-check: the two envs order the tickers differently")
    ref.reset(seed=0)
    ours.reset(seed=0)
    action = np.full(s, 1.5 / HMAX, dtype=np.float32)  # x hmax -> 1 share each
    state, ref_reward, *_ = ref.step(action)
    with torch.inference_mode():
        _, reward, *_ = ours.step(torch.as_tensor(action).unsqueeze(0))
    ours_reward, ours_cash = float(reward[0]), float(ours.cash[0])
    ok = math.isclose(ours_reward, ref_reward, rel_tol=1e-4, abs_tol=1e-6) and math.isclose(
        ours_cash, float(state[0]), rel_tol=1e-12
    )
    if not ok:
        raise RuntimeError(
            f"cross-check failed: reward ours {ours_reward} vs reference {ref_reward}, "
            f"cash ours {ours_cash} vs reference {float(state[0])}"
        )
    return {
        "date": str(ref.date_memory[0])[:10],
        "ours_reward": ours_reward,
        "reference_reward": float(ref_reward),
        "ours_cash": ours_cash,
        "reference_cash": float(state[0]),
    }


def run(
    sizes: list[int],
    repeats: int,
    seconds: float,
    warmup: float,
    device: str,
    start: str,
    end: str,
) -> dict[str, Any]:
    jobs: list[tuple[str, Any]] = [(r, None) for r in REFERENCES] + [("ours", n) for n in sizes]
    ours: dict[int, list[float]] = {n: [] for n in sizes}
    refs: dict[str, list[float]] = {r: [] for r in REFERENCES}
    raw: list[dict[str, Any]] = []
    for rep in range(repeats):
        # Reverse the order every other repeat so ordering effects (caches, turbo,
        # neighbours on this shared machine) do not systematically favour one side.
        for who, n in jobs if rep % 2 == 0 else jobs[::-1]:
            gc.collect()
            if who == "ours":
                m = bench_ours(n, device, rep, seconds, warmup, start, end)
                ours[n].append(m["steps_per_s"])
            else:
                m = bench_reference(who == "finrl_cached", rep, seconds, warmup, start, end)
                refs[who].append(m["steps_per_s"])
            raw.append({"repeat": rep, "env": who, "num_envs": n or 1, **m})
            log(f"repeat {rep} {who:>12} N={n or 1:>5}: {m['steps_per_s']:.4g} steps/s")
    ref_sum = {r: summarize(v) for r, v in refs.items()}
    configs: list[dict[str, Any]] = []
    for n in sizes:
        o = summarize(ours[n])
        entry: dict[str, Any] = {"num_envs": n, "ours_steps_per_s": o}
        for r in REFERENCES:
            entry[f"ratio_ours_over_{r}"] = safe_ratio(o["median"], ref_sum[r]["median"])
            entry[f"paired_ratios_{r}"] = [a / b for a, b in zip(ours[n], refs[r], strict=True)]
        if n == TARGET_N:
            entry["target_met"] = bool(entry["ratio_ours_over_finrl"] >= TARGET_SPEEDUP)
            entry["target_met_vs_finrl_cached"] = bool(
                entry["ratio_ours_over_finrl_cached"] >= TARGET_SPEEDUP
            )
        configs.append(entry)
    target = next((c for c in configs if c["num_envs"] == TARGET_N), None)
    return {
        "references": {f"{r}_steps_per_s": ref_sum[r] for r in REFERENCES},
        "target": {
            "description": f"ours at {TARGET_N} envs >= {TARGET_SPEEDUP:g}x the FinRL-style "
            "env (medians)",
            "num_envs": TARGET_N,
            "required_ratio": TARGET_SPEEDUP,
            "ratio": target["ratio_ours_over_finrl"] if target else None,
            "met": target["target_met"] if target else None,
            "ratio_vs_finrl_cached": target["ratio_ours_over_finrl_cached"] if target else None,
            "met_vs_finrl_cached": target["target_met_vs_finrl_cached"] if target else None,
        },
        "configs": configs,
        "raw": raw,
    }


def print_table(result: dict) -> None:
    refs = result["references"]
    rows = [
        [
            "FinRL-style (FinRL's per-step uniques)",
            1,
            fmt_range(refs["finrl_steps_per_s"], "{:.3g}"),
            "1x",
            "-",
        ],
        [
            "FinRL-style, uniques cached",
            1,
            fmt_range(refs["finrl_cached_steps_per_s"], "{:.3g}"),
            "-",
            "1x",
        ],
    ]
    for c in result["configs"]:
        rows.append(
            [
                f"ours ({result['settings']['device']})",
                c["num_envs"],
                fmt_range(c["ours_steps_per_s"], "{:.3g}"),
                f"{c['ratio_ours_over_finrl']:.3g}x",
                f"{c['ratio_ours_over_finrl_cached']:.3g}x",
            ]
        )
    headers = ["env", "num_envs", "steps/s median [min, max]", "/ finrl", "/ finrl_cached"]
    st, m = result["settings"], result["machine"]
    print(
        f"\n{NAME}: {st['num_stocks']} stocks {st['start']}..{st['end']}, random actions, "
        f"{st['repeats']} repeat(s) x {st['seconds']:g} s, torch threads "
        f"{m['torch_num_threads']}, {m['cpu_count']} CPUs, {result['date']}"
    )
    print(format_table(headers, rows))
    t = result["target"]
    if t["ratio"] is not None:
        print(
            f"target: {t['description']}: {t['ratio']:.3g}x -> "
            f"{'MET' if t['met'] else 'NOT MET'} (vs the cached variant: "
            f"{t['ratio_vs_finrl_cached']:.3g}x -> "
            f"{'met' if t['met_vs_finrl_cached'] else 'not met'})"
        )


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=None, help="repeats (default 3; 1 with --quick)")
    ap.add_argument(
        "--seconds",
        type=float,
        default=None,
        help=f"timed window per measurement (default {SECONDS:g}; {QUICK_SECONDS:g} with --quick)",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=None,
        help=f"untimed seconds before each window (default {WARMUP:g}; "
        f"{QUICK_WARMUP:g} with --quick)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test (< 30 s): short windows, 1 repeat, output under the temp dir",
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
        help=f"our num_envs values (default {' '.join(map(str, SIZES))})",
    )
    ap.add_argument("--start", default=START, help=f"first trading day (default {START})")
    ap.add_argument("--end", default=END, help=f"last trading day (default {END})")
    ap.add_argument("--device", default="cpu", help="our env's device (default cpu)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch.set_num_threads (default 1: one core each side; the reference is "
        "single-threaded either way)",
    )
    args = ap.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    seconds = (
        args.seconds if args.seconds is not None else (QUICK_SECONDS if args.quick else SECONDS)
    )
    warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP if args.quick else WARMUP)
    if repeats < 1 or any(n < 1 for n in args.sizes):
        ap.error("--repeats and --sizes must be >= 1")
    if seconds <= 0 or warmup < 0:
        ap.error("--seconds must be > 0 and --warmup >= 0")
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    out = args.out if args.out is not None else default_out(NAME, args.quick)

    threads = apply_threads(args.threads)
    machine = machine_info()
    machine["pandas"] = _version("pandas")
    log("sanity checks ...")
    checks = {"reference": sanity_check(), "cross_check": cross_check(args.start, args.end)}
    probe = make_reference(args.start, args.end, cached=True)
    settings = {
        "device": args.device,
        "start": args.start,
        "end": args.end,
        "trading_days": int(probe.df.index[-1]) + 1,
        "num_stocks": probe.stock_dim,
        "indicators": probe.tech_indicator_list,
        "state_dim": probe.state_space,
        "hmax": HMAX,
        "cost": COST,
        "initial_amount": INITIAL_AMOUNT,
        "reward_scaling": REWARD_SCALE / INITIAL_AMOUNT,
        "ours_episode_days": EPISODE_DAYS,
        "repeats": repeats,
        "seconds": seconds,
        "warmup_seconds": warmup,
        "sizes": args.sizes,
    }
    del probe
    result = run(args.sizes, repeats, seconds, warmup, args.device, args.start, args.end)
    machine["loadavg_at_end"] = loadavg()
    result = {
        "benchmark": NAME,
        "machine": machine,
        "date": now_iso(),
        "quick": args.quick,
        "unit": "sub-env steps per second (num_envs * vector steps / wall seconds)",
        "torch_threads": {"requested": args.threads, "in_effect": threads},
        "ours": "elegantpod.finance.trading.env.StockTradingEnv(N, device, seed, data='sp500', "
        f"start, end, episode_days={EPISODE_DAYS}, hmax={HMAX}, cost={COST}), auto-reset, "
        "torch.inference_mode(), pre-generated uniform [-1, 1] float32 torch actions",
        "references_description": {
            "finrl": "benchmarks/finrl_reference.py FinRLStyleStockTradingEnv: FinRL "
            f"{FINRL_VERSION_STUDIED} StockTradingEnv semantics, one env, whole range per "
            "episode, reset on terminated; len(df.index.unique()) and len(df.tic.unique()) "
            "recomputed every step as FinRL does",
            "finrl_cached": "the same with those two counts computed once",
        },
        "fairness": [
            "both sides in one process; torch intra-op threads = --threads (default 1, one "
            "core each side; the reference is single-threaded Python/pandas; the machine's "
            "cores are shared with other work)",
            "same data, date range, indicators, hmax, cost, initial cash, reward scaling",
            "action sampling not timed (pre-generated pools cycled through)",
            "reference steps/s does not depend on our N: one figure, ratio = ours(N) / ref",
            "measurement order reversed every other repeat; fresh envs every measurement",
        ],
        "settings": settings,
        "checks": checks,
        **result,
    }
    path = write_json_atomic(out, result)
    print_table(result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
