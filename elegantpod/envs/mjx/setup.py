"""JAX set up for MJX inside a torch process: its settings, compilation cache and devices.

Why a module of its own: :class:`~elegantpod.envs.mjx.env.MjxVecEnv` runs MuJoCo's JAX
backend beside torch, and JAX's defaults suit a process that is JAX alone. What has to
be settled before JAX starts its backends (its first computation; importing jax alone
does not start them) lives here, apart from the env, together with the check that MJX
is installed and the map from torch's devices to JAX's. Each setting is overridable by
setting it yourself:

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
  one thread (elegantpod's rule: pods share a machine's cores, and on a busy machine a
  thread per core stalls each op on a descheduled one; ``benchmarks/README.md``).
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
from pathlib import Path

import torch

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


def setup_jax(device: torch.device | None = None):
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
