"""Twin Delayed DDPG (Fujimoto et al., 2018): DDPG with three changes against overestimation.

1. Clipped double Q-learning: twin critics, and the target takes their minimum,
   ``y = r + gamma (1 - d) min_{i=1,2} Q'_i(s', a')``; both critics regress on it,
   ``J_Q = sum_i E[(Q_i(s, a) - y)^2]``.
2. Target policy smoothing: ``a' = clip(mu'(s') + clip(eps, -c, c), -1, 1)``,
   ``eps ~ N(0, sigma~^2)``, so the target averages Q over a small action region.
3. Delayed policy updates: the actor ``J_mu = -E[Q_1(s, mu(s))]`` and all targets
   ``theta' <- tau theta + (1 - tau) theta'`` move once every ``policy_delay`` critic
   steps, so the policy follows a critic that has settled.

Everything else (networks, acting and its exploration noise, replay, checkpoints) is
DDPG's (``ddpg.py``): actions live in ``[-1, 1]`` and are scaled to the env's bounds
only when sent to the env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from elegantpod.agents.ddpg import DDPG, DDPGConfig
from elegantpod.agents.hparams import hparam, inherit
from elegantpod.checks.limits import MAX_NOISE, Limit
from elegantpod.search.space import Bound

MAX_DELAY = 1_000
"""Hard limit of TD3's ``policy_delay`` (critic steps per actor step; published: 2)."""


Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class TD3Config(DDPGConfig):
    """TD3 hyperparameters (DDPG's plus the three fixes); defaults solve Pendulum-v1 in
    seconds on a laptop CPU."""

    exploration_noise: float = inherit(DDPGConfig, "exploration_noise", key=False)
    """Scale ``sigma`` of the exploration noise added to actions in ``[-1, 1]`` (DDPG's;
    the key columns show ``policy_delay`` instead)."""
    policy_noise: float = hparam(0.2, limit=Limit(0.0, MAX_NOISE), search=Bound(0.1, 0.4))
    """Standard deviation ``sigma~`` of the target policy smoothing noise."""
    noise_clip: float = hparam(0.5, limit=Limit(0.0, MAX_NOISE))
    """Bound ``c`` of the smoothing noise."""
    policy_delay: int = hparam(
        2, limit=Limit(1, MAX_DELAY, integer=True), search=Bound(1, 4, integer=True), key=True
    )
    """Critic steps per actor (and target) step."""


class TD3(DDPG):
    """TD3 for continuous (Box) actions."""

    name = "td3"
    config_cls = TD3Config
    n_critics: ClassVar[int] = 2

    def target_action(self, next_obs: Tensor) -> Tensor:
        """``a' = clip(mu'(s') + clip(eps, -c, c), -1, 1)``: target policy smoothing."""
        c = self.config
        a = self.actor_target(next_obs)
        eps = torch.randn(a.shape, device=a.device, generator=self.generator)
        eps = (eps * c.policy_noise).clamp(-c.noise_clip, c.noise_clip)
        return (a + eps).clamp(-1.0, 1.0)

    def is_actor_step(self) -> bool:
        """Every ``policy_delay``-th critic step (counted over the learner's life)."""
        return self.gradient_steps % self.config.policy_delay == 0
