"""Deep Deterministic Policy Gradient (Lillicrap et al., 2016), as "our DDPG" of the
TD3 paper (Fujimoto et al., 2018).

A deterministic actor ``mu(s)`` in ``[-1, 1]`` (tanh; scaled to the env's bounds only
when sent to the env), a critic ``Q(s, a)`` and slow target copies ``mu'``, ``Q'``:
``y = r + gamma (1 - d) Q'(s', mu'(s'))``, ``J_Q = E[(Q(s, a) - y)^2]``,
``J_mu = -E[Q(s, mu(s))]`` (the deterministic policy gradient, Silver et al., 2014), and
after each step ``theta' <- tau theta + (1 - tau) theta'``. Exploration acts
``clip(mu(s) + sigma n_t, -1, 1)`` with unit-variance noise ``n_t``: by default i.i.d.
Gaussian, as in the TD3 paper's re-tuned DDPG (no batch normalization or critic weight
decay either; the critic takes the action at its input layer rather than its second),
or, by the ``noise`` hyperparameter, Ornstein-Uhlenbeck noise as in the original DDPG or
colored noise (``noise.py``).

TD3 (``td3.py``) is this algorithm with three changes, so it subclasses :class:`DDPG`
through three hooks: ``n_critics``, :meth:`DDPG.target_action` and
:meth:`DDPG.is_actor_step`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import gymnasium
import torch
from torch import nn

from elegantpod.agents.base import DeployedActor
from elegantpod.agents.hparams import hparam
from elegantpod.agents.nets import EnsembleQ, mlp
from elegantpod.agents.noise import NoiseConfig
from elegantpod.agents.offpolicy import OffPolicyConfig, OffPolicyLearner, polyak
from elegantpod.checks.limits import MAX_NOISE, Limit
from elegantpod.search.space import Bound
from elegantpod.types import Batch

Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class DDPGConfig(NoiseConfig, OffPolicyConfig):
    """DDPG hyperparameters; defaults solve Pendulum-v1 in seconds on a laptop CPU."""

    exploration_noise: float = hparam(
        0.1, limit=Limit(0.0, MAX_NOISE), search=Bound(0.05, 1.0), key=True
    )
    """Scale ``sigma`` of the exploration noise (its standard deviation) added to
    actions in ``[-1, 1]``."""


class DeterministicActor(nn.Module):
    """``mu(s) = tanh(f(s))``: one action in ``[-1, 1]`` per state."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], **rng):
        super().__init__()
        # A small last layer starts the policy near the middle of the action box.
        self.net = mlp([obs_dim, *hidden, act_dim], activation=nn.ReLU, out_gain=0.01, **rng)

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.net(obs))


class DDPGActor(DeployedActor):
    """DDPG's (and TD3's) policy to deploy: ``tanh(f(s))`` scaled to the Box; samples add
    Gaussian ``exploration_noise`` before the scaling, clipped to ``[-1, 1]``."""

    reads = ("actor",)

    def __init__(self, observation_space, action_space, config: DDPGConfig):
        super().__init__(action_space)
        rng = self.placeholder_rng()
        obs_dim, act_dim = int(observation_space.shape[0]), int(action_space.shape[0])
        self.actor = DeterministicActor(obs_dim, act_dim, config.hidden, **rng)
        self.noise = float(config.exploration_noise)

    def forward(self, obs: Tensor) -> Tensor:
        return self.scale(self.actor(obs))

    def sample(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        a = self.actor(obs)
        eps = torch.randn(a.shape, device=a.device, generator=generator)
        return self.scale((a + self.noise * eps).clamp(-1.0, 1.0))


class DDPG(OffPolicyLearner):
    """DDPG for continuous (Box) actions."""

    name = "ddpg"
    config_cls = DDPGConfig
    n_critics: ClassVar[int] = 1
    """Critics evaluated together (an :class:`EnsembleQ`); the target takes their min."""

    @classmethod
    def supported_action_spaces(cls):
        """Continuous (Box) actions only: the actor outputs them deterministically."""
        return (gymnasium.spaces.Box,)

    def __init__(self, observation_space, action_space, config=None, device="cpu", seed=0):
        super().__init__(observation_space, action_space, config, device, seed)
        c, dev = self.config, self.device
        obs_dim = self.obs_shape[0]
        rng = {"device": dev, "generator": self.generator}  # see nets.py
        self.actor = DeterministicActor(obs_dim, self.act_dim, c.hidden, **rng)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = EnsembleQ(self.n_critics, obs_dim, self.act_dim, c.hidden, **rng)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.modules = {
            "actor": self.actor,
            "actor_target": self.actor_target,
            "critic": self.critic,
            "critic_target": self.critic_target,
        }
        self.optimizers = {
            "actor": torch.optim.Adam(self.actor.parameters(), lr=c.lr, fused=True),
            "critic": torch.optim.Adam(self.critic.parameters(), lr=c.lr, fused=True),
        }

    @classmethod
    def deployed(cls, observation_space, action_space, config) -> DDPGActor:
        """See :class:`DDPGActor`."""
        return DDPGActor(observation_space, action_space, config)

    def default_eval_every(self) -> int:
        """Env steps between evaluations when the caller sets none."""
        return 1000

    # -- acting --------------------------------------------------------------------------
    def _noisy(self, a: Tensor, std: float) -> Tensor:
        eps = torch.randn(a.shape, device=a.device, generator=self.generator)
        return (a + std * eps).clamp(-1.0, 1.0)

    def explore(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """``clip(mu(s) + sigma n_t, -1, 1)`` with the sub-envs' noise processes ``n_t``."""
        if self.is_warming_up:
            a = self.random_action(obs.shape[0])
        else:
            n_t = self.noise.sample(obs.shape[0], self.act_dim)
            a = (self.actor(obs) + self.config.exploration_noise * n_t).clamp(-1.0, 1.0)
        return a, self.to_env(a)

    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        """The policy's actions; ``deterministic=False`` adds i.i.d. Gaussian noise."""
        a = self.actor(obs)
        if not deterministic:
            a = self._noisy(a, self.config.exploration_noise)
        return self.to_env(a)

    # -- learning ------------------------------------------------------------------------
    def target_action(self, next_obs: Tensor) -> Tensor:
        """The action the target critic is evaluated at: ``mu'(s')``."""
        return self.actor_target(next_obs)

    def is_actor_step(self) -> bool:
        """Whether this gradient step also updates the actor and the targets (always)."""
        return True

    @torch.no_grad()
    def td_target(self, b: Batch) -> Tensor:
        """``y = r + gamma (1 - d) min_i Q'_i(s', a')`` with ``a'`` from :meth:`target_action`."""
        q_next = self.critic_target(b.next_obs, self.target_action(b.next_obs)).min(0).values
        return b.reward + self.config.gamma * (~b.terminated).to(b.reward.dtype) * q_next

    def update(self, batch: Batch) -> dict[str, float]:
        c = self.config
        n_updates = self.take(batch)
        if n_updates == 0:
            return {}
        sums = torch.zeros(3, device=self.device)
        actor_steps, first = 0, self.gradient_steps
        for _ in range(n_updates):
            if self.should_stop():  # a stop request ends even a long burst
                break
            b = self.replay.sample(c.batch_size)
            y = self.td_target(b)
            q = self.critic(b.obs, b.action)
            j_q = (q - y).square().mean(1).sum()  # summed over the critics
            self.optimizers["critic"].zero_grad(set_to_none=True)
            j_q.backward()
            self.optimizers["critic"].step()
            self.gradient_steps += 1
            if self.is_actor_step():
                # The deterministic policy gradient flows through Q_1 into mu only.
                self.critic.requires_grad_(False)
                j_mu = -self.critic(b.obs, self.actor(b.obs))[0].mean()
                self.critic.requires_grad_(True)
                self.optimizers["actor"].zero_grad(set_to_none=True)
                j_mu.backward()
                self.optimizers["actor"].step()
                polyak(self.critic_target, self.critic, c.tau)
                polyak(self.actor_target, self.actor, c.tau)
                sums[1] += j_mu.detach()
                actor_steps += 1
            sums[0] += j_q.detach()
            sums[2] += q.detach()[0].mean()
        done = self.gradient_steps - first
        if done == 0:
            return {}
        j_q_sum, j_mu_sum, q_sum = sums.tolist()
        stats = {"losses/critic": j_q_sum / done, "charts/q": q_sum / done}
        if actor_steps:
            stats["losses/actor"] = j_mu_sum / actor_steps
        return stats
