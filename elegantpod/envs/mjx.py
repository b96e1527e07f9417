"""MuJoCo locomotion on MJX: thousands of MuJoCo worlds per accelerator, from PyPI.

``make_env("Ant-v5", num_envs=4096, device="cuda", backend="mjx")`` builds an
:class:`MjxVecEnv`: gymnasium's v5 task (:mod:`elegantpod.envs.mjx_tasks`) simulated by
MuJoCo's JAX backend, MJX, for every sub-env at once, behind elegantpod's protocol
(same-step auto-reset with ``info["final_obs"]``, episode statistics, time limit).

Why JAX inside a torch library: MJX is MuJoCo's own GPU physics and installs from PyPI
(``pip install 'elegantpod[mjx]'``), where Isaac Gym does not. The whole env step (the
``frame_skip`` physics steps, contact forces, observation, reward, termination, time
limit, statistics, and the reset of finished worlds) is one jitted XLA program per env
size; torch and JAX exchange tensors through DLPack, which on a GPU shares the memory
(no copy) and orders the two libraries' streams.

Settings made before JAX starts its backends (its first computation; importing jax
alone does not start them), each overridable by setting it yourself:

- ``XLA_PYTHON_CLIENT_PREALLOCATE=false``: by default JAX reserves 75% of a GPU's memory
  at start, leaving torch's networks and buffers (and other pods packed on that GPU)
  too little. Without preallocation JAX's allocator grows as the worlds need. JAX reads
  the variable only when it starts its GPU backend: if that already happened in this
  process with preallocation on, building the worlds raises ``RuntimeError`` naming the
  variable (:func:`preallocation_problem`) rather than run beside torch in a quarter of
  the GPU.
- ``XLA_FLAGS=--xla_gpu_enable_command_buffer=`` on CUDA hosts: XLA records parts of a
  program as CUDA graphs ("command buffers") lazily, on their first runs, and torch's
  work in the same process (its synchronisations, frees and graph captures) invalidates
  them. The MJX programs themselves are compiled with command buffers off in any case
  (jit's ``compiler_options``, :data:`NO_COMMAND_BUFFERS`), so a JAX that started its
  backend with them on is no reason to refuse; the flag covers the process's other JAX
  programs when elegantpod is first.
- ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` on CPU hosts only: a pod on the CPU uses
  one thread (elegantpod's rule: pods share a machine's cores; two threads each made a
  busy 2-core box 10x slower).
- JAX's persistent compilation cache in ``$ELEGANTPOD_JAX_CACHE`` (default
  ``~/.cache/elegantpod/jax``), so that a tournament's workers, an evaluator and the next
  run load a compiled step instead of compiling it again (tens of seconds on a CPU). A
  compiled program is code, so the cache must be safe from other users all the way
  down from ``/`` (:func:`elegantpod.workspace.private_folder`: owners, modes, sticky
  bits, no one else's symlinks); an unsafe ``$ELEGANTPOD_JAX_CACHE`` is an error, an
  unsafe default location runs uncached with a warning.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, NamedTuple, get_type_hints

import gymnasium
import numpy as np
import torch

from elegantpod.envs.base import (
    StepResult,
    Tensor,
    check_max_episode_steps,
    check_num_envs,
    check_seed,
)
from elegantpod.envs.mjx_tasks import TASKS, Task, load_model, task_params

MJX_HELP = (
    "backend='mjx' needs MuJoCo's JAX backend: pip install 'elegantpod[mjx]' "
    "(mujoco-mjx and jax; on a CUDA machine also jax's CUDA plugin, "
    "pip install 'jax[cuda13]' or 'jax[cuda12]' to match the driver)"
)


def check_installed() -> None:
    """Raise ``ImportError`` with the pip command when MJX or JAX is missing.

    Cheap (no import of jax), so that a pod spec naming ``backend="mjx"`` fails where it
    is checked, before any cluster work.
    """
    import importlib.util

    missing = []
    for name in ("jax", "mujoco.mjx"):
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package (mujoco) is missing
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise ImportError(f"{MJX_HELP} (missing: {', '.join(missing)})")


PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"

NO_COMMAND_BUFFERS = {"xla_gpu_enable_command_buffer": ""}
"""XLA's compile options for MJX programs on CUDA: no command buffers (see the module
docstring), whatever ``XLA_FLAGS`` said when JAX started."""


def backend_started() -> bool:
    """Whether JAX has started its backends in this process (importing nothing)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:  # jax not imported, or not that far
        return False
    probe = getattr(bridge, "backends_are_initialized", None)
    if probe is not None:
        return bool(probe())
    return bool(getattr(bridge, "_backends", None))


def preallocation_problem(environ, started: bool, platforms) -> str | None:
    """Why JAX's GPU memory is preallocated in this process, or ``None`` when it is not.

    ``environ`` is the environment JAX read when it started its backends (when
    ``started``), ``platforms`` the platforms it started (``"cuda"``, ``"cpu"``...).
    JAX preallocates unless ``XLA_PYTHON_CLIENT_PREALLOCATE`` is ``false`` or ``0`` or its
    allocator is ``platform``; only GPU backends preallocate.
    """
    if not started or not {"cuda", "gpu", "rocm"} & {str(p).lower() for p in platforms}:
        return None
    if environ.get(PREALLOCATE, "") in ("false", "False", "0"):
        return None
    if environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").lower() == "platform":
        return None
    return (
        f"JAX started its GPU backend in this process with {PREALLOCATE} "
        f"{environ.get(PREALLOCATE, 'unset')!r}, so it holds 75% of the GPU's memory and "
        "torch's networks and buffers (and other pods on this GPU) would run out: set "
        f"{PREALLOCATE}=false in the environment before anything in the process uses JAX "
        "(elegantpod sets it when it is first)"
    )


def _setup_jax(device: torch.device | None = None):
    """Import jax and mjx with elegantpod's defaults (see the module docstring).

    For a CUDA ``device``, raise ``RuntimeError`` when something else in the process
    started JAX's GPU backend with preallocation on (a setting of the user's own made
    before elegantpod started JAX is theirs to keep).
    """
    started_before = backend_started()
    if not started_before:  # JAX reads these when it starts its backends
        os.environ.setdefault(PREALLOCATE, "false")
        flags = os.environ.get("XLA_FLAGS", "")
        if torch.cuda.is_available():
            if "xla_gpu_enable_command_buffer" not in flags:
                flags = f"{flags} --xla_gpu_enable_command_buffer=".strip()
        elif "xla_cpu_multi_thread_eigen" not in flags:
            flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
        if flags:
            os.environ["XLA_FLAGS"] = flags
    try:
        import jax
        from mujoco import mjx
    except ImportError as exc:
        raise ImportError(f"{MJX_HELP}: {exc}") from None
    if started_before and device is not None and device.type == "cuda":
        platforms = {"cuda"} if _has_gpu(jax) else set()
        problem = preallocation_problem(os.environ, True, platforms)
        if problem is not None:
            raise RuntimeError(problem)
    _use_compilation_cache(jax)
    return jax, mjx


def _has_gpu(jax) -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


def cache_dir() -> Path:
    """Where compiled MJX steps are kept between processes (``$ELEGANTPOD_JAX_CACHE``)."""
    if os.environ.get("ELEGANTPOD_JAX_CACHE"):
        return Path(os.environ["ELEGANTPOD_JAX_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "elegantpod" / "jax"


CACHE_ADVICE = (
    "set ELEGANTPOD_JAX_CACHE to a folder of yours under folders only you (or root) can "
    "write, e.g. ~/.cache/elegantpod/jax"
)


def _private_dir(path: Path) -> bool:
    """Create ``path`` (mode 0700) or accept it if no other user can write it or change
    where it leads (every folder from ``/`` down: :func:`~elegantpod.workspace.private_folder`)."""
    from elegantpod.workspace import private_folder

    try:
        private_folder(path, what="JAX compilation cache", advice=CACHE_ADVICE)
    except (OSError, ValueError):
        return False
    return True


def _use_compilation_cache(jax) -> None:
    """Point JAX's persistent compilation cache at :func:`cache_dir`, if it is private.

    A compiled program is native code that JAX loads back: a cache another user can
    write to, or can swap for a symlink (through any folder above it), would run their
    code. A ``$ELEGANTPOD_JAX_CACHE`` that fails the check is an error; the default
    location only warns and runs uncached.
    """
    if jax.config.jax_compilation_cache_dir:  # the user chose one
        return
    try:
        _pin_cache(jax, cache_dir())
    except ValueError as exc:
        if os.environ.get("ELEGANTPOD_JAX_CACHE"):
            raise
        import warnings

        warnings.warn(f"{exc}; MJX runs without a compilation cache", stacklevel=3)


def _pin_cache(jax, wanted: Path) -> None:
    """Give JAX the folder ``wanted`` resolves to once checked, and make sure it is still
    the folder checked (same device and inode) after JAX took it."""
    from elegantpod.workspace import private_folder

    what = "JAX compilation cache"
    try:
        path, identity = private_folder(wanted, what=what, advice=CACHE_ADVICE)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
        try:
            jax.config.update("jax_compilation_cache_dir", str(path))
            now, held = os.stat(path, follow_symlinks=False), os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        jax.config.update("jax_compilation_cache_dir", None)
        raise ValueError(f"{what} {str(wanted)[:200]!r}: {exc}; {CACHE_ADVICE}") from None
    if {(now.st_dev, now.st_ino), (held.st_dev, held.st_ino)} != {identity}:
        jax.config.update("jax_compilation_cache_dir", None)
        raise ValueError(
            f"{what} {str(wanted)[:200]!r} was replaced while it was being checked; {CACHE_ADVICE}"
        )
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def jax_device(jax, device: torch.device):
    """The JAX device that holds the same memory as torch's ``device``."""
    if device.type == "cpu":
        return jax.devices("cpu")[0]
    if device.type != "cuda":
        raise ValueError(f"backend='mjx' runs on 'cpu' or 'cuda' devices, not {str(device)!r}")
    try:
        gpus = jax.devices("cuda")
    except RuntimeError:
        raise ValueError(
            f"device {str(device)!r}: this jax ({jax.__version__}) has no CUDA backend; {MJX_HELP}"
        ) from None
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index >= len(gpus):
        raise ValueError(f"device {str(device)!r}: jax sees {len(gpus)} CUDA device(s)")
    return gpus[index]


class MjxVecEnv:
    """A gymnasium v5 MuJoCo locomotion task on MJX, as a batched torch env.

    Parameters
    ----------
    env_id
        ``"Ant-v5"``, ``"Humanoid-v5"``, ``"Hopper-v5"`` or ``"HalfCheetah-v5"``.
    num_envs
        Worlds simulated in lock-step (thousands per GPU; a few on a CPU, where MJX is
        several times slower than gymnasium's MuJoCo: ``benchmarks/mjx_throughput.py``).
    device
        Torch device of the returned tensors; the worlds live in JAX on the same device.
    seed
        Seed of the reset noise (JAX's counter-based generator).
    physics
        ``"exact"``: gymnasium's model and options, one step matching gymnasium's env
        from the same state (``tests/envs/test_mjx.py``). ``"fast"``: the options tuned
        for accelerators (:func:`~elegantpod.envs.mjx_tasks.physics_options`), whose
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
            with jax.default_device(program.device):
                key = jax.random.PRNGKey(self._seed)
        qpos, qvel, key = program.noise(program.model, key, self.num_envs)
        self._state, obs = program.start(program.model, qpos, qvel, key)
        self._shared = False
        return self._to_torch(obs)

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
        self._state, out = program.step(
            program.model, state, self._to_jax(action.contiguous()), program.limit(self)
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
        program = self._build()
        want = {"qpos": (self.num_envs, self.model.nq), "qvel": (self.num_envs, self.model.nv)}
        arrays = {}
        for name, value in (("qpos", qpos), ("qvel", qvel)):
            value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
            if tuple(value.shape) != want[name]:
                raise ValueError(f"{name} of shape {tuple(value.shape)}, expected {want[name]}")
            arrays[name] = self._to_jax(value.contiguous())
        if self._state is None:
            self.reset()
        key = self._state.key
        self._state, obs = program.start(program.model, arrays["qpos"], arrays["qvel"], key)
        self._shared = True  # the worlds may hold the very buffers of qpos and qvel
        return self._to_torch(obs)

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


class Run(NamedTuple):
    """What one env carries from step to step, all JAX arrays with leading ``num_envs``."""

    worlds: Any
    """The batched ``mjx.Data``."""
    elapsed: Any
    """Steps of each world's episode so far (int32)."""
    episode_return: Any
    """Return of each world's episode so far (float32)."""
    key: Any
    """The reset-noise key."""


# Postponed annotations leave the constructor's as ForwardRef('Any'), to be resolved in
# the globals of the namespace collections.namedtuple built it in, which lack this
# module's names: pdoc warned (its issue 765), typing.get_type_hints(Run.__new__) raised.
# Resolved once here, in this module (no JAX: the fields are typed Any).
Run.__new__.__annotations__ = get_type_hints(Run)


class _Program:
    """The jitted reset and step of one task, physics, parameters and device.

    ``model`` is the ``MjModel`` that :func:`~elegantpod.envs.mjx_tasks.load_model` made
    for ``task`` and ``physics``; it goes to the device once here.
    """

    def __init__(self, task: Task, physics: str, params: dict, device: torch.device, model) -> None:
        jax, mjx = _setup_jax(device)
        self.jax = jax
        self.device = jax_device(jax, device)
        self.model = mjx.put_model(model, device=self.device)
        options = NO_COMMAND_BUFFERS if device.type == "cuda" else None
        self.noise, self.step, self.start = _make_functions(jax, mjx, task, params, model, options)
        self._limits: dict[int, Any] = {}

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


def _make_functions(jax, mjx, task: Task, params: dict, model, options: dict | None = None):
    """``noise(m, key, n)``, ``step(m, state, action, limit)`` and ``start(m, qpos, qvel,
    key)``, jitted (with XLA's compile ``options``).

    ``state`` is a :class:`Run`. ``step`` returns the
    next state and ``(obs, final_obs, reward, terminated, truncated, episode_return,
    episode_length)``; worlds whose episode ended are reset inside the same program
    (behind a ``lax.cond``, so steps where none ended skip the reset's forward pass).
    """
    jnp = jax.numpy
    dt = float(model.opt.timestep) * task.frame_skip
    nv = int(model.nv)
    terminate = params.get("terminate_when_unhealthy", False)

    def worlds_at(m, qpos, qvel):
        # gymnasium: mj_resetData, then set_state(qpos, qvel) runs mj_forward
        def world(qpos, qvel):
            return mjx.forward(m, mjx.make_data(m).replace(qpos=qpos, qvel=qvel))

        return jax.vmap(world)(qpos, qvel)

    def draw(m, sub, n):
        """Fresh episodes' ``(qpos, qvel)`` for ``n`` worlds, from the key ``sub``."""
        one = lambda k: task.reset_noise(params, k, m.qpos0, nv)  # noqa: E731
        return jax.vmap(one)(jax.random.split(sub, n))

    def observe(m, d):
        return task.observe(params, m, d).astype(jnp.float32)

    def step_world(m, d, action):
        before = task.position(m, d)
        d = d.replace(ctrl=action)
        d = jax.lax.fori_loop(0, task.frame_skip, lambda _, d: mjx.step(m, d), d)
        if task.needs_contact_forces:
            d = mjx.rne_postconstraint(m, d)
        velocity = (task.position(m, d) - before) / dt
        reward, healthy = task.reward(params, m, d, action, velocity)
        terminated = jnp.logical_not(healthy) & terminate
        return d, observe(m, d), reward.astype(jnp.float32), terminated

    def noise(m, key, n):
        """Fresh episodes' states for ``n`` worlds, and the key to carry on."""
        key, sub = jax.random.split(key)
        return (*draw(m, sub, n), key)

    def step(m, state: Run, action, limit):
        worlds, elapsed, episode_return, key = state
        n = action.shape[0]
        worlds, final_obs, reward, terminated = jax.vmap(step_world, in_axes=(None, 0, 0))(
            m, worlds, action
        )
        elapsed = elapsed + 1
        episode_return = episode_return + reward
        truncated = elapsed >= limit
        done = terminated | truncated
        key, sub = jax.random.split(key)

        def restart(worlds):
            fresh = worlds_at(m, *draw(m, sub, n))

            def pick(new, old):
                return jnp.where(done.reshape((n,) + (1,) * (old.ndim - 1)), new, old)

            worlds = jax.tree_util.tree_map(pick, fresh, worlds)
            return worlds, jax.vmap(observe, in_axes=(None, 0))(m, worlds)

        worlds, obs = jax.lax.cond(done.any(), restart, lambda w: (w, final_obs), worlds)
        state = Run(
            worlds,
            jnp.where(done, 0, elapsed),
            jnp.where(done, 0.0, episode_return),
            key,
        )
        out = (obs, final_obs, reward, terminated, truncated, episode_return, elapsed)
        return state, out

    def start(m, qpos, qvel, key):
        # one program for reset and set_state: each costs tens of seconds to compile on
        # a CPU, and a reset is a set_state from noise
        worlds = worlds_at(m, qpos, qvel)
        obs = jax.vmap(observe, in_axes=(None, 0))(m, worlds)
        n = qpos.shape[0]
        return Run(worlds, jnp.zeros(n, jnp.int32), jnp.zeros(n, jnp.float32), key), obs

    # the state is donated: XLA updates the worlds in place rather than copying them
    return (
        jax.jit(noise, static_argnums=2, compiler_options=options),
        jax.jit(step, donate_argnums=1, compiler_options=options),
        jax.jit(start, compiler_options=options),
    )
