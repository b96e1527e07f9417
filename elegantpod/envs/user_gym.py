"""Your own gymnasium env on Dask workers: a registration made in this process, shipped.

Why: a pod is rebuilt on a worker from its env id, so an id registered only in the
user's process (``gymnasium.register("Reach1D-v0", entry_point=Reach1D)`` in a notebook
cell or a script's ``main()``) is unknown there, and every pod failed with "unknown env
id". A tournament ships each such registration to its workers as a worker plugin (workers
that join later run it too), as it ships learners registered with
:func:`~elegantpod.agents.register_algo`.

What travels: the registration's fields, with its entry point as the object itself
(a class or a factory). A class or factory defined in ``__main__`` or in a module of the
user's (not an installed package) is pickled by value, so the workers need not import
the user's file; one from an installed package is pickled by reference, as the workers
have the same environment. Registrations of gymnasium's own envs, and of installed
packages that register with a string entry point, are not shipped.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path
from typing import Any

import gymnasium

GYMNASIUM_OWN = ("gymnasium.", "shimmy.", "ale_py.")
"""Entry points of registrations that every worker with the same packages has."""


def as_env_id(env: Any) -> str:
    """An env id for ``env``: an id as given; an env class or factory registered (in this
    process) under an id made from its name.

    A :class:`~elegantpod.envs.base.TorchVecEnv` subclass is registered with
    :func:`~elegantpod.envs.register_env` under its class name; a ``gymnasium.Env``
    subclass or a factory that returns one with ``gymnasium.register`` as
    ``<name>-v0``. Registering the same object again reuses its id; another object under
    a taken id is refused.

    Raises
    ------
    ValueError
        For something that is neither an id, a class nor a callable, or a name already
        registered for another env.
    """
    if isinstance(env, str):
        return env
    from elegantpod.envs.base import TorchVecEnv
    from elegantpod.envs.classic import NATIVE_ENVS
    from elegantpod.envs.registry import register_env

    name = getattr(env, "__name__", None)
    if not callable(env) or not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"env must be an env id, an env class or a factory function, got {env!r}")
    if isinstance(env, type) and issubclass(env, TorchVecEnv):
        if NATIVE_ENVS.get(name, env) is not env:
            raise ValueError(f"env id {name!r} is taken by another env class")
        register_env(name, env)
        return name
    env_id = f"{name}-v0"
    taken = gymnasium.registry.get(env_id)
    if taken is not None and taken.entry_point is not env:
        raise ValueError(
            f"env id {env_id!r} is registered with gymnasium for another env "
            f"({taken.entry_point!r}): register yours under an id of its own"
        )
    if taken is None:
        gymnasium.register(id=env_id, entry_point=env)
    return env_id


def shipped_registration(env_id: str) -> dict[str, Any] | None:
    """What a worker needs to register ``env_id`` with gymnasium as this process has it,
    or ``None`` where it needs nothing (not a gymnasium id, or one every worker has)."""
    spec = gymnasium.registry.get(env_id)
    if spec is None:
        return None
    entry = spec.entry_point
    if isinstance(entry, str):
        if entry.startswith(GYMNASIUM_OWN):
            return None
        module_name = entry.split(":", 1)[0]
        module = sys.modules.get(module_name)
        if module is None or not _is_users(module):
            return None  # an installed package's: the workers import it by name
        from gymnasium.envs.registration import load_env_creator

        entry = load_env_creator(entry)
    _by_value(entry)
    return {
        "id": spec.id,
        "entry_point": entry,
        "reward_threshold": spec.reward_threshold,
        "nondeterministic": spec.nondeterministic,
        "max_episode_steps": spec.max_episode_steps,
        "order_enforce": spec.order_enforce,
        "disable_env_checker": spec.disable_env_checker,
        "kwargs": dict(spec.kwargs),
    }


def register_shipped(registration: dict[str, Any]) -> None:
    """Register a shipped registration with gymnasium in this (worker) process."""
    if registration["id"] not in gymnasium.registry:
        gymnasium.register(**registration)


def _by_value(entry: Any) -> None:
    """Make ``entry``'s module pickle by value where it is the user's own code (a worker
    may not be able to import it); ``__main__`` is pickled by value already."""
    import cloudpickle

    name = getattr(entry, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or name == "__main__" or not _is_users(module):
        return
    cloudpickle.register_pickle_by_value(module)


def _is_users(module) -> bool:
    """Whether ``module`` is the user's code: a file outside the interpreter's standard
    library and installed packages (a script's folder, an ``--import``-ed module)."""
    path = getattr(module, "__file__", None)
    if not path:
        return module.__name__ == "__main__"
    path = Path(path).resolve()
    paths = sysconfig.get_paths()
    installed = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return not any(path.is_relative_to(Path(p).resolve()) for p in installed)
