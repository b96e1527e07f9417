"""Soft Actor-Critic (Haarnoja et al., 2018) with twin critics and automatic temperature.

Losses as in the paper (SAC v2): with ``a' ~ pi(.|s')``,
``y = r + gamma (1 - d) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
``J_Q = E[(Q_i(s, a) - y)^2] / 2``, ``J_pi = E[alpha log pi(a|s) - min_i Q_i(s, a)]``,
``J_alpha = E[-alpha (log pi(a|s) + H_target)]``. Actions are tanh-squashed into
``[-1, 1]`` for learning and scaled to the env's bounds only when sent to the env.

Exploration samples ``a = tanh(mu(s) + sigma(s) eps)`` with ``eps`` from the sub-envs'
noise processes (``noise.py``): i.i.d. ``N(0, I)`` by default, or correlated in time
(Ornstein-Uhlenbeck, colored), as in Eberhard et al. (2023), which is still ``N(0, I)``
at each step. Updates always draw i.i.d. ``eps``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import gymnasium
import torch
import torch.nn.functional as F
from torch import nn

from elegantpod.agents.base import DeployedActor
from elegantpod.agents.hparams import hparam, inherit
from elegantpod.agents.nets import EnsembleQ, mlp
from elegantpod.agents.noise import NoiseConfig
from elegantpod.agents.offpolicy import OffPolicyConfig, OffPolicyLearner
from elegantpod.checks.limits import Limit
from elegantpod.types import Batch

MAX_ENTROPY = 10_000.0
"""Hard limit of SAC's ``|target_entropy|`` (nats): a squashed Gaussian over ``d``
action dimensions has at most ``d log 2``, so a larger magnitude is a typo or an attack."""

MAX_TEMPERATURE = 1_000.0
"""Hard limit of SAC's initial temperature ``alpha`` (published values: 0.05 to 1)."""


Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class SACConfig(NoiseConfig, OffPolicyConfig):
    """SAC hyperparameters; defaults solve Pendulum-v1 in seconds on a laptop CPU."""

    batch_size: int = inherit(OffPolicyConfig, "batch_size", 256, key=True)
    """Transitions per gradient step."""
    replay_ratio: float = inherit(OffPolicyConfig, "replay_ratio", 0.25)
    """Gradient steps per collected transition."""
    init_alpha: float = hparam(0.2, limit=Limit(0.0, MAX_TEMPERATURE, open_low=True))
    """Initial entropy temperature."""
    target_entropy: float | None = hparam(
        None, limit=Limit(-MAX_ENTROPY, MAX_ENTROPY, optional=True)
    )
    """Entropy target; ``None``: ``-action_dim``."""


class SquashedGaussianActor(nn.Module):
    """``a = tanh(mu(s) + sigma(s) eps)`` with its log-density (change of variables)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], **rng):
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 2 * act_dim], activation=nn.ReLU, out_gain=0.01, **rng)

    def forward(
        self, obs: Tensor, generator=None, deterministic=False, eps: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``(a, log pi(a|s))``; ``eps``: the standard-normal draws to use (an
        exploration noise process's), else fresh ones from ``generator``."""
        mean, log_std = self.net(obs).chunk(2, -1)
        if deterministic:
            return torch.tanh(mean), torch.zeros_like(mean[..., 0])
        log_std = log_std.clamp(-5.0, 2.0)
        if eps is None:
            eps = torch.randn(mean.shape, device=mean.device, generator=generator)
        u = mean + eps * log_std.exp()
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|
        logp = (-0.5 * eps.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp


class SACActor(DeployedActor):
    """SAC's policy to deploy: the squashed Gaussian's mean, ``tanh(mu(s))``, scaled to
    the Box; samples from the squashed Gaussian."""

    reads = ("actor",)

    def __init__(self, observation_space, action_space, config: SACConfig):
        super().__init__(action_space)
        rng = self.placeholder_rng()
        obs_dim, act_dim = int(observation_space.shape[0]), int(action_space.shape[0])
        self.actor = SquashedGaussianActor(obs_dim, act_dim, config.hidden, **rng)

    def forward(self, obs: Tensor) -> Tensor:
        return self.scale(self.actor(obs, deterministic=True)[0])

    def sample(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return self.scale(self.actor(obs, generator)[0])


class SAC(OffPolicyLearner):
    """SAC for continuous (Box) actions."""

    name = "sac"
    config_cls = SACConfig

    @classmethod
    def supported_action_spaces(cls):
        """Continuous (Box) actions only: the squashed Gaussian policy needs them."""
        return (gymnasium.spaces.Box,)

    def __init__(self, observation_space, action_space, config=None, device="cpu", seed=0):
        super().__init__(observation_space, action_space, config, device, seed)
        c, dev = self.config, self.device
        obs_dim = self.obs_shape[0]
        rng = {"device": dev, "generator": self.generator}  # see nets.py
        self.actor = SquashedGaussianActor(obs_dim, self.act_dim, c.hidden, **rng)
        self.critic = EnsembleQ(2, obs_dim, self.act_dim, c.hidden, **rng)
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

    @classmethod
    def deployed(cls, observation_space, action_space, config) -> SACActor:
        """See :class:`SACActor`."""
        return SACActor(observation_space, action_space, config)

    def default_eval_every(self) -> int:
        """Env steps between evaluations when the caller sets none."""
        return 1000

    def explore(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """``tanh(mu(s) + sigma(s) eps)`` with ``eps`` from the sub-envs' noise processes."""
        if self.is_warming_up:
            a = self.random_action(obs.shape[0])
        else:
            eps = self.noise.sample(obs.shape[0], self.act_dim)
            a, _ = self.actor(obs, eps=eps)
        return a, self.to_env(a)

    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        a, _ = self.actor(obs, self.generator, deterministic=deterministic)
        return self.to_env(a)

    def update(self, batch: Batch) -> dict[str, float]:
        c = self.config
        n_updates = self.take(batch)
        if n_updates == 0:
            return {}
        target_entropy = -float(self.act_dim) if c.target_entropy is None else c.target_entropy
        sums = torch.zeros(4, device=self.device)
        critic_params = list(self.critic.parameters())
        target_params = list(self.critic_target.parameters())
        first = self.gradient_steps
        for _ in range(n_updates):
            if self.should_stop():  # a stop request ends even a long burst
                break
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

            self.gradient_steps += 1
            with torch.no_grad():
                torch._foreach_lerp_(target_params, critic_params, c.tau)
                sums += torch.stack((j_q.detach(), j_pi.detach(), j_alpha.detach(), alpha))
        done = self.gradient_steps - first
        if done == 0:
            return {}
        vals = (sums / done).tolist()
        return dict(
            zip(
                ("losses/critic", "losses/actor", "losses/alpha", "charts/alpha"), vals, strict=True
            )
        )
