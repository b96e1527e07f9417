"""The batched-environment protocol and its same-step auto-reset semantics.

Every environment in elegantpod, native or adapted, speaks one protocol so that workers,
evaluators and buffers never special-case where an env came from:

- ``reset(seed) -> obs`` and ``step(action) -> (obs, reward, terminated, truncated, info)``;
  all values are torch tensors with leading size ``num_envs`` on ``env.device``.
- **Same-step auto-reset.** A sub-env whose episode ends in a step returns, in ``obs``,
  the first observation of its next episode. The last observation of the finished
  episode is kept in ``info["final_obs"]``, a full ``(num_envs, *obs_shape)`` tensor that
  holds the true next observation of *every* sub-env (for unfinished ones it equals
  ``obs``). Learners bootstrap from it, so a truncated episode is valued correctly.
- ``info["episode_return"]`` and ``info["episode_length"]`` hold, in the rows where
  ``terminated | truncated``, the return and length of the episode that just ended.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, get_type_hints, runtime_checkable

import gymnasium
import torch

from elegantpod.envs.fused_step import (
    CPU_COMPILE_MIN_ENVS,
    compiled_step,
    is_capturing,
    is_resource_error,
    mark_failed,
    whole_step,
)
from elegantpod.envs.hooks import EnvHooks
from elegantpod.envs.limits import check_max_episode_steps, check_num_envs, check_seed

Tensor = torch.Tensor
StepResult = tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Any]]


@runtime_checkable
class VecEnv(Protocol):
    """What workers and evaluators need from a batched environment."""

    num_envs: int
    device: torch.device
    observation_space: gymnasium.spaces.Space
    """Space of one sub-env's observation."""
    action_space: gymnasium.spaces.Space
    """Space of one sub-env's action."""
    max_episode_steps: int | None
    env_id: str

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every sub-env (reseeded when ``seed`` is given); the first observations."""
        ...

    def step(self, action: Tensor) -> StepResult:
        """Step every sub-env; finished ones restart in the same step, keeping
        ``info["final_obs"]`` for bootstrapping."""
        ...

    def close(self) -> None:
        """Release what the env holds (processes, simulators); native envs hold nothing."""
        ...


class EnvCarry(NamedTuple):
    """The tensors a native env's step replaces and the next step reads (its carry).

    Public so that code which must hold them in place (CUDA-graph capture, which copies
    them into the graph's own memory and back) needs no private field of the env.
    """

    state: Tensor
    elapsed: Tensor
    episode_return: Tensor
    draws: Tensor
    """How many reset-noise draws the fused step made since its key was drawn."""
    reset_key: Tensor
    """The key of the fused step's counter-based reset noise."""


# The constructor NamedTuple makes holds the annotations as unresolved strings (this
# module's ``from __future__ import annotations``): resolved here, so that the docs build
# (pdoc) and typing.get_type_hints(EnvCarry.__new__) can read them.
EnvCarry.__new__.__annotations__ = get_type_hints(EnvCarry)


class TorchVecEnv(EnvHooks):
    """Base class of native batched envs: time limits, episode statistics, auto-reset.

    Subclasses keep their physical state in ``self.state``, laid out *feature-major*
    (``(state_dim, num_envs)``) so each state variable is one contiguous row: elementwise
    kernels then run on contiguous memory, which is what makes a step cheap on CPU and
    coalesced on GPU. A subclass writes its physics as a few vectorized hooks; this
    class settles the protocol once. Persistent tensors are replaced, never mutated in
    place, so an env works both inside and outside ``torch.inference_mode()``.

    What a subclass writes (the native envs of :mod:`~elegantpod.envs.classic` are
    examples):

    - **must** set ``state_dim``, the rows of ``self.state`` (class attribute);
    - **must** implement :meth:`dynamics`, a classmethod and a pure function:
      ``(next_state, reward, terminated)`` from ``state`` and ``action``, constants from
      the class, ``state`` itself left unchanged;
    - **must** implement :meth:`_sample_initial_state`, ``n`` initial states
      ``(state_dim, n)`` drawn with ``self.generator`` alone, so that ``reset(seed)``
      repeats them (:class:`~elegantpod.envs.classic.UniformReset` provides it, and
      :attr:`initial_state`, for a uniform box);
    - **must** define ``__init__`` taking ``num_envs``, ``device``, ``seed`` (and
      ``max_episode_steps``, ``compile`` and keywords of its own, a pod's
      ``env_kwargs``), calling ``super().__init__`` with them first and then setting
      ``observation_space`` and ``action_space``, the spaces of one sub-env.

    What it **may** override: ``env_id`` (the name in messages; the registry finds a
    registered class by the id given to
    :func:`~elegantpod.envs.registry.register_env`), ``default_max_episode_steps``
    (``None``: no time limit), ``path_kwargs``; :meth:`observe` (default: the
    transposed state); :attr:`initial_state` (lets the fused step draw reset states
    inside its compiled region); :meth:`close`, for an env that holds something to
    release; and the classmethods of :class:`~elegantpod.envs.hooks.EnvHooks` that
    generic code (tournaments, the registry, the CLI) asks an env class found by id:
    ``baselines`` (what doing nothing scores), ``leaderboard_columns`` and
    ``leaderboard_notes`` (extra leaderboard columns, explained) and ``shipped_values``
    (file keyword values that name shipped data). Their defaults add nothing.

    What it **must not** override or assign: :meth:`reset`, :meth:`step`,
    :meth:`carry`, :meth:`set_carry` and :attr:`fused` (the protocol and the carry that
    CUDA-graph capture holds in place), the step machinery behind them (``_fused_step``,
    ``_call_step``, ``_observe``, ``_new_reset_stream``), and the tensors they carry
    (``state``, ``elapsed``, ``episode_return``), which the step replaces each call.

    Parameters
    ----------
    num_envs
        Number of sub-environments simulated in lock-step.
    device
        Torch device that holds state and returns tensors.
    seed
        Seed of the env's own ``torch.Generator`` (reset noise); ``reset(seed)`` reseeds.
    max_episode_steps
        Time limit; reaching it sets ``truncated`` (as gymnasium's ``TimeLimit`` does,
        also when the episode terminates in that same step). ``None``: class default.
    compile
        Run the whole step (dynamics, reward, termination, time limit, episode
        statistics and the auto-reset) as one ``torch.compile`` region: one fused kernel
        on CUDA, one vectorized C++ loop on CPU, in place of some thirty small eager ops
        whose per-op dispatch, not arithmetic, is what a step costs. ``None`` (default):
        on CUDA, and on CPU from
        :data:`~elegantpod.envs.fused_step.CPU_COMPILE_MIN_ENVS` sub-envs, where it
        pays (``benchmarks/README.md``, ``env_throughput.py``); smaller CPU envs run
        eagerly, as compiling costs seconds that a small, short run never earns back.
        The compiled step is shared in the process by every env of the same class, size
        and device (see :func:`~elegantpod.envs.fused_step.compiled_step`), so a rebuilt
        env does not compile again. If compiling fails (no Triton, no C compiler), the
        env warns once and runs the same step uncompiled (same numbers), as do later
        envs of that class, size and device.

        A compiled step draws reset noise for every row each step and keeps it where an
        episode ended (branch-free, no host sync), as eager steps on accelerators do;
        eager CPU steps draw it only for the rows that ended. Both are seeded by
        ``seed``, but the streams differ, so a compiled and an eager CPU env of one seed
        start their *second* episodes from different states.
    """

    env_id: str = ""
    default_max_episode_steps: int | None = None
    state_dim: int = 0
    path_kwargs: tuple[str, ...] = ()
    """Keywords whose values name files the env reads: a checkpoint or store that sets
    one is refused unless the user passes the same value (see
    :func:`~elegantpod.envs.registry.external_sources`)."""

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        compile: bool | None = None,
    ) -> None:
        self.num_envs = check_num_envs(num_envs)
        seed = check_seed(seed)
        max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps or self.default_max_episode_steps
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)
        n, dev = self.num_envs, self.device
        self.state = torch.zeros(self.state_dim, n, device=dev)
        self.elapsed = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        # keyed by reset(), after the first states, so that those stay the seed's first draws
        self._reset_key = torch.zeros((), dtype=torch.int64, device=dev)
        self._draws = torch.zeros((), dtype=torch.int64, device=dev)
        self._needs_reset = True
        if compile is None:
            on_cpu = self.device.type == "cpu"
            compile = not on_cpu or self.num_envs >= CPU_COMPILE_MIN_ENVS
        # The fused step (compiled, or its uncompiled twin after a failed compile) resets
        # densely. The plain eager step finds finished rows with a host sync on CPU,
        # where that is cheap and saves reset noise for rows that go on, and uses the
        # fused step's branch-free select on accelerators.
        self._fused = bool(compile)
        self._sparse_reset = self.device.type == "cpu" and not self._fused
        self._compile_key = (type(self), self.num_envs, str(self.device))
        compiled = compiled_step(*self._compile_key) if self._fused else None
        self._step_fn = compiled if compiled is not None else whole_step(type(self))

    @property
    def fused(self) -> bool:
        """Whether steps run as one fused region (compiled, or its uncompiled twin)."""
        return self._fused

    def carry(self) -> EnvCarry:
        """The tensors one step replaces and the next reads (see :class:`EnvCarry`)."""
        return EnvCarry(self.state, self.elapsed, self.episode_return, self._draws, self._reset_key)

    def set_carry(self, carry: EnvCarry) -> None:
        """Make the env step on from ``carry`` (tensors of the same shapes and devices;
        the env takes them as they are, without copying)."""
        self.state, self.elapsed, self.episode_return = (
            carry.state,
            carry.elapsed,
            carry.episode_return,
        )
        self._draws, self._reset_key = carry.draws, carry.reset_key

    def _new_reset_stream(self) -> None:
        """Key the fused step's counter-based reset noise from the env's generator."""
        self._reset_key = torch.randint(
            0, 2**32, (), generator=self.generator, device=self.device, dtype=torch.int64
        )
        self._draws = torch.zeros((), dtype=torch.int64, device=self.device)

    # -- hooks for subclasses -------------------------------------------------------
    initial_state: Callable[[Tensor], Tensor] | None = None
    """Optional classmethod mapping uniforms ``u`` in [0, 1), ``(state_dim, n)``, to
    initial states. Given it, the fused step draws reset noise inside its compiled region
    (a counter-based hash, :func:`~elegantpod.envs.noise.uniform_noise`), cheaper on
    CPU than the Mersenne Twister of a ``torch.Generator`` (``benchmarks/README.md``,
    ``env_throughput.py``); without it, the fused step calls
    :meth:`_sample_initial_state` for every row each step."""

    def _sample_initial_state(self, n: int) -> Tensor:
        """Return ``n`` fresh initial states, ``(state_dim, n)``, drawn with ``self.generator``."""
        raise NotImplementedError

    @classmethod
    def dynamics(cls, state: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Advance ``state`` by one step: return ``(next_state, reward, terminated)``.

        A pure function of its inputs (constants come from the class), so that it can be
        compiled once per class and checked against gymnasium in isolation.
        """
        raise NotImplementedError

    @classmethod
    def observe(cls, state: Tensor) -> Tensor:
        """Map ``(state_dim, n)`` states to ``(n, obs_dim)`` observations.

        A pure function of the state (like :meth:`dynamics`), so that the fused step
        computes observations inside its compiled region. The default, the transposed
        state, is a view and costs nothing.
        """
        return state.T

    def _observe(self, state: Tensor) -> Tensor:
        return type(self).observe(state)

    # -- the protocol -----------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every sub-env and return the first observations."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        with torch.no_grad():
            self.state = self._sample_initial_state(self.num_envs)
            if self._fused:  # eager steps keep drawing from the generator alone
                self._new_reset_stream()
            self.elapsed = torch.zeros_like(self.elapsed)
            self.episode_return = torch.zeros_like(self.episode_return)
        self._needs_reset = False
        return self._observe(self.state)

    @torch.no_grad()
    def step(self, action: Tensor) -> StepResult:
        """Advance all sub-envs; finished ones restart in the same step."""
        if self._needs_reset:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        if self._fused:
            return self._fused_step(action)
        next_state, reward, terminated = self.dynamics(self.state, action)
        elapsed = self.elapsed + 1
        episode_return = self.episode_return + reward
        if self.max_episode_steps is not None:
            truncated = elapsed >= self.max_episode_steps
            done = terminated | truncated
        else:
            truncated = torch.zeros_like(terminated)
            done = terminated
        info = {
            "final_obs": self._observe(next_state),
            "episode_return": episode_return,
            "episode_length": elapsed,
        }
        if self._sparse_reset:
            index = done.nonzero().squeeze(1)
            state = next_state.clone()
            if index.numel():
                state.index_copy_(1, index, self._sample_initial_state(index.numel()))
        else:
            fresh = self._sample_initial_state(self.num_envs)
            state = torch.where(done, fresh, next_state)
        self.state = state
        self.elapsed = elapsed.masked_fill(done, 0)
        self.episode_return = episode_return.masked_fill(done, 0.0)
        return self._observe(state), reward, terminated, truncated, info

    def _fused_step(self, action: Tensor) -> StepResult:
        if type(self).initial_state is None:  # the subclass draws its own reset states
            noise = self._sample_initial_state(self.num_envs)
        else:
            noise = self._reset_key
        args = (self.state, self.elapsed, self.episode_return, action, noise, self._draws)
        out = self._call_step(*args, self.max_episode_steps or 0)
        state, obs, final_obs, reward, terminated, truncated = out[:6]
        ret, length, self.elapsed, self.episode_return, self._draws = out[6:]
        self.state = state
        info = {"final_obs": final_obs, "episode_return": ret, "episode_length": length}
        # uint8 0/1 out of the kernel (bool stores vectorize badly on CPU), read as bool
        return obs, reward, terminated.view(torch.bool), truncated.view(torch.bool), info

    def _call_step(self, *args):
        try:
            return self._step_fn(*args)
        except Exception as exc:  # compile-time failures surface on the first call
            # Inside a CUDA-graph capture a (re)compile fails for reasons of the capture
            # (Inductor synchronizes, allocates, autotunes), not of this env: the
            # capture fails and its caller trains on eagerly; the compiled step stays.
            # An OOM or a CUDA error is the device's, not the compiler's: raised as it
            # is, and the size is not marked failed for the process.
            if self._step_fn is whole_step(type(self)) or is_capturing():
                raise
            if is_resource_error(exc):
                raise
            warnings.warn(
                f"{self.env_id}: torch.compile failed ({type(exc).__name__}: {exc}); "
                "running the step uncompiled",
                RuntimeWarning,
                stacklevel=4,
            )
            self._step_fn = whole_step(type(self))
            mark_failed(self._compile_key)
            return self._step_fn(*args)

    def close(self) -> None:
        """Native envs hold no external resources."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"
