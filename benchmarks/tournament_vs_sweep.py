"""Tournament vs a plain sweep at equal compute: does exploit/explore pay?

Why: the paper's claim for the tournament-based ensemble is that sharing the best
agents' weights and mutating their hyperparameters reaches a target sooner than training
the same starting population independently. Both sides here run the *same* four
starting pods (SAC on Pendulum-v1: the default configuration plus three mutated around
it, seeded identically) on the *same* two-worker ``LocalCluster``, through the same
orchestrator, segment size and evaluation; the only difference is that the sweep never
replaces a pod (``ready_segments`` is infinite), while the tournament replaces ready pods
that score below the leaderboard's top half with mutated copies of leaderboard parents.

Measured per seed: wall seconds until the first segment evaluation reaches the target
(-200), and the best score at a fixed wall time (``--horizon`` seconds, both runs go
that long at least). Target: tournament median <= 0.7x the sweep's, solving every seed.

Usage::

    python benchmarks/tournament_vs_sweep.py [--seeds 3] [--horizon 60] [--quick]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from _common import (
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

NAME = "tournament_vs_sweep"
ENV, TARGET, ALGOS, PODS = "Pendulum-v1", -200.0, ["sac"], 4


def run(client, seed: int, exploit: bool, horizon: float, budget: float, root: Path):
    gen = GeneratorConfig() if exploit else GeneratorConfig(ready_segments=10**9)
    t = Tournament(
        env=ENV,
        algos=ALGOS,
        pods=PODS,
        max_seconds=budget,
        store=root,
        client=client,
        seed=seed,
        generator=gen,
    )
    t0 = time.monotonic()
    t.start()
    solved_at, best_at_horizon = math.nan, math.nan
    while t.status == "running":
        time.sleep(0.1)
        s = t.summary()
        now = time.monotonic() - t0
        if math.isnan(best_at_horizon) and now >= horizon:
            best_at_horizon = s["best_score"] if s["best_score"] is not None else math.nan
        if math.isnan(solved_at) and s["best_score"] is not None and s["best_score"] >= TARGET:
            solved_at = now
        if not math.isnan(solved_at) and now >= horizon:
            t.stop()
    s = t.wait()
    if math.isnan(best_at_horizon):
        best_at_horizon = s["best_score"] if s["best_score"] is not None else math.nan
    return solved_at, best_at_horizon, s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--horizon", type=float, default=60.0, help="fixed wall time for best score")
    p.add_argument("--budget", type=float, default=150.0, help="give up after this many seconds")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.quick:
        a.seeds, a.horizon, a.budget = 1, 10.0, 20.0
    out = Path(a.out) if a.out else default_out(NAME, a.quick)
    info = machine_info()
    client = cluster(n_workers=2, dashboard_address=None)
    per = {"tournament": {"solve": [], "best": []}, "sweep": {"solve": [], "best": []}}
    try:
        for seed in range(a.seeds):
            order = [("tournament", True), ("sweep", False)]
            if seed % 2:
                order.reverse()  # alternate who goes first so drift hits both alike
            for name, exploit in order:
                with tempfile.TemporaryDirectory() as d:
                    solve, best, s = run(client, seed, exploit, a.horizon, a.budget, Path(d) / "s")
                log(
                    f"seed {seed} {name}: solved at {solve:.1f}s, best@{a.horizon:.0f}s {best:.1f}"
                    f" ({s['pods_total']} pods, {s['env_steps_total']} env steps)"
                )
                per[name]["solve"].append(solve if not math.isnan(solve) else a.budget)
                per[name]["best"].append(best)
                per[name].setdefault("solved", []).append(not math.isnan(solve))
    finally:
        cl = client.cluster
        client.close()
        cl.close()
    res = {
        n: {
            "seconds_to_target": summarize(v["solve"]),
            "best_at_horizon": summarize(v["best"]),
            "solved": v["solved"],
        }
        for n, v in per.items()
    }
    ratio = safe_ratio(
        res["tournament"]["seconds_to_target"]["median"],
        res["sweep"]["seconds_to_target"]["median"],
    )
    met = ratio <= 0.7 and all(per["tournament"]["solved"])
    info["loadavg_at_end"] = loadavg()
    write_json_atomic(
        out,
        {
            "benchmark": NAME,
            "machine": info,
            "date": now_iso(),
            "quick": a.quick,
            "env_id": ENV,
            "algos": ALGOS,
            "pods": PODS,
            "workers": 2,
            "target_reward": TARGET,
            "horizon_seconds": a.horizon,
            "budget_seconds": a.budget,
            "seeds": a.seeds,
            "results": res,
            "ratio_seconds_to_target": ratio,
            "target": {
                "description": "tournament <= 0.7x sweep seconds to target, every seed solved",
                "met": met,
            },
        },
    )
    print(
        format_table(
            ["", "seconds to -200", f"best score at {a.horizon:.0f}s", "solved"],
            [
                [
                    n,
                    fmt_range(r["seconds_to_target"], "{:.1f}"),
                    fmt_range(r["best_at_horizon"], "{:.1f}"),
                    f"{sum(r['solved'])}/{len(r['solved'])}",
                ]
                for n, r in res.items()
            ],
        )
    )
    print(
        f"tournament / sweep = {ratio:.2f} (target <= 0.7): {'met' if met else 'NOT met'}; "
        f"wrote {out}"
    )


if __name__ == "__main__":
    main()
