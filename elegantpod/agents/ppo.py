"""Proximal Policy Optimization (Schulman et al., 2017) with GAE (Schulman et al., 2016).

The loss reads as in the paper: ``L = L^CLIP - c1 L^VF + c2 S`` with
``L^CLIP = E[min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t)]``, ``r_t = pi(a_t|s_t) / pi_old(a_t|s_t)``.
Old log-probabilities and values are computed once per rollout, batched over the whole
rollout, rather than step by step during collection: the policy does not change while
collecting, so this gives the same numbers and keeps the rollout loop lean.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from elegantpod.agents.base import DeployedActor, Learner
from elegantpod.agents.hparams import hparam, limits
from elegantpod.agents.nets import RunningNorm, encoded, is_image, mlp_params, mlp_working_bytes
from elegantpod.checks.limits import (
    LOG_STD_RANGE,
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_GRAD_NORM,
    MAX_HORIZON,
    MAX_LOSS_WEIGHT,
    MAX_LR,
    MAX_NUM_ENVS,
    Limit,
    check_hidden,
    check_limits,
    check_rollout,
)
from elegantpod.search.space import Bound
from elegantpod.types import Batch

MAX_ENT_COEF = 1.0
"""Hard limit of PPO's entropy bonus (published values: 0 to 0.01)."""


Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class PPOConfig:
    """PPO hyperparameters; defaults solve CartPole-v1 in a few seconds on a laptop CPU.

    Each field declares its hard limit, its search domain and its role once
    (:func:`~elegantpod.agents.hparams.hparam`).
    """

    num_envs: int = hparam(64, limit=Limit(1, MAX_NUM_ENVS, integer=True), structural=True)
    """Parallel sub-envs per worker."""
    horizon: int = hparam(32, limit=Limit(1, MAX_HORIZON, integer=True), structural=True)
    """Vector steps per rollout; a rollout holds ``num_envs * horizon`` transitions."""
    lr: float = hparam(
        3e-3,
        limit=Limit(0.0, MAX_LR, open_low=True),
        search=Bound(1e-4, 1e-2, log=True),
        key=True,
    )
    """Adam learning rate of actor and critic."""
    gamma: float = hparam(0.99, limit=Limit(0.0, 1.0, domain=True), search=Bound(0.95, 0.999))
    """Discount factor."""
    gae_lambda: float = hparam(0.9, limit=Limit(0.0, 1.0, domain=True), search=Bound(0.8, 0.99))
    """GAE lambda: bias/variance trade-off of the advantage estimate."""
    clip_coef: float = hparam(
        0.2, limit=Limit(0.0, 1.0, open_low=True), search=Bound(0.1, 0.4), key=True
    )
    """Surrogate clipping epsilon."""
    epochs: int = hparam(
        4,
        limit=Limit(1, MAX_EPOCHS, integer=True),
        search=Bound(2, 10, integer=True),
        key=True,
    )
    """Passes over each rollout."""
    minibatch_size: int = hparam(512, limit=Limit(1, MAX_BATCH, integer=True))
    """Transitions per gradient step; at most the rollout's (``num_envs * horizon``, a
    fused learner's share of it): a larger value takes the whole rollout per step."""
    ent_coef: float = hparam(0.0, limit=Limit(0.0, MAX_ENT_COEF), search=Bound(0.0, 0.02))
    """Entropy bonus c2."""
    vf_coef: float = hparam(0.5, limit=Limit(0.0, MAX_LOSS_WEIGHT))
    """Value-loss weight c1."""
    max_grad_norm: float = hparam(0.5, limit=Limit(0.0, MAX_GRAD_NORM, open_low=True))
    """Global gradient-norm clip."""
    normalize_advantage: bool = hparam(True)
    """Standardize advantages per minibatch."""
    normalize_obs: bool = hparam(False, structural=True)
    """Running mean/std normalization of observations."""
    hidden: tuple[int, ...] = hparam((64, 64), structural=True)
    """Hidden layer sizes of actor and critic (bounded by ``check_hidden``)."""
    init_log_std: float = hparam(0.0, limit=Limit(*LOG_STD_RANGE))
    """Initial log standard deviation of Gaussian policies (continuous actions)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first hyperparameter out of range.

        Every number has a hard range (its field's ``limit``, ``elegantpod.checks.MAX_*``),
        so that a typo, a hostile mutation or a store from someone else cannot allocate
        terabytes, start an endless update or train with a nonsensical loss; then the
        sizes that must agree: a rollout of ``num_envs * horizon`` transitions within
        ``MAX_ROLLOUT``. (A ``minibatch_size`` past the rollout is no error: a gradient
        step then takes the whole rollout.)
        """
        check_limits(self, limits(PPOConfig))
        check_hidden(self.hidden)
        check_rollout(self.num_envs, self.horizon)


def gae(
    reward: Tensor,
    value: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    done: Tensor,
    gamma: float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation over a time-major ``(T, N)`` rollout.

    ``delta_t = r_t + gamma (1 - term_t) V(s'_t) - V(s_t)`` and
    ``A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}``, where ``s'_t`` is the true
    next state (so truncated episodes bootstrap) and ``done_t`` cuts the recursion at
    episode ends. Returns ``(advantages, returns = advantages + values)``.
    """
    not_term = (~terminated).to(reward.dtype)
    not_done = (~done).to(reward.dtype)
    delta = reward + gamma * not_term * next_value - value
    advantage = torch.empty_like(reward)
    last = torch.zeros_like(reward[0])
    for t in range(reward.shape[0] - 1, -1, -1):
        last = delta[t] + gamma * lam * not_done[t] * last
        advantage[t] = last
    return advantage, advantage + value


def adam_options(device: str | torch.device, capture: bool) -> dict[str, bool]:
    """How a PPO learner's Adam runs on ``device``.

    ``capture`` (its update is recorded in a CUDA graph): ``capturable``, which keeps the
    step count on the device and reads a tensor learning rate there. Otherwise on CUDA:
    ``fused``, one kernel for all parameters, without capturable's extra launches and
    the warning it gives outside a capture. Elsewhere (CPU): torch's default.
    """
    if capture:
        return {"capturable": True}
    if torch.device(device).type == "cuda":
        return {"fused": True}
    return {}


def make_adam(
    params: list[Tensor],
    lr: float | Tensor,
    device: str | torch.device,
    *,
    capture: bool = False,
) -> torch.optim.Adam:
    """PPO's Adam (``eps=1e-5``) with the :func:`adam_options` of ``device``."""
    return torch.optim.Adam(params, lr=lr, eps=1e-5, **adam_options(device, capture))


def actor_network(obs_shape: tuple[int, ...], act_dim: int, hidden: tuple[int, ...], **rng):
    """PPO's actor: logits, or a Gaussian's mean, from (normalised) observations.

    One definition for the learner and for a :class:`~elegantpod.policy.policy.Policy` loading
    its weights: an image encoder first where observations are images
    (:func:`~elegantpod.agents.nets.encoded`), the last layer's gain 0.01 so that the
    first policy is near uniform (Andrychowicz et al. 2021)."""
    return encoded(obs_shape, [obs_shape[0], *hidden, act_dim], out_gain=0.01, **rng)


def observation_norm(obs_shape: tuple[int, ...], normalize_obs: bool) -> RunningNorm:
    """PPO's running observation normaliser: on where ``normalize_obs`` asks, except for
    images, which the image encoder scales (per-pixel statistics would only add noise)."""
    return RunningNorm(obs_shape, enabled=normalize_obs and not is_image(obs_shape))


class PPOActor(DeployedActor):
    """PPO's policy to deploy: the actor after the observation normaliser; the logits'
    argmax or the Gaussian's mean clipped to the Box, and samples from the categorical
    or from the Gaussian with the learned ``log_std``."""

    def __init__(self, observation_space, action_space, config: PPOConfig):
        super().__init__(action_space)
        shape = tuple(observation_space.shape)
        act_dim = int(action_space.n) if self.is_discrete else int(action_space.shape[0])
        rng = self.placeholder_rng()
        self.actor = actor_network(shape, act_dim, config.hidden, **rng)
        self.obs_norm = observation_norm(shape, config.normalize_obs)
        self.log_std = _ParamHolder(nn.Parameter(torch.zeros(act_dim)))
        self.reads = ("actor", "obs_norm") if self.is_discrete else ("actor", "obs_norm", "log_std")

    def forward(self, obs: Tensor) -> Tensor:
        out = self.actor(self.obs_norm(obs))
        return out.argmax(-1) if self.is_discrete else self.clip(out)

    def sample(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        out = self.actor(self.obs_norm(obs))
        if self.is_discrete:
            return torch.multinomial(torch.softmax(out, -1), 1, generator=generator).squeeze(-1)
        noise = torch.randn(out.shape, device=out.device, generator=generator)
        return self.clip(out + noise * self.log_std.param.exp())

    def check(self) -> None:
        if (self.obs_norm.var < 0).any() or not self.obs_norm.count > 0:
            raise ValueError("field 'learner.modules.obs_norm' has a negative variance or count")


class PPO(Learner):
    """PPO for discrete (categorical) and continuous (diagonal Gaussian) actions."""

    name = "ppo"
    config_cls = PPOConfig
    is_on_policy = True
    takes_images = True
    default_max_steps: ClassVar[int] = 2_000_000
    default_segment_steps: ClassVar[int] = 32_768
    """Env steps per tournament segment: a few seconds of training on one CPU core."""

    @classmethod
    def memory_bytes(
        cls, config, obs_dim: int, act_dim: int, *, pixels: bool = False, captured: bool = False
    ) -> int:
        """A copy of the rollout as the update's batch, one pass of the whole rollout
        through the widest layer (advantages, values), actor and critic with their
        Adam moments and a minibatch's activations; captured as CUDA graphs, the
        graphs' pool holds that working memory once more (see
        :meth:`Learner.memory_bytes`). A subclass whose config drops ``minibatch_size``
        (an A2C: one full-batch step) is counted with the whole rollout as its batch."""
        n = int(config.horizon) * int(config.num_envs)
        batch = n * 4 * (2 * obs_dim + act_dim + 3)
        widths = (obs_dim, *config.hidden, act_dim)
        rows = min(int(getattr(config, "minibatch_size", n)), n)
        whole = 8 * n * max(widths)
        out = batch + whole + mlp_working_bytes(widths, rows, networks=2)
        if captured:
            out += batch + whole + 2 * 8 * rows * sum(widths)
        return out

    @classmethod
    def actor_params(cls, config, obs_dim: int, act_dim: int) -> int:
        """The actor MLP's weights and biases (:meth:`Learner.actor_params`)."""
        return mlp_params((obs_dim, *config.hidden, act_dim))

    def __init__(self, observation_space, action_space, config=None, device="cpu", seed=0):
        super().__init__(observation_space, action_space, config, device, seed)
        c, dev = self.config, self.device
        obs_dim = self.obs_shape[0]
        if self.is_discrete:
            self.act_dim = int(action_space.n)
            self.action_shape: tuple[int, ...] = ()
        else:
            self.act_dim = int(action_space.shape[0])
            self.action_shape = (self.act_dim,)
            self.low = torch.as_tensor(action_space.low, device=dev)
            self.high = torch.as_tensor(action_space.high, device=dev)
        rng = {"device": dev, "generator": self.generator}
        self.actor = actor_network(self.obs_shape, self.act_dim, c.hidden, **rng)
        self.critic = encoded(self.obs_shape, [obs_dim, *c.hidden, 1], out_gain=1.0, **rng)
        self.obs_norm = observation_norm(self.obs_shape, c.normalize_obs).to(dev)
        self.log_std = nn.Parameter(torch.full((max(self.act_dim, 1),), c.init_log_std, device=dev))
        self.modules = {"actor": self.actor, "critic": self.critic, "obs_norm": self.obs_norm}
        params = [*self.actor.parameters(), *self.critic.parameters()]
        if not self.is_discrete:
            self.modules["log_std"] = _ParamHolder(self.log_std)
            params.append(self.log_std)
        self.params = params
        self.optimizers = {"ppo": make_adam(params, c.lr, dev)}
        self.lr_tensor: Tensor | None = None
        """The learning rate as a device tensor that Adam reads, once
        :meth:`use_static_update` made one (``None``: a float, as in any optimizer)."""

    @classmethod
    def deployed(cls, observation_space, action_space, config) -> PPOActor:
        """See :class:`PPOActor`."""
        return PPOActor(observation_space, action_space, config)

    def use_static_update(self, capture: bool) -> None:
        """Prepare the optimizer for :meth:`update_static` (called by
        :class:`~elegantpod.pod.capture.IterationGraphs`), keeping its state.

        The learning rate becomes :attr:`lr_tensor`, a device tensor that Adam reads and
        that :meth:`set_hparams` changes in place, so a captured update follows a new
        ``lr`` without being captured again. ``capture``: the update will be recorded in
        a CUDA graph, so Adam is made capturable (see :func:`adam_options`).
        """
        old = self.optimizers["ppo"]
        saved = old.state_dict() if old.state else None
        # float64 on a CPU, where Adam reads it back as a Python float: the very numbers
        # of a float learning rate; float32 on CUDA, where capturable Adam computes with it
        dtype = torch.float64 if self.device.type == "cpu" else torch.float32
        self.lr_tensor = torch.tensor(float(self.config.lr), device=self.device, dtype=dtype)
        self.optimizers["ppo"] = make_adam(
            self.params, self.lr_tensor, self.device, capture=capture
        )
        if saved is not None:  # the moments and step clocks carry over
            modules = {k: m.state_dict() for k, m in self.modules.items()}
            self.load_state_dict({"modules": modules, "optimizers": {"ppo": saved}})
        self._apply_lr()

    @property
    def tensor_hparams(self) -> tuple[str, ...]:
        """Hyperparameters the update reads from device tensors rather than as Python
        constants: a captured update follows their changes without a new capture."""
        return ("lr",) if self.lr_tensor is not None else ()

    def _apply_lr(self) -> None:
        if self.lr_tensor is None:
            super()._apply_lr()
            return
        with torch.no_grad():
            self.lr_tensor.fill_(float(self.config.lr))  # in place: graphs read it
        for group in self.optimizers["ppo"].param_groups:
            group["lr"] = self.lr_tensor

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.lr_tensor is not None:  # a checkpoint holds plain numbers
            for group in state["optimizers"]["ppo"]["param_groups"]:
                group["lr"] = float(self.config.lr)
        return state

    def default_eval_every(self) -> int:
        """Env steps between evaluations: two rollouts or more, so each sees new updates."""
        return max(2 * self.config.num_envs * self.config.horizon, 4096)

    # -- acting ----------------------------------------------------------------------
    def explore(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        out = self.actor(self.obs_norm(obs))
        if self.is_discrete:
            # Gumbel-max draws from the categorical in two kernels, no distribution object.
            u = torch.rand(out.shape, device=out.device, generator=self.generator)
            action = (out - torch.log(-torch.log(u.clamp_(1e-20, 1.0)))).argmax(-1)
            return action, action
        noise = torch.randn(out.shape, device=out.device, generator=self.generator)
        action = out + noise * self.log_std.exp()
        return action, torch.maximum(torch.minimum(action, self.high), self.low)

    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        if not deterministic:
            return self.explore(obs)[1]
        out = self.actor(self.obs_norm(obs))
        if self.is_discrete:
            return out.argmax(-1)
        return torch.maximum(torch.minimum(out, self.high), self.low)

    def random_action(self, n: int) -> Tensor:
        if self.is_discrete:
            return torch.randint(
                0, self.act_dim, (n,), device=self.device, generator=self.generator
            )
        u = torch.rand(n, self.act_dim, device=self.device, generator=self.generator)
        return self.low + u * (self.high - self.low)

    def log_prob_entropy(self, obs_n: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """``log pi(a|s)`` and the policy entropy for normalized observations."""
        out = self.actor(obs_n)
        if self.is_discrete:
            logp_all = torch.log_softmax(out, -1)
            logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            return logp, entropy
        log_std = self.log_std.expand_as(out)
        z = (action - out) / log_std.exp()
        logp = (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)
        return logp, entropy

    # -- learning ----------------------------------------------------------------------
    def update(self, batch: Batch) -> dict[str, float]:
        *_, stats = self.update_epochs(batch)  # run every epoch; the last yields the stats
        return stats

    STAT_KEYS: ClassVar[tuple[str, ...]] = (
        "losses/policy",
        "losses/value",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
    )
    """What :meth:`update` reports: means over the update's gradient steps."""

    def update_epochs(self, batch: Batch) -> Iterator[dict[str, float]]:
        """The update, one epoch at a time (fused learners average between epochs)."""
        c = self.config
        prepared = self._prepare(batch)
        sums = torch.zeros(len(self.STAT_KEYS), device=self.device)
        steps = 0
        is_stopped = False
        for epoch in range(c.epochs):
            for idx in self._minibatches(prepared[0].shape[0]):
                if self.should_stop():  # a stop request ends even a long update
                    is_stopped = True
                    break
                self._gradient_step(prepared, idx, sums)
                steps += 1
            if is_stopped or epoch == c.epochs - 1:
                self.obs_norm.update(batch.obs)
                yield dict(zip(self.STAT_KEYS, (sums / max(steps, 1)).tolist(), strict=True))
                return
            yield {}

    def update_static(self, batch: Batch, sums: Tensor) -> int:
        """The whole update with no host synchronisation and no branch on data: what a
        CUDA graph captures (:mod:`elegantpod.pod.capture`).

        The same kernels in the same order as :meth:`update`, so the same numbers, but
        it neither polls :attr:`should_stop` (a captured update is replayed whole, in
        milliseconds) nor reads its statistics: it sums them into ``sums`` (zeroed
        first, ``len(STAT_KEYS)`` on the device) and returns the count of gradient steps
        to divide them by.
        """
        sums.zero_()
        prepared = self._prepare(batch)
        steps = 0
        for _ in range(self.config.epochs):
            for idx in self._minibatches(prepared[0].shape[0]):
                self._gradient_step(prepared, idx, sums)
                steps += 1
        self.obs_norm.update(batch.obs)
        return steps

    def _prepare(self, batch: Batch) -> tuple[Tensor, ...]:
        """Flat observations, actions, old log-probabilities, advantages and returns."""
        c = self.config
        T, N = batch.reward.shape
        with torch.no_grad():
            # Normalize with the statistics the rollout was collected under, so that
            # old_logp is the behaviour policy's; the statistics move after the epochs.
            obs = self.obs_norm(batch.obs.reshape(T * N, *self.obs_shape))
            next_obs = self.obs_norm(batch.next_obs.reshape(T * N, *self.obs_shape))
            value = self.critic(obs).view(T, N)
            next_value = self.critic(next_obs).view(T, N)
            action = batch.action.reshape(T * N, *self.action_shape)
            old_logp, _ = self.log_prob_entropy(obs, action)
            advantage, ret = gae(
                batch.reward, value, next_value, batch.terminated, batch.done, c.gamma, c.gae_lambda
            )
        return obs, action, old_logp, advantage.reshape(-1), ret.reshape(-1)

    def _minibatches(self, B: int) -> Iterator[Tensor]:
        """Index sets of one epoch: a fresh permutation cut into whole minibatches.

        The permutation sorts uniform keys (``stable`` fixes the order of rare ties)
        rather than calling ``randperm``, whose CUDA kernel is not known to be safe to
        capture in a graph; on every device the same draws give the same minibatches.
        """
        mb = min(self.config.minibatch_size, B)
        keys = torch.rand(B, device=self.device, generator=self.generator)
        perm = torch.argsort(keys, stable=True)
        for start in range(0, B - mb + 1, mb):
            yield perm[start : start + mb]

    def _gradient_step(self, prepared: tuple[Tensor, ...], idx: Tensor, sums: Tensor) -> None:
        """One clipped-surrogate step on the minibatch ``idx``; adds its statistics to
        ``sums`` on the device."""
        c = self.config
        obs, action, old_logp, advantage, ret = prepared
        logp, entropy = self.log_prob_entropy(obs[idx], action[idx])
        log_ratio = logp - old_logp[idx]
        ratio = log_ratio.exp()
        adv = advantage[idx]
        if c.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
        l_clip = torch.min(ratio * adv, ratio.clamp(1 - c.clip_coef, 1 + c.clip_coef) * adv)
        l_vf = 0.5 * (self.critic(obs[idx]).squeeze(-1) - ret[idx]).square().mean()
        s = entropy.mean()
        loss = -l_clip.mean() + c.vf_coef * l_vf - c.ent_coef * s
        opt = self.optimizers["ppo"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, c.max_grad_norm)
        opt.step()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clipfrac = ((ratio - 1).abs() > c.clip_coef).float().mean()
            sums += torch.stack((-l_clip.mean(), l_vf, s, approx_kl, clipfrac))


class _ParamHolder(nn.Module):
    """Lets a bare parameter (PPO's ``log_std``) travel in ``modules`` like a network."""

    def __init__(self, param: nn.Parameter):
        super().__init__()
        self.param = param
