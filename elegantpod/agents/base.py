"""The thin protocol every learner follows, and what is common to all of them."""

from __future__ import annotations

import dataclasses
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import gymnasium
import torch

from elegantpod.agents import hparams
from elegantpod.checks.overrides import replace_checked
from elegantpod.search.space import Domain
from elegantpod.types import Batch

logger = logging.getLogger(__name__)

Tensor = torch.Tensor


class DeployedActor(torch.nn.Module):
    """A learner's policy as deployment takes it: raw float32 observations
    ``(batch, *obs_shape)`` in, env-ready actions out (``(batch,)`` int64 for a discrete
    space, ``(batch, act_dim)`` float32 within the Box's bounds).

    Why one per algorithm, in the algorithm's own module: what the actor is (a
    normaliser, a squashed Gaussian, a Q-network's argmax) and how it explores is the
    algorithm's knowledge, so :class:`~elegantpod.policy.policy.Policy`, its exports and
    its videos need no switch on algorithm names, and a learner a user registers is
    deployed the same way (its ``deployed`` classmethod returns one of these).

    A subclass names its children after the entries of the learner's ``modules`` that it
    reads (PPO's ``actor``, ``obs_norm`` and ``log_std``) and lists them in
    :attr:`reads`: a checkpoint's weights load into it by those names, each checked.
    The action bounds are buffers that no checkpoint carries (``persistent=False``): they
    come from the action space.
    """

    reads: tuple[str, ...] = ()
    """The learner's ``modules`` entries this actor loads, each into its child of that
    name."""

    def __init__(self, action_space):
        super().__init__()
        self.is_discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        # two tensors, not one twice: a traced module refuses a shared buffer
        for name in ("low", "high"):
            bound = torch.zeros(0)
            if not self.is_discrete:
                bound = torch.tensor(getattr(action_space, name), dtype=torch.float32)
            self.register_buffer(name, bound, persistent=False)

    @staticmethod
    def placeholder_rng() -> dict[str, Any]:
        """Where a deployed actor builds its networks: on the CPU, drawing their initial
        weights (overwritten by the checkpoint's) from a generator of its own, not from
        torch's global one, whose state a user's own code may rely on."""
        return {"device": "cpu", "generator": torch.Generator().manual_seed(0)}

    def scale(self, a: Tensor) -> Tensor:
        """A point of ``[-1, 1]^d`` in the Box's bounds (as off-policy learners store
        actions)."""
        return self.low + (a + 1.0) * 0.5 * (self.high - self.low)

    def clip(self, a: Tensor) -> Tensor:
        """``a`` clipped to the Box's bounds."""
        return torch.maximum(torch.minimum(a, self.high), self.low)

    def forward(self, obs: Tensor) -> Tensor:
        """The deterministic action: what evaluation, exports and videos use."""
        raise NotImplementedError

    def sample(self, obs: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """An action drawn as the learner explores (``Policy.predict(deterministic=False)``);
        the deterministic one for a learner that does not say how it explores."""
        return self(obs)

    def check(self) -> None:
        """Raise ``ValueError`` for loaded weights that are unusable beyond their shapes
        (PPO: a negative variance in its normaliser); nothing by default."""


class Learner(ABC):
    """An RL algorithm: acts, learns from a :class:`Batch`, saves and loads its state.

    Subclasses set ``name`` and ``config_cls`` and list their optimizers in
    ``self.optimizers`` (name -> optimizer) so that learning rates can be changed live
    and optimizer moments travel with checkpoints.

    Randomness: every random draw of a learner (network initialisation, action sampling,
    exploration noise, minibatch permutations, replay sampling) comes from its own
    ``self.generator``, seeded from ``seed``, never from torch's process-wide RNG, so
    that pods sharing a process (a Dask worker's threads) do not disturb each other.
    """

    name: ClassVar[str]
    config_cls: ClassVar[type]
    is_on_policy: ClassVar[bool]
    structural_hparams: ClassVar[tuple[str, ...]] = ()
    """Hyperparameters that fix network or buffer shapes: never changed live or by a
    mutation of a child that copies its parent's networks. Derived from the config's
    fields (:func:`elegantpod.agents.hparams.structural`, see :meth:`__init_subclass__`)."""
    key_hparams: ClassVar[tuple[str, ...]] = ("lr",)
    """The hyperparameters worth a glance: the leaderboard's and the dashboard's key
    columns (:func:`elegantpod.agents.hparams.key_names` of a config that declares them)."""
    default_max_steps: ClassVar[int] = 1_000_000
    """Env steps of ``train()`` when the caller gives no budget."""
    default_segment_steps: ClassVar[int] = 32_768
    """Env steps per tournament segment when the tournament gives no segment budget."""
    takes_images: ClassVar[bool] = False
    """Whether the learner's networks read image observations (three dimensions, pixel
    values 0..255) through an :class:`~elegantpod.agents.nets.ImageEncoder`; a learner
    that does not is refused such an env before any work."""
    search_space: ClassVar[dict[str, Domain]] = {}
    """``{hyperparameter: Bound | Choice}``: where a tournament's generator may move each one.
    Derived from the config's fields (:func:`elegantpod.agents.hparams.search_space`, see
    :meth:`__init_subclass__`); empty (nothing moves) for a learner whose config declares
    none. Set it in the class body, or with ``register_algo(cls, search_space=...)``, to
    give other domains."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Derive ``search_space``, ``structural_hparams`` and ``key_hparams`` from the
        ``config_cls`` a subclass names, where that config declares its fields with
        :func:`~elegantpod.agents.hparams.hparam`: the field is their one home, so a
        learner never repeats them. A value set in the subclass's own body wins; a config
        that declares nothing (plain dataclass fields) leaves the inherited values."""
        super().__init_subclass__(**kwargs)
        config = cls.__dict__.get("config_cls")
        if config is None or not hparams.declared(config):
            return
        own = cls.__dict__
        if "search_space" not in own:
            cls.search_space = hparams.search_space(config)
        if "structural_hparams" not in own:
            cls.structural_hparams = hparams.structural(config)
        if "key_hparams" not in own and hparams.key_names(config):
            cls.key_hparams = hparams.key_names(config)

    def __init__(self, observation_space, action_space, config, device="cpu", seed: int = 0):
        self.check_spaces(observation_space, action_space)
        self.config = config if config is not None else self.config_cls()
        self.config.validate()
        self.observation_space, self.action_space = observation_space, action_space
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))
        self.obs_shape = tuple(observation_space.shape)
        self.is_discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        self.action_shape: tuple[int, ...] = () if self.is_discrete else tuple(action_space.shape)
        """Shape of one stored action: ``()`` for Discrete, ``(act_dim,)`` for Box."""
        self.action_dtype = torch.int64 if self.is_discrete else torch.float32
        """How rollouts and replay buffers store actions."""
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.modules: dict[str, torch.nn.Module] = {}
        self.should_stop: Callable[[], bool] = _never
        """Polled between gradient steps (PPO: minibatches): ``True`` ends the update
        early, with the statistics so far. A running :class:`~elegantpod.pod.pod.Pod` sets
        it, so that a stop request reaches a long update; it must be cheap."""

    # -- action spaces ----------------------------------------------------------------
    @classmethod
    def check_spaces(cls, observation_space, action_space) -> None:
        """Raise ``ValueError`` when this algorithm cannot handle the spaces."""
        is_box = isinstance(observation_space, gymnasium.spaces.Box)
        dims = len(observation_space.shape) if is_box else 0
        if is_box and dims == 3 and not cls.takes_images:
            # the registered ones, those get_algo finds: a subclass defined and never
            # registered (or unregistered) is no choice a user has
            takers = ", ".join(sorted(n for n, c in REGISTRY.items() if c.takes_images))
            raise ValueError(
                f"{cls.name} takes vector observations, not images "
                f"{tuple(observation_space.shape)}: use an algorithm with an image encoder "
                f"({takers}), or wrap the env to give features"
            )
        if not is_box or dims not in ((1, 3) if cls.takes_images else (1,)):
            raise ValueError(
                f"{cls.name} needs a flat Box observation space"
                f"{' or images (height, width, channels)' if cls.takes_images else ''}, "
                f"got {observation_space!r}"
            )
        if not isinstance(action_space, cls.supported_action_spaces()):
            kinds = " or ".join(t.__name__ for t in cls.supported_action_spaces())
            raise ValueError(
                f"{cls.name} cannot handle action space {action_space!r}: it needs {kinds} actions"
            )

    @classmethod
    def check_env(cls, env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
        """Raise ``ValueError`` when this algorithm cannot train on ``env_id``.

        Cheap: it builds a single sub-env on the CPU to read the spaces (which also checks
        ``env_kwargs``, e.g. a trading env's data and dates).
        """
        from elegantpod.envs.gym import NO_LIMIT_STEPS, GymVecEnv, time_limit_advice
        from elegantpod.envs.registry import make_env

        probe = make_env(env_id, num_envs=1, device="cpu", seed=0, **(env_kwargs or {}))
        try:
            cls.check_spaces(probe.observation_space, probe.action_space)
            if isinstance(probe, GymVecEnv) and probe.max_episode_steps is None:
                logger.warning(
                    "%r has no time limit: if a policy can keep an episode going, its "
                    "evaluations never end (one is cut at the budget's end, a tournament "
                    "segment's after %s steps); %s",
                    env_id,
                    f"{NO_LIMIT_STEPS:,}",
                    time_limit_advice(env_id),
                )
        finally:
            probe.close()

    @classmethod
    def deployed(cls, observation_space, action_space, config) -> DeployedActor:
        """The policy to deploy, built from the spaces and config alone (its weights are
        loaded by :attr:`DeployedActor.reads`): what ``Policy``, exports and videos run.

        A learner without one trains and runs in tournaments, but is not deployable; a
        ``Policy`` of it says so."""
        raise NotImplementedError(
            f"{cls.name} has no actor to deploy: give the learner a 'deployed' classmethod "
            "that returns an elegantpod.agents.base.DeployedActor"
        )

    @classmethod
    def memory_bytes(
        cls, config, obs_dim: int, act_dim: int, *, pixels: bool = False, captured: bool = False
    ) -> int:
        """About how many bytes one learner of ``config`` allocates on its device, for
        ``obs_dim`` observation values and ``act_dim`` action dimensions (or discrete
        choices): networks with their gradients and optimizer moments, a replay, the
        largest activations of an update.

        Why the learner says: the pod refuses a spec that its device cannot hold before
        it builds anything (:func:`~elegantpod.pod.memory.estimate_pod_bytes`), and only
        the learner knows what its fields mean. The pod itself counts its rollout and
        envs from the config's ``num_envs`` and ``horizon``.

        Parameters
        ----------
        pixels
            The observations are images, which a replay may keep as one byte a value.
        captured
            The pod may replay the update as CUDA graphs, whose private pool keeps a
            second copy of the update's working memory.

        Returns 0 here (nothing beyond the rollout): a learner that preallocates more
        (a replay, large networks) overrides it.
        """
        return 0

    @classmethod
    def actor_params(cls, config, obs_dim: int, act_dim: int) -> int:
        """Weights and biases of the deployed actor of ``config``: a lower bound on what
        a real checkpoint of it holds, so that a hand-made checkpoint whose spec
        describes a far larger network is refused before that network is built
        (:mod:`~elegantpod.pod.saved`). 0 here: no bound."""
        return 0

    @classmethod
    def supported_action_spaces(cls) -> tuple[type, ...]:
        """Action space types this algorithm can handle."""
        return (gymnasium.spaces.Discrete, gymnasium.spaces.Box)

    def default_eval_every(self) -> int:
        """Env steps between evaluations when the caller sets none."""
        return 5_000

    # -- the protocol ---------------------------------------------------------------
    @abstractmethod
    def explore(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Sample for training: ``(action to store, action to send to the env)``."""

    @abstractmethod
    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        """Env-ready actions for ``(N, obs_dim)`` observations."""

    @abstractmethod
    def update(self, batch: Batch) -> dict[str, float]:
        """Learn from a time-major rollout; return namespaced scalar statistics."""

    def update_epochs(self, batch: Batch) -> Iterator[dict[str, float]]:
        """The update as a sequence of epochs, yielding after each one.

        These are the points where fused learners (:class:`~elegantpod.agents.fusion.
        FusedLearners`) average their parameters. The last value yielded holds the
        statistics. By default the whole update is one epoch (off-policy learners:
        one burst of gradient steps); PPO yields after each pass over its data.
        """
        yield self.update(batch)

    def random_action(self, n: int) -> Tensor:
        """Uniform actions (for warm-up), as stored in buffers."""
        raise NotImplementedError

    def episodes_ended(self, done: Tensor | None) -> None:
        """Hear which sub-envs' episodes ended after an env step: ``(num_envs,)`` bools,
        or ``None`` when all of them start fresh episodes (a worker's first rollout
        after a reset).

        Why: exploration noise that is correlated in time (see
        :mod:`~elegantpod.agents.noise`) restarts with each episode. A worker calls this
        after every step; it must stay cheap and not synchronise with the device. Here:
        nothing (a learner whose exploration has no memory).
        """
        return

    # -- hyperparameters ----------------------------------------------------------------
    def get_hparams(self) -> dict[str, Any]:
        """Hyperparameters by name."""
        return dataclasses.asdict(self.config)

    def set_hparams(self, **changes: Any) -> None:
        """Change hyperparameters live, by name; learning rates reach the optimizers.

        Raises ``ValueError`` naming an unknown key or a value of the wrong type, and
        leaves the learner unchanged in that case.
        """
        new = replace_checked(self.config, changes)
        frozen = getattr(self, "structural_hparams", ())
        for key in changes:
            if key in frozen and getattr(new, key) != getattr(self.config, key):
                raise ValueError(
                    f"{key!r} fixes the network or buffer shapes; it cannot change live"
                )
        self.config = new
        self._apply_lr()

    def _apply_lr(self) -> None:
        for opt_name, opt in self.optimizers.items():
            lr = getattr(self.config, f"{opt_name}_lr", None) or getattr(self.config, "lr", None)
            if lr is not None:
                for group in opt.param_groups:
                    group["lr"] = lr

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers and extras: plain tensors and numbers only (weights_only-safe)."""
        return {
            "modules": {k: m.state_dict() for k, m in self.modules.items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` produced; raises on a mismatched architecture."""
        missing = set(self.modules) - set(state.get("modules", {}))
        if missing:
            raise ValueError(f"state has no weights for {sorted(missing)}")
        for k, m in self.modules.items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers.items():
            if k in state.get("optimizers", {}):
                # this pod's own flags (capturable on CUDA, not on CPU), whatever device
                # the checkpoint's optimizer ran on
                keep = [
                    {f: g[f] for f in ("capturable", "fused") if f in g} for g in o.param_groups
                ]
                o.load_state_dict(state["optimizers"][k])
                for group, flags in zip(o.param_groups, keep, strict=True):
                    group.update(flags)
                    on_device = bool(group.get("capturable") or group.get("fused"))
                    for p in group["params"]:
                        st = o.state.get(p)
                        if st and torch.is_tensor(st.get("step")):
                            where = p.device if on_device else "cpu"
                            st["step"] = st["step"].to(where, torch.float32)
        if "generator" in state:
            self.generator.set_state(state["generator"].cpu())
        self._apply_lr()


REGISTRY: dict[str, type[Learner]] = {}
"""Every algorithm usable by name, filled by :mod:`elegantpod.agents` (its ``ALGOS`` is
this dict): here, so that a learner's own messages can name the others without importing
the package that imports it."""


def _never() -> bool:
    """The :attr:`Learner.should_stop` of a learner outside a running pod."""
    return False
