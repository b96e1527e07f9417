"""Soft Actor-Critic (Haarnoja et al., 2018) with twin critics and automatic temperature.

Losses as in the paper (SAC v2): with ``a' ~ pi(.|s')``,
``y = r + gamma (1 - d) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
``J_Q = E[(Q_i(s, a) - y)^2] / 2``, ``J_pi = E[alpha log pi(a|s) - min_i Q_i(s, a)]``,
``J_alpha = E[-alpha (log pi(a|s) + H_target)]``. Actions are tanh-squashed into
``[-1, 1]`` for learning and scaled to the env's bounds only when sent to the env.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import ClassVar

import gymnasium
import torch
import torch.nn.functional as F
from torch import nn

from elegantpod.agents.base import Learner
from elegantpod.agents.nets import EnsembleQ, mlp
from elegantpod.buffers import ReplayBuffer
from elegantpod.config import in_range, positive
from elegantpod.types import Batch

Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class SACConfig:
    """SAC hyperparameters; defaults solve Pendulum-v1 in seconds on a laptop CPU."""

    num_envs: int = 4
    """Parallel sub-envs per worker."""
    horizon: int = 16
    """Vector steps collected between two bursts of gradient updates."""
    lr: float = 1e-3
    """Adam learning rate of actor, critics and temperature."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.01
    """Polyak rate of the target critics."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 200_000
    """Replay capacity (transitions)."""
    learning_starts: int = 1000
    """Uniform-random transitions collected before learning starts."""
    replay_ratio: float = 0.25
    """Gradient steps per collected transition."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of actor and critics."""
    init_alpha: float = 0.2
    """Initial entropy temperature."""
    target_entropy: float | None = None
    """Entropy target; ``None``: ``-action_dim``."""

    def validate(self) -> None:
        for name in (
            "num_envs",
            "horizon",
            "lr",
            "batch_size",
            "buffer_size",
            "replay_ratio",
            "init_alpha",
        ):
            positive(name, getattr(self, name))
        in_range("gamma", self.gamma, 0.0, 1.0)
        in_range("tau", self.tau, 0.0, 1.0)
        if self.learning_starts < 0:
            raise ValueError(f"learning_starts must be >= 0, got {self.learning_starts!r}")
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"hidden must be positive layer sizes, got {self.hidden!r}")


class SquashedGaussianActor(nn.Module):
    """``a = tanh(mu(s) + sigma(s) eps)`` with its log-density (change of variables)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]):
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 2 * act_dim], activation=nn.ReLU, out_gain=0.01)

    def forward(self, obs: Tensor, generator=None, deterministic=False) -> tuple[Tensor, Tensor]:
        mean, log_std = self.net(obs).chunk(2, -1)
        if deterministic:
            return torch.tanh(mean), torch.zeros_like(mean[..., 0])
        log_std = log_std.clamp(-5.0, 2.0)
        eps = torch.randn(mean.shape, device=mean.device, generator=generator)
        u = mean + eps * log_std.exp()
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|
        logp = (-0.5 * eps.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp


class SAC(Learner):
    """SAC for continuous (Box) actions."""

    name = "sac"
    config_cls = SACConfig
    is_on_policy = False
    structural_hparams = ("num_envs", "hidden", "buffer_size")
    default_max_steps: ClassVar[int] = 200_000
    default_segment_steps: ClassVar[int] = 4_000
    """Env steps per tournament segment: a few seconds of training on one CPU core."""

    @classmethod
    def supported_action_spaces(cls):
        return (gymnasium.spaces.Box,)

    def __init__(self, observation_space, action_space, config=None, device="cpu", seed=0):
        super().__init__(observation_space, action_space, config, device, seed)
        c, dev = self.config, self.device
        obs_dim, self.act_dim = self.obs_shape[0], int(action_space.shape[0])
        self.action_shape = (self.act_dim,)
        self.action_dtype = torch.float32
        self.low = torch.as_tensor(action_space.low, device=dev)
        self.high = torch.as_tensor(action_space.high, device=dev)
        self.actor = SquashedGaussianActor(obs_dim, self.act_dim, c.hidden).to(dev)
        self.critic = EnsembleQ(2, obs_dim, self.act_dim, c.hidden).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(c.init_alpha), device=dev))
        self.alpha_holder = nn.Module()
        self.alpha_holder.log_alpha = self.log_alpha
        self.modules = {
            "actor": self.actor,
            "critic": self.critic,
            "critic_target": self.critic_target,
            "alpha": self.alpha_holder,
        }
        self.optimizers = {
            "actor": torch.optim.Adam(self.actor.parameters(), lr=c.lr, fused=True),
            "critic": torch.optim.Adam(self.critic.parameters(), lr=c.lr, fused=True),
            "alpha": torch.optim.Adam([self.log_alpha], lr=c.lr, fused=True),
        }
        self.replay = ReplayBuffer(
            c.buffer_size, self.obs_shape, self.action_shape, dev, self.generator
        )
        self.seen = 0
        self._update_debt = 0.0

    def default_eval_every(self) -> int:
        return 1000

    def _to_env(self, a: Tensor) -> Tensor:
        return self.low + (a + 1.0) * 0.5 * (self.high - self.low)

    def explore(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        if self.seen < self.config.learning_starts:
            a = torch.rand(obs.shape[0], self.act_dim, device=self.device, generator=self.generator)
            a = a * 2 - 1
        else:
            a, _ = self.actor(obs, self.generator)
        return a, self._to_env(a)

    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        a, _ = self.actor(obs, self.generator, deterministic=deterministic)
        return self._to_env(a)

    def update(self, batch: Batch) -> dict[str, float]:
        c = self.config
        self.replay.extend(batch.flatten())
        n_new = len(batch)
        self.seen += n_new
        # After a resume the replay starts empty (it is not checkpointed): wait until it
        # holds a few batches again rather than overfit the first transitions.
        if self.seen < c.learning_starts or len(self.replay) < min(
            c.learning_starts, 4 * c.batch_size
        ):
            return {}
        self._update_debt += n_new * c.replay_ratio
        n_updates = int(self._update_debt)
        self._update_debt -= n_updates
        target_entropy = -float(self.act_dim) if c.target_entropy is None else c.target_entropy
        sums = torch.zeros(4, device=self.device)
        critic_params = list(self.critic.parameters())
        target_params = list(self.critic_target.parameters())
        for _ in range(n_updates):
            b = self.replay.sample(c.batch_size)
            alpha = self.log_alpha.exp().detach()
            with torch.no_grad():
                next_a, next_logp = self.actor(b.next_obs, self.generator)
                q_next = self.critic_target(b.next_obs, next_a).min(0).values - alpha * next_logp
                y = b.reward + c.gamma * (~b.terminated).float() * q_next
            j_q = 0.5 * (self.critic(b.obs, b.action) - y).square().mean(1).sum()
            self.optimizers["critic"].zero_grad(set_to_none=True)
            j_q.backward()
            self.optimizers["critic"].step()

            a, logp = self.actor(b.obs, self.generator)
            self.critic.requires_grad_(False)
            q_pi = self.critic(b.obs, a).min(0).values
            self.critic.requires_grad_(True)
            j_pi = (alpha * logp - q_pi).mean()
            self.optimizers["actor"].zero_grad(set_to_none=True)
            j_pi.backward()
            self.optimizers["actor"].step()

            j_alpha = -(self.log_alpha * (logp.detach() + target_entropy)).mean()
            self.optimizers["alpha"].zero_grad(set_to_none=True)
            j_alpha.backward()
            self.optimizers["alpha"].step()

            with torch.no_grad():
                torch._foreach_lerp_(target_params, critic_params, c.tau)
                sums += torch.stack((j_q.detach(), j_pi.detach(), j_alpha.detach(), alpha))
        if n_updates == 0:
            return {}
        vals = (sums / n_updates).tolist()
        return dict(
            zip(
                ("losses/critic", "losses/actor", "losses/alpha", "charts/alpha"), vals, strict=True
            )
        )

    def state_dict(self):
        """Networks, optimizers and the filled part of the replay buffer (oldest first).

        Keeping the replay makes a tournament segment boundary (or a worker death)
        invisible to SAC: the next segment learns from the same data.
        """
        state = super().state_dict()
        state["seen"] = self.seen
        state["replay"] = self.replay.contents()
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.seen = int(state.get("seen", self.seen))
        if state.get("replay") is not None:
            self.replay.restore(state["replay"])
