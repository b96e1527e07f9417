"""The evaluator: deterministic episodes on an env of its own, reproducible by index."""

from __future__ import annotations

import time

import torch

from elegantpod.agents.base import Learner
from elegantpod.envs.gym import NO_LIMIT_STEPS, time_limit_advice
from elegantpod.envs.registry import make_env
from elegantpod.types import EvalResult

SEED_STRIDE = 7919
"""Evaluation ``k`` resets its env with ``seed + SEED_STRIDE * k``."""


class EvaluationIncomplete(RuntimeError):
    """An evaluation whose episodes did not all end: within its step limit, or, on an
    env without a time limit, before the run's budget ran out. Its message says what to
    set (a time limit, ``max_episode_steps``)."""


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
    def evaluate(
        self,
        learner: Learner,
        episode_index: int | None = None,
        *,
        deadline: float | None = None,
    ) -> EvalResult:
        """One deterministic episode per sub-env.

        ``episode_index=None`` runs the next evaluation (``count`` goes up by one);
        an index ``1 <= k <= count`` repeats evaluation ``k``'s episodes without counting
        (for the same weights, the same result).

        ``deadline`` (a ``time.perf_counter()`` value, the end of the run's budget) bounds
        an evaluation on an env without a time limit, whose episodes may never end: past
        it, :class:`EvaluationIncomplete`. An env with a time limit ends every episode
        within it, so its evaluation always runs to the end.
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
            return self._episodes(learner, self.seed + SEED_STRIDE * index, deadline)
        finally:
            self.seconds += time.perf_counter() - start

    def _episodes(self, learner: Learner, seed: int, deadline: float | None) -> EvalResult:
        obs = self.env.reset(seed=seed)
        n = self.episodes
        finished = torch.zeros(n, dtype=torch.bool, device=self.env.device)
        returns = torch.zeros(n, dtype=torch.float64, device=self.env.device)
        lengths = torch.zeros(n, dtype=torch.int64, device=self.env.device)
        limit = self.env.max_episode_steps or NO_LIMIT_STEPS
        if self.env.max_episode_steps is not None:
            deadline = None
        late = False
        for step in range(limit + 1):
            obs, _, terminated, truncated, info = self.env.step(
                learner.act(obs, deterministic=True)
            )
            done = (terminated | truncated) & ~finished
            returns = torch.where(done, info["episode_return"].double(), returns)
            lengths = torch.where(done, info["episode_length"], lengths)
            finished |= done
            if step % 16 == 15:
                if bool(finished.all()):
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    late = True
                    break
        if not bool(finished.all()):
            raise EvaluationIncomplete(self._incomplete(n - int(finished.sum()), step + 1, late))
        # envs that record whole episodes (a full-range trading env) report more metrics
        measured = self.env.episode_metrics() if getattr(self.env, "record", False) else {}
        extra = {k: tuple(v) for k, v in measured.items()}
        return EvalResult(tuple(returns.tolist()), tuple(int(x) for x in lengths.tolist()), extra)

    def _incomplete(self, open_episodes: int, steps: int, late: bool) -> str:
        """What an evaluation that did not end says, and what to set."""
        env_id = getattr(self.env, "env_id", None) or type(self.env).__name__
        when = "before the run's budget ran out" if late else f"within {steps:,} steps"
        text = (
            f"evaluation on {env_id!r}: {open_episodes} of {self.episodes} episodes did "
            f"not end {when}"
        )
        if self.env.max_episode_steps is None:
            text += (
                f". {env_id!r} has no time limit, so an episode the policy never ends "
                f"never finishes: {time_limit_advice(env_id)}"
            )
        return text

    def close(self) -> None:
        """Release the env."""
        self.env.close()
