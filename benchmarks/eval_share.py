"""What share of a trading segment goes to evaluation: every few thousand steps vs once.

Why: a trading pod's evaluation runs the whole validation range (two years of days), and
with PPO's default cadence (every 4,096 env steps at 64 accounts) a tournament segment of
32,768 steps evaluated eight times. Segments now evaluate once, at their end: the score
the tournament ranks. Side by side in one run, the same pod (StockTrading-v0, 10 shipped
stocks, 64 accounts, horizon 16, validation 2017-2018, Sharpe) trains one segment's worth
of steps both ways; the evaluator's own clock gives the share. Medians of ``--repeats``.

Usage::

    python benchmarks/eval_share.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import default_out, log, machine_info, now_iso, write_json_atomic

from elegantpod import Pod
from elegantpod.agents import PPOConfig
from elegantpod.config import PodSpec

NAME = "eval_share"
SEGMENT = 32_768
TRAIN = {"data": "sp500", "start": "2010-01-01", "end": "2016-12-31", "episode_days": 63}
VALIDATION = {"start": "2017-01-01", "end": "2018-12-31", "episode_days": None}


def share(eval_every: int, seed: int) -> float:
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        hparams=PPOConfig(num_envs=64, horizon=16),
        seed=seed,
        env_kwargs=TRAIN,
        eval_env_kwargs=VALIDATION,
        fitness="sharpe",
        eval_episodes=1,
        max_steps=SEGMENT,
        eval_every_steps=eval_every,
    )
    with Pod(spec) as pod:
        t0 = time.perf_counter()
        pod.run()
        return pod.evaluator.seconds / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    share(SEGMENT, 99)  # warm up
    before, after = [], []
    for seed in range(1 if a.quick else a.repeats):
        before.append(share(4096, seed))
        after.append(share(SEGMENT, seed))
        log(f"seed {seed}: every 4,096 steps {before[-1]:.1%}, once per segment {after[-1]:.1%}")
    data = {
        "benchmark": NAME,
        "date": now_iso(),
        "machine": machine_info(),
        "segment_steps": SEGMENT,
        "share_every_4096_steps": statistics.median(before),
        "share_once_per_segment": statistics.median(after),
        "target": {
            "description": "evaluation below about 10% of a segment",
            "met": statistics.median(after) < 0.10,
        },
    }
    out = default_out(NAME, a.quick)
    write_json_atomic(out, data)
    print(
        f"evaluation share of a {SEGMENT:,}-step trading segment: "
        f"{data['share_every_4096_steps']:.1%} (every 4,096 steps) -> "
        f"{data['share_once_per_segment']:.1%} (once, at the end); {out}"
    )


if __name__ == "__main__":
    main()
