"""What starting local CPU workers costs: forked from a forkserver that has torch
imported (``elegantpod.cluster()``'s way) against spawned, each importing it (Dask's
default, and ours before).

Why: every ``elegantpod.cluster()``, every CLI run and every notebook kernel starts
worker processes, and a spawned one is a new Python that imports torch, gymnasium and the
pod code before it can train: about 1.5 s of one core each, so 16 of them at once on a
16-core node, or a noticeable share of a test suite that starts a hundred. A forked one
starts in about a tenth of a second; the forkserver pays the imports once per process.

Each repetition is a fresh Python process (methods alternated, so drift hits both
alike) that starts ``--workers`` workers and waits until each has the pod code imported,
twice in a row (the second start shows what a warm forkserver costs: the usual case of
a notebook that restarts its cluster, or a worker the tournament scales up):

* wall seconds of the first and the second start, to workers ready to train;
* CPU seconds of the process and every process it started, by the end of the first
  start (the imports included, wherever they ran).

Ratios are forked / spawned: below 1 is cheaper. Usage::

    python benchmarks/cluster_start.py [--workers 2] [--reps 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import (
    default_out,
    format_table,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

METHODS = ("spawned", "forked")


def ready() -> bool:
    """In a worker: the pod code imported, as before a first segment."""
    import torch  # noqa: F401

    import elegantpod.tournament.worker.segment  # noqa: F401

    return True


def tree_cpu() -> float:
    """CPU seconds of this process, its reaped children and its live descendants."""
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for p in me.children(recursive=True):
        try:
            c = p.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


def child(method: str, workers: int) -> dict[str, float]:
    """One repetition, in a fresh process: two starts of ``workers`` workers."""
    import elegantpod
    from elegantpod.clusters import local

    if method == "spawned":  # the start before the forkserver: each worker spawned
        local.forkserver_workers = lambda environ: None
    out: dict[str, float] = {}
    for start in ("first", "second"):
        t0 = time.perf_counter()
        c = elegantpod.cluster(n_workers=workers, dashboard_address=None)
        assert all(c.run(ready).values())
        out[f"{start}_seconds"] = time.perf_counter() - t0
        if start == "first":
            out["first_cpu_seconds"] = tree_cpu()
        elegantpod.shutdown(c)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="two repetitions")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.workers)))
        return
    reps = 2 if a.quick else a.reps
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
    for i in range(reps):
        for method in METHODS[i % 2 :] + METHODS[: i % 2]:
            done = subprocess.run(
                [sys.executable, __file__, "--child", method, "--workers", str(a.workers)],
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
            )
            runs[method].append(json.loads(done.stdout.strip().splitlines()[-1]))
            log(f"  {method:8} rep {i}: {runs[method][-1]}")
    keys = ("first_seconds", "second_seconds", "first_cpu_seconds")
    summary = {m: {k: summarize([r[k] for r in runs[m]]) for k in keys} for m in METHODS}
    ratios = {
        k: safe_ratio(summary["forked"][k]["median"], summary["spawned"][k]["median"]) for k in keys
    }
    result = {
        "benchmark": "cluster_start",
        "date": now_iso(),
        "machine": machine_info(),
        "workers": a.workers,
        "reps": reps,
        "runs": runs,
        "summary": summary,
        "ratio_forked_over_spawned": ratios,
    }
    out = a.out or default_out("cluster_start", a.quick)
    write_json_atomic(out, result)
    rows = [
        [k, f"{summary['spawned'][k]['median']:.2f}", f"{summary['forked'][k]['median']:.2f}",
         f"{ratios[k]:.2f}"]
        for k in keys
    ]  # fmt: skip
    print(format_table(["median", "spawned", "forked", "forked / spawned"], rows))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
