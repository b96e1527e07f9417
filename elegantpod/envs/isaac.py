"""Adapter: an Isaac Gym ``VecTask`` (IsaacGymEnvs' calling convention) -> our VecEnv.

The convention adapted is the one of IsaacGymEnvs' ``VecTask``:

- ``task.reset() -> {"obs": (num_envs, num_obs)}`` is meant to be called once at start; it
  returns the observation buffer as it is and resets nothing. The buffers start with
  ``reset_buf = 1`` everywhere, so the first ``step`` restarts every sub-env.
- ``task.step(actions) -> (obs_dict, rew, reset_buf, extras)``: actions are normalized to
  ``[-1, 1]`` (the task scales them to torques or targets itself, after clipping them to
  ``±clip_actions``); ``reset_buf`` flags sub-envs whose episode ended in this step, and
  ``extras["time_outs"]`` those of them that hit ``max_episode_length``. All tensors live
  on ``rl_device`` (the GPU).
- **Next-step reset.** A flagged sub-env is restarted inside the *following* ``step``
  (``post_physics_step`` calls ``reset_idx(env_ids)``, then ``compute_observations``): in
  that step its action falls on the finished episode and its reward is meaningless, and
  the step returns the new episode's first observation. The observation returned with
  the flag is therefore the true last observation of the finished episode.

elegantpod settles on same-step auto-reset (:mod:`elegantpod.envs.base`). A step-only
conversion cannot produce it: the new episode's first observation exists only after
another ``task.step``, which would also advance every other sub-env. So the adapter does
what the task's ``post_physics_step`` would do one step later, right away: after each
``task.step`` it calls ``task.reset_idx`` on the finished sub-envs (which clears their
``reset_buf`` and ``progress_buf``, so the task never resets them again) and reads their
first observation (``task.compute_observations()`` when the task has it, then
``task.obs_buf`` clipped to ``±clip_obs``, as ``VecTask.step`` reports it). No step is
wasted and no meaningless reward reaches a learner. Episodes then last at most
``max_episode_length - 1`` steps, as the IsaacGymEnvs tasks count them.

Finishing flags split into ``truncated = reset_buf & time_outs`` and ``terminated = reset_buf
& ~time_outs``: an episode that terminates in its last allowed step is reported truncated,
since ``time_outs`` cannot tell the two apart. Learners send actions within
``action_space``, which is the task's declared Box; the adapter maps it linearly onto
``[-1, 1]`` (the identity for the usual ``Box(-1, 1)``; dimensions declared unbounded get
``[-1, 1]`` and pass unchanged).

Everything stays on the task's device; episode statistics, ``final_obs`` and the
terminated/truncated split are tensor ops. The one host sync per step is the
``nonzero()`` that lists the finished sub-envs for ``reset_idx`` (an index API), the same
sync the task's own ``post_physics_step`` makes.

``isaacgym`` is not on PyPI and is imported only by :func:`make_isaac_env`;
:class:`IsaacVecEnv` wraps any object that follows the convention.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from typing import Any

import gymnasium
import numpy as np
import torch

from elegantpod.envs.base import StepResult, Tensor
from elegantpod.envs.limits import check_num_envs, check_seed

ISAAC_GYM_HELP = (
    "Isaac Gym is not on PyPI: download Isaac Gym Preview 4 from NVIDIA "
    "(https://developer.nvidia.com/isaac-gym), install it with `pip install -e "
    "isaacgym/python`, then install IsaacGymEnvs (github.com/isaac-sim/IsaacGymEnvs) with "
    "`pip install -e .`. NVIDIA's bindings are built for Python 3.6-3.8 only. Any task that "
    "follows the VecTask convention can also be wrapped directly: IsaacVecEnv(task)."
)


class IsaacVecEnv:
    """Wrap an Isaac Gym ``VecTask``-style task as a torch VecEnv (same-step auto-reset).

    Parameters
    ----------
    task
        An object with IsaacGymEnvs' ``VecTask`` interface: ``num_envs``, ``step``,
        ``reset``, ``reset_idx(env_ids)``, ``obs_buf``; optionally ``num_obs``,
        ``num_actions``, ``observation_space``, ``action_space``, ``max_episode_length``,
        ``rl_device``, ``device``, ``clip_obs``, ``compute_observations()``.
    env_id
        Name reported as ``env_id`` (default ``"isaacgym/<task class>"``).
    recompute_obs
        Call ``task.compute_observations()`` after restarting finished sub-envs, as the
        task's own ``post_physics_step`` does after ``reset_idx``. Turn it off for a task
        whose ``reset_idx`` already writes ``obs_buf``, or whose ``compute_observations``
        has side effects (observation history, noise) that must run once per step.
    """

    def __init__(self, task: Any, *, env_id: str | None = None, recompute_obs: bool = True):
        self.task = task
        self.num_envs = int(task.num_envs)
        self.device = torch.device(getattr(task, "rl_device", None) or task.device)
        self.task_device = torch.device(getattr(task, "device", None) or self.device)
        self.env_id = env_id or f"isaacgym/{type(task).__name__}"
        self.observation_space = _observation_space(task)
        self.action_space, center, half = _action_mapping(task)
        is_identity = bool(np.all(center == 0.0) and np.all(half == 1.0))
        self._center = None if is_identity else torch.as_tensor(center, device=self.device)
        self._half = None if is_identity else torch.as_tensor(half, device=self.device)
        length = getattr(task, "max_episode_length", None)
        self.max_episode_steps = int(length) if length is not None else None
        """An upper bound: IsaacGymEnvs tasks end episodes after ``max_episode_length - 1``."""
        self.recompute_obs = bool(recompute_obs) and callable(
            getattr(task, "compute_observations", None)
        )
        clip = getattr(task, "clip_obs", math.inf)
        self._clip_obs = math.inf if clip is None else float(clip)
        n = self.num_envs
        self.episode_return = torch.zeros(n, device=self.device)
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._has_started = False
        self._is_ready = False
        self._is_closed = False

    # -- conversions ------------------------------------------------------------------
    def _to_task(self, action: Tensor) -> Tensor:
        a = torch.as_tensor(action).to(self.device, torch.float32)
        a = a.reshape(self.num_envs, *self.action_space.shape)
        if self._center is not None:
            a = (a - self._center) / self._half
        return a

    def _obs_tensor(self, obs: Any) -> Tensor:
        if not isinstance(obs, Tensor):
            raise TypeError(
                f"{self.env_id}: obs_dict['obs'] must be a tensor, got {type(obs).__name__} "
                "(dict observations are not supported)"
            )
        # clone: a task may hand out its own buffer and overwrite it in the next step
        return obs.to(self.device, torch.float32).reshape(self.num_envs, -1).clone()

    def _first_obs(self) -> Tensor:
        """Observations of restarted sub-envs, read as ``VecTask.step`` would report them."""
        if self.recompute_obs:
            self.task.compute_observations()
        obs = self.task.obs_buf
        if math.isfinite(self._clip_obs):
            obs = torch.clamp(obs, -self._clip_obs, self._clip_obs)
        return self._obs_tensor(obs)

    # -- the protocol -------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Restart every sub-env and return the first observations.

        Isaac Gym tasks draw their reset noise from torch's global RNG, so a ``seed``
        reseeds it (``torch.manual_seed``), as ``isaacgymenvs.make(seed=...)`` does.
        """
        if self._is_closed:
            raise RuntimeError(f"{self.env_id}: the env is closed")
        if seed is not None:
            torch.manual_seed(int(seed))
        if not self._has_started:
            self.task.reset()  # VecTask's one-time start call (rl_games makes it too)
            self._has_started = True
        self.task.reset_idx(torch.arange(self.num_envs, device=self.task_device))
        obs = self._first_obs()
        self.episode_return = torch.zeros_like(self.episode_return)
        self.episode_length = torch.zeros_like(self.episode_length)
        self._is_ready = True
        return obs

    def step(self, action: Tensor) -> StepResult:
        """Step all sub-envs; finished ones restart in the same step (see module doc)."""
        if not self._is_ready:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        obs_dict, reward, reset_buf, extras = self.task.step(self._to_task(action))
        n = self.num_envs
        final_obs = self._obs_tensor(obs_dict["obs"])
        reward = reward.to(self.device, torch.float32).reshape(n).clone()
        done = reset_buf.to(self.device).reshape(n) != 0
        time_outs = (extras or {}).get("time_outs")
        if time_outs is None:
            truncated = torch.zeros_like(done)
        else:
            truncated = done & (time_outs.to(self.device).reshape(n) != 0)
        terminated = done & ~truncated
        episode_return = self.episode_return + reward
        episode_length = self.episode_length + 1
        info = {
            "final_obs": final_obs,
            "episode_return": episode_return,
            "episode_length": episode_length,
        }
        self.episode_return = episode_return.masked_fill(done, 0.0)
        self.episode_length = episode_length.masked_fill(done, 0)
        obs = final_obs
        env_ids = done.nonzero().squeeze(-1)  # the step's one host sync: reset_idx takes ids
        if env_ids.numel():
            self.task.reset_idx(env_ids.to(self.task_device))
            obs = torch.where(done.unsqueeze(-1), self._first_obs(), final_obs)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Release the task's simulation (``task.close()``, else its viewer and sim)."""
        if self._is_closed:
            return
        self._is_closed = True
        self._is_ready = False
        task = self.task
        if callable(getattr(task, "close", None)):
            task.close()
            return
        gym = getattr(task, "gym", None)
        if gym is None:
            return
        if getattr(task, "viewer", None) is not None:
            gym.destroy_viewer(task.viewer)
        if getattr(task, "sim", None) is not None:
            gym.destroy_sim(task.sim)

    def __repr__(self) -> str:
        return f"IsaacVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={self.device})"


def _observation_space(task: Any) -> gymnasium.spaces.Box:
    """The task's observation Box as a gymnasium float32 Box."""
    space = getattr(task, "observation_space", None)
    if space is not None and getattr(space, "shape", None):
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float32), space.shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float32), space.shape)
        return gymnasium.spaces.Box(low, high, tuple(space.shape), np.float32)
    return gymnasium.spaces.Box(-np.inf, np.inf, (int(task.num_obs),), np.float32)


def _action_mapping(task: Any) -> tuple[gymnasium.spaces.Box, np.ndarray, np.ndarray]:
    """The Box learners act in, and ``center``, ``half`` with ``task action = (a - center) /
    half`` in ``[-1, 1]``. Unbounded dimensions become ``[-1, 1]`` (identity)."""
    space = getattr(task, "action_space", None)
    if space is not None and getattr(space, "shape", None):
        shape = tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), shape)
    else:
        shape = (int(task.num_actions),)
        low, high = np.full(shape, -1.0), np.full(shape, 1.0)
    bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
    low = np.where(bounded, low, -1.0).astype(np.float32)
    high = np.where(bounded, high, 1.0).astype(np.float32)
    center = (high + low) / 2
    half = (high - low) / 2
    return gymnasium.spaces.Box(low, high, shape, np.float32), center, half


def _import_isaacgym() -> None:
    """Import ``isaacgym`` or raise an ``ImportError`` that says how to get it working."""
    try:
        is_installed = importlib.util.find_spec("isaacgym") is not None
    except (ImportError, ValueError):
        is_installed = False
    if not is_installed:
        raise ImportError(
            f"make_isaac_env needs NVIDIA Isaac Gym, which is not installed. {ISAAC_GYM_HELP}"
        )
    try:
        importlib.import_module("isaacgym")
        importlib.import_module("isaacgym.gymapi")
    except ImportError as exc:
        if "before isaacgym" in str(exc):
            raise ImportError(
                "Isaac Gym must be imported before torch: put `import isaacgym` first in the "
                "script or notebook, above `import torch` and `import elegantpod`."
            ) from exc
        raise ImportError(
            f"Isaac Gym is installed but failed to load: {exc}. {ISAAC_GYM_HELP}"
        ) from exc
    except Exception as exc:  # e.g. RuntimeError: no bindings for this Python version
        raise ImportError(
            f"Isaac Gym is installed but failed to load: {exc}. {ISAAC_GYM_HELP}"
        ) from exc


def make_isaac_env(
    task_name: str,
    num_envs: int,
    device: str | torch.device = "cuda:0",
    seed: int = 0,
    *,
    headless: bool = True,
    recompute_obs: bool = True,
    **make_kwargs: Any,
) -> IsaacVecEnv:
    """Build an IsaacGymEnvs task (``"Ant"``, ``"Humanoid"``, ``"Cartpole"``...) as a VecEnv.

    Parameters
    ----------
    task_name
        IsaacGymEnvs task name.
    num_envs
        Sub-envs simulated together on the device.
    device
        Simulation and RL device (``sim_device`` and ``rl_device`` of IsaacGymEnvs).
    seed
        Seed handed to ``isaacgymenvs.make``.
    headless
        No viewer window.
    recompute_obs
        See :class:`IsaacVecEnv`.
    **make_kwargs
        Forwarded to ``isaacgymenvs.make`` (``cfg``, ``graphics_device_id``...).

    Raises
    ------
    ImportError
        When Isaac Gym or IsaacGymEnvs is missing or cannot load; the message says how to
        get it (Isaac Gym comes from NVIDIA's download page, not from PyPI).
    """
    num_envs = check_num_envs(num_envs)
    seed = check_seed(seed) or 0
    _import_isaacgym()
    try:
        isaacgymenvs = importlib.import_module("isaacgymenvs")
    except ImportError as exc:
        raise ImportError(f"make_isaac_env needs IsaacGymEnvs: {exc}. {ISAAC_GYM_HELP}") from exc
    dev = str(torch.device(device))
    task = isaacgymenvs.make(
        seed=seed,
        task=task_name,
        num_envs=num_envs,
        sim_device=dev,
        rl_device=dev,
        headless=headless,
        **make_kwargs,
    )
    return IsaacVecEnv(task, env_id=f"isaacgym/{task_name}", recompute_obs=recompute_obs)
