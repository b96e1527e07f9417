"""``make demo``: a small tournament with PPO and SAC on the embedded Dask cluster."""

from __future__ import annotations

import sys
import tempfile


def run_demo(seed: int = 0, max_seconds: float = 180.0) -> int:
    """Run a 4-pod PPO + SAC tournament on Pendulum-v1 and print its leaderboard.

    The embedded default is a ``LocalCluster`` with one worker process per CPU core,
    bound to 127.0.0.1; the store is a fresh temporary directory.
    """
    from elegantpod.cli import follow
    from elegantpod.cluster import cluster
    from elegantpod.tournament import Tournament

    store = tempfile.mkdtemp(prefix="elegantpod-demo-")
    t = Tournament(
        env="Pendulum-v1",
        algos=["ppo", "sac"],
        pods=4,
        target_reward=-200.0,
        max_seconds=max_seconds,
        store=store,
        seed=seed,
    )
    client = cluster()
    t.client, t._own_client = client, True
    print(f"Dask cluster: {client}\ndashboard: {client.dashboard_link}", file=sys.stderr)
    t.start()
    follow(t, every=5.0)
    s = t.wait()
    board = t.leaderboard
    cols = ["rank", "pod", "algo", "score_mean", "score_std", "env_steps", "status", "parent"]
    print("\nLeaderboard")
    print(board[cols].fillna("-").to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(
        f"\nsolved={s['solved']} best={s['best_score']:.1f} by {s['best_pod']} in "
        f"{s['wall_seconds']:.1f}s, {s['env_steps_total']} env steps, "
        f"{s['pods_total']} pods ({s['pods_failed']} failed)"
    )
    print(f"store: {store}")
    return 0 if s["status"] == "finished" and s["pods_failed"] == 0 else 1
