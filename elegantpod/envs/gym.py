"""Adapter: any gymnasium env id or gymnasium vector env -> elegantpod's VecEnv.

gymnasium 1.x vector envs auto-reset on the *next* step by default: the step after an
episode ends ignores the action and returns the reset observation. elegantpod settles
on *same-step* auto-reset (see :mod:`elegantpod.envs.base`). Envs built here from an id
ask gymnasium for ``SAME_STEP`` directly; a vector env handed in with ``NEXT_STEP`` or
``DISABLED`` is converted by resetting the finished sub-envs at once with
``reset(options={"reset_mask": done})``, which also cancels gymnasium's pending reset.

Tensors are float32 whatever the env computes in: MuJoCo envs observe in float64, and
``observation_space`` is reported as the float32 Box that the returned tensors fill.
Actions are passed on as they come (learners already send them within the Box bounds),
cast to the action space's dtype.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from elegantpod.envs.base import StepResult, Tensor, check_num_envs, check_seed

FILE_KWARGS = ("xml_file",)
"""gymnasium keywords whose values name a file the env reads (every MuJoCo env's model).
An error building an env with one never shows its text, which could quote the file."""


def withheld(env_id: str, key: str, value: Any, exc: BaseException, how: str) -> str:
    """An error message for a failed env build from a file keyword, without the error's
    text: MuJoCo's XML parser quotes the file it read (``Element 'secret...'``)."""
    shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:200] + "..."
    return (
        f"could not build {env_id!r} with {key}={shown}: {type(exc).__name__} while reading "
        f"or using it (its message is not shown, as it may quote the file; {how})"
    )


class GymVecEnv:
    """Wrap a gymnasium vector env (or build one from an id) as a torch VecEnv.

    Parameters
    ----------
    env
        A gymnasium env id (``"LunarLander-v3"``) or a ready ``gymnasium.vector.VectorEnv``.
    num_envs
        Sub-envs to create when ``env`` is an id; ignored for a ready vector env.
    device
        Device of the returned tensors. Simulation itself runs where gymnasium runs it.
    seed
        Seed for the first ``reset``.
    vectorization_mode
        ``"sync"`` (one process) or ``"async"`` (one process per sub-env; pays off only
        when a single step is expensive and there are cores to spare: MuJoCo on many
        cores, not on two; ``benchmarks/README.md``, ``worker_parallelism.py``).
    vector_kwargs
        Options of gymnasium's vector env, e.g. ``{"context": "forkserver"}`` for async
        workers started without ``fork`` (safer from a multi-threaded process).
        ``autoreset_mode`` is always ``SAME_STEP``.
    **make_kwargs
        Forwarded to ``gymnasium.make_vec``.
    """

    def __init__(
        self,
        env: str | VectorEnv,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        vectorization_mode: str = "sync",
        vector_kwargs: dict[str, Any] | None = None,
        **make_kwargs: Any,
    ) -> None:
        seed = check_seed(seed)
        if seed is not None and seed < 0:
            raise ValueError(f"gymnasium's envs take seeds >= 0, got {seed}")
        if isinstance(env, str):
            num_envs = check_num_envs(num_envs)
            if vectorization_mode not in ("sync", "async"):
                raise ValueError(
                    f"vectorization_mode must be 'sync' or 'async', got {vectorization_mode!r}"
                )
            if vectorization_mode == "async" and multiprocessing.current_process().daemon:
                # Dask's worker processes are daemonic by default, and a daemonic process
                # may not start children: say so instead of multiprocessing's bare assert.
                raise RuntimeError(
                    "vectorization_mode='async' starts one process per sub-env, which a "
                    "daemonic process (a Dask worker by default) cannot do: start the "
                    "workers with dask.config.set({'distributed.worker.daemon': False}), "
                    "or use vectorization_mode='sync'"
                )
            self.env_id = env
            files = [k for k in FILE_KWARGS if make_kwargs.get(k) is not None]
            try:
                self.vec = gymnasium.make_vec(
                    env,
                    num_envs=num_envs,
                    vectorization_mode=vectorization_mode,
                    vector_kwargs={
                        **(vector_kwargs or {}),
                        "autoreset_mode": AutoresetMode.SAME_STEP,
                    },
                    **make_kwargs,
                )
            except Exception as exc:
                # a missing package or a wrong keyword: messages that quote no file
                is_plain = isinstance(exc, gymnasium.error.DependencyNotInstalled) or (
                    isinstance(exc, TypeError) and "keyword argument" in str(exc)
                )
                if is_plain or not files:
                    raise
                how = f"gymnasium.make({env!r}, {files[0]}=...) shows it"
                raise ValueError(withheld(env, files[0], make_kwargs[files[0]], exc, how)) from None
        elif isinstance(env, VectorEnv):
            self.vec = env
            spec = getattr(env, "spec", None)
            self.env_id = getattr(spec, "id", None) or type(env).__name__
        else:
            raise TypeError(
                f"env must be a gymnasium id or a gymnasium.vector.VectorEnv, got {type(env)!r}"
            )
        self.num_envs = self.vec.num_envs
        self.device = torch.device(device)
        self.observation_space = _float32_box(self.vec.single_observation_space)
        self.action_space = self.vec.single_action_space
        mode = self.vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode)
        spec = getattr(self.vec, "spec", None)
        self.max_episode_steps = getattr(spec, "max_episode_steps", None)
        self._seed = seed
        self._is_discrete = isinstance(self.action_space, gymnasium.spaces.Discrete)
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._last_obs: np.ndarray | None = None

    def _tensor(self, x: np.ndarray, dtype=torch.float32) -> Tensor:
        return torch.as_tensor(np.asarray(x), dtype=dtype).to(self.device)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset all sub-envs (seeded ``seed, seed+1, ...`` when a seed is given)."""
        seed = self._seed if seed is None else seed
        obs, _ = self.vec.reset(seed=seed)
        self._seed = None  # later resets continue the sub-envs' own RNG streams
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self._last_obs = np.array(obs, copy=True)
        return self._tensor(obs)

    def step(self, action: Tensor) -> StepResult:
        """Step all sub-envs with same-step auto-reset and ``info["final_obs"]``."""
        if self._last_obs is None:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        act = action.detach().cpu().numpy() if isinstance(action, Tensor) else np.asarray(action)
        if self._is_discrete:
            act = act.reshape(self.num_envs).astype(np.int64)
        else:
            act = act.reshape((self.num_envs, *self.action_space.shape))
            act = act.astype(self.action_space.dtype, copy=False)
        obs, reward, terminated, truncated, info = self.vec.step(act)
        reward = np.asarray(reward, dtype=np.float64)
        done = np.logical_or(terminated, truncated)
        final_obs = np.array(obs, copy=True)
        if done.any():
            if self.autoreset_mode == AutoresetMode.SAME_STEP:
                mask = info.get("_final_obs", done)
                final_obs[mask] = np.stack(info["final_obs"][mask])
            else:
                # NEXT_STEP / DISABLED: obs already is the final one; start the next
                # episode now so this step returns its first observation.
                reset_obs, _ = self.vec.reset(options={"reset_mask": done})
                obs = np.where(done.reshape(-1, *([1] * (obs.ndim - 1))), reset_obs, obs)
        self._returns += reward
        self._lengths += 1
        ep_return, ep_length = self._returns.copy(), self._lengths.copy()
        self._returns[done] = 0.0
        self._lengths[done] = 0
        self._last_obs = obs
        out_info = {
            "final_obs": self._tensor(final_obs),
            "episode_return": self._tensor(ep_return),
            "episode_length": self._tensor(ep_length, torch.int64),
        }
        return (
            self._tensor(obs),
            self._tensor(reward),
            self._tensor(terminated, torch.bool),
            self._tensor(truncated, torch.bool),
            out_info,
        )

    def close(self) -> None:
        """Close the underlying gymnasium env (ends worker processes of async envs)."""
        self.vec.close()

    def __repr__(self) -> str:
        return f"GymVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={self.device})"


def _float32_box(space: gymnasium.spaces.Space) -> gymnasium.spaces.Space:
    """A float Box as the float32 Box our tensors fill (other spaces unchanged)."""
    if not isinstance(space, gymnasium.spaces.Box) or space.dtype == np.float32:
        return space
    if not np.issubdtype(space.dtype, np.floating):
        return space
    low, high = space.low.astype(np.float32), space.high.astype(np.float32)
    return gymnasium.spaces.Box(low, high, space.shape, np.float32)
