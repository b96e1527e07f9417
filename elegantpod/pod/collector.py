"""The collector: a batched env stepped by a learner's exploration policy."""

from __future__ import annotations

import math

import torch

from elegantpod.agents.base import Learner
from elegantpod.buffers import RolloutBuffer
from elegantpod.envs.base import VecEnv


class Collector:
    """Steps a batched env with a learner's exploration policy into a rollout buffer.

    The pod's data collector (the paper's "worker"; in :mod:`elegantpod.tournament` a
    worker is a Dask worker process, which runs whole pods).
    """

    def __init__(self, env: VecEnv, learner: Learner, horizon: int, seed: int):
        self.env, self.learner, self.horizon = env, learner, int(horizon)
        self.buffer = RolloutBuffer(
            horizon,
            env.num_envs,
            learner.obs_shape,
            learner.action_shape,
            learner.action_dtype,
            env.device,
        )
        self.seed = int(seed)
        self.obs = env.reset(seed=self.seed)
        self.is_fresh = True
        """Every episode is fresh (after a reset): the next rollout tells the learner."""
        # Finished-episode statistics stay on the device: no host sync per step.
        self.return_sum = torch.zeros((), device=env.device, dtype=torch.float64)
        self.episodes = torch.zeros((), device=env.device, dtype=torch.int64)

    def restart(self) -> None:
        """Start fresh episodes as at construction (the env reset with the collector's seed)
        and forget the finished-episode statistics; the learner's exploration noise
        restarts at the next rollout."""
        self.obs = self.env.reset(seed=self.seed)
        self.is_fresh = True
        self.return_sum.zero_()
        self.episodes.zero_()

    @torch.inference_mode()
    def rollout(self):
        """Collect ``horizon`` vector steps; returns the time-major :class:`Batch`.

        After each step the learner hears which episodes ended
        (``learner.episodes_ended``), so that its exploration noise restarts with them.
        """
        if self.is_fresh:
            # At the rollout, not in restart(): a pod rebuilt from a checkpoint (fresh
            # episodes, the saved noise) then restarts its noise exactly as a pod that
            # restarted its episodes after saving the same state.
            self.learner.episodes_ended(None)
            self.is_fresh = False
        obs = self.obs
        for t in range(self.horizon):
            stored, env_action = self.learner.explore(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(env_action)
            self.buffer.write(t, obs, stored, reward, info["final_obs"], terminated, truncated)
            done = terminated | truncated
            self.learner.episodes_ended(done)
            self.return_sum += (info["episode_return"] * done).sum()
            self.episodes += done.sum()
            obs = next_obs
        self.obs = obs
        return self.buffer.batch()

    def env_values(self) -> dict[str, list[torch.Tensor]]:
        """The env's recent output, by kind: the current observations, the last rollout's
        and, for a learner with a replay, the replay's (its filled part).

        What a pod whose training went non-finite is traced back to (see
        :mod:`elegantpod.pod.finite`): read only then, never while collecting, so the
        rollout pays nothing for it.
        """
        buf = self.buffer
        obs, rewards = [self.obs, buf.obs, buf.next_obs], [buf.reward]
        for learner in getattr(self.learner, "learners", None) or (self.learner,):
            replay = getattr(learner, "replay", None)
            if replay is not None and len(replay):
                n = len(replay)
                obs += [replay.obs[:n], replay.next_obs[:n]]
                rewards.append(replay.reward[:n])
        return {"observations": obs, "rewards": rewards}

    def pop_train_return(self) -> float:
        """Mean return of training episodes finished since the last call (NaN if none)."""
        n = int(self.episodes)
        mean = float(self.return_sum) / n if n else math.nan
        self.return_sum.zero_()
        self.episodes.zero_()
        return mean
