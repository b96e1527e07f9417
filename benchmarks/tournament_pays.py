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
``lander`` (LunarLanderContinuous-v3, SAC, target 0, 240 s)
    A harder task, where learning-rate, entropy and replay settings decide whether a
    lander learns to hover and set down (return above 0) or keeps crashing (-100 and
    below) within a few minutes: one SAC pod with the box2d preset's settings, alone on
    the 2-core box, scored -20 at 20k env steps and -38 at 75k (150 s), so the target
    is within reach of a good schedule but not of every seed. Segments of 5,000 steps
    (about 20 s here), so that each pod trains about six in a run and the evidence rule
    can act (at 10,000 no tournament replaced or restarted a pod).
``trading`` (StockTrading-v0 on the shipped S&P 500 sample, PPO, fitness validation
Sharpe, target 1.5, 60 s)
    Ranked by the validation Sharpe ratio (2017-2018) of training on 2010-2016;
    compared on the validation Sharpe reached at the budget and on the held-out
    backtest (2019-2022) of each method's best agent. The target is 1.5 because a
    first, barely trained segment already scores 1.0 on these eight large caps (a
    first run with target 1.0 was solved in 0.2-6.6 s by every method).

Methods, side by side on the *same* two-worker ``LocalCluster`` with the same number of
pods in flight (4 pods, 2 at a time), the same segment size and evaluation, and the same
wall budget; every seed runs every method back to back (order rotated per seed):

- ``tournament_sample``: the default generator (exploit/explore; replacement only on
  evidence, restarts with fresh draws from the search space when the population is
  stuck), its first pods started as population-based training starts
  (``init="sample"``: the base settings and three draws from the search space);
- ``tournament_base``: the same, its first pods the base and three variations of it
  (``init="base"``); the two are measured side by side to choose ``Tournament``'s
  default start, and the table compares the default one against every other method;
- ``sweep``: the ``init="base"`` starting pods, never replaced;
- ``random``: random search, the same number of pods with configurations drawn
  uniformly from each algorithm's search space, never replaced;
- ``tune_pbt``: Ray Tune's PBT training our pods (round 3 ran ``tune_pbt.py``'s former
  command line; Tune is now a method of ``pays_study.py``'s plans).

Each run appends its line to ``results/tournament_pays_runs.jsonl`` as soon as it ends
(:mod:`pays_runs`): its every evaluation (tournament seconds, score), its budget and
target, and what the method did (replacements, restarts, schedule). A later invocation
skips the runs logged already, so ten seeds of every method can be spread over many
sessions. ``--report`` makes the tables from the log with ``elegantpod.compare``, on the
seeds every method has: solved fraction (Wilson interval), IQM of the seconds to target
(unsolved counted at the budget) and of the final score (stratified bootstrap
intervals), and the tournament against each other method (the IQM difference and the
probability of improvement, with intervals; it "pays" only where the difference's
interval lies below zero). It writes ``results/tournament_pays_<task>.html`` (the
report) and ``.json`` (the figures).

Usage::

    python benchmarks/tournament_pays.py --task trap [--seeds 10] [--methods tournament,sweep]
    python benchmarks/tournament_pays.py --report
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pays_runs
from _common import loadavg, log, machine_info, now_iso, write_json_atomic

from elegantpod import Tournament, cluster
from elegantpod.tournament import GeneratorConfig
from elegantpod.tournament.core.generator import search_space


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
    "lander": Task(
        env="LunarLanderContinuous-v3",
        algo="sac",
        target=0.0,
        budget=240.0,
        # the box2d preset's SAC settings (rl-zoo3's, adapted)
        hparams={
            "num_envs": 8,
            "hidden": (256, 256),
            "lr": 7.3e-4,
            "gamma": 0.98,
            "tau": 0.02,
            "buffer_size": 300_000,
            "learning_starts": 10_000,
        },
        # 5,000 (about 20 s here): at 10,000 a 240 s run gave each pod about three
        # segments and no tournament replaced or restarted a pod (seed 100, all methods)
        segment_steps=5_000,
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
    client,
    task: Task,
    method: str,
    seed: int,
    root: Path,
    generator: dict | None = None,
    init: str = "base",
) -> dict[str, Any]:
    """One method on one seed: a tournament for ``task.budget`` seconds (``generator``:
    settings over the default generator's, for tuning runs on other seeds; ``init``:
    how the first pods start, ``METHOD_INIT``'s for each method)."""
    options = {k: v for k, v in task.options.items() if not k.startswith("_")}
    if method.startswith("tournament"):
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
        init=init,
        **options,
    )
    if method == "random":
        rng = random.Random(10_000 + seed)
        for _ in range(4):
            t.add_pod(task.algo, **random_hparams(task, rng))
    t.start()
    s = t.wait()
    scored = t.history().dropna(subset=["score"]).sort_values("time")
    hit = scored[scored["score"] >= task.target]
    solved_at = float(hit["time"].min()) if len(hit) else math.nan
    out = {
        "time": [round(float(x), 3) for x in scored["time"]],
        "score": [float(x) for x in scored["score"]],
        "budget": task.budget,
        "target": task.target,
        "segment_steps": task.segment_steps,
        "queue": pays_runs.QUEUE,
        "best": s["best_score"] if s["best_score"] is not None else None,
        "pods_total": s["pods_total"],
        "pods_replaced": s["pods_replaced"],
        "env_steps": s["env_steps_total"],
        "wall_seconds": s["wall_seconds"],
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
    }
    if "_backtest" in task.options and s["best_pod"] is not None:
        from elegantpod.finance import backtest
        from elegantpod.finance.stats import metrics as fm
        from elegantpod.finance.stats.bootstrap import bootstrap_sharpe_ci

        start, end = task.options["_backtest"]
        res = backtest(t, start=start, end=end, index="sp500")
        table = res.metrics()["sharpe"]
        out["backtest_sharpe"] = float(table.iloc[0])  # the agent's row comes first
        values = res.account_value.to_numpy()
        ci = bootstrap_sharpe_ci(fm.returns_from_values(values), res.periods_per_year, seed=0)
        out["backtest_sharpe_ci"] = [ci.low, ci.high]
        out["backtest_sharpe_benchmarks"] = {str(k): float(v) for k, v in table.iloc[1:].items()}
    log(
        f"  {method:<18} seed {seed}: {pays_runs.outcome(solved_at, task.budget)}, "
        f"best {out['best']:.3g}, "
        f"{s['pods_total']} pods ({s['pods_replaced']} replaced, "
        f"{out['restarts']} restarts, {out['kept_in_noise']} kept in the noise), "
        f"{s['env_steps_total']:,} env steps"
    )
    return out


METHOD_INIT = {
    "tournament_sample": "sample",
    "tournament_base": "base",
    "sweep": "base",
    "random": "base",
}
"""Each method's first pods. The two tournaments differ only in their start
(``init``), measured side by side to choose ``Tournament``'s default."""


def table_order() -> list[str]:
    """The methods in table order: the tournament as it starts by default first (the
    one compared against every other), then the other start, Tune's PBT and the rest."""
    from elegantpod.tournament import TournamentSpec

    default = TournamentSpec(env_id="CartPole-v1").init
    other = "base" if default == "sample" else "sample"
    return [f"tournament_{default}", f"tournament_{other}", "tune_pbt", "sweep", "random"]


def report(log_path: Path = pays_runs.LOG, write: bool = True) -> str:
    """The README's tables, one per task, from the run log through ``elegantpod.compare``
    (each task's report and figures written beside the log with ``write``)."""
    from elegantpod import compare

    parts = []
    for name, task in TASKS.items():
        order = table_order()
        runs = pays_runs.curves(name, log_path, order, task.segment_steps)
        if not runs.get(order[0]):
            continue
        budgets = {c["budget"] for cs in runs.values() for c in cs}
        if len(budgets) != 1:  # runs of another budget (--budget) go to a log of their own
            raise SystemExit(f"{name}: the log holds runs of budgets {sorted(budgets)}")
        budget = budgets.pop()
        title = f"{task.env} {task.algo.upper()} (target {task.target:g}, {budget:.0f} s)"
        c = compare(runs, task.target, budget=budget, title=title)
        parts.append(c.to_markdown())
        if write:  # beside the log, named after it (another log: other files)
            stem = "tournament_pays" if log_path == pays_runs.LOG else log_path.stem
            c.save(log_path.parent / f"{stem}_{name}.html")
            write_json_atomic(log_path.parent / f"{stem}_{name}.json", c.to_dict())
    return "\n\n".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", action="store_true", help="print the tables from the log")
    p.add_argument("--task", choices=sorted(TASKS))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=100, help="benchmark seeds start here")
    p.add_argument("--budget", type=float, default=None, help="wall seconds per run")
    p.add_argument("--methods", default=",".join(METHOD_INIT))
    p.add_argument("--log", default=str(pays_runs.LOG), help="the run log (JSON lines)")
    p.add_argument("--quick", action="store_true", help="one seed of 20 s, to a scratch log")
    p.add_argument(
        "--generator",
        action="append",
        default=[],
        help="key=value over the default GeneratorConfig (tuning runs, on other seeds)",
    )
    a = p.parse_args()
    log_path = Path(a.log)
    if a.report:
        try:
            print(report(log_path))
        except ValueError as exc:  # a bad log line or run: one line, its values escaped
            raise SystemExit(f"error: {exc}") from None
        return
    if a.task is None:
        p.error("--task is required (or --report)")
    generator = {k: json.loads(v) for k, _, v in (g.partition("=") for g in a.generator)}
    task = get_task(a.task)
    if a.budget:
        task = dataclasses.replace(task, budget=a.budget)
    methods = [m for m in a.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHOD_INIT]
    if unknown:
        p.error(f"unknown methods {unknown}: choose from {list(METHOD_INIT)}")
    if a.quick:
        a.seeds = 1
        task = dataclasses.replace(task, budget=20.0)
        log_path = log_path.with_name(log_path.stem + "_quick.jsonl")
    info = machine_info()
    already = pays_runs.done(log_path, {n: t.segment_steps for n, t in TASKS.items()})
    todo = [
        (seed, method)
        for i, seed in enumerate(range(a.first_seed, a.first_seed + a.seeds))
        # order rotated per seed: drift over the hours hits every method alike
        for method in methods[i % len(methods) :] + methods[: i % len(methods)]
        if (a.task, method, seed) not in already
    ]
    log(f"{len(todo)} runs to do ({len(already)} logged in {log_path})")
    if not todo:
        return
    client = cluster(n_workers=2, dashboard_address=None)
    try:
        for seed, method in todo:
            with tempfile.TemporaryDirectory() as d:
                out = run(client, task, method, seed, Path(d) / "s", generator, METHOD_INIT[method])
            out.update(
                task=a.task,
                method=method,
                seed=seed,
                date=now_iso(),
                generator=generator or "default",
                machine=info,
                loadavg=loadavg(),
            )
            pays_runs.append(out, log_path)
    finally:
        cl = client.cluster
        client.close()
        cl.close()
    if not a.quick:
        print(report(log_path))


if __name__ == "__main__":
    main()
