"""MuJoCo locomotion on MJX: thousands of MuJoCo worlds per accelerator, from PyPI.

``make_env("Ant-v5", num_envs=4096, device="cuda", backend="mjx")`` builds an
:class:`MjxVecEnv`: gymnasium's v5 task (:mod:`elegantpod.envs.mjx.tasks`) simulated by
MuJoCo's JAX backend, MJX, for every sub-env at once, behind elegantpod's protocol
(same-step auto-reset with ``info["final_obs"]``, episode statistics, time limit).

Why JAX inside a torch library: MJX is MuJoCo's own GPU physics and installs from PyPI
(``pip install 'elegantpod[mjx]'``), where Isaac Gym does not. The whole env step (the
``frame_skip`` physics steps, contact forces, observation, reward, termination, time
limit, statistics, and the reset of finished worlds) is one jitted XLA program per env
size; torch and JAX exchange tensors through DLPack, which on a GPU shares the memory
(no copy) and orders the two libraries' streams.

This module is the torch side: the env class, its checks before anything compiles, and
the process's cache of compiled programs. The rest has a module each:

- :mod:`elegantpod.envs.mjx.setup`: JAX's settings made before it starts (no
  preallocation, no command buffers, one CPU thread), the private compilation cache,
  torch's devices as JAX's.
- :mod:`elegantpod.envs.mjx.step`: the jitted program and
  :class:`~elegantpod.envs.mjx.step.Run`, the carry.
- :mod:`elegantpod.envs.mjx.tasks`, :mod:`elegantpod.envs.mjx.params`,
  :mod:`elegantpod.envs.mjx.physics`, :mod:`elegantpod.envs.mjx.memory`: the tasks, their
  keywords checked, their models and physics options, and the memory of one world.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import gymnasium
import numpy as np
import torch

from elegantpod.envs.base import StepResult, Tensor
from elegantpod.envs.limits import check_max_episode_steps, check_num_envs, check_seed
from elegantpod.envs.mjx.params import task_params
from elegantpod.envs.mjx.physics import load_model
from elegantpod.envs.mjx.setup import (
    NO_COMMAND_BUFFERS,
    check_installed,
    jax_device,
)

# _Program calls it through this module, where a test stands in for it
from elegantpod.envs.mjx.setup import setup_jax as _setup_jax
from elegantpod.envs.mjx.step import Run, make_functions
from elegantpod.envs.mjx.tasks import TASKS, Task

__all__ = ["MjxVecEnv", "check_memory"]


class MjxVecEnv:
    """A gymnasium v5 MuJoCo locomotion task on MJX, as a batched torch env.

    Parameters
    ----------
    env_id
        ``"Ant-v5"``, ``"Humanoid-v5"``, ``"Hopper-v5"`` or ``"HalfCheetah-v5"``.
    num_envs
        Worlds simulated in lock-step (thousands per GPU; a few on a CPU, where MJX is
        slower than gymnasium's MuJoCo: ``benchmarks/README.md``, ``mjx_locomotion.py``).
    device
        Torch device of the returned tensors; the worlds live in JAX on the same device.
    seed
        Seed of the reset noise (JAX's counter-based generator).
    physics
        ``"exact"``: gymnasium's model and options, one step matching gymnasium's env
        from the same state (``tests/envs/test_mjx.py``). ``"fast"``: the options tuned
        for accelerators (:func:`~elegantpod.envs.mjx.physics.physics_options`), whose
        returns drift from exact by a bounded amount. ``None`` (default): fast on a
        GPU, exact on the CPU.
    max_episode_steps
        Time limit (gymnasium's 1000 by default).
    **task_kwargs
        gymnasium's keywords for the reward, termination and reset terms
        (``ctrl_cost_weight``, ``healthy_z_range``, ``reset_noise_scale``...).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        physics: str | None = None,
        max_episode_steps: int | None = None,
        **task_kwargs: Any,
    ) -> None:
        if env_id not in TASKS:
            raise ValueError(
                f"backend='mjx' has no env {env_id!r}; it has {', '.join(sorted(TASKS))}"
            )
        # every number is checked before anything imports JAX or allocates worlds
        num_envs = check_num_envs(num_envs)
        seed = check_seed(seed)
        max_episode_steps = check_max_episode_steps(max_episode_steps)
        task = TASKS[env_id]
        self.params = task_params(task, task_kwargs)
        check_installed()
        self.device = torch.device(device)
        if physics is None:
            physics = "fast" if self.device.type == "cuda" else "exact"
        self.task, self.physics, self.env_id = task, physics, env_id
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps or task.max_episode_steps
        self.model = load_model(task, physics)  # checks physics
        check_memory(self.model, num_envs, self.device, env_id)
        self.dt = float(self.model.opt.timestep) * task.frame_skip
        obs_dim = _obs_dim(task, self.model, self.params)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        low, high = self.model.actuator_ctrlrange.astype(np.float32).T
        self.action_space = gymnasium.spaces.Box(low, high, dtype=np.float32)
        self._seed = 0 if seed is None else seed
        self._state: Run | None = None  # made by reset()
        self._program = None  # built on first reset: a probe env compiles nothing
        self._shared = False  # whether torch tensors may share the state's qpos/qvel

    # -- the protocol -----------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Start a fresh episode in every world; the first observations."""
        seed = check_seed(seed)
        program = self._build()
        jax = program.jax
        if seed is not None:
            self._seed = seed
        if seed is None and self._state is not None:
            key = self._state.key  # carry on the stream: a new draw, as gymnasium's reset()
        else:
            # committed to the device as the step's own outputs are: an uncommitted
            # input would make XLA compile the step a second time
            key = jax.device_put(jax.random.PRNGKey(self._seed), program.device)
        return self._begin(key, None)

    @torch.no_grad()
    def step(self, action: Tensor) -> StepResult:
        """Advance every world by ``frame_skip`` physics steps; finished ones restart."""
        if self._state is None:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        program = self._program
        action = torch.as_tensor(action, dtype=torch.float32, device=self.device)
        if action.shape != (self.num_envs, *self.action_space.shape):
            raise ValueError(
                f"{self.env_id}: actions of shape {tuple(action.shape)}, expected "
                f"{(self.num_envs, *self.action_space.shape)}"
            )
        state = self._unshared() if self._shared else self._state
        action = self._to_jax(action.contiguous())
        qpos, qvel = program.no_states(self.num_envs)
        self._state, out = program.step(
            program.model, state, action, program.limit(self), qpos, qvel, *program.flags[False]
        )
        self._shared = False
        obs, final_obs, reward, terminated, truncated, ret, length = map(self._to_torch, out)
        info = {"final_obs": final_obs, "episode_return": ret, "episode_length": length.long()}
        return obs, reward, terminated, truncated, info

    def set_state(self, qpos: Tensor, qvel: Tensor) -> Tensor:
        """Put every world in the state ``(qpos, qvel)``, ``(num_envs, nq)`` and
        ``(num_envs, nv)``, as gymnasium's ``set_state`` does (then ``mj_forward``), and
        start its episode count there; returns the observations.

        Why: parity checks drive gymnasium's env and this one from the same states, and
        a curriculum may start episodes from states it chose.
        """
        self._build()
        want = {"qpos": (self.num_envs, self.model.nq), "qvel": (self.num_envs, self.model.nv)}
        arrays = {}
        for name, value in (("qpos", qpos), ("qvel", qvel)):
            value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
            if tuple(value.shape) != want[name]:
                raise ValueError(f"{name} of shape {tuple(value.shape)}, expected {want[name]}")
            arrays[name] = self._to_jax(value.contiguous())
        if self._state is None:
            self.reset()
        obs = self._begin(self._state.key, (arrays["qpos"], arrays["qvel"]))
        self._shared = True  # the worlds may hold the very buffers of qpos and qvel
        return obs

    @property
    def qpos(self) -> Tensor:
        """Every world's joint positions, ``(num_envs, nq)``: a view of JAX's memory, no
        copy. It holds the state of when it was read: a later step leaves it unchanged
        and valid (the step then computes from a copy, since JAX may not donate memory
        that torch still holds)."""
        return self._field("qpos")

    @property
    def qvel(self) -> Tensor:
        """Every world's joint velocities, ``(num_envs, nv)``."""
        return self._field("qvel")

    def _field(self, name: str) -> Tensor:
        if self._state is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        self._shared = True
        return self._to_torch(getattr(self._state.worlds, name))

    def _unshared(self) -> Run:
        """The state with fresh copies of ``qpos`` and ``qvel`` (on the device), which the
        step may donate: the originals may be held by torch tensors (:attr:`qpos`,
        :meth:`set_state`'s inputs), and donating a buffer with such an external
        reference is refused on GPUs (and silently copied on the CPU)."""
        worlds = self._state.worlds
        jnp = self._program.jax.numpy
        worlds = worlds.replace(qpos=jnp.copy(worlds.qpos), qvel=jnp.copy(worlds.qvel))
        return self._state._replace(worlds=worlds)

    def close(self) -> None:
        """Drop the worlds (the compiled program stays cached for the next env)."""
        self._state = None

    def __repr__(self) -> str:
        return (
            f"MjxVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={self.device}, "
            f"physics={self.physics!r})"
        )

    # -- internals --------------------------------------------------------------------
    def _begin(self, key, states) -> Tensor:
        """Start every world's episode, from reset noise drawn with ``key`` or from
        ``states`` (``(qpos, qvel)`` as JAX arrays), by the step program itself."""
        program = self._program
        n = self.num_envs
        if self._state is None:
            state = program.blank(program.model, n)
        else:
            state = self._unshared() if self._shared else self._state
        qpos, qvel = program.no_states(n) if states is None else states
        idle = program.idle_action(n, self.action_space.shape[0])
        self._state, out = program.step(
            program.model,
            state._replace(key=key),
            idle,
            program.limit(self),
            qpos,
            qvel,
            *program.flags[True, states is not None],
        )
        self._shared = False
        return self._to_torch(out[0])

    def _build(self):
        if self._program is None:
            self._program = _program(self.task, self.physics, self.params, self.device, self.model)
        return self._program

    def _to_jax(self, tensor: Tensor):
        return self._program.jax.dlpack.from_dlpack(tensor)

    @staticmethod
    def _to_torch(array) -> Tensor:
        return torch.from_dlpack(array)


def check_memory(model, num_envs: int, device: torch.device, env_id: str) -> None:
    """Raise ``ValueError`` when ``num_envs`` worlds cannot fit in ``device``'s memory.

    Why: MJX allocates every world at the first reset, and a request far beyond the
    memory (``num_envs=10**9``) aborted the whole process with ``std::bad_alloc``
    instead of raising. The estimate is a lower bound (one world's ``MjData`` arrays in
    float32, as MJX keeps them), so a refusal is certain and a pass is no promise.
    """
    import mujoco

    data = mujoco.MjData(model)
    world = sum(
        getattr(data, name).nbytes // 2
        for name in dir(data)
        if not name.startswith("_") and isinstance(getattr(data, name, None), np.ndarray)
    )
    need = world * num_envs
    have = _memory_bytes(device)
    if have is not None and need > have:
        raise ValueError(
            f"num_envs={num_envs} {env_id} worlds need at least {need / 2**30:,.1f} GiB, "
            f"more than the {have / 2**30:,.1f} GiB of {device}: use fewer worlds"
        )


def _memory_bytes(device: torch.device) -> int | None:
    """The memory of ``device`` in bytes (a GPU's total, or the machine's), if known."""
    try:
        if device.type == "cuda" and torch.cuda.is_available():
            index = device.index if device.index is not None else torch.cuda.current_device()
            return int(torch.cuda.get_device_properties(index).total_memory)
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError, RuntimeError):
        return None


def _obs_dim(task: Task, model, params: dict) -> int:
    """The observation size, from the model's sizes, without building any JAX program."""
    nq, nv, nbody = model.nq, model.nv, model.nbody
    if task.env_id == "Ant-v5":
        return nq - 2 + nv + 6 * (nbody - 1) * params["include_cfrc_ext_in_observation"]
    if task.env_id == "Humanoid-v5":
        sizes = {
            "include_cinert_in_observation": 10 * (nbody - 1),
            "include_cvel_in_observation": 6 * (nbody - 1),
            "include_qfrc_actuator_in_observation": nv - 6,
            "include_cfrc_ext_in_observation": 6 * (nbody - 1),
        }
        return nq - 2 + nv + sum(n for k, n in sizes.items() if params[k])
    return nq - 1 + nv  # Hopper, HalfCheetah


class _Program:
    """The jitted reset and step of one task, physics, parameters and device.

    ``model`` is the ``MjModel`` that :func:`~elegantpod.envs.mjx.physics.load_model` made
    for ``task`` and ``physics``; it goes to the device once here.
    """

    def __init__(self, task: Task, physics: str, params: dict, device: torch.device, model) -> None:
        jax, mjx = _setup_jax(device)
        self.jax = jax
        self.device = jax_device(jax, device)
        self.model = mjx.put_model(model, device=self.device)
        options = NO_COMMAND_BUFFERS if device.type == "cuda" else None
        self.blank, self.step = make_functions(jax, mjx, task, params, model, options)
        self._limits: dict[int, Any] = {}
        self._zeros: dict[tuple, Any] = {}
        put = lambda flag: jax.device_put(np.bool_(flag), self.device)  # noqa: E731
        yes, no = put(True), put(False)
        self.flags = {False: (no, no), (True, False): (yes, no), (True, True): (yes, yes)}
        """``step``'s ``begin`` and ``given`` flags for a step, a reset and a set_state,
        on the device once (a host bool would be copied there at every step)."""
        self.nq, self.nv = int(model.nq), int(model.nv)

    def _zeros_of(self, shape: tuple):
        if shape not in self._zeros:
            self._zeros[shape] = self.jax.device_put(np.zeros(shape, np.float32), self.device)
        return self._zeros[shape]

    def no_states(self, n: int):
        """Stand-ins for ``step``'s ``(qpos, qvel)`` where none are given: zeros the
        program ignores, kept on the device."""
        return self._zeros_of((n, self.nq)), self._zeros_of((n, self.nv))

    def idle_action(self, n: int, nu: int):
        """The action a start passes (its physics step is discarded)."""
        return self._zeros_of((n, nu))

    def limit(self, env: MjxVecEnv):
        """``env.max_episode_steps`` as an int32 already on the device, made once per
        value: a host number passed to ``step`` would be copied to the device at every
        step."""
        value = int(env.max_episode_steps)
        if value not in self._limits:
            self._limits[value] = self.jax.device_put(np.int32(value), self.device)
        return self._limits[value]


_programs: dict[tuple, _Program] = {}
_programs_lock = threading.Lock()


def _program(task: Task, physics: str, params: dict, device: torch.device, model) -> _Program:
    """The process's one :class:`_Program` for these settings (jit caches each size);
    ``model``, the env's own, is used only when the program is built."""
    key = (task.env_id, physics, tuple(sorted(params.items())), str(device))
    with _programs_lock:
        if key not in _programs:
            _programs[key] = _Program(task, physics, params, device, model)
        return _programs[key]
