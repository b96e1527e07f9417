"""What replay-based learners share: the replay ring, warm-up, the replay ratio, and
checkpoints that keep the replay.

SAC, DDPG, TD3 and DQN build on :class:`OffPolicyLearner` and write only their networks,
their acting and their losses. Every algorithm reads the same loop: a worker's rollout
goes into the replay, then :meth:`OffPolicyLearner.take` says how many gradient steps
are due (``replay_ratio`` per collected transition, fractions carried over), so the
learning speed per env step does not depend on ``num_envs * horizon``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch

from elegantpod.agents.base import Learner
from elegantpod.agents.hparams import hparam, limits
from elegantpod.agents.nets import is_image, mlp_params, mlp_working_bytes
from elegantpod.agents.noise import SEQ_LEN, ExplorationNoise, NoiseConfig
from elegantpod.buffers import ReplayBuffer
from elegantpod.checks.limits import (
    MAX_BATCH,
    MAX_BUFFER,
    MAX_HORIZON,
    MAX_LR,
    MAX_NUM_ENVS,
    MAX_REPLAY_RATIO,
    Limit,
    check_at_most,
    check_hidden,
    check_limits,
    check_rollout,
)
from elegantpod.search.space import Bound
from elegantpod.types import Batch

Tensor = torch.Tensor


@dataclass(frozen=True, kw_only=True)
class OffPolicyConfig:
    """Hyperparameters of the replay loop, common to every off-policy algorithm.

    Each field declares its hard limit, its search domain (the one DDPG, TD3 and SAC
    share; an algorithm may :func:`~elegantpod.agents.hparams.inherit` it with another)
    and its role once (:func:`~elegantpod.agents.hparams.hparam`).
    """

    num_envs: int = hparam(4, limit=Limit(1, MAX_NUM_ENVS, integer=True), structural=True)
    """Parallel sub-envs per worker."""
    horizon: int = hparam(16, limit=Limit(1, MAX_HORIZON, integer=True))
    """Vector steps collected between two bursts of gradient updates."""
    lr: float = hparam(
        1e-3,
        limit=Limit(0.0, MAX_LR, open_low=True),
        search=Bound(1e-4, 3e-3, log=True),
        key=True,
    )
    """Adam learning rate of every network."""
    gamma: float = hparam(0.99, limit=Limit(0.0, 1.0, domain=True), search=Bound(0.95, 0.999))
    """Discount factor."""
    tau: float = hparam(
        0.01,
        limit=Limit(0.0, 1.0, open_low=True, domain=True),
        search=Bound(0.002, 0.05, log=True),
        key=True,
    )
    """Polyak rate of the target networks (1: copy them)."""
    batch_size: int = hparam(
        128,
        limit=Limit(1, MAX_BATCH, integer=True),
        search=Bound(64, 512, integer=True, log=True),
    )
    """Transitions per gradient step, drawn from the replay: at most ``buffer_size``."""
    buffer_size: int = hparam(200_000, limit=Limit(1, MAX_BUFFER, integer=True), structural=True)
    """Replay capacity (transitions)."""
    learning_starts: int = hparam(1000, limit=Limit(0, MAX_BUFFER, integer=True))
    """Uniform-random transitions collected before learning starts."""
    replay_ratio: float = hparam(
        0.5,
        limit=Limit(0.0, MAX_REPLAY_RATIO, open_low=True),
        search=Bound(0.1, 1.0, log=True),
    )
    """Gradient steps per collected transition."""
    hidden: tuple[int, ...] = hparam((64, 64), structural=True)
    """Hidden layer sizes of every network (bounded by ``check_hidden``)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first hyperparameter out of range.

        Every number has a hard range (its field's ``limit``, ``elegantpod.checks.MAX_*``;
        an algorithm's own fields included), so that a typo, a hostile mutation or a
        store from someone else cannot allocate terabytes or start an endless update.
        Then the sizes that must agree: a batch drawn from the replay fits in it, and a
        rollout of ``num_envs * horizon`` transitions stays within ``MAX_ROLLOUT``.
        """
        check_limits(self, limits(type(self)))
        check_hidden(self.hidden)
        why = "each gradient step draws its batch from the replay, which holds no more"
        check_at_most("batch_size", self.batch_size, "buffer_size", self.buffer_size, why)
        check_rollout(self.num_envs, self.horizon)


class OffPolicyLearner(Learner):
    """A learner that learns from a replay of past transitions.

    Actions are stored as the learner thinks of them: an index (int64, shape ``()``) for
    ``Discrete`` spaces, a point of ``[-1, 1]^d`` (float32, shape ``(d,)``) for ``Box``
    spaces, scaled to the env's bounds only when sent (:meth:`to_env`). ``act_dim`` is the
    number of actions or the action dimension.
    """

    is_on_policy = False
    config_cls = OffPolicyConfig  # its subclasses name their own; the shared fields' home
    default_max_steps: ClassVar[int] = 200_000
    default_segment_steps: ClassVar[int] = 4_000
    """Env steps per tournament segment: a few seconds of training on one CPU core."""

    @classmethod
    def memory_bytes(
        cls, config, obs_dim: int, act_dim: int, *, pixels: bool = False, captured: bool = False
    ) -> int:
        """The replay (``buffer_size`` transitions of two observations, float32, or one
        byte a value for images), actor, twin critics and their target copies with Adam
        moments and a batch's activations, and colored noise's sequences (``SEQ_LEN``
        steps per sub-env and action dimension); see :meth:`Learner.memory_bytes`."""
        transition = 4 * (2 * obs_dim + act_dim + 3) - (6 * obs_dim if pixels else 0)
        widths = (obs_dim, *config.hidden, act_dim)
        out = int(config.buffer_size) * transition
        out += mlp_working_bytes(widths, int(config.batch_size), networks=6)
        if getattr(config, "noise", None) == "colored":  # NoiseConfig's, where it has one
            out += 4 * int(config.num_envs) * act_dim * SEQ_LEN
        return out

    @classmethod
    def actor_params(cls, config, obs_dim: int, act_dim: int) -> int:
        """The actor's (DQN: the Q-network's) weights and biases."""
        return mlp_params((obs_dim, *config.hidden, act_dim))

    def __init__(self, observation_space, action_space, config, device, seed):
        super().__init__(observation_space, action_space, config, device, seed)
        if self.is_discrete:
            self.act_dim = int(action_space.n)
            self.action_shape: tuple[int, ...] = ()
            self.action_dtype = torch.int64
        else:
            self.act_dim = int(action_space.shape[0])
            self.action_shape = (self.act_dim,)
            self.action_dtype = torch.float32
            self.low = torch.as_tensor(action_space.low, device=self.device)
            self.high = torch.as_tensor(action_space.high, device=self.device)
        c = self.config
        self.replay = ReplayBuffer(
            c.buffer_size,
            self.obs_shape,
            self.action_shape,
            self.device,
            self.generator,
            self.action_dtype,
            torch.uint8 if is_image(self.obs_shape) else torch.float32,  # images as bytes
        )
        self.seen = 0
        """Env steps the pod collected so far: the clock of warm-up and exploration
        schedules (a fused learner's shard counts the whole pod's steps)."""
        self.rollout_env_steps: int | None = None
        """Env steps of the pod's whole rollout when this learner is given only a shard
        of it (set by :class:`~elegantpod.agents.fusion.FusedLearners` before each
        update); ``None``: the batch is the whole rollout. With it, ``K`` fused learners
        start learning and decay exploration at the same env step as one learner."""
        self.gradient_steps = 0
        """Gradient steps taken so far: the clock of delayed and periodic updates."""
        self._update_debt = 0.0
        self.noise: ExplorationNoise | None = (
            ExplorationNoise(c, self.generator) if isinstance(c, NoiseConfig) else None
        )
        """The exploration noise process of a config with ``noise`` hyperparameters
        (DDPG, TD3, SAC); ``None`` otherwise (DQN)."""

    @classmethod
    def check_spaces(cls, observation_space, action_space) -> None:
        """As :meth:`Learner.check_spaces`; a Box of actions must also have finite bounds:
        actions are stored in ``[-1, 1]`` and scaled into the Box (:meth:`to_env`)."""
        super().check_spaces(observation_space, action_space)
        if isinstance(action_space, gymnasium.spaces.Box) and not (
            np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()
        ):
            raise ValueError(
                f"{cls.name} scales its actions into the Box, so its bounds must be finite, "
                f"got {action_space!r}"
            )

    def to_env(self, action: Tensor) -> Tensor:
        """Stored actions as the env takes them: ``[-1, 1]`` scaled to the Box bounds."""
        if self.is_discrete:
            return action
        return self.low + (action + 1.0) * 0.5 * (self.high - self.low)

    def random_action(self, n: int) -> Tensor:
        """``n`` uniform actions as stored: indices, or points of ``[-1, 1]^d``."""
        if self.is_discrete:
            return torch.randint(
                0, self.act_dim, (n,), device=self.device, generator=self.generator
            )
        u = torch.rand(n, self.act_dim, device=self.device, generator=self.generator)
        return u * 2 - 1

    def episodes_ended(self, done: Tensor | None) -> None:
        """Restart the exploration noise of the sub-envs whose episodes ended."""
        if self.noise is not None:
            self.noise.restart(done)

    def set_hparams(self, **changes: Any) -> None:
        """As :meth:`Learner.set_hparams`; a change of ``noise``, ``noise_beta`` or
        ``noise_theta`` starts a fresh noise process."""
        super().set_hparams(**changes)
        if self.noise is not None:
            self.noise.configure(self.config)

    @property
    def is_warming_up(self) -> bool:
        """Still collecting the uniform-random ``learning_starts`` transitions."""
        return self.seen < self.config.learning_starts

    def take(self, batch: Batch) -> int:
        """Store a time-major rollout in the replay; return the gradient steps due now.

        Gradient steps are ``replay_ratio`` per transition of ``batch`` (a fused learner's
        shard: per transition of its shard).
        """
        c = self.config
        self.replay.extend(batch.flatten())
        pod_steps = self.rollout_env_steps or len(batch)
        self.seen += pod_steps
        # A pod resumed from a checkpoint without replay (stripped, or an older one)
        # refills a few batches first rather than overfit its first transitions; a shard
        # holds its share of what the pod collected.
        share = len(batch) / pod_steps
        refill = min(int(c.learning_starts * share), 4 * c.batch_size, self.replay.capacity)
        if self.is_warming_up or len(self.replay) < refill:
            return 0
        self._update_debt += len(batch) * c.replay_ratio
        n_updates = int(self._update_debt)
        self._update_debt -= n_updates
        return n_updates

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers, step clocks, the filled replay (oldest first) and the
        exploration noise's state (``"noise"``, when the learner has noise).

        Keeping the replay makes a tournament segment boundary (or a worker death)
        invisible to the learner: the next segment learns from the same data.
        """
        state = super().state_dict()
        state["seen"] = self.seen
        state["gradient_steps"] = self.gradient_steps
        state["update_debt"] = self._update_debt
        state["replay"] = self.replay.contents()
        if self.noise is not None:
            state["noise"] = self.noise.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` produced; a state without a replay (see
        :func:`~elegantpod.pod.checkpoint.strip_replay_from_file`) leaves the replay empty,
        one without noise (an older checkpoint's) starts a fresh noise process."""
        # checked first: a malformed noise state leaves the learner as it was
        noise = None if self.noise is None else self.noise.checked(state.get("noise"), self.act_dim)
        super().load_state_dict(state)
        if self.noise is not None:
            self.noise.process = noise
        self.seen = int(state.get("seen", self.seen))
        self.gradient_steps = int(state.get("gradient_steps", self.gradient_steps))
        self._update_debt = float(state.get("update_debt", self._update_debt))
        if state.get("replay") is not None:
            self.replay.restore(state["replay"])
        else:
            self.replay.clear()


def polyak(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    """``theta' <- tau theta + (1 - tau) theta'`` for every parameter, in one fused call."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)
