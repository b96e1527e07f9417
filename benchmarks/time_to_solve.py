"""Wall-clock time to solve: elegantpod vs Stable-Baselines3 (PPO/CartPole, SAC/Pendulum).

Measures the wall seconds from the start of training (envs and networks already built)
to the end of the first deterministic 10-episode evaluation whose mean return reaches the
threshold: CartPole-v1 >= 475 with PPO, Pendulum-v1 >= -200 with SAC. Why: "faster" only
means something for an RL toolkit as time to a given solution quality, measured side by
side with a well-known baseline on the same machine in the same run; steps per second
alone would reward a fast but sample-hungry or unstable learner.

* Ours: ``elegantpod.pod.pod.Pod(PodSpec(..., target_reward=T)).run()`` with the library's
  default hyperparameters; ``TrainResult.wall_seconds`` is timed the same way.
* Peer: Stable-Baselines3 with rl-zoo3's tuned hyperparameters, timed from right before
  ``model.learn`` to the end of the evaluation that first reaches the threshold. A
  callback runs ``evaluate_policy(model, eval_env, 10, deterministic=True)`` on a separate
  single gymnasium env every ``eval_freq`` env steps (all sub-envs counted) and stops
  training there.

Runs that never reach the threshold count as failures with the whole budget's time. Seeds
are interleaved (ours 0, SB3 0, ours 1, ...) so that machine noise hits both alike; both
run in this one process with the same torch thread count (recorded). The ratio is
ours median / SB3 median; targets: PPO <= 1/5, SAC <= 1/2. Partial results are written
after every run, so an interrupted benchmark keeps what it measured.

Usage::

    python benchmarks/time_to_solve.py [--seeds 3] [--only ppo|sac] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import torch
from _common import (
    apply_threads,
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

import elegantpod.pod.pod as P
from elegantpod.config import PodSpec

NAME = "time_to_solve"
EVAL_EPISODES = 10


@dataclass(frozen=True)
class Part:
    """One algorithm/env pairing with its threshold, budgets and target ratio."""

    algo: str
    env_id: str
    threshold: float
    target_ratio: float
    ours_max_steps: int
    sb3_budget: int
    sb3_zoo_timesteps: int
    sb3_eval_freq: int
    quick_ours_max_steps: int
    quick_sb3_budget: int
    quick_sb3_eval_freq: int


PARTS: dict[str, Part] = {
    "ppo": Part(
        algo="ppo",
        env_id="CartPole-v1",
        threshold=475.0,
        target_ratio=1 / 5,
        ours_max_steps=500_000,
        sb3_budget=500_000,
        sb3_zoo_timesteps=100_000,
        sb3_eval_freq=5_000,
        quick_ours_max_steps=4_096,
        quick_sb3_budget=2_048,
        quick_sb3_eval_freq=1_024,
    ),
    "sac": Part(
        algo="sac",
        env_id="Pendulum-v1",
        threshold=-200.0,
        target_ratio=1 / 2,
        ours_max_steps=60_000,
        sb3_budget=60_000,
        sb3_zoo_timesteps=20_000,
        sb3_eval_freq=1_000,
        quick_ours_max_steps=1_000,
        quick_sb3_budget=600,
        quick_sb3_eval_freq=300,
    ),
    "dqn": Part(
        algo="dqn",
        env_id="CartPole-v1",
        threshold=475.0,
        target_ratio=1 / 3,
        ours_max_steps=300_000,
        sb3_budget=200_000,
        sb3_zoo_timesteps=50_000,
        sb3_eval_freq=2_000,
        quick_ours_max_steps=2_000,
        quick_sb3_budget=1_500,
        quick_sb3_eval_freq=500,
    ),
}


# -- ours -------------------------------------------------------------------------------
def run_ours(part: Part, seed: int, max_steps: int) -> dict[str, Any]:
    """One elegantpod run; ``wall_seconds`` is the pod's own (starts after the build)."""
    build_start = time.perf_counter()
    spec = PodSpec(
        env_id=part.env_id,
        algo=part.algo,
        seed=seed,
        max_steps=max_steps,
        target_reward=part.threshold,
        eval_episodes=EVAL_EPISODES,
    )
    pod = P.Pod(spec)
    build_seconds = time.perf_counter() - build_start
    eval_every = pod.spec.eval_every_steps or pod.learner.default_eval_every()
    r = pod.run()
    out = {
        "seed": seed,
        "solved": bool(r.solved),
        "wall_seconds": float(r.wall_seconds),
        "env_steps": int(r.env_steps),
        "eval_return_mean": float(r.eval_return_mean),
        "evaluations": len(r.curve),
        "eval_every_steps": int(eval_every),
        "build_seconds": build_seconds,
        "torch_threads": torch.get_num_threads(),
        "curve": [[p.env_steps, round(p.wall_seconds, 4), p.eval_return_mean] for p in r.curve],
    }
    del pod
    return out


def ours_config(part: Part) -> dict[str, Any]:
    """The hyperparameters our pod resolves to by default (for the record)."""
    from elegantpod.agents import get_algo

    hp = get_algo(part.algo).config_cls()
    return dataclasses.asdict(hp)


# -- Stable-Baselines3 ------------------------------------------------------------------
class LinearToZero:
    """rl-zoo3's ``lin_X`` schedule, ending at ``end_fraction`` of the learn() budget.

    SB3 calls a schedule with ``progress_remaining`` (1 -> 0 over ``total_timesteps``);
    the value falls linearly from ``start`` to 0 over the first ``end_fraction`` of it and
    stays at 0 after, so the zoo's schedule over its ``n_timesteps`` is kept exactly
    while ``learn`` may run longer.
    """

    def __init__(self, start: float, end_fraction: float) -> None:
        self.start, self.end_fraction = float(start), float(end_fraction)

    def __call__(self, progress_remaining: float) -> float:
        done = (1.0 - progress_remaining) / self.end_fraction
        return self.start * max(0.0, 1.0 - done)

    def __repr__(self) -> str:
        return f"LinearToZero(start={self.start}, end_fraction={self.end_fraction})"


def _solve_callback_cls() -> type:
    """Build the callback class lazily so SB3 is imported only when SB3 runs."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class SolveCallback(BaseCallback):
        """Evaluate every ``eval_freq`` env steps; stop at the first mean >= threshold."""

        def __init__(self, eval_env: Any, eval_freq: int, threshold: float, episodes: int):
            super().__init__(verbose=0)
            self.eval_env, self.eval_freq = eval_env, int(eval_freq)
            self.threshold, self.episodes = float(threshold), int(episodes)
            self.next_eval = self.eval_freq
            self.start = math.nan  # set by the caller right before model.learn
            self.solved_seconds: float | None = None
            self.solved_steps: int | None = None
            self.last_mean = math.nan
            self.curve: list[list[float]] = []

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            while self.next_eval <= self.num_timesteps:
                self.next_eval += self.eval_freq
            mean, _std = evaluate_policy(
                self.model, self.eval_env, n_eval_episodes=self.episodes, deterministic=True
            )
            now = time.perf_counter() - self.start
            self.last_mean = float(mean)
            self.curve.append([int(self.num_timesteps), round(now, 4), float(mean)])
            if mean >= self.threshold:
                self.solved_seconds, self.solved_steps = now, int(self.num_timesteps)
                return False
            return True

    return SolveCallback


def run_sb3(
    part: Part, seed: int, budget: int, eval_freq: int, schedule_steps: int
) -> dict[str, Any]:
    """One SB3 run with rl-zoo3's hyperparameters, timed from right before ``learn``."""
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    build_start = time.perf_counter()
    if part.algo == "ppo":
        env = make_vec_env(part.env_id, n_envs=8, seed=seed)
        frac = schedule_steps / budget
        model: Any = PPO(
            "MlpPolicy",
            env,
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=LinearToZero(1e-3, frac),
            clip_range=LinearToZero(0.2, frac),
            seed=seed,
            device="cpu",
            verbose=0,
        )
    elif part.algo == "sac":
        env = make_vec_env(part.env_id, n_envs=1, seed=seed)
        model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu", verbose=0)
    elif part.algo == "dqn":
        from stable_baselines3 import DQN

        env = make_vec_env(part.env_id, n_envs=1, seed=seed)
        # rl-zoo3 dqn.yml, CartPole-v1 ("almost tuned"); exploration over its n_timesteps
        model = DQN(
            "MlpPolicy",
            env,
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16 * schedule_steps / budget,
            exploration_final_eps=0.04,
            policy_kwargs={"net_arch": [256, 256]},
            seed=seed,
            device="cpu",
            verbose=0,
        )
    else:
        raise ValueError(f"no SB3 recipe for {part.algo!r}")
    eval_env = DummyVecEnv([lambda: Monitor(gymnasium.make(part.env_id))])
    eval_env.seed(seed + 1_000_003)
    callback = _solve_callback_cls()(eval_env, eval_freq, part.threshold, EVAL_EPISODES)
    build_seconds = time.perf_counter() - build_start

    start = time.perf_counter()
    callback.start = start
    model.learn(total_timesteps=budget, callback=callback)
    end = time.perf_counter() - start
    solved = callback.solved_seconds is not None
    out = {
        "seed": seed,
        "solved": solved,
        "wall_seconds": callback.solved_seconds if solved else end,
        "env_steps": callback.solved_steps if solved else int(model.num_timesteps),
        "eval_return_mean": callback.last_mean,
        "evaluations": len(callback.curve),
        "eval_every_steps": eval_freq,
        "build_seconds": build_seconds,
        "torch_threads": torch.get_num_threads(),
        "curve": callback.curve,
    }
    env.close()
    eval_env.close()
    del model
    return out


def sb3_config(part: Part, budget: int, eval_freq: int, schedule_steps: int) -> dict[str, Any]:
    """What the SB3 side runs (for the record)."""
    if part.algo == "ppo":
        hp: dict[str, Any] = {
            "n_envs": 8,
            "policy": "MlpPolicy",
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "learning_rate": f"linear 1e-3 -> 0 over {schedule_steps} steps, then 0",
            "clip_range": f"linear 0.2 -> 0 over {schedule_steps} steps, then 0",
        }
    elif part.algo == "dqn":
        hp = {
            "n_envs": 1,
            "policy": "MlpPolicy",
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration": f"linear 1 -> 0.04 over 0.16 x {schedule_steps} steps",
            "net_arch": [256, 256],
        }
    else:
        hp = {"n_envs": 1, "policy": "MlpPolicy", "learning_rate": 1e-3, "other": "SB3 defaults"}
    return {
        "source": f"rl-zoo3 hyperparams (n_timesteps {part.sb3_zoo_timesteps})",
        "hyperparameters": hp,
        "learn_total_timesteps": budget,
        "eval_freq_env_steps": eval_freq,
        "eval": f"evaluate_policy(n_eval_episodes={EVAL_EPISODES}, deterministic=True) on "
        "a separate DummyVecEnv([Monitor(gymnasium.make(env_id))])",
        "device": "cpu",
    }


# -- driver -----------------------------------------------------------------------------
def summarize_part(part: Part, ours: list[dict], sb3: list[dict]) -> dict[str, Any]:
    ow = summarize([r["wall_seconds"] for r in ours])
    sw = summarize([r["wall_seconds"] for r in sb3])
    ratio = safe_ratio(ow["median"], sw["median"])
    n_ours_solved = sum(r["solved"] for r in ours)
    paired = [
        safe_ratio(a["wall_seconds"], b["wall_seconds"]) for a, b in zip(ours, sb3, strict=False)
    ]
    complete = len(ours) == len(sb3) and len(ours) > 0
    return {
        "ours_wall_seconds": ow,
        "sb3_wall_seconds": sw,
        "ours_env_steps": summarize([r["env_steps"] for r in ours]),
        "sb3_env_steps": summarize([r["env_steps"] for r in sb3]),
        "ours_solved": f"{n_ours_solved}/{len(ours)}",
        "sb3_solved": f"{sum(r['solved'] for r in sb3)}/{len(sb3)}",
        "ratio_ours_over_sb3": ratio,
        "paired_ratios": paired,
        "target": f"ours median <= {part.target_ratio:.3g} x SB3 median "
        "(and ours solved on a majority of seeds)",
        "target_ratio": part.target_ratio,
        "target_met": (
            bool(ratio <= part.target_ratio and 2 * n_ours_solved > len(ours))
            if complete and not math.isnan(ratio)
            else None
        ),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="seeds per framework and algorithm (default 3; 1 with --quick)",
    )
    ap.add_argument("--only", choices=sorted(PARTS), default=None, help="run just one part")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 1 seed, tiny budgets, output under the temp dir",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON path (default benchmarks/results/{NAME}.json; "
        "/tmp/elegantpod-bench/ with --quick)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads for both frameworks (default: torch's choice)",
    )
    ap.add_argument(
        "--sb3-ppo-schedule-steps",
        type=int,
        default=PARTS["ppo"].sb3_zoo_timesteps,
        help="steps over which SB3 PPO's lr and clip range decay to 0 (default: "
        "rl-zoo's n_timesteps, %(default)s; the learn budget may be longer)",
    )
    args = ap.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    if seeds < 1:
        ap.error("--seeds must be >= 1")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.sb3_ppo_schedule_steps < 1:
        ap.error("--sb3-ppo-schedule-steps must be >= 1")
    out = args.out if args.out is not None else default_out(NAME, args.quick)
    names = [args.only] if args.only else list(PARTS)

    threads = apply_threads(args.threads)
    result: dict[str, Any] = {
        "benchmark": NAME,
        "machine": machine_info(),
        "date": now_iso(),
        "quick": args.quick,
        "complete": False,
        "seeds": seeds,
        "torch_threads": {"requested": args.threads, "in_effect": threads},
        "timing": "wall seconds from training start (envs and nets built) to the end of the "
        f"first deterministic {EVAL_EPISODES}-episode evaluation with mean >= "
        "threshold; unsolved runs count as the whole budget's time",
        "order": "interleaved per seed: ours s, sb3 s, ours s+1, ...",
        "parts": {},
    }
    for name in names:
        part = PARTS[name]
        ours_steps = part.quick_ours_max_steps if args.quick else part.ours_max_steps
        sb3_budget = part.quick_sb3_budget if args.quick else part.sb3_budget
        eval_freq = part.quick_sb3_eval_freq if args.quick else part.sb3_eval_freq
        schedule = {"ppo": args.sb3_ppo_schedule_steps, "dqn": part.sb3_zoo_timesteps}.get(name)
        if schedule is not None and args.quick:
            schedule = min(schedule, sb3_budget)
        entry: dict[str, Any] = {
            "env_id": part.env_id,
            "threshold": part.threshold,
            "ours": {
                "max_steps": ours_steps,
                "hyperparameters": ours_config(part),
                "eval_episodes": EVAL_EPISODES,
            },
            "sb3": sb3_config(part, sb3_budget, eval_freq, schedule or 0),
            "ours_runs": [],
            "sb3_runs": [],
        }
        result["parts"][name] = entry
        for s in range(seeds):
            for who in ("ours", "sb3"):
                gc.collect()
                log(f"[{name}] seed {s}: {who} ...")
                if who == "ours":
                    run = run_ours(part, s, ours_steps)
                else:
                    run = run_sb3(part, s, sb3_budget, eval_freq, schedule or 1)
                entry[f"{who}_runs"].append(run)
                log(
                    f"[{name}] seed {s}: {who} solved={run['solved']} "
                    f"wall={run['wall_seconds']:.1f}s steps={run['env_steps']} "
                    f"eval={run['eval_return_mean']:.1f}"
                )
                entry["summary"] = summarize_part(part, entry["ours_runs"], entry["sb3_runs"])
                write_json_atomic(out, result)
    result["complete"] = True
    result["machine"]["loadavg_at_end"] = loadavg()
    result["date_end"] = now_iso()
    path = write_json_atomic(out, result)
    print_table(result)
    print(f"wrote {path}")
    return 0


def print_table(result: dict) -> None:
    rows = []
    for name, e in result["parts"].items():
        sm = e["summary"]
        met = sm["target_met"]
        rows.append(
            [
                name,
                e["env_id"],
                f"{e['threshold']:g}",
                f"{fmt_range(sm['ours_wall_seconds'], '{:.1f}')} ({sm['ours_solved']})",
                f"{fmt_range(sm['sb3_wall_seconds'], '{:.1f}')} ({sm['sb3_solved']})",
                f"{sm['ratio_ours_over_sb3']:.3f}",
                f"<= {sm['target_ratio']:.3g}",
                "-" if met is None else ("yes" if met else "NO"),
            ]
        )
    headers = [
        "algo",
        "env",
        "threshold",
        "ours wall s median [min, max] (solved)",
        "SB3 wall s median [min, max] (solved)",
        "ours/SB3",
        "target",
        "met",
    ]
    m = result["machine"]
    print(
        f"\n{NAME}: {result['seeds']} seed(s), torch threads "
        f"{result['torch_threads']['in_effect']}, {m['cpu_count']} CPUs, "
        f"{result['date']}{' (QUICK smoke run)' if result['quick'] else ''}"
    )
    print(format_table(headers, rows))


if __name__ == "__main__":
    raise SystemExit(main())
