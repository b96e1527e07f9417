"""The evaluator: deterministic episodes on an env of its own, reproducible by index."""

from __future__ import annotations

import time

import torch

from elegantpod.agents.base import Learner
from elegantpod.envs.registry import make_env
from elegantpod.types import EvalResult

SEED_STRIDE = 7919
"""Evaluation ``k`` resets its env with ``seed + SEED_STRIDE * k``."""


class Evaluator:
    """Runs ``episodes`` deterministic episodes in parallel on a separate env.

    ``env_kwargs`` configure that env (a trading env's validation dates, say); an env
    that reports ``episode_metrics()`` (Sharpe, Calmar...) has them collected too.

    Evaluations are numbered from 1. The ``k``-th starts its episodes from the env reset
    with ``seed + 7919 * k``, so evaluation ``k`` of a pod is the same episodes whenever it
    runs: a resumed pod's next evaluation is the one its checkpoint counted up to, and a
    segment run again can repeat an evaluation exactly (``episode_index=``).
    """

    def __init__(self, env_id: str, episodes: int, device, seed: int, env_kwargs=None):
        self.env = make_env(
            env_id, num_envs=episodes, device=device, seed=seed, **(env_kwargs or {})
        )
        self.episodes, self.seed, self.count = int(episodes), int(seed), 0
        self.seconds = 0.0
        """Wall seconds spent evaluating so far (a tournament reports its share)."""

    @torch.inference_mode()
    def evaluate(self, learner: Learner, episode_index: int | None = None) -> EvalResult:
        """One deterministic episode per sub-env.

        ``episode_index=None`` runs the next evaluation (``count`` goes up by one);
        an index ``1 <= k <= count`` repeats evaluation ``k``'s episodes without counting
        (for the same weights, the same result).
        """
        if episode_index is None:
            self.count += 1
            index = self.count
        else:
            if isinstance(episode_index, bool) or not isinstance(episode_index, int):
                raise TypeError(f"episode_index must be an integer, got {episode_index!r}")
            if not 1 <= episode_index <= self.count:
                raise ValueError(
                    f"episode_index must be one of the {self.count} evaluations run so far "
                    f"(1..{self.count}), got {episode_index}"
                )
            index = episode_index
        start = time.perf_counter()
        try:
            return self._episodes(learner, self.seed + SEED_STRIDE * index)
        finally:
            self.seconds += time.perf_counter() - start

    def _episodes(self, learner: Learner, seed: int) -> EvalResult:
        obs = self.env.reset(seed=seed)
        n = self.episodes
        finished = torch.zeros(n, dtype=torch.bool, device=self.env.device)
        returns = torch.zeros(n, dtype=torch.float64, device=self.env.device)
        lengths = torch.zeros(n, dtype=torch.int64, device=self.env.device)
        limit = self.env.max_episode_steps or 100_000
        for step in range(limit + 1):
            obs, _, terminated, truncated, info = self.env.step(
                learner.act(obs, deterministic=True)
            )
            done = (terminated | truncated) & ~finished
            returns = torch.where(done, info["episode_return"].double(), returns)
            lengths = torch.where(done, info["episode_length"], lengths)
            finished |= done
            if step % 16 == 15 and bool(finished.all()):
                break
        if not bool(finished.all()):
            raise RuntimeError(f"evaluation did not finish {n} episodes within {limit} steps")
        # envs that record whole episodes (a full-range trading env) report more metrics
        measured = self.env.episode_metrics() if getattr(self.env, "record", False) else {}
        extra = {k: tuple(v) for k, v in measured.items()}
        return EvalResult(tuple(returns.tolist()), tuple(int(x) for x in lengths.tolist()), extra)

    def close(self) -> None:
        """Release the env."""
        self.env.close()
