"""What running a pod as a Dask task costs: env steps/s in a tournament vs in-process.

Why: the tournament's promise is that Dask only schedules and never slows the pods. The
same PPO pod (CartPole-v1, default hyperparameters) runs the same ``--segments``
segments of ``--segment-steps`` env steps twice, side by side in one run:

* **in-process**: ``run_segment`` called in a loop in this process (one torch thread),
  with no Dask at all;
* **tournament**: a one-pod ``Tournament`` on a ``LocalCluster`` with one worker
  process and one thread, with control polling and progress events on.

Two ratios are reported: env steps per second of segment wall time (what Dask costs
the pod while it runs: control polls and progress events included) and end-to-end env
steps per wall second from the end of the first segment to the end of the last (what it
costs including submission, scheduling and result handling between segments; the
tournament's own start and end, a fixed second or so, are left out on both sides). The
generator is switched off (a pod is never replaced) so both sides run the same work.
Target: the tournament keeps >= 95% of in-process throughput. Medians over ``--seeds``.

With ``--pods N --workers W`` (the population run): N pods with the tournament's own
seeds and hyperparameters, their segments run one after another in this process, against
the tournament of those N pods on W workers. Target on 2 workers: >= 0.95.

Both sides keep pods resident between segments (the in-process loop goes through the
same ``run_segment``), so what remains is Dask's own cost.

Usage::

    python benchmarks/dask_overhead.py [--seeds 3] [--segments 6] [--quick]
    python benchmarks/dask_overhead.py --pods 4 --workers 2 --seeds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
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
from elegantpod.agents import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.tournament import GeneratorConfig
from elegantpod.tournament.worker.segment import SegmentTask, run_segment

NAME = "dask_overhead"
ENV = "CartPole-v1"


def in_process(seed, segments, seg_steps, root: Path, pods=None) -> tuple[float, float]:
    """The pods' segments one after another here: ``pods`` lists ``(seed, hparams)``."""
    torch.set_num_threads(1)
    pods = pods or [(seed, {})]
    specs = [PodSpec(env_id=ENV, algo="ppo", hparams=PPOConfig(**hp), seed=s) for s, hp in pods]
    latest = [None] * len(specs)
    seg_wall, steps, ends = 0.0, 0, []
    for k in range(1, segments + 1):
        for i, spec in enumerate(specs):  # round robin, as a tournament's fair share
            ckpt = str(root / f"p{i:03d}-seg-{k:05d}.pt")
            res = run_segment(
                SegmentTask(
                    tournament_id=f"bench-{seed}",
                    pod_id=f"p{i:03d}",
                    segment=k,
                    spec_json=spec.to_json(),
                    checkpoint=ckpt,
                    resume_from=latest[i],
                    segment_steps=seg_steps,
                )
            )
            latest[i] = ckpt
            seg_wall += res.wall_seconds
            steps += res.env_steps_delta
            ends.append((time.time(), res.env_steps_delta))
    return steps / seg_wall, _between_ends(ends)


def _between_ends(ends: list[tuple[float, int]]) -> float:
    """Env steps per second from the first segment's end to the last one's."""
    ends = sorted(ends)
    steps = sum(n for _, n in ends[1:])
    return steps / max(ends[-1][0] - ends[0][0], 1e-9)


def in_tournament(client, seed: int, segments: int, seg_steps: int, root: Path, pods: int = 1):
    """The tournament of ``pods`` pods; also returns their ``(seed, hparams)``."""
    t = Tournament(
        env=ENV,
        algos=["ppo"],
        pods=pods,
        max_steps=pods * segments * seg_steps,
        segment_steps=seg_steps,
        store=root,
        client=client,
        seed=seed,
        generator=GeneratorConfig(ready_segments=10**9),
    )
    t.start()
    t.wait()
    records = t.pods.to_dict("records")
    deltas, last = [], {}
    ends = [m for m in t.curves() if m.get("type") == "segment_end"]
    for m in sorted(ends, key=lambda m: m["time"]):  # the steps each segment added
        deltas.append((m["time"], m["env_steps"] - last.get(m["pod"], 0)))
        last[m["pod"]] = m["env_steps"]
    seg_wall = sum(r["wall_seconds"] for r in records)  # the segments' own wall times
    fields = set(PPOConfig.__dataclass_fields__)
    made = [
        (r["seed"], {k: v for k, v in r["hparams"].items() if k in fields and k != "hidden"})
        for r in records
    ]
    total = sum(n for _, n in deltas)
    return total / seg_wall, _between_ends(deltas), made


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--segments", type=int, default=6)
    p.add_argument("--segment-steps", type=int, default=32768)
    p.add_argument("--pods", type=int, default=1, help="pods in the population run")
    p.add_argument("--workers", type=int, default=1, help="tournament workers")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.quick:
        a.seeds, a.segments, a.segment_steps = 1, 2, 8192
    name = NAME if a.pods == 1 and a.workers == 1 else f"{NAME}_{a.pods}pods_{a.workers}workers"
    out = Path(a.out) if a.out else default_out(name, a.quick)
    info = machine_info()
    client = cluster(n_workers=a.workers, threads_per_worker=1, dashboard_address=None)
    rows = {"inproc_inner": [], "dask_inner": [], "inproc_e2e": [], "dask_e2e": []}
    try:
        # warm both sides (first torch import, first env build) outside the timing
        with tempfile.TemporaryDirectory() as d:
            in_tournament(client, 99, 1, 2048, Path(d) / "s")
            in_process(99, 1, 2048, Path(d))
        for seed in range(a.seeds):
            # the tournament first: the in-process side runs the very pods it made
            with tempfile.TemporaryDirectory() as d:
                d_inner, d_e2e, made = in_tournament(
                    client, seed, a.segments, a.segment_steps, Path(d) / "s", a.pods
                )
            with tempfile.TemporaryDirectory() as d:
                i_inner, i_e2e = in_process(
                    seed, a.segments, a.segment_steps, Path(d), made if a.pods > 1 else None
                )
            log(
                f"seed {seed}: in-process {i_inner:.0f}/{i_e2e:.0f} steps/s, "
                f"tournament {d_inner:.0f}/{d_e2e:.0f} steps/s (inner/end-to-end)"
            )
            rows["inproc_inner"].append(i_inner)
            rows["dask_inner"].append(d_inner)
            rows["inproc_e2e"].append(i_e2e)
            rows["dask_e2e"].append(d_e2e)
    finally:
        cl = client.cluster
        client.close()
        cl.close()
    res = {k: summarize(v) for k, v in rows.items()}
    ratio_inner = safe_ratio(res["dask_inner"]["median"], res["inproc_inner"]["median"])
    ratio_e2e = safe_ratio(res["dask_e2e"]["median"], res["inproc_e2e"]["median"])
    info["loadavg_at_end"] = loadavg()
    data = {
        "benchmark": NAME,
        "machine": info,
        "date": now_iso(),
        "quick": a.quick,
        "env_id": ENV,
        "algo": "ppo",
        "seeds": a.seeds,
        "pods": a.pods,
        "workers": a.workers,
        "segments": a.segments,
        "segment_steps": a.segment_steps,
        "unit": "env steps per second",
        "results": res,
        "ratio_inner": ratio_inner,
        "ratio_end_to_end": ratio_e2e,
        "target": {
            "description": "tournament >= 0.95x in-process (end to end)",
            "met": ratio_e2e >= 0.95,
        },
    }
    write_json_atomic(out, data)
    print(
        format_table(
            ["measure", "in-process", "tournament (Dask)", "ratio"],
            [
                [
                    "pod steps/s within segments",
                    fmt_range(res["inproc_inner"]),
                    fmt_range(res["dask_inner"]),
                    f"{ratio_inner:.3f}",
                ],
                [
                    "end-to-end env steps / wall s",
                    fmt_range(res["inproc_e2e"]),
                    fmt_range(res["dask_e2e"]),
                    f"{ratio_e2e:.3f}",
                ],
            ],
        )
    )
    print(f"target >= 0.95 end to end: {'met' if ratio_e2e >= 0.95 else 'NOT met'}; wrote {out}")


if __name__ == "__main__":
    main()
