"""A native env's whole step as one fused region: built, compiled and shared.

A step (dynamics, reward, termination, time limit, episode statistics, auto-reset) costs
some thirty small eager ops whose dispatch, not arithmetic, is the price; as one
``torch.compile`` region it is one kernel on CUDA and one vectorized loop on a CPU.
:class:`~elegantpod.envs.base.TorchVecEnv` takes its step function from here.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable

import torch

from elegantpod.envs.noise import uniform_noise

Tensor = torch.Tensor

CPU_COMPILE_MIN_ENVS = 512
"""Sub-envs from which a CPU env compiles its step by default (see ``compile``)."""

ENTRIES_PER_SIZE = 2
"""Compiled graphs one env size may need: a step runs with plain tensors (the state after
``reset``) and with inference tensors (in a rollout), and dynamo compiles each apart.
Each class, size and device has a code object of its own (see :func:`compiled_step`),
so these stay well under dynamo's default ``recompile_limit`` of 8 per code object."""

COMPILE_BACKEND = "inductor"
"""The ``torch.compile`` backend of compiled steps built from now on. ``"eager"`` or
``"aot_eager"`` run dynamo's tracing, guards and caching without Inductor's code
generation: what CPU tests use to check when a step compiles, in milliseconds."""

_compiled: dict[tuple[type, int, str], Callable | None] = {}
_step_functions: dict[tuple[type, int, str], Callable] = {}
_whole_steps: dict[type, Callable] = {}
_compiled_lock = threading.Lock()


def is_capturing() -> bool:
    """Whether a CUDA-graph capture is underway on the current stream (False on a build
    without CUDA, where torch's query raises)."""
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def whole_step(cls: type) -> Callable:
    """The fused step of ``cls``: one pure function from this step's tensors to the next.

    ``step(state, elapsed, episode_return, action, noise, draws, max_steps)`` returns
    ``(state, obs, final_obs, reward, terminated, truncated, episode_return,
    episode_length, elapsed, kept_return, draws + 1)``: the state after auto-reset and
    its observation, the true next observation, the reward, ``uint8`` termination and
    truncation flags, the return and length of each episode so far (read where an
    episode ended), and the counters to carry on (zero where an episode ended). Rows
    whose episode ended restart from ``initial_state(uniform_noise(shape, noise,
    draws))`` or, for a class without :attr:`~elegantpod.envs.base.TorchVecEnv.initial_state`, from
    ``noise`` itself, an initial state for every row. ``max_steps`` 0: no time limit.
    One function per class, so that dynamo caches its graphs in one place.

    Flags and selections go through float32 rather than bool tensors: Inductor's CPU
    code stores and reloads bool vectors slowly, while float and uint8 stores vectorize
    (``benchmarks/README.md``, ``env_throughput.py``).
    """
    with _compiled_lock:
        if cls not in _whole_steps:
            _whole_steps[cls] = _make_whole_step(cls)
        return _whole_steps[cls]


def _make_whole_step(cls: type) -> Callable:
    # Plain functions with ``cls`` in the closure: bound classmethods would make dynamo
    # guard them with a Python lambda (``a.__self__ is b.__self__``) on every call.
    dynamics, observe = cls.dynamics.__func__, cls.observe.__func__
    initial_state = getattr(cls.initial_state, "__func__", None)

    def step(state, elapsed, episode_return, action, noise, draws, max_steps: int):
        if initial_state is None:
            fresh = noise
        else:
            fresh = initial_state(cls, uniform_noise(tuple(state.shape), noise, draws))
        next_state, reward, terminated = dynamics(cls, state, action)
        elapsed = elapsed + 1
        episode_return = episode_return + reward
        term = terminated.to(torch.float32)
        trunc = (elapsed >= max_steps).to(torch.float32) if max_steps else torch.zeros_like(term)
        done = torch.maximum(term, trunc)
        # two spellings of one test, so that Inductor keeps ``done`` as float32 rather
        # than merging them into a bool buffer that both loops share
        new_state = torch.where(done * 2.0 > 1.0, fresh, next_state)
        done = done > 0.5
        return (
            new_state,
            observe(cls, new_state),
            observe(cls, next_state),
            reward,
            term.to(torch.uint8),
            trunc.to(torch.uint8),
            episode_return,
            elapsed,
            torch.where(done, 0, elapsed),
            torch.where(done, 0.0, episode_return),
            draws + 1,
        )

    step.__qualname__ = f"{cls.__qualname__}.whole_step"
    return step


def compiled_step(cls: type, num_envs: int, device: str) -> Callable | None:
    """The process's one compiled :func:`whole_step` of ``cls`` for ``num_envs``
    sub-envs on ``device``.

    Built on first request and shared by every later env of that class, size and device,
    so that rebuilding a pod (a tournament segment) reuses it instead of compiling again.
    ``None`` once compiling it failed here: such envs run the step uncompiled.

    Dynamo keeps the compiled graphs of one function under its code object, and past
    ``torch._dynamo.config.recompile_limit`` (8) graphs of one code object runs new
    ones eagerly. Raising that limit does not hold: from torch 2.12 dynamo's config is
    per thread and per ``contextvars`` context, and Dask runs each task in a copied
    context, so a limit raised in one task is gone in the next and in other threads.
    Instead each class, size and device compiles its own copy of the step function (see
    :func:`step_function`): it holds the :data:`ENTRIES_PER_SIZE` graphs of its one
    size, under torch's default limits, in any thread and context.
    """
    key = (cls, int(num_envs), str(device))
    fn = step_function(cls, num_envs, device)
    with _compiled_lock:
        if key not in _compiled:
            _compiled[key] = torch.compile(fn, dynamic=False, backend=COMPILE_BACKEND)
        return _compiled[key]


def step_function(cls: type, num_envs: int, device: str) -> Callable:
    """The uncompiled function that :func:`compiled_step` compiles for this class, size
    and device: :func:`whole_step` of ``cls`` under a code object of its own, where
    dynamo keeps that size's compiled graphs (its cache entries count them)."""
    key = (cls, int(num_envs), str(device))
    step = whole_step(cls)
    with _compiled_lock:
        if key not in _step_functions:
            label = f"{cls.__name__}_step_{int(num_envs)}_{str(device).replace(':', '_')}"
            code = step.__code__.replace(co_name=label)  # a new code object: its own cache
            fn = types.FunctionType(
                code, step.__globals__, label, step.__defaults__, step.__closure__
            )
            fn.__qualname__ = f"{cls.__qualname__}.whole_step[{int(num_envs)}, {device}]"
            _step_functions[key] = fn
        return _step_functions[key]


def is_resource_error(exc: BaseException) -> bool:
    """An error of the device or its memory (out of memory, a CUDA or accelerator error),
    not of compiling: it says nothing about whether this size compiles, so it must not
    mark the size failed for the whole process (one transient OOM did)."""
    kinds = tuple(
        k
        for k in (
            MemoryError,
            getattr(torch, "OutOfMemoryError", None),
            getattr(torch, "AcceleratorError", None),
        )
        if isinstance(k, type)
    )
    text = str(exc).lower()
    return isinstance(exc, kinds) or "out of memory" in text or "cuda error" in text


def mark_failed(key: tuple[type, int, str]) -> None:
    """Later envs of ``key`` run eagerly rather than fail to compile again (seconds each)."""
    with _compiled_lock:
        _compiled[key] = None
