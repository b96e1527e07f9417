"""How big a tournament store gets over a long run, pruned, against keeping everything.

Why: every segment writes a checkpoint, and before pruning none was ever deleted (32 pods
for 60 s left 120 checkpoints). The store now keeps what can still be needed (each live
pod's latest checkpoint, each leaderboard entry's, the parents of pods that have not
finished a segment yet) and deletes the rest after the state pointer moves. This runs a
CartPole-v1 PPO tournament (defaults, ``--pods`` pods, 2 embedded workers) for
``--minutes`` and samples the store's size on disk every ``--every`` seconds.

The peer, side by side in the same run: what the same tournament would have kept without
pruning, i.e. every checkpoint its pods wrote (the segments finished, summed over every
pod record, times the mean checkpoint size measured in the store). The bound this script
states and checks: ``(3 * pods + leaderboard_size) * largest checkpoint`` (each pod's
latest, the parents of new children, each leaderboard entry's, and per pod one segment
written since the last pruning or in flight), plus ``KEEP_SNAPSHOTS + 1`` state
snapshots, plus 64 KiB of small files (tournament.json, leaderboard.json, the lease).

Usage::

    python benchmarks/store_bound.py [--minutes 30] [--pods 8] [--quick]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _common import default_out, log, machine_info, now_iso, safe_ratio, write_json_atomic

from elegantpod import Tournament, cluster
from elegantpod.tournament.store.snapshots import KEEP_SNAPSHOTS

NAME = "store_bound"


def disk(root: Path) -> dict:
    """Bytes and file counts of the store now."""
    ckpts = list(root.glob("pods/*/seg-*.pt"))
    sizes = [f.stat().st_size for f in ckpts if f.exists()]
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    snaps = [f.stat().st_size for f in root.glob("state/*.json")]
    return {
        "bytes": total,
        "checkpoints": len(sizes),
        "checkpoint_bytes": sum(sizes),
        "largest_checkpoint": max(sizes, default=0),
        "mean_checkpoint": sum(sizes) / len(sizes) if sizes else 0.0,
        "largest_snapshot": max(snaps, default=0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--pods", type=int, default=8)
    ap.add_argument("--every", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="1 minute, sampled every 5 s")
    args = ap.parse_args()
    if args.quick:
        args.minutes, args.every = 1.0, 5.0
    root = Path(tempfile.mkdtemp(prefix="elegantpod-store-bound-")) / "store"
    client = cluster(n_workers=2, dashboard_address=None)
    samples = []
    try:
        t = Tournament(
            "CartPole-v1",
            ["ppo"],
            pods=args.pods,
            store=root,
            client=client,
            max_seconds=args.minutes * 60,
        )
        t.start()
        start = time.monotonic()
        while t.status == "running":
            time.sleep(args.every)
            s = t.summary()
            d = disk(root)
            d.update(
                seconds=round(time.monotonic() - start, 1),
                pods_total=s["pods_total"],
                segments=int(t.pods["segment"].sum()),
                store_bytes_reported=s["store_bytes"],
            )
            samples.append(d)
            log(
                f"[{d['seconds']:7.0f}s] {d['bytes'] / 2**20:7.2f} MiB, {d['checkpoints']} "
                f"checkpoints, {d['segments']} segments, {d['pods_total']} pods"
            )
        summary = t.wait()
    finally:
        cl = client.cluster
        client.close()
        cl.close()
    final = disk(root)
    segments = int(t.pods["segment"].sum())
    unpruned = segments * max(final["mean_checkpoint"], 1.0)
    largest = max(s["largest_checkpoint"] for s in samples) if samples else 0
    snapshot = max(s["largest_snapshot"] for s in samples) if samples else 0
    leaderboard = t.spec.leaderboard_size
    bound = (3 * args.pods + leaderboard) * largest + (KEEP_SNAPSHOTS + 1) * snapshot + 65536
    peak = max((s["bytes"] for s in samples), default=final["bytes"])
    result = {
        "name": NAME,
        "when": now_iso(),
        "machine": machine_info(),
        "settings": {"minutes": args.minutes, "pods": args.pods, "workers": 2},
        "segments": segments,
        "pods_total": summary["pods_total"],
        "env_steps_total": summary["env_steps_total"],
        "final": final,
        "peak_bytes": peak,
        "bound_bytes": bound,
        "within_bound": peak <= bound,
        "unpruned_bytes_estimate": unpruned,
        "pruned_over_unpruned": safe_ratio(final["checkpoint_bytes"], unpruned),
        "samples": samples,
    }
    out = default_out(NAME, args.quick)
    write_json_atomic(out, result)
    print(
        f"{args.minutes:g} min, {segments} segments, {summary['pods_total']} pods: peak "
        f"{peak / 2**20:.2f} MiB (bound {bound / 2**20:.2f} MiB, "
        f"{'within' if peak <= bound else 'OVER'}); unpruned would be about "
        f"{unpruned / 2**20:.1f} MiB ({result['pruned_over_unpruned']:.3f}x kept); {out}"
    )
    os.environ.get("CI") or log(f"store left at {root}")


if __name__ == "__main__":
    main()
