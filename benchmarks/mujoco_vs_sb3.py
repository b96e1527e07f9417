"""MuJoCo locomotion at a fixed env-step budget: elegantpod vs Stable-Baselines3.

Why: on MuJoCo the env runs on the CPU, so an RL toolkit's speed is its learner's and
its plumbing's, and "faster" only counts at equal or better return. For each of
HalfCheetah-v5 and Hopper-v5 and each of SAC and TD3, both libraries train for the same
number of env steps (``--budget``, the issue's figure is 100,000) and are then evaluated
on the same number of deterministic episodes; we record the mean evaluation return and
the wall seconds of training (envs and networks built before the clock starts; the
final evaluation not included, for both). Seeds are interleaved (ours s, SB3 s, ...),
both run in this process with the same torch thread count.

* SB3: rl-zoo3's MuJoCo settings (sac.yml / td3.yml ``mujoco-defaults``): SAC defaults
  with ``learning_starts=10000``; TD3 with ``learning_rate=1e-3``, ``batch_size=256``,
  ``net_arch=[400, 300]``, Gaussian action noise 0.1, ``learning_starts=10000``; one
  gradient step per env step.
* Ours: ``MUJOCO_HPARAMS`` below: 256x256 networks and ``learning_starts=10000`` like
  the zoo, but half a gradient step per env step (``replay_ratio=0.5``) and 4 sub-envs.

Target (issue): equal or better return in <= 1/2 of SB3's wall time.

Usage::

    python benchmarks/mujoco_vs_sb3.py [--budget 100000] [--seeds 3] [--envs ...] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import gymnasium
import torch
from _common import (
    apply_threads,
    default_out,
    fmt_range,
    format_table,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

from elegantpod.agents import get_algo
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod

NAME = "mujoco_vs_sb3"
MUJOCO_HPARAMS = {
    "sac": {"hidden": (256, 256), "lr": 3e-4, "learning_starts": 10_000, "replay_ratio": 0.5},
    "td3": {"hidden": (256, 256), "learning_starts": 10_000, "replay_ratio": 0.5},
}


def run_ours(env_id: str, algo: str, seed: int, budget: int, episodes: int) -> dict[str, Any]:
    cls = get_algo(algo)
    known = {f for f in cls.config_cls.__dataclass_fields__}
    hp = cls.config_cls(**{k: v for k, v in MUJOCO_HPARAMS[algo].items() if k in known})
    spec = PodSpec(
        env_id=env_id,
        algo=algo,
        hparams=hp,
        seed=seed,
        max_steps=budget,
        eval_every_steps=10 * budget,  # no evaluation while training
        eval_episodes=episodes,
    )
    pod = Pod(spec)
    t0 = time.perf_counter()
    while pod.env_steps < budget:  # the pod's own loop, minus its end-of-run evaluation
        batch = pod.collector.rollout()
        pod.learner.update(batch)
        pod.env_steps += pod.env.num_envs * pod.collector.horizon
    wall = time.perf_counter() - t0
    ev = pod.evaluate()
    pod.env.close()
    return {"seed": seed, "wall_seconds": wall, "return": ev.mean, "env_steps": pod.env_steps}


def run_sb3(env_id: str, algo: str, seed: int, budget: int, episodes: int) -> dict[str, Any]:
    import numpy as np
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.noise import NormalActionNoise

    env = gymnasium.make(env_id)
    if algo == "sac":
        model: Any = SAC("MlpPolicy", env, learning_starts=10_000, seed=seed, device="cpu")
    else:
        n = env.action_space.shape[0]
        model = TD3(
            "MlpPolicy",
            env,
            learning_rate=1e-3,
            batch_size=256,
            learning_starts=10_000,
            train_freq=1,
            gradient_steps=1,
            action_noise=NormalActionNoise(np.zeros(n), 0.1 * np.ones(n)),
            policy_kwargs={"net_arch": [400, 300]},
            seed=seed,
            device="cpu",
        )
    t0 = time.perf_counter()
    model.learn(total_timesteps=budget)
    wall = time.perf_counter() - t0
    eval_env = gymnasium.make(env_id)
    eval_env.reset(seed=seed + 1_000_003)
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
    env.close()
    eval_env.close()
    return {"seed": seed, "wall_seconds": wall, "return": float(mean), "env_steps": budget}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Hopper-v5"])
    ap.add_argument("--algos", nargs="+", default=["sac", "td3"])
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="2,000 steps, 1 seed, to temp")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.budget, args.seeds, args.episodes = 2_000, 1, 1
    threads = apply_threads(args.threads)
    started = time.perf_counter()
    cells: dict[str, dict[str, list]] = {}
    for env_id in args.envs:
        for algo in args.algos:
            key = f"{env_id}/{algo}"
            cells[key] = {"ours": [], "sb3": []}
            for seed in range(args.seeds):
                for who, fn in (("ours", run_ours), ("sb3", run_sb3)):
                    gc.collect()
                    r = fn(env_id, algo, seed, args.budget, args.episodes)
                    log(f"{key} seed {seed} {who}: {r['return']:.0f} in {r['wall_seconds']:.0f}s")
                    cells[key][who].append(r)
    rows, summary = [], {}
    for key, runs in cells.items():
        o = {m: summarize([r[m] for r in runs["ours"]]) for m in ("return", "wall_seconds")}
        b = {m: summarize([r[m] for r in runs["sb3"]]) for m in ("return", "wall_seconds")}
        ratio = safe_ratio(o["wall_seconds"]["median"], b["wall_seconds"]["median"])
        met = ratio <= 0.5 and o["return"]["median"] >= b["return"]["median"]
        summary[key] = {"ours": o, "sb3": b, "time_ratio": ratio, "target_met": met}
        rows.append(
            [
                key,
                fmt_range(o["return"], "{:.0f}"),
                fmt_range(b["return"], "{:.0f}"),
                fmt_range(o["wall_seconds"], "{:.0f}"),
                fmt_range(b["wall_seconds"], "{:.0f}"),
                f"{ratio:.2f}",
                "met" if met else "NOT met",
            ]
        )
    print(
        format_table(
            ["env/algo", "ours return", "SB3 return", "ours s", "SB3 s", "time ratio", "target"],
            rows,
        )
    )
    data = {
        "name": NAME,
        "when": now_iso(),
        "machine": machine_info(),
        "torch_threads": threads,
        "budget_env_steps": args.budget,
        "seeds": args.seeds,
        "eval_episodes": args.episodes,
        "ours_hparams": MUJOCO_HPARAMS,
        "sb3": "rl-zoo3 mujoco-defaults (see module docstring)",
        "target": "ours median return >= SB3's and ours median wall <= 0.5 x SB3's",
        "cells": cells,
        "summary": summary,
        "total_seconds": time.perf_counter() - started,
        "torch": torch.__version__,
    }
    out = default_out(NAME, args.quick) if args.out is None else args.out
    write_json_atomic(out, data)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
