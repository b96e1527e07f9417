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

import collections
import threading
import warnings
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import gymnasium
import torch

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


class TorchVecEnv:
    """Base class of native batched envs: time limits, episode statistics, auto-reset.

    Subclasses keep their physical state in ``self.state``, laid out *feature-major*
    (``(state_dim, num_envs)``) so each state variable is one contiguous row: elementwise
    kernels then run on contiguous memory, which is what makes a step cheap on CPU and
    coalesced on GPU. They implement three vectorized hooks; this class settles the
    protocol once. Persistent tensors are replaced, never mutated in place, so an env
    works both inside and outside ``torch.inference_mode()``.

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
        Run ``dynamics`` through ``torch.compile``. ``None`` (default): on CUDA devices
        only, where it was measured to pay (1.07x at 4,096 and 1.41x at 262,144 CartPole
        sub-envs on an H200, ``benchmarks/results/gpu_throughput.json``); on CPUs it did
        not. The compiled function is shared in the process by every env of the same
        class, size and device (see :func:`compiled_dynamics`), so a rebuilt env does
        not compile again. If compiling fails (no Triton, no C compiler), the env warns
        once and runs eagerly, as do later envs of that class, size and device.
    """

    env_id: str = ""
    default_max_episode_steps: int | None = None
    state_dim: int = 0

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        compile: bool | None = None,
    ) -> None:
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs!r}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps or self.default_max_episode_steps
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else int(seed))
        n, dev = self.num_envs, self.device
        self.state = torch.zeros(self.state_dim, n, device=dev)
        self.elapsed = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        # A host sync to find finished rows is cheap on CPU and saves sampling noise for
        # every row; on accelerators a branch-free select avoids the sync instead.
        self._sparse_reset = self.device.type == "cpu"
        self._needs_reset = True
        use_compile = self.device.type == "cuda" if compile is None else bool(compile)
        self._compile_key = (type(self), self.num_envs, str(self.device))
        compiled = compiled_dynamics(*self._compile_key) if use_compile else None
        self._dynamics = compiled if compiled is not None else self.dynamics

    # -- hooks for subclasses -------------------------------------------------------
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

    def _observe(self, state: Tensor) -> Tensor:
        """Map ``(state_dim, n)`` states to ``(n, obs_dim)`` observations."""
        return state.T

    # -- the protocol -----------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every sub-env and return the first observations."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        with torch.no_grad():
            self.state = self._sample_initial_state(self.num_envs)
            self.elapsed = torch.zeros_like(self.elapsed)
            self.episode_return = torch.zeros_like(self.episode_return)
        self._needs_reset = False
        return self._observe(self.state)

    @torch.no_grad()
    def step(self, action: Tensor) -> StepResult:
        """Advance all sub-envs; finished ones restart in the same step."""
        if self._needs_reset:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        next_state, reward, terminated = self._step_dynamics(self.state, action)
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

    def _step_dynamics(self, state: Tensor, action: Tensor):
        try:
            return self._dynamics(state, action)
        except Exception as exc:  # compile-time failures surface on the first call
            if self._dynamics is self.dynamics:
                raise
            warnings.warn(
                f"{self.env_id}: torch.compile failed ({type(exc).__name__}: {exc}); "
                "running the dynamics eagerly",
                RuntimeWarning,
                stacklevel=3,
            )
            self._dynamics = self.dynamics
            _mark_failed(self._compile_key)
            return self._dynamics(state, action)

    def close(self) -> None:
        """Native envs hold no external resources."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"


ENTRIES_PER_SIZE = 2
"""Compiled graphs one env size may need: a step runs with plain tensors (the state after
``reset``) and with inference tensors (in a rollout), and dynamo compiles each apart."""

_compiled: dict[tuple[type, int, str], Callable | None] = {}
_compiled_lock = threading.Lock()


def compiled_dynamics(cls: type[TorchVecEnv], num_envs: int, device: str) -> Callable | None:
    """The process's one compiled ``cls.dynamics`` for ``num_envs`` sub-envs on ``device``.

    Built on first request and shared by every later env of that class, size and device,
    so that rebuilding a pod (a tournament segment) reuses it instead of compiling again.
    ``None`` once compiling it failed here: such envs run eagerly.

    Dynamo keeps every compiled graph of one function under one code object and, past
    ``torch._dynamo.config.recompile_limit`` (8) graphs, runs new shapes eagerly (with
    one warning). Pods of several sizes in one process (training envs, evaluators of other
    episode counts) pass that, so the limit is raised here to fit each size and device
    this process asked for, :data:`ENTRIES_PER_SIZE` graphs each, and never lowered.
    """
    key = (cls, int(num_envs), str(device))
    with _compiled_lock:
        if key not in _compiled:
            _compiled[key] = torch.compile(cls.dynamics, dynamic=False)
            _raise_recompile_limits()
        return _compiled[key]


def _raise_recompile_limits() -> None:
    import torch._dynamo.config as dynamo

    per_class = collections.Counter(cls for cls, _, _ in _compiled)
    need = ENTRIES_PER_SIZE * max(per_class.values()) + 8  # 8: torch's own default
    total = ENTRIES_PER_SIZE * len(_compiled) + 256  # 256: torch's own default
    # torch < 2.7 spells the limits cache_size_limit and accumulated_cache_size_limit
    old = not hasattr(dynamo, "recompile_limit")
    for name, value in (("recompile_limit", need), ("accumulated_recompile_limit", total)):
        name = name.replace("recompile", "cache_size") if old else name
        setattr(dynamo, name, max(getattr(dynamo, name), value))


def _mark_failed(key: tuple[type, int, str]) -> None:
    """Later envs of ``key`` run eagerly rather than fail to compile again (seconds each)."""
    with _compiled_lock:
        _compiled[key] = None
