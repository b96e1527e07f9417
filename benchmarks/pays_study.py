"""A pre-registered study of whether the tournament pays: plan first, then runs, then the table.

Why this runner and not ``tournament_pays.py``: an outside audit of that script's table
(``../shared/reviews/thesis-audit.md``) found its test seeds were its tuning seeds, its
comparators ran on other commits, machines and days, a run could be redone until it
pleased, and a target crossed on one lucky evaluation counted. Every one of those is a
choice a runner can refuse. So here:

- **A plan file comes first** (``benchmarks/plans/*.json``, committed before any test
  run): tasks, targets, budgets, methods (each a line-up of selection rules and a start,
  :mod:`elegantpod.tournament.core.rules`), test seeds never used before (1000 and up:
  tuning uses 900-999, earlier rounds 100-113), the analysis (the family of
  comparisons, the one-sided alternative, the family-wise level) and the commit of the
  code that runs it.
- **The runner refuses** a task, method or seed the plan does not name, a dirty tree, a
  plan file not committed, code that differs from the plan's commit (outside
  ``benchmarks/plans`` and ``benchmarks/results``), another CPU model, and foreign
  load: before each run it samples the whole machine's busy share for a few seconds,
  with its own cluster idle, and waits (then refuses) while it is above the plan's
  ``max_busy``. Each run's line records the commit, the CPU model, the busy share and
  the load average.
- **The first valid run per seed counts.** A run that ended is logged as ``ok`` and never
  run again, whatever it showed. A run that raised (the cluster or the machine failed,
  before any outcome was seen) is logged as ``infra`` with its error, and the next
  invocation runs it again: that is the only rerun there is.
- **Methods are interleaved** per seed in rotated order, on one machine, one commit,
  one cluster (2 single-thread worker processes), one clock (a tournament's, from its
  first segment submitted, evaluation included) and one evaluation schedule (every
  method is a tournament of the same pods, segments and evaluation episodes).
- **A crossing counts only when confirmed**: every run has ``confirm_target`` on, so a
  segment whose evaluation reaches the target evaluates once more on fresh episodes,
  and the run's curve holds, at such a segment, the lesser of the two scores.

``--admit TASK`` checks a candidate task on pilot seeds (tuning seeds only) by the
plan's admission rule: the base settings as a sweep reach the target in under half the
pilot seeds by half the budget, and each pod gets at least ``min_ready_intervals`` ready
intervals (segments after its first ``ready_segments``) within the budget.

Usage::

    python benchmarks/pays_study.py --plan benchmarks/plans/P.json --admit pendulum --seeds 900-904
    python benchmarks/pays_study.py --plan benchmarks/plans/P.json --tune --task trap \\
        --method tournament --seeds 900-903 --generator score_window=2
    python benchmarks/pays_study.py --plan benchmarks/plans/P.json [--task trap]
    python benchmarks/pays_study.py --plan benchmarks/plans/P.json --report
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR, log, now_iso, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
TUNING_SEEDS = range(900, 1000)
"""Seeds for tuning and pilots: never test seeds."""
USED_SEEDS = range(0, 1000)
"""Seeds earlier rounds, tuning and pilots used: a plan's test seeds are 1000 and up."""
PLAN_KEYS = {
    "name",
    "code_commit",
    "machine",
    "tasks",
    "methods",
    "seeds",
    "pods",
    "workers",
    "max_busy",
    "analysis",
    "admission",
    "notes",
}
TASK_KEYS = {
    "env",
    "algo",
    "target",
    "budget",
    "segment_steps",
    "hparams",
    "eval_episodes",
    "generator",
}
"""A task's ``generator`` settings apply to every method on it (the rules' patience, in
segments, follows the task's segment size); a method's own go over them."""
METHOD_KEYS = {"rules", "init", "generator", "tune"}
"""A method is a line-up of selection rules and a start, or (``"tune": "pbt"`` or
``"pb2"``) Ray Tune's scheduler training the same starting pods (:mod:`tune_pbt`)."""
ANALYSIS_KEYS = {"primary", "alternative", "level"}
CODE = ("elegantpod", "benchmarks", "pyproject.toml")
"""What "the code" of a plan's commit is: what runs (docs may change between runs)."""


@dataclass(frozen=True)
class Plan:
    """A checked plan file."""

    name: str
    code_commit: str
    machine: str
    tasks: dict[str, dict[str, Any]]
    methods: dict[str, dict[str, Any]]
    seeds: tuple[int, ...]
    pods: int = 4
    workers: int = 2
    max_busy: float = 0.15
    analysis: dict[str, Any] = field(default_factory=dict)
    admission: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def _fail(msg: str) -> None:
    raise SystemExit(f"error: {msg}")


def load_plan(path: str | Path) -> Plan:
    """The plan at ``path``, every field checked; ``SystemExit`` naming the first bad one."""
    from elegantpod.checks.json_values import parse_json
    from elegantpod.tournament.core.rules import check_rules

    path = Path(path)
    try:
        d = parse_json(path.read_text(), str(path))
    except (OSError, ValueError) as exc:
        _fail(f"plan {str(path)!r}: {exc}")
    if not isinstance(d, dict):
        _fail(f"plan {str(path)!r} must be a JSON object")
    unknown = sorted(set(d) - PLAN_KEYS)
    if unknown:
        _fail(f"plan: unknown key(s) {unknown}; known: {sorted(PLAN_KEYS)}")
    for key in ("name", "code_commit", "machine", "tasks", "methods", "seeds", "analysis"):
        if key not in d:
            _fail(f"plan: {key!r} is missing")
    if not isinstance(d["code_commit"], str) or len(d["code_commit"]) != 40:
        _fail(f"plan: code_commit must be a full commit hash, got {d['code_commit']!r}")
    seeds = d["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(type(s) is int for s in seeds):
        _fail(f"plan: seeds must be a list of integers, got {seeds!r}")
    used = [s for s in seeds if s in USED_SEEDS]
    if used:
        _fail(f"plan: seeds {used} were used before (tuning 900-999, earlier rounds below)")
    if len(set(seeds)) != len(seeds):
        _fail("plan: a seed is named twice")
    tasks = d["tasks"]
    if not isinstance(tasks, dict) or not tasks:
        _fail("plan: tasks must be an object {name: task}")
    for name, t in tasks.items():
        if not isinstance(t, dict) or sorted(set(t) - TASK_KEYS):
            _fail(f"plan: task {name!r} must be an object of {sorted(TASK_KEYS)}")
        for key in ("env", "algo", "target", "budget"):
            if key not in t:
                _fail(f"plan: task {name!r} lacks {key!r}")
    methods = d["methods"]
    if not isinstance(methods, dict) or len(methods) < 2:
        _fail("plan: methods must name at least two methods")
    for name, m in methods.items():
        if not isinstance(m, dict) or sorted(set(m) - METHOD_KEYS):
            _fail(f"plan: method {name!r} must be an object of {sorted(METHOD_KEYS)}")
        if "tune" in m:
            from tune_pbt import SCHEDULERS

            if m["tune"] not in SCHEDULERS:
                _fail(f"plan: method {name!r}: tune must be one of {SCHEDULERS}, got {m['tune']!r}")
            if "rules" in m or "init" in m:
                _fail(f"plan: method {name!r}: a Tune method takes no rules or init")
            continue
        try:
            check_rules(m.get("rules"))
        except ValueError as exc:
            _fail(f"plan: method {name!r}: {exc}")
        if m.get("init", "base") not in ("base", "sample"):
            _fail(f"plan: method {name!r}: init must be base or sample, got {m.get('init')!r}")
    from elegantpod.tournament import GeneratorConfig

    for tname, t in tasks.items():  # every task x method's settings, checked now
        for mname, m in methods.items():
            settings = {**(t.get("generator") or {}), **(m.get("generator") or {})}
            try:
                GeneratorConfig(**{**settings, "rules": tuple(m.get("rules", ()))}).validate()
            except (TypeError, ValueError) as exc:
                _fail(f"plan: task {tname!r}, method {mname!r}: generator: {exc}")
    a = d["analysis"]
    if not isinstance(a, dict) or sorted(set(a) - ANALYSIS_KEYS):
        _fail(f"plan: analysis must be an object of {sorted(ANALYSIS_KEYS)}")
    primary = a.get("primary")
    if not isinstance(primary, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(x in methods for x in p) for p in primary
    ):
        _fail(f"plan: analysis.primary must be pairs of the plan's methods, got {primary!r}")
    return Plan(
        name=str(d["name"]),
        code_commit=d["code_commit"],
        machine=str(d["machine"]),
        tasks=tasks,
        methods=methods,
        seeds=tuple(seeds),
        pods=int(d.get("pods", 4)),
        workers=int(d.get("workers", 2)),
        max_busy=float(d.get("max_busy", 0.15)),
        analysis=a,
        admission=dict(d.get("admission") or {}),
        path=path,
    )


def git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        _fail(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def check_tree(plan: Plan, log_path: Path) -> str:
    """The commit the runs are on, after refusing a dirty tree, an uncommitted plan and
    code other than the plan's commit."""
    own = (
        {str(log_path.resolve().relative_to(ROOT))}
        if log_path.resolve().is_relative_to(ROOT)
        else set()
    )
    dirty = [
        line
        for line in git("status", "--porcelain", "--untracked-files=all").splitlines()
        if line[3:] not in own
    ]
    if dirty:
        _fail(f"the tree is not clean ({len(dirty)} change(s), e.g. {dirty[0]!r}): commit first")
    rel = str(plan.path.resolve().relative_to(ROOT))
    if not git("log", "-1", "--format=%H", "--", rel):
        _fail(f"plan {rel} is not committed")
    diff = subprocess.run(
        [
            "git",
            "diff",
            "--quiet",
            plan.code_commit,
            "HEAD",
            "--",
            *CODE,
            ":(exclude)benchmarks/plans",
            ":(exclude)benchmarks/results",
        ],
        cwd=ROOT,
        timeout=60,
    )
    if diff.returncode != 0:
        _fail(f"the code differs from the plan's commit {plan.code_commit[:12]}")
    return git("rev-parse", "HEAD")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def busy_share(seconds: float = 3.0) -> float:
    """The share of all CPUs busy over ``seconds`` (from ``/proc/stat``): this runner's
    cluster is idle then, so what is busy is someone else."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle

    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(limit: float, patience: float = 120.0) -> float:
    """The machine's busy share once it is at most ``limit``; ``SystemExit`` after
    ``patience`` seconds of foreign load."""
    start = time.monotonic()
    while True:
        share = busy_share()
        if share <= limit:
            return share
        if time.monotonic() - start > patience:
            _fail(f"foreign load: {share:.0%} of the CPUs busy (plan allows {limit:.0%})")
        log(f"  waiting: {share:.0%} of the CPUs busy")


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's lines (a missing log: none); ``SystemExit`` naming a bad line."""
    if not path.exists():
        return []
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as exc:
            _fail(f"{path}:{i}: not JSON: {exc}")
        if not isinstance(d, dict):
            _fail(f"{path}:{i}: not an object")
        out.append(d)
    return out


def counted(lines: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The first valid (``ok``) run of each (task, method, seed): the one that counts."""
    first: dict[tuple[str, str, int], dict[str, Any]] = {}
    for d in lines:
        if d.get("status") == "ok":
            first.setdefault((d["task"], d["method"], d["seed"]), d)
    return first


def order(plan: Plan, task: str, seeds: list[int]) -> list[tuple[int, str]]:
    """(seed, method) in run order: per seed, the methods rotated by the seed's index."""
    methods = list(plan.methods)
    out = []
    for i, seed in enumerate(seeds):
        k = i % len(methods)
        out += [(seed, m) for m in methods[k:] + methods[:k]]
    return out


def curve(history, target: float) -> tuple[list[float], list[float]]:
    """Times and scores of every evaluation; where a score reached the target and a
    confirming evaluation ran, the lesser of the two (a crossing counts only if both do)."""
    import pandas as pd

    times, scores = [], []
    for row in history.sort_values("time").itertuples():
        if row.score is None or not math.isfinite(row.score):
            continue
        s = float(row.score)
        if s >= target and pd.notna(row.confirm):  # a column of Tournament.history()
            s = min(s, float(row.confirm))
        times.append(round(float(row.time), 3))
        scores.append(s)
    return times, scores


def run(client, plan: Plan, task: dict[str, Any], method: dict[str, Any], seed: int, root: Path):
    """One method on one task and seed: a tournament of the plan's pods for the budget,
    or Ray Tune's scheduler training the same starting pods (:func:`tune_pbt.run_tune`)."""
    from elegantpod import Tournament
    from elegantpod.tournament import GeneratorConfig

    settings = {**task.get("generator", {}), **method.get("generator", {})}
    if "tune" in method:
        from tune_pbt import run_tune

        return run_tune(
            method["tune"], task, seed, pods=plan.pods, workers=plan.workers, generator=settings
        )
    gen = GeneratorConfig(**{**settings, "rules": tuple(method["rules"])})
    t = Tournament(
        env=task["env"],
        algos=[task["algo"]],
        pods=plan.pods,
        max_seconds=float(task["budget"]),
        target_reward=float(task["target"]),
        confirm_target=True,
        segment_steps=task.get("segment_steps"),
        eval_episodes=int(task.get("eval_episodes", 10)),
        hparams={task["algo"]: dict(task.get("hparams", {}))},
        store=root,
        client=client,
        seed=seed,
        generator=gen,
        init=method.get("init", "base"),
    )
    t.start()
    s = t.wait()
    history = t.history()
    times, scores = curve(history, float(task["target"]))
    per_pod = history.groupby("pod")["segment"].max()
    return {
        "time": times,
        "score": scores,
        "budget": float(task["budget"]),
        "target": float(task["target"]),
        "solved_at": s.get("solved_at"),
        "unconfirmed": int(
            ((history["score"] >= float(task["target"])) & history["confirm"].notna()).sum()
        )
        - int(bool(s["solved"])),
        "best": s["best_score"],
        "pods_total": s["pods_total"],
        "restarts": s.get("restarts", 0),
        "replaced_on_evidence": s.get("replaced_on_evidence", 0),
        "kept_in_noise": s.get("kept_in_noise", 0),
        "segments_per_pod": sorted(int(x) for x in per_pod.to_numpy()),
        "env_steps": s["env_steps_total"],
        "wall_seconds": s["wall_seconds"],
        "eval_share": s.get("eval_share"),
    }


def versions() -> dict[str, str]:
    """The versions of what a run's numbers depend on (a plan with a Tune method runs
    every method in ``.venv-tune``: these say so)."""
    import importlib.metadata as md
    import sys

    import elegantpod

    out = {
        "python": sys.version.split()[0],
        "prefix": Path(sys.prefix).name,
        "elegantpod": str(Path(elegantpod.__file__).parent),  # the worktree's own code
    }
    for name in ("torch", "numpy", "gymnasium", "dask", "distributed", "ray"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


def parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def study(
    plan: Plan,
    log_path: Path,
    task_names: list[str],
    seeds: list[int] | None,
    tune: dict[str, Any] | None = None,
    methods: list[str] | None = None,
) -> None:
    """Run what the plan (or, with ``tune``, a tuning request) has left to run."""
    from elegantpod import cluster

    if tune is None:
        commit = check_tree(plan, log_path)
        if cpu_model() != plan.machine:
            _fail(f"this CPU is {cpu_model()!r}; the plan runs on {plan.machine!r}")
        seeds = seeds or list(plan.seeds)
        foreign = [s for s in seeds if s not in plan.seeds]
        if foreign:
            _fail(f"seeds {foreign} are not in the plan")
    else:
        commit = git("rev-parse", "HEAD")
        foreign = [s for s in seeds or [] if s not in TUNING_SEEDS]
        if foreign or not seeds:
            _fail(f"tuning runs take seeds 900-999 only, got {foreign or seeds}")
    for name in task_names:
        if name not in plan.tasks:
            _fail(f"task {name!r} is not in the plan ({', '.join(plan.tasks)})")
    for m in methods or []:
        if m not in plan.methods:
            _fail(f"method {m!r} is not in the plan ({', '.join(plan.methods)})")
    done = counted(read_log(log_path))
    todo = [
        (name, seed, m)
        for name in task_names
        for seed, m in order(plan, name, seeds)
        if (not methods or m in methods) and (name, m, seed) not in done
    ]
    log(f"{len(todo)} runs to do ({len(done)} counted in {log_path})")
    if not todo:
        return
    client = cluster(n_workers=plan.workers, dashboard_address=None)
    try:
        for name, seed, m in todo:
            busy = wait_quiet(plan.max_busy) if tune is None else busy_share()
            method = dict(plan.methods[m])
            if tune:
                method["generator"] = {**method.get("generator", {}), **tune}
            line = {
                "plan": plan.name,
                "task": name,
                "task_config": plan.tasks[name],
                "method": m,
                "seed": seed,
                "commit": commit,
                "cpu": cpu_model(),
                "busy_before": round(busy, 3),
                "loadavg": [round(x, 2) for x in os.getloadavg()],
                "date": now_iso(),
                "tuning": tune,
                "versions": versions(),
            }
            try:
                with tempfile.TemporaryDirectory() as d:
                    out = run(client, plan, plan.tasks[name], method, seed, Path(d) / "s")
                line["versions"].update(out.pop("versions", {}))  # a Tune run adds Ray's
                line.update(status="ok", **out)
                solved = out["solved_at"]
                log(
                    f"  {name} {m:<14} seed {seed}: "
                    + (f"solved at {solved:.1f} s" if solved is not None else "not solved")
                    + f", best {out['best']}, {out['pods_total']} pods, "
                    f"{out['restarts']} restarts, {out['replaced_on_evidence']} exploited, "
                    f"segments per pod {out['segments_per_pod']}"
                    + (f", overhead {out['overhead']}" if "overhead" in out else "")
                )
            except Exception as exc:  # the machine or cluster failed: no outcome was seen
                line.update(status="infra", error=f"{type(exc).__name__}: {exc}"[:2000])
                log(f"  {name} {m} seed {seed}: infrastructure failure, logged: {exc}")
            with open(log_path, "a") as f:
                f.write(json.dumps(line) + "\n")
                f.flush()
                os.fsync(f.fileno())
    finally:
        cl = client.cluster
        client.close()
        cl.close()


def admit(plan: Plan, name: str, log_path: Path) -> dict[str, Any]:
    """The admission rule on the pilot runs of the plan's ``sweep`` method in the log."""
    rule = {"solved_by_half_below": 0.5, "min_ready_intervals": 15, **plan.admission}
    task = plan.tasks[name]
    half = float(task["budget"]) / 2
    runs = [
        d
        for d in read_log(log_path)
        if d.get("status") == "ok" and d["task"] == name and d["method"] == "sweep"
    ]
    if not runs:
        _fail(f"no pilot sweep runs of {name!r} in {log_path}")
    from elegantpod.tournament import GeneratorConfig

    ready = GeneratorConfig().ready_segments
    by_half = [d["solved_at"] is not None and d["solved_at"] <= half for d in runs]
    intervals = [min(d["segments_per_pod"]) - ready for d in runs]
    share = sum(by_half) / len(runs)
    out = {
        "task": name,
        "pilot_seeds": [d["seed"] for d in runs],
        "solved_by_half_budget": share,
        "ready_intervals_min_pod": intervals,
        "rule": rule,
        "admitted": share < rule["solved_by_half_below"]
        and min(intervals) >= rule["min_ready_intervals"],
    }
    return out


def report(plan: Plan, log_path: Path, write: bool = True) -> str:
    """Each task's table from the counted runs, through ``elegantpod.compare``: paired by
    seed, the plan's primary family with Holm's correction, its alternative and level."""
    from elegantpod import compare
    from elegantpod.comparison import statistics as st

    done = counted(read_log(log_path))
    a = plan.analysis
    parts = []
    family: list[dict[str, Any]] = []  # the primary comparisons of every task
    for name, task in plan.tasks.items():
        runs = {
            m: [
                {k: d[k] for k in ("time", "score", "budget", "target", "seed")}
                for (t, mm, _), d in sorted(done.items(), key=lambda kv: kv[0][2])
                if t == name and mm == m and d["seed"] in plan.seeds
            ]
            for m in plan.methods
        }
        if not all(runs.values()):
            continue
        c = compare(
            runs,
            float(task["target"]),
            budget=float(task["budget"]),
            title=f"{name}: {task['env']} {task['algo'].upper()} (target {task['target']}, "
            f"{task['budget']} s, plan {plan.name})",
            family=[tuple(p) for p in a["primary"]],
            alternative=a.get("alternative", "less"),
            level=float(a.get("level", 0.025)),
            paired=True,
        )
        parts.append(c.to_markdown())
        for v in c.versus:
            family.append(
                {
                    "task": name,
                    "method": v.method,
                    "other": v.other,
                    "seeds": v.runs,
                    "pairing": v.pairing,
                    "rmst_difference": v.rmst_difference.as_list(),
                    "p": v.p_value,
                }
            )
        if write:
            stem = f"pays_study_{plan.name}_{name}"
            c.save(RESULTS_DIR / f"{stem}.html")
            write_json_atomic(RESULTS_DIR / f"{stem}.json", c.to_dict())
    overhead = overheads(done, plan)
    if overhead:
        parts.append(overhead)
    if family:  # Holm over the whole primary family: every task's comparisons together
        level = float(a.get("level", 0.025))
        adjusted = st.holm([f["p"] for f in family])
        rows = [
            "| task | comparison | seeds | RMST difference, s [95%] | p | Holm p | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f, p_adj in zip(family, adjusted, strict=True):
            f["p_holm"] = float(p_adj)
            f["verdict"] = "pays" if p_adj <= level else "not shown"
            d = f["rmst_difference"]
            rows.append(
                f"| {f['task']} | {f['method']} vs {f['other']} | {f['seeds']} "
                f"({f['pairing']}) | {d[0]:.3g} [{d[1]:.3g}, {d[2]:.3g}] | {f['p']:.3g} | "
                f"{p_adj:.3g} | {f['verdict']} |"
            )
        parts.append(
            f"Primary family ({len(family)} one-sided tests, Holm at {level}):\n\n"
            + "\n".join(rows)
        )
        if write:
            path = RESULTS_DIR / f"pays_study_{plan.name}_family.json"
            write_json_atomic(path, {"family": family})
    return "\n\n".join(parts)


def overheads(done: dict[tuple[str, str, int], dict[str, Any]], plan: Plan) -> str:
    """A table of the Tune methods' overheads, apart from their times to target: the
    median over seeds of the start-up before the first segment (``ray.init`` and the
    experiment's start) and of the checkpoint seconds inside the budget (writing and
    handing over each segment's checkpoint, restoring a paused or exploited trial), with
    their range; empty when the plan has no Tune method."""
    import statistics

    rows = []
    for name in plan.tasks:
        for m in plan.methods:
            lines = [
                d["overhead"]
                for (t, mm, s), d in sorted(done.items())
                if t == name and mm == m and s in plan.seeds and "overhead" in d
            ]
            if not lines:
                continue

            def med(key: str, ls: list[dict[str, Any]] = lines) -> str:
                xs = [float(x[key]) for x in ls]
                return f"{statistics.median(xs):.3g} [{min(xs):.3g}, {max(xs):.3g}]"

            rows.append(
                f"| {name} | {m} | {len(lines)} | {med('ray_init_s')} | {med('startup_s')} | "
                f"{med('checkpoint_s')} | {med('checkpoint_share')} | {med('restores')} |"
            )
    if not rows:
        return ""
    return (
        "Tune's overhead, apart from its time to target (median [min, max] over seeds; "
        "the checkpoint share is of the 2 workers' budget):\n\n"
        "| task | method | seeds | ray.init s | start-up to first segment s | "
        "checkpoint s | checkpoint share | restores |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows)
    )


def summary(log_path: Path) -> str:
    """One line per (task, method, tuning settings) of a log: the seeds, how many solved
    (confirmed), the median seconds to target (unsolved at the budget) and what the
    rules did, on average: the quick look tuning needs (the study's table is
    :func:`report`'s)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for d in read_log(log_path):
        if d.get("status") == "ok":
            key = (d["task"], d["method"], json.dumps(d.get("tuning") or {}, sort_keys=True))
            groups.setdefault(key, []).append(d)
    lines = []
    for (task, method, tuning), runs in sorted(groups.items()):

        def at(r: dict[str, Any]) -> float:  # a crossing after the budget is censored
            s = r["solved_at"]
            return s if s is not None and s <= r["budget"] else r["budget"]

        times = sorted(at(r) for r in runs)
        solved = sum(r["solved_at"] is not None and r["solved_at"] <= r["budget"] for r in runs)

        def mean(key: str, rs: list[dict[str, Any]] = runs) -> float:
            return sum(r.get(key, 0) for r in rs) / len(rs)

        lines.append(
            f"{task:<14} {method:<13} {tuning:<40} seeds {[r['seed'] for r in runs]} "
            f"solved {solved}/{len(runs)} median {times[len(times) // 2]:.1f} s  "
            f"exploited {mean('replaced_on_evidence'):.1f} kept {mean('kept_in_noise'):.1f} "
            f"restarts {mean('restarts'):.1f} unconfirmed {mean('unconfirmed'):.1f}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", required=True)
    p.add_argument("--task", action="append", default=[], help="a task of the plan (repeat)")
    p.add_argument("--seeds", default=None, help="e.g. 1000-1009 (default: the plan's)")
    p.add_argument("--method", action="append", default=[], help="tuning: a method of the plan")
    p.add_argument("--tune", action="store_true", help="tuning runs: seeds 900-999, own log")
    p.add_argument("--generator", action="append", default=[], help="tuning: key=value")
    p.add_argument("--admit", default=None, help="pilot sweep runs of TASK, then the rule")
    p.add_argument("--report", action="store_true")
    p.add_argument("--summary", action="store_true", help="a quick look at the tuning log")
    a = p.parse_args()
    plan = load_plan(a.plan)
    study_log = RESULTS_DIR / f"pays_study_{plan.name}.jsonl"
    pilot_log = RESULTS_DIR / f"pays_tuning_{plan.name}.jsonl"
    if a.report:
        print(report(plan, study_log))
        return
    if a.summary:
        print(summary(pilot_log))
        return
    seeds = parse_seeds(a.seeds) if a.seeds else None
    if any("tune" in m for m in plan.methods.values()):
        from tune_pbt import ensure_venv

        ensure_venv()  # every method of the plan in the one virtualenv Tune needs
    if a.admit:
        study(plan, pilot_log, [a.admit], seeds, tune={}, methods=["sweep"])
        out = admit(plan, a.admit, pilot_log)
        write_json_atomic(RESULTS_DIR / f"pays_admission_{plan.name}_{a.admit}.json", out)
        print(json.dumps(out, indent=1))
        return
    if a.tune:
        tune = {k: json.loads(v) for k, _, v in (g.partition("=") for g in a.generator)}
        study(plan, pilot_log, a.task or list(plan.tasks), seeds, tune=tune, methods=a.method)
        return
    study(plan, study_log, a.task or list(plan.tasks), seeds)
    print(report(plan, study_log))


if __name__ == "__main__":
    main()
