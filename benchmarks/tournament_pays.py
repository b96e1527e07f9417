"""Does the tournament pay? Tournament vs plain sweep vs random search, equal compute.

Why: a user picks elegantpod over training N runs by hand only if the tournament finds a
good agent sooner. The paper's claim (section 5) is that the tournament-based ensemble
reaches higher rewards sooner than independent training. This script measures that on
tasks where hyperparameters and luck matter, each with a target and a wall budget:

``trap`` (MountainCarContinuous-v0, TD3, target 90, 90 s)
    An exploration trap: the action cost teaches a policy to stand still (return ~0)
    long before random exploration reaches the flag (+100), and with the default
    exploration noise most runs never do. A population copies the pod that found the
    flag (networks, optimizer *and* its replay buffer, which holds the flag), while a
    trapped pod replaced by a mutated copy gets a new draw of exploration noise.
``schedule`` (Pendulum-v1, PPO, target -200, 60 s)
    A task whose good learning rate changes during training: a large step size leaves
    the -1200 plateau fast but oscillates around -300, a small one converges but slowly.
    PBT's mutations make a schedule (large early, smaller late) that no fixed setting
    has.
``trading`` (StockTrading-v0 on the shipped S&P 500 sample, PPO, fitness validation
Sharpe, target 1.5, 60 s)
    Ranked by the validation Sharpe ratio (2017-2018) of training on 2010-2016;
    compared on the validation Sharpe reached at the budget and on the held-out
    backtest (2019-2022) of each method's best agent. The target is 1.5 because a
    first, barely trained segment already scores 1.0 on these eight large caps (a
    first run with target 1.0 was solved in 0.2-6.6 s by every method).

Methods, side by side on the *same* two-worker ``LocalCluster`` with the same number of
pods in flight (4 pods, 2 at a time), the same segment size and evaluation, and the same
wall budget; every seed runs every method back to back (order alternated per seed):

- ``tournament``: the default generator (exploit/explore; replacement only on evidence,
  restarts with fresh draws from the search space when the population is stuck);
- ``sweep``: the same starting pods (the base configuration and three mutated around
  it, identically seeded), never replaced;
- ``random``: random search, the same number of pods with configurations drawn
  uniformly from each algorithm's search space, never replaced.

Measured per seed: wall seconds (tournament time, from the pods' history) until the best
pod's evaluation first reaches the target (unsolved: the whole budget), and the best score
at the budget. Results: ``benchmarks/results/tournament_vs_baselines_<task>.json``; Ray
Tune PBT is measured by ``tune_pbt.py`` (its own virtualenv) and merged into the table
when its result file exists.

Usage::

    python benchmarks/tournament_pays.py --task trap [--seeds 5] [--budget 90] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    RESULTS_DIR,
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

from elegantpod import Tournament, cluster
from elegantpod.tournament import GeneratorConfig
from elegantpod.tournament.core.generator import search_space

METHODS = ("tournament", "sweep", "random")


@dataclass(frozen=True)
class Task:
    """One benchmark task: what trains, what counts as solved, how long it may take."""

    env: str
    algo: str
    target: float
    budget: float
    hparams: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    segment_steps: int | None = None


def trading_options() -> dict[str, Any]:
    from elegantpod.finance import DateSplits

    splits = DateSplits(
        train=("2010-01-01", "2016-12-31"),
        validation=("2017-01-01", "2018-12-31"),
        backtest=("2019-01-01", "2022-12-31"),
    )
    opts = splits.tournament_options(
        fitness="sharpe",
        data="sp500",
        tickers=["AAPL", "MSFT", "JPM", "XOM", "JNJ", "WMT", "PG", "KO"],
        episode_days=63,
        windows=4,  # the mean Sharpe of four half-year windows, and their spread
    )
    return {**opts, "_backtest": splits.backtest}


TASKS = {
    "trap": Task(
        env="MountainCarContinuous-v0",
        algo="td3",
        target=90.0,
        budget=90.0,
        hparams={"num_envs": 16, "replay_ratio": 0.25, "exploration_noise": 1.0},
        segment_steps=8_000,
    ),
    "schedule": Task(
        env="Pendulum-v1",
        algo="ppo",
        target=-200.0,
        budget=60.0,
        hparams={"num_envs": 64, "horizon": 32},
        segment_steps=20_480,
    ),
    "trading": Task(
        env="StockTrading-v0",
        algo="ppo",
        target=1.5,
        budget=60.0,
        segment_steps=4_000,
    ),
}


def get_task(name: str) -> Task:
    """``TASKS[name]``, with the trading task's data options filled in (they read the
    shipped sample's dates, so only when that task runs)."""
    task = TASKS[name]
    return dataclasses.replace(task, options=trading_options()) if name == "trading" else task


def random_hparams(task: Task, rng: random.Random) -> dict[str, Any]:
    """A configuration drawn uniformly (log-uniform where declared) from the search space."""
    return {
        **task.hparams,
        **{name: bound.sample(rng) for name, bound in search_space(task.algo).items()},
    }


def run(
    client, task: Task, method: str, seed: int, root: Path, generator: dict | None = None
) -> dict[str, Any]:
    """One method on one seed: a tournament for ``task.budget`` seconds (``generator``:
    settings over the default generator's, for tuning runs on other seeds)."""
    options = {k: v for k, v in task.options.items() if not k.startswith("_")}
    if method == "tournament":
        gen = GeneratorConfig(**(generator or {}))
    else:
        gen = GeneratorConfig(ready_segments=10**9, restart_after=0)
    t = Tournament(
        env=task.env,
        algos=[task.algo],
        pods=4,
        max_seconds=task.budget,
        target_reward=task.target,
        segment_steps=task.segment_steps,
        hparams={task.algo: dict(task.hparams)},
        store=root,
        client=client,
        seed=seed,
        generator=gen,
        **options,
    )
    if method == "random":
        rng = random.Random(10_000 + seed)
        for _ in range(4):
            t.add_pod(task.algo, **random_hparams(task, rng))
    t.start()
    s = t.wait()
    hist = t.history()
    scored = hist.dropna(subset=["score"])
    hit = scored[scored["score"] >= task.target]
    solved_at = float(hit["time"].min()) if len(hit) else math.nan
    out = {
        "solved_at": solved_at,
        "best": s["best_score"] if s["best_score"] is not None else math.nan,
        "pods_total": s["pods_total"],
        "pods_replaced": s["pods_replaced"],
        "env_steps": s["env_steps_total"],
        "wall_seconds": s["wall_seconds"],
        "schedule_changes": sum(1 for ph in t.schedule() if ph["changes"]),
        "restarts": s.get("restarts", 0),
        "replaced_on_evidence": s.get("replaced_on_evidence", 0),
        "kept_in_noise": s.get("kept_in_noise", 0),
        "winner_schedule": [
            {
                "pod": ph["pod"],
                "origin": ph.get("origin"),
                "changes": ph["changes"],
                "noise": ph["hparams"].get("noise"),
                "to_time": ph["to_time"],
                "score": ph["score"],
            }
            for ph in t.schedule()
        ],
        "curve": [[round(r["time"], 2), r["score"]] for r in scored.to_dict("records")],
    }
    if "_backtest" in task.options and s["best_pod"] is not None:
        from elegantpod.finance import backtest

        start, end = task.options["_backtest"]
        from elegantpod.finance.stats import metrics as fm
        from elegantpod.finance.stats.selection import bootstrap_sharpe_ci

        res = backtest(t, start=start, end=end, index="sp500")
        table = res.metrics()["sharpe"]
        out["backtest_sharpe"] = float(table.iloc[0])  # the agent's row comes first
        values = res.account_value.to_numpy()
        ci = bootstrap_sharpe_ci(fm.returns_from_values(values), res.periods_per_year, seed=0)
        out["backtest_sharpe_ci"] = [ci.low, ci.high]
        out["backtest_sharpe_benchmarks"] = {str(k): float(v) for k, v in table.iloc[1:].items()}
    log(
        f"  {method:<10} seed {seed}: solved at {solved_at:.1f}s, best {out['best']:.3g}, "
        f"{s['pods_total']} pods ({s['pods_replaced']} replaced, "
        f"{out['restarts']} restarts, {out['kept_in_noise']} kept in the noise), "
        f"{s['env_steps_total']:,} env steps"
    )
    return out


def report() -> str:
    """The README's markdown table, from every task's result file (Tune PBT merged)."""
    lines = [
        "| task (target, budget) | method | seconds to target | solved | best at budget |"
        " ratio to tournament |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for task in TASKS:
        path = RESULTS_DIR / f"tournament_vs_baselines_{task}.json"
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        res = dict(d["results"])
        tune = RESULTS_DIR / f"tournament_vs_tune_pbt_{task}.json"
        if tune.exists():
            res["tune_pbt"] = json.loads(tune.read_text())["results"]["tune_pbt"]
        mine = res["tournament"]["seconds_to_target"]["median"]
        for method, r in res.items():
            other = r["seconds_to_target"]["median"]
            ratio = "-" if method == "tournament" else f"{safe_ratio(mine, other):.2f}"
            extra = ""
            if "backtest_sharpe" in r:
                extra = f"; held-out backtest Sharpe {fmt_range(r['backtest_sharpe'], '{:.2f}')}"
                cis = [x.get("backtest_sharpe_ci") for x in r.get("runs", [])]
                if cis and all(cis):
                    extra += (
                        " (95% CIs: " + ", ".join(f"[{lo:.2f}, {hi:.2f}]" for lo, hi in cis) + ")"
                    )
            name = f"{d['env_id']} {d['algo'].upper()}"
            lines.append(
                f"| {name} ({d['target']:g}, {d['budget_seconds']:.0f} s) | {method} |"
                f" {fmt_range(r['seconds_to_target'], '{:.1f}')} |"
                f" {sum(r['solved'])}/{len(r['solved'])} |"
                f" {fmt_range(r['best_at_budget'], '{:.3g}')}{extra} | {ratio} |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if "--report" in sys.argv:
        print(report())
        return
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=100, help="benchmark seeds start here")
    p.add_argument("--budget", type=float, default=None, help="wall seconds per run")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument(
        "--generator",
        action="append",
        default=[],
        help="key=value over the default GeneratorConfig (tuning runs, on other seeds)",
    )
    a = p.parse_args()
    generator = {k: json.loads(v) for k, _, v in (g.partition("=") for g in a.generator)}
    task = get_task(a.task)
    if a.budget:
        task = dataclasses.replace(task, budget=a.budget)
    methods = [m for m in a.methods.split(",") if m]
    if a.quick:
        a.seeds = 1
        task = dataclasses.replace(task, budget=20.0)
    out = Path(a.out) if a.out else default_out(f"tournament_vs_baselines_{a.task}", a.quick)
    info = machine_info()
    client = cluster(n_workers=2, dashboard_address=None)
    per: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    t0 = time.monotonic()
    try:
        for i, seed in enumerate(range(a.first_seed, a.first_seed + a.seeds)):
            order = methods if i % 2 == 0 else methods[::-1]  # drift hits all alike
            for method in order:
                with tempfile.TemporaryDirectory() as d:
                    per[method].append(run(client, task, method, seed, Path(d) / "s", generator))
    finally:
        cl = client.cluster
        client.close()
        cl.close()
    res = {}
    for method, runs in per.items():
        solve = [r["solved_at"] if math.isfinite(r["solved_at"]) else task.budget for r in runs]
        res[method] = {
            "seconds_to_target": summarize(solve),
            "best_at_budget": summarize([r["best"] for r in runs]),
            "solved": [math.isfinite(r["solved_at"]) for r in runs],
            "runs": runs,
        }
        if any("backtest_sharpe" in r for r in runs):
            res[method]["backtest_sharpe"] = summarize(
                [r.get("backtest_sharpe", math.nan) for r in runs]
            )
    tune = RESULTS_DIR / f"tournament_vs_tune_pbt_{a.task}.json"
    if tune.exists():
        res["tune_pbt"] = json.loads(tune.read_text())["results"]["tune_pbt"]
    med = {m: r["seconds_to_target"]["median"] for m, r in res.items()}
    ratios = {m: safe_ratio(med["tournament"], med[m]) for m in res if m != "tournament"}
    info["loadavg_at_end"] = loadavg()
    write_json_atomic(
        out,
        {
            "benchmark": "tournament_vs_baselines",
            "task": a.task,
            "machine": info,
            "date": now_iso(),
            "quick": a.quick,
            "env_id": task.env,
            "algo": task.algo,
            "hparams": task.hparams,
            "segment_steps": task.segment_steps,
            "fitness": task.options.get("fitness", "return"),
            "pods": 4,
            "workers": 2,
            "target": task.target,
            "budget_seconds": task.budget,
            "seeds": list(range(a.first_seed, a.first_seed + a.seeds)),
            "generator": generator or "default",
            "total_seconds": time.monotonic() - t0,
            "results": res,
            "ratio_median_seconds_to_target": ratios,
            "timing": "tournament seconds until the first segment evaluation >= target "
            "(unsolved: the budget)",
        },
    )
    rows = []
    for m, r in res.items():
        row = [
            m,
            fmt_range(r["seconds_to_target"], "{:.1f}"),
            fmt_range(r["best_at_budget"], "{:.3g}"),
            f"{sum(r['solved'])}/{len(r['solved'])}",
        ]
        if "backtest_sharpe" in r:
            row.append(fmt_range(r["backtest_sharpe"], "{:.2f}"))
        rows.append(row)
    headers = ["", "seconds to target", f"best at {task.budget:.0f}s", "solved"]
    if any(len(r) > 4 for r in rows):
        headers.append("backtest Sharpe")
    print(format_table(headers, [r + [""] * (len(headers) - len(r)) for r in rows]))
    print(
        "tournament / other (median seconds to target): "
        + ", ".join(f"{m} {v:.2f}" for m, v in ratios.items())
        + f"; wrote {out}"
    )


if __name__ == "__main__":
    main()
