"""``make_env``: the one way to get a batched env, native where we have one."""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import inspect
import warnings
from typing import Any

import gymnasium
import torch

from elegantpod.checks.text import short
from elegantpod.devices import resolve_device
from elegantpod.envs.base import VecEnv
from elegantpod.envs.classic import NATIVE_ENVS
from elegantpod.envs.gym import FILE_KWARGS, GymVecEnv, withheld
from elegantpod.envs.hooks import EnvHooks
from elegantpod.envs.limits import check_max_episode_steps, check_num_envs, check_seed

ENTRY_POINTS = "elegantpod.envs"
"""The entry-point group of packaged envs: native env classes that a package installs
(``[project.entry-points."elegantpod.envs"]`` in its ``pyproject.toml``, ``id =
"module:Class"``) and that are imported only when used. elegantpod's own trading env is
one (``StockTrading-v0``): the registry names no domain of its own, and another package
adds its envs the same way."""


@functools.cache
def declared_envs() -> tuple[importlib.metadata.EntryPoint, ...]:
    """Every entry point of :data:`ENTRY_POINTS` in the installed packages' metadata, read
    once, elegantpod's own first; none is imported here."""
    found = importlib.metadata.entry_points(group=ENTRY_POINTS)
    return tuple(sorted(found, key=lambda ep: _package(ep) != "elegantpod"))


def packaged_envs() -> dict[str, importlib.metadata.EntryPoint]:
    """Every packaged env (:data:`ENTRY_POINTS`) by id; none is imported here.

    An entry point may only add an id: one that names an id already taken (a native
    env such as ``CartPole-v1``, a gymnasium id, another package's env) is ignored
    with a warning, and the id keeps what it had. Why: any installed package can
    declare entry points, and one named ``CartPole-v1`` took that id over, and with it
    every spec, checkpoint and tournament that names it. Checked at each call, as
    gymnasium ids may be registered later (``import ale_py``, the user's own).
    """
    out: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in declared_envs():
        taken = _taken(ep.name, out)
        if taken is None:
            out[ep.name] = ep
        else:
            _warn_taken(ep.name, ep.value, _package(ep), taken)
    return dict(sorted(out.items()))


def _taken(env_id: str, packaged: dict[str, importlib.metadata.EntryPoint]) -> str | None:
    """What already holds ``env_id``, or ``None`` where it is free for a packaged env."""
    if env_id in packaged:
        return f"the env {packaged[env_id].value!r} of the package {_package(packaged[env_id])!r}"
    if env_id in NATIVE_ENVS:
        return f"a native env ({NATIVE_ENVS[env_id].__name__})"
    if env_id in gymnasium.registry:
        return "a gymnasium env"
    return None


def _package(ep: importlib.metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None)


@functools.cache
def _warn_taken(env_id: str, value: str, package: str | None, taken: str) -> None:
    """Warn, once per entry point, that it names an id that is taken (see
    :func:`packaged_envs`)."""
    warnings.warn(
        f"the {ENTRY_POINTS!r} entry point {short(value)} of the package {package!r} "
        f"names the env {short(env_id)}, which is already {taken}: ignored, and "
        f"{short(env_id)} stays what it was",
        UserWarning,
        stacklevel=4,
    )


PATH_KWARGS = ("data", *FILE_KWARGS)
"""Env keywords whose values name files or URLs that an env reads, for every env: a
trading env's market ``data`` and the model file of gymnasium's MuJoCo envs
(``xml_file``). An env class declares its own in ``path_kwargs`` (or
``register_env(..., path_kwargs=...)``); see :func:`path_kwargs` and
:func:`external_sources`."""

CUSTOM_ENVS: dict[str, type] = {}
"""Env classes added with :func:`register_env` (a tournament ships them to its workers)."""
CUSTOM_PATH_KWARGS: dict[str, tuple[str, ...]] = {}
"""The ``path_kwargs`` given to :func:`register_env`, by env id."""


def register_env(env_id: str, cls: type | None = None, *, path_kwargs=()):
    """Make your own batched env class usable by id: ``make_env``, pods, ``train``, tournaments.

    Why: specs and checkpoints name their env by id, so a pod rebuilt anywhere (on a Dask
    worker, from a checkpoint) must find the class by that id. ``cls`` should subclass
    :class:`~elegantpod.envs.base.TorchVecEnv` (same-step auto-reset, ``final_obs``) and
    take ``num_envs``, ``device``, ``seed`` and its own keyword arguments (a pod's
    ``env_kwargs``). A :class:`~elegantpod.tournament.Tournament` on a registered env
    registers it on its workers too. Usable as a decorator: ``@register_env("Line-v0")``.

    ``path_kwargs`` names the keywords whose values are files the env reads (as the
    class attribute ``path_kwargs`` does): a checkpoint or store that sets one is
    refused unless you pass the same value yourself, and an error building the env from
    one never shows the exception's text, which could quote the file.

    Raises
    ------
    ValueError
        For a class that is not a ``TorchVecEnv`` or an id of a built-in env.
    """
    from elegantpod.envs.base import TorchVecEnv

    if cls is None:
        return lambda c: register_env(env_id, c, path_kwargs=path_kwargs)
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env_id must be a non-empty string, got {env_id!r}")
    if (env_id in NATIVE_ENVS and env_id not in CUSTOM_ENVS) or env_id in packaged_envs():
        raise ValueError(f"{env_id!r} is a built-in env; choose another id")
    if isinstance(cls, type) and issubclass(cls, gymnasium.Env):
        raise ValueError(
            f"register_env takes a batched TorchVecEnv, and {cls.__name__} is a "
            f"gymnasium.Env: register it with gymnasium.register({env_id!r}, "
            f"entry_point={cls.__name__}), or pass the class itself as "
            "Tournament(env=...); elegantpod batches it, and a tournament ships the "
            "registration to its workers"
        )
    if not (isinstance(cls, type) and issubclass(cls, TorchVecEnv)):
        raise ValueError(f"register_env needs a TorchVecEnv subclass, got {cls!r}")
    if isinstance(path_kwargs, str) or not all(isinstance(k, str) and k for k in path_kwargs):
        raise ValueError(f"path_kwargs must be a list of keyword names, got {path_kwargs!r}")
    NATIVE_ENVS[env_id] = cls
    CUSTOM_ENVS[env_id] = cls
    CUSTOM_PATH_KWARGS[env_id] = tuple(path_kwargs)
    return cls


def path_kwargs(env_id: str | None = None) -> frozenset[str]:
    """The keywords of ``env_id`` whose values name files it reads: :data:`PATH_KWARGS`
    and the env's own; ``None``: those of every env this process knows (a superset)."""
    names = set(PATH_KWARGS)
    for i in list(NATIVE_ENVS) if env_id is None else [env_id]:
        names.update(getattr(NATIVE_ENVS.get(i), "path_kwargs", ()) or ())
        names.update(CUSTOM_PATH_KWARGS.get(i, ()))
    return frozenset(names)


def external_sources(env_kwargs: dict, env_id: str | None = None) -> dict:
    """The entries of ``env_kwargs`` that would make an env read a file or fetch a URL.

    Why: a spec inside a checkpoint or a store comes from whoever wrote the file, and
    building its env must not reach the network or read a local path on their say-so
    (a Hopper's ``xml_file`` naming a secret file was opened, and its text quoted in the
    error). A path keyword (:func:`path_kwargs` of ``env_id``; ``None``: of any env)
    counts unless its value names what elegantpod or gymnasium ships (``"sp500"``,
    ``"hopper.xml"``: an env class says which in ``shipped_values``), and so does any
    keyword whose value holds a URL (``"://"``).
    """
    names = path_kwargs(env_id)
    out = {}
    for key, value in env_kwargs.items():
        is_path = key in names and not _is_shipped(key, value)
        if is_path or any("://" in t for t in _strings(value)):
            out[key] = value
    return out


def _is_shipped(key: str, value) -> bool:
    """``value`` is unset or names a file that comes with elegantpod or gymnasium.

    Any env's shipped values count, whichever env is asked about: as with
    :func:`path_kwargs`, a superset refuses nothing that one env ships.
    """
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    if key in FILE_KWARGS:  # a bare name is read from gymnasium's assets folder
        from pathlib import Path

        assets = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
        is_bare = value and not value.startswith((".", "~")) and not set(value) & {"/", "\\"}
        if is_bare and (assets / value).is_file():
            return True
    known = [*NATIVE_ENVS, *packaged_envs()]
    return any(value in env_hooks(env_id).shipped_values(key) for env_id in known)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def available_envs() -> list[str]:
    """Ids with a native torch implementation (any gymnasium id works too)."""
    return sorted([*NATIVE_ENVS, *packaged_envs()])


def _packaged_env(env_id: str) -> type:
    """The class of a packaged env, imported now (a package's module, the first time)."""
    return packaged_envs()[env_id].load()


def env_hooks(env_id: str) -> type[EnvHooks]:
    """The class whose :class:`~elegantpod.envs.hooks.EnvHooks` classmethods speak for
    ``env_id``: its env class (imported if need be), or ``EnvHooks`` itself, whose
    defaults add nothing, for an id that has none (gymnasium, MJX, Isaac)."""
    cls = _packaged_env(env_id) if env_id in packaged_envs() else NATIVE_ENVS.get(env_id)
    return cls if isinstance(cls, type) and issubclass(cls, EnvHooks) else EnvHooks


def check_fitness(fitness: Any, env_id: str) -> None:
    """Raise ``ValueError`` naming ``fitness`` unless ``env_id``'s evaluations report it
    (its :attr:`EnvHooks.fitnesses <elegantpod.envs.hooks.EnvHooks.fitnesses>`)."""
    names = env_hooks(env_id).fitnesses
    if fitness not in names:
        raise ValueError(
            f"unknown fitness {short(fitness)} for {env_id!r}; choose one of {list(names)} "
            "(an env class declares what its evaluations report: EnvHooks.fitnesses)"
        )


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` naming ``env_id`` when neither we nor gymnasium know it."""
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    if env_id in NATIVE_ENVS or env_id in packaged_envs() or env_id in gymnasium.registry:
        return
    known = list(dict.fromkeys([*NATIVE_ENVS, *packaged_envs(), *gymnasium.registry]))
    close = difflib.get_close_matches(env_id, known, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown env id {env_id!r}: not a native env ({', '.join(available_envs())}) "
        f"nor a registered gymnasium env{hint}"
    )


def make_env(
    env_id: str,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    *,
    native: bool | None = None,
    backend: str | None = None,
    **kwargs,
) -> VecEnv:
    """Build a batched env of ``num_envs`` sub-envs returning tensors on ``device``.

    Parameters
    ----------
    env_id
        A native id (see :func:`available_envs`) or any registered gymnasium id.
    num_envs
        Sub-envs stepped together; native envs handle hundreds of thousands per device.
    device
        Torch device for state (native) or returned tensors (adapter); ``"auto"``: a
        GPU where torch sees one, else the CPU (see
        :func:`~elegantpod.devices.resolve_device`).
    seed
        Seed for reset noise; the same seed gives the same episodes.
    native
        ``None`` picks the native env when one exists; ``False`` forces the gymnasium
        adapter (useful for parity checks); ``True`` requires a native env.
    backend
        ``"mjx"``: MuJoCo's JAX backend for ``Ant-v5``, ``Humanoid-v5``, ``Hopper-v5`` and
        ``HalfCheetah-v5``, thousands of worlds per GPU
        (:class:`~elegantpod.envs.mjx.env.MjxVecEnv`; keywords ``physics="exact"|"fast"``
        and gymnasium's reward terms). ``None`` or ``"gymnasium"``: as ``native`` says.
    **kwargs
        Forwarded to the env class (native: ``max_episode_steps``; ``StockTrading-v0``:
        ``data``, ``start``, ``end`` and the other
        :class:`~elegantpod.finance.trading.env.StockTradingEnv` options; adapter:
        ``vectorization_mode`` and ``gymnasium.make_vec`` keywords).
    """
    check_env_id(env_id)
    # numbers first: a seed of 2**64 or a time limit of 10**18 failed late (OverflowError),
    # and num_envs=10**9 aborted the process
    num_envs = check_num_envs(num_envs)
    seed = check_seed(seed)
    if "max_episode_steps" in kwargs:
        kwargs["max_episode_steps"] = check_max_episode_steps(kwargs["max_episode_steps"])
    device = resolve_device(device)  # a malformed or absent device fails before any work
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS[1:]} or None, got {backend!r}")
    if backend == "mjx":
        if native:
            raise ValueError("native=True and backend='mjx' exclude each other")
        from elegantpod.envs.mjx.env import MjxVecEnv

        return MjxVecEnv(env_id, num_envs=num_envs, device=device, seed=seed, **kwargs)
    if env_id in packaged_envs():
        if native is False:
            raise ValueError(f"{env_id!r} has no gymnasium twin; it is native only")
        env_cls = _packaged_env(env_id)
        try:
            return env_cls(num_envs=num_envs, device=device, seed=seed, **kwargs)
        except TypeError as exc:
            raise ValueError(f"bad keyword for {env_id!r}: {exc}") from None
    use_native = env_id in NATIVE_ENVS if native is None else native
    if use_native:
        if env_id not in NATIVE_ENVS:
            raise ValueError(f"no native env for {env_id!r}; native ids: {available_envs()}")
        env_cls = NATIVE_ENVS[env_id]
        _check_keywords(env_id, env_cls, kwargs)
        files = sorted(k for k in path_kwargs(env_id) if kwargs.get(k) is not None)
        try:
            return env_cls(num_envs=num_envs, device=device, seed=seed, **kwargs)
        except Exception as exc:
            if not files:
                raise
            how = f"build {env_cls.__name__}(...) yourself to see it"
            raise ValueError(withheld(env_id, files[0], kwargs[files[0]], exc, how)) from None
    try:
        return GymVecEnv(env_id, num_envs=num_envs, device=device, seed=seed, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise ValueError(_missing_dependency(env_id, exc)) from None
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise ValueError(f"bad keyword for {env_id!r}: {exc}") from None


BACKENDS = (None, "gymnasium", "mjx")
"""Simulators ``make_env`` can put behind an id (``None``: the usual choice)."""

_SELF_KEYWORDS = {"self", "num_envs", "device", "seed"}


def _check_keywords(env_id: str, env_cls: type, kwargs: dict) -> None:
    """A keyword the env's constructor does not take fails naming the ones it does."""
    params = inspect.signature(env_cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [n for n in params if n not in _SELF_KEYWORDS]
    bad = sorted(set(kwargs) - set(accepted))
    if bad:
        names = ", ".join(accepted) or "none"
        raise ValueError(
            f"{env_id!r} takes no keyword {', '.join(repr(b) for b in bad)}; its keywords: {names}"
        )


_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco"}
"""gymnasium entry-point packages whose dependencies one of our pip extras installs."""


def _missing_dependency(env_id: str, exc: Exception) -> str:
    """Which pip extra installs what a gymnasium env lacks, or gymnasium's own advice."""
    entry = str(getattr(gymnasium.registry.get(env_id), "entry_point", ""))
    for package, extra in _EXTRAS.items():
        if f"envs.{package}" in entry:
            return (
                f"{env_id!r} needs {package} dependencies that are not installed: "
                f"pip install 'elegantpod[{extra}]' ({exc})"
            )
    return f"{env_id!r} needs a dependency that is not installed: {exc}"


def check_eval_env(env_id: str, env_kwargs: dict, eval_env_kwargs: dict, fitness: str) -> None:
    """Build one evaluation sub-env on the CPU: bad evaluation settings, or a ``fitness``
    the env cannot measure, fail here with a clear error rather than on a worker. A
    gymnasium env is reset too: a first observation unlike its declared space (float
    frames in a ``uint8`` Box, other ``Dict`` keys) is refused here (see
    :class:`~elegantpod.envs.gym.DeclaredEnv`)."""
    probe = make_env(env_id, num_envs=1, device="cpu", seed=0, **{**env_kwargs, **eval_env_kwargs})
    try:
        if isinstance(probe, GymVecEnv):  # a native env's reset is ours, and may compile
            probe.reset()
        if fitness != "return" and not getattr(probe, "record", False):
            how = env_hooks(env_id).fitness_advice() or "it does not record its episodes"

            raise ValueError(
                f"fitness {fitness!r} needs an evaluation env that measures it, and "
                f"{env_id!r} with these settings does not: {how}"
            )
    finally:
        probe.close()
