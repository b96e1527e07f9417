"""``make demo``: the showcase on the embedded default (a tournament in later releases)."""

from __future__ import annotations

import tempfile


def run_demo(seed: int = 0) -> int:
    """Train a PPO pod on CartPole-v1 and a SAC pod on Pendulum-v1; print a results table."""
    from elegantpod.training import train

    runs = [
        ("CartPole-v1", "ppo", 475.0, 300_000),
        ("Pendulum-v1", "sac", -200.0, 40_000),
    ]
    out_root = tempfile.mkdtemp(prefix="elegantpod-demo-")
    rows = []
    for env, algo, target, budget in runs:
        r = train(
            env,
            algo,
            seed=seed,
            target_reward=target,
            max_steps=budget,
            out=f"{out_root}/{algo}-{env}",
            progress=True,
        )
        rows.append(r)
    header = (
        f"{'env':<14}{'algo':<6}{'solved':<8}{'eval return':>18}{'env steps':>11}{'seconds':>9}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        ret = f"{r.eval_return_mean:.1f} +- {r.eval_return_std:.1f}"
        print(
            f"{r.env:<14}{r.algo:<6}{str(r.solved):<8}{ret:>18}{r.env_steps:>11}{r.wall_seconds:>9.1f}"
        )
    print(f"\ncheckpoints under {out_root}")
    return 0 if all(r.solved for r in rows) else 1
