"""Adapter: any gymnasium env id or gymnasium vector env -> elegantpod's VecEnv.

gymnasium 1.x vector envs auto-reset on the *next* step by default: the step after an
episode ends ignores the action and returns the reset observation. elegantpod settles
on *same-step* auto-reset (see :mod:`elegantpod.envs.base`). Envs built here from an id
ask gymnasium for ``SAME_STEP`` directly; a vector env handed in with ``NEXT_STEP`` or
``DISABLED`` is converted by resetting the finished sub-envs at once with
``reset(options={"reset_mask": done})``, which also cancels gymnasium's pending reset.

Tensors are float32 whatever the env computes in: MuJoCo envs observe in float64, and
``observation_space`` is reported as the float32 Box that the returned tensors fill.

Observations that are not a flat Box are flattened as gymnasium's
``spaces.flatten`` does, so every learner takes them: a ``Discrete`` state (FrozenLake)
becomes its one-hot vector, ``MultiDiscrete`` one one-hot per part, ``MultiBinary`` and
a Box of any shape their numbers, and ``Tuple`` and ``Dict`` (Blackjack's
``(sum, dealer card, usable ace)``) the concatenation of their parts.
``observation_space`` is then the flat Box (:data:`FLATTENED`). Images (a Box of
``uint8`` with 3 dimensions: CarRacing's frames) are the exception: a policy over their
flattened pixels learns little, so they keep their shape, as float32 pixel values
0..255 in a Box of that shape, for the learners with an image encoder (PPO and DQN,
see :mod:`elegantpod.agents.nets`).
Actions are passed on as they come (learners already send them within the Box bounds),
cast to the action space's dtype.

A user's env is held to what it declares (:class:`DeclaredEnv`): an observation of more
than :data:`~elegantpod.envs.limits.MAX_OBS_VALUES` numbers is refused when the first
sub-env is built, and each reset's and the first step's observation must have the
declared dtype, shape and ``Dict`` keys; a ``close()`` that raises is a warning.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from elegantpod.checks.text import short
from elegantpod.envs.base import StepResult, Tensor
from elegantpod.envs.limits import MAX_OBS_VALUES, check_num_envs, check_seed

NO_LIMIT_STEPS = 100_000
"""Steps an evaluation waits for its episodes to end on an env without a time limit."""


def time_limit_advice(env_id: str) -> str:
    """How to give ``env_id`` a time limit: what the warning before training and the
    error of an evaluation that never ends both say."""
    return (
        "give it one with env_kwargs={'max_episode_steps': N} (--env-arg "
        f"max_episode_steps=N), or register {env_id!r} with max_episode_steps=N"
    )


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
                    **declared_kwargs(env, make_kwargs),
                )
            except Exception as exc:
                # a missing package, a wrong keyword or an observation refused by
                # DeclaredEnv: messages that quote no file
                is_plain = isinstance(
                    exc, gymnasium.error.DependencyNotInstalled | ObservationError
                ) or (isinstance(exc, TypeError) and "keyword argument" in str(exc))
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
        single = self.vec.single_observation_space
        self.raw_observation_space = flattened_space(single, self.env_id)
        """The env's own observation space where the observations the learners read are
        its flattened form (see the module docstring), else ``None``: a checkpoint
        records it, so that a deployed ``Policy`` takes the env's own observations
        (:mod:`elegantpod.envs.spaces`)."""
        check_obs_values(single, self.env_id)  # a ready vector env's: before flatten_space
        if self.raw_observation_space is None:
            self.observation_space = _float32_box(single)
        else:  # gymnasium flattens a Discrete into an int64 Box: ours holds float32
            flat = gymnasium.spaces.flatten_space(single)
            low, high = flat.low.astype(np.float32), flat.high.astype(np.float32)
            self.observation_space = gymnasium.spaces.Box(low, high, flat.shape, np.float32)
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
        self._last_obs = obs
        return self._tensor(self._flat(obs))

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
        flat = self._flat(obs)  # (num_envs, d): the flat form of every observation
        final_obs = np.array(flat, copy=True)
        if done.any():
            if self.autoreset_mode == AutoresetMode.SAME_STEP:
                mask = info.get("_final_obs", done)
                final_obs[mask] = np.stack([self._flat_one(o) for o in info["final_obs"][mask]])
            else:
                # NEXT_STEP / DISABLED: obs already is the final one; start the next
                # episode now so this step returns its first observation.
                reset_obs, _ = self.vec.reset(options={"reset_mask": done})
                reset_flat = self._flat(reset_obs)
                flat = np.where(done.reshape(-1, *([1] * (flat.ndim - 1))), reset_flat, flat)
        self._returns += reward
        self._lengths += 1
        ep_return, ep_length = self._returns.copy(), self._lengths.copy()
        self._returns[done] = 0.0
        self._lengths[done] = 0
        self._last_obs = flat
        out_info = {
            "final_obs": self._tensor(final_obs),
            "episode_return": self._tensor(ep_return),
            "episode_length": self._tensor(ep_length, torch.int64),
        }
        return (
            self._tensor(flat),
            self._tensor(reward),
            self._tensor(terminated, torch.bool),
            self._tensor(truncated, torch.bool),
            out_info,
        )

    def _flat(self, obs) -> np.ndarray:
        """A batch of observations as the ``(num_envs, d)`` array the tensors fill."""
        if self.raw_observation_space is None:
            return np.asarray(obs)
        space = self.raw_observation_space
        rows = gymnasium.vector.utils.iterate(self.vec.observation_space, obs)
        return np.stack([gymnasium.spaces.flatten(space, o) for o in rows]).astype(np.float32)

    def _flat_one(self, obs) -> np.ndarray:
        """One sub-env's observation (a final one), flattened as :meth:`_flat` does."""
        if self.raw_observation_space is None:
            return np.asarray(obs)
        return gymnasium.spaces.flatten(self.raw_observation_space, obs).astype(np.float32)

    def close(self) -> None:
        """Close the underlying gymnasium env (ends worker processes of async envs).

        An error of the env's own ``close()`` is a warning, not raised: closing is the
        clean-up after a finished or failed run (a pod's, a tournament segment's), whose
        result or real error it must not replace.
        """
        try:
            self.vec.close()
        except Exception as exc:
            warn_close(self.env_id, exc)

    def __repr__(self) -> str:
        return f"GymVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={self.device})"


FLATTENED = (
    gymnasium.spaces.Discrete,
    gymnasium.spaces.MultiDiscrete,
    gymnasium.spaces.MultiBinary,
    gymnasium.spaces.Tuple,
    gymnasium.spaces.Dict,
)
"""Observation spaces flattened into a Box (as is a Box of more than one dimension)."""


def flattened_space(space: gymnasium.spaces.Space, env_id: str):
    """``space`` where its observations are to be flattened, ``None`` where they are a
    flat Box or images already; an :class:`ObservationError` (a ``ValueError``) for
    spaces that have no fixed-size flat form (``Text``, ``Graph``, ``Sequence``)."""
    if isinstance(space, gymnasium.spaces.Box):
        if len(space.shape) == 1 or is_image_space(space):
            return None
        return space
    if isinstance(space, FLATTENED) and _has_flat_form(space):
        return space
    raise ObservationError(
        f"{env_id!r} observes {type(space).__name__} spaces, which have no fixed-size "
        "vector form; elegantpod takes Box, Discrete, MultiDiscrete, MultiBinary and "
        "Tuple or Dict of those"
    )


def is_image_space(space: gymnasium.spaces.Space) -> bool:
    """A Box of ``uint8`` with 3 dimensions: frames, kept in their shape (module docstring)."""
    return (
        isinstance(space, gymnasium.spaces.Box)
        and len(space.shape) == 3
        and space.dtype == np.uint8
    )


def _has_flat_form(space: gymnasium.spaces.Space) -> bool:
    if isinstance(space, gymnasium.spaces.Tuple):
        return all(_has_flat_form(s) for s in space.spaces)
    if isinstance(space, gymnasium.spaces.Dict):
        return all(_has_flat_form(s) for s in space.spaces.values())
    return isinstance(space, (gymnasium.spaces.Box, *FLATTENED))


def _float32_box(space: gymnasium.spaces.Space) -> gymnasium.spaces.Space:
    """A float Box, or images, as the float32 Box our tensors fill (others unchanged)."""
    if is_image_space(space):
        return gymnasium.spaces.Box(0.0, 255.0, space.shape, np.float32)
    if not isinstance(space, gymnasium.spaces.Box) or space.dtype == np.float32:
        return space
    if not np.issubdtype(space.dtype, np.floating):
        return space
    low, high = space.low.astype(np.float32), space.high.astype(np.float32)
    return gymnasium.spaces.Box(low, high, space.shape, np.float32)


# -- a user's env held to what it declares -------------------------------------------------
class ObservationError(ValueError):
    """An env's observation space, or an observation, that elegantpod cannot take as
    declared: too large, or not what the space says (dtype, shape, keys)."""


class DeclaredEnv(gymnasium.Wrapper):
    """One sub-env of a gymnasium env, refused where it observes otherwise than it declares.

    Why: gymnasium's batching of sub-envs fails obscurely on such observations (float
    frames in a ``uint8`` space: ``Cannot cast array data``; a ``Dict`` lacking a key: a
    bare ``KeyError``), or casts them silently (``uint16`` 300 into ``uint8``: 44; a key
    the space lacks: dropped), and gymnasium's own checker only warns, or asserts, at
    the first reset and step. This wrapper sits above the env and the time limit that
    ``gymnasium.make`` adds, below gymnasium's checker (:func:`declared_kwargs`), and
    raises one :class:`ObservationError` naming the env, the dtype, shape or keys: for
    a space too large when the sub-env is built, before the vector env allocates its
    batch; for an observation at every reset and at the first step (each later step
    goes straight to the env, at no cost). An error of the env's ``close()`` is a
    warning (see :meth:`GymVecEnv.close`).
    """

    def __init__(self, env: gymnasium.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        flattened_space(env.observation_space, env_id)  # no fixed-size form: said now
        check_obs_values(env.observation_space, env_id)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """The env's reset, its observation checked (every reset: an episode's cost)."""
        obs, info = self.env.reset(seed=seed, options=options)
        check_observation(self.observation_space, obs, self.env_id, "reset()")
        return obs, info

    def step(self, action):
        """The env's first step, its observation checked; later steps are the env's own."""
        out = self.env.step(action)
        check_observation(self.observation_space, out[0], self.env_id, "step()")
        # later steps call the env's own step: a check at every step costs every step
        self.step = self.env.step
        return out

    def close(self) -> None:
        """Close the env; an error of its ``close()`` is a warning (:func:`warn_close`)."""
        try:
            self.env.close()
        except Exception as exc:
            warn_close(self.env_id, exc)


def declared_kwargs(env_id: str, make_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``make_kwargs`` for ``gymnasium.make_vec`` with :class:`DeclaredEnv` on each sub-env.

    gymnasium's checker (``PassiveEnvChecker``), when the spec or ``disable_env_checker``
    asks for it, moves above ``DeclaredEnv``: put first by ``gymnasium.make``, it would
    assert (a ``Dict``'s keys) or warn (a dtype) before our check could say what to do.
    ``wrappers`` of the caller go on top.
    """
    kwargs = dict(make_kwargs)
    spec = gymnasium.registry.get(env_id)
    disabled = kwargs.pop("disable_env_checker", None)
    if disabled is None:  # an unknown id: make_vec says so
        disabled = spec is None or spec.disable_env_checker
    checker = [] if disabled else [gymnasium.wrappers.PassiveEnvChecker]
    wrappers = [functools.partial(DeclaredEnv, env_id=env_id), *checker]
    return {
        **kwargs,
        "disable_env_checker": True,
        "wrappers": [*wrappers, *(kwargs.pop("wrappers", None) or ())],
    }


def obs_values(space: gymnasium.spaces.Space) -> int:
    """Numbers in one observation of ``space`` as the adapter returns it: a frame's
    pixels times channels, else its flattened width (a ``Discrete``'s one-hot ``n``).

    Counted in Python integers, from the space's sizes only: gymnasium's ``flatdim``
    sums a ``MultiDiscrete`` in int64, which overflows to a negative width.
    """
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return sum(int(n) for n in space.nvec.flat)
    if isinstance(space, gymnasium.spaces.Tuple):
        return sum(obs_values(s) for s in space.spaces)
    if isinstance(space, gymnasium.spaces.Dict):
        return sum(obs_values(s) for s in space.spaces.values())
    return math.prod(int(d) for d in space.shape)  # Box, MultiBinary


def check_obs_values(space: gymnasium.spaces.Space, env_id: str) -> None:
    """Raise :class:`ObservationError` naming ``space`` and its size when one observation
    holds more than :data:`~elegantpod.envs.limits.MAX_OBS_VALUES` numbers."""
    values = obs_values(space)
    if values <= MAX_OBS_VALUES:
        return
    if is_image_space(space):
        what, advice = "a frame", "downscale or crop the frames"
    elif _has_one_hot(space):
        what = "once flattened"
        advice = "a Discrete state is its one-hot vector; observe features of the state"
    else:
        what, advice = "once flattened", "observe fewer numbers"
    raise ObservationError(
        f"{env_id!r} observes {short(space)}, {values:,} values {what}; elegantpod "
        f"takes observations of at most {MAX_OBS_VALUES:,} (MAX_OBS_VALUES): {advice}"
    )


def _has_one_hot(space: gymnasium.spaces.Space) -> bool:
    if isinstance(space, gymnasium.spaces.Tuple | gymnasium.spaces.Dict):
        parts = space.spaces.values() if isinstance(space.spaces, dict) else space.spaces
        return any(_has_one_hot(s) for s in parts)
    return isinstance(space, gymnasium.spaces.Discrete | gymnasium.spaces.MultiDiscrete)


def check_observation(
    space: gymnasium.spaces.Space, obs: Any, env_id: str, where: str, path: str = "observation"
) -> None:
    """Raise :class:`ObservationError` where ``obs``, which the env's ``where`` returned,
    is not of ``space``'s dtype (or one that casts within its kind, as gymnasium's
    batching does: ``float64`` for ``float32``, not ``float64`` for ``uint8``), shape,
    integer range, ``Dict`` keys or ``Tuple`` length. Values within a Box's bounds are
    not checked: that costs a pass over every observation."""
    if isinstance(space, gymnasium.spaces.Dict):
        if not isinstance(obs, Mapping):
            _refuse(env_id, path, f"declares a dict, but its {where} returned a {_kind(obs)}")
        missing = [k for k in space.spaces if k not in obs]
        extra = [k for k in obs if k not in space.spaces]
        if missing or extra:
            parts = [f"lacks {_keys(missing)}"] if missing else []
            parts += [f"has {_keys(extra)} it does not declare"] if extra else []
            declared = ", ".join(short(k) for k in space.spaces)
            _refuse(
                env_id,
                path,
                f"declares the keys {declared}, but what its {where} returned "
                f"{' and '.join(parts)}",
            )
        for key, sub in space.spaces.items():
            check_observation(sub, obs[key], env_id, where, f"{path}[{short(key)}]")
    elif isinstance(space, gymnasium.spaces.Tuple):
        if not isinstance(obs, tuple | list) or len(obs) != len(space.spaces):
            got = f"{len(obs)} parts" if isinstance(obs, tuple | list) else f"a {_kind(obs)}"
            _refuse(
                env_id, path, f"declares {len(space.spaces)} parts, but its {where} returned {got}"
            )
        for i, (sub, part) in enumerate(zip(space.spaces, obs, strict=True)):
            check_observation(sub, part, env_id, where, f"{path}[{i}]")
    else:
        _check_array(space, obs, env_id, where, path)


def _check_array(space, obs: Any, env_id: str, where: str, path: str) -> None:
    """A Box's, Discrete's, MultiDiscrete's or MultiBinary's observation (see
    :func:`check_observation`)."""
    declared = np.dtype(space.dtype)
    try:
        array = np.asarray(obs)
    except (TypeError, ValueError):  # a ragged list, an object numpy cannot read
        array = np.empty((), dtype=object)
    if not np.can_cast(array.dtype, declared, "same_kind"):
        got = array.dtype if array.dtype != object else _kind(obs)
        _refuse(
            env_id,
            path,
            f"declares {declared} values, but its {where} returned {got} ones: return "
            f"{declared} values, or declare the dtype the env computes in",
        )
    if array.shape != space.shape:
        _refuse(
            env_id,
            path,
            f"declares observations of shape {space.shape}, but its {where} returned one "
            f"of shape {array.shape}",
        )
    if np.issubdtype(declared, np.integer) and array.dtype != declared and array.size:
        info = np.iinfo(declared)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            extreme = f"as large as {high}" if high > info.max else f"as small as {low}"
            _refuse(
                env_id,
                path,
                f"declares {declared} values, but its {where} returned {array.dtype} ones "
                f"{extreme}, outside {declared}'s {info.min}..{info.max} (they would wrap)",
            )
    if isinstance(space, gymnasium.spaces.Discrete):
        start, n = int(space.start), int(space.n)
        if not start <= int(array) < start + n:
            _refuse(
                env_id,
                path,
                f"holds {start}..{start + n - 1}, but its {where} returned {int(array)}",
            )


def _refuse(env_id: str, path: str, what: str) -> None:
    raise ObservationError(f"{env_id!r}, {path}: its observation space {what}")


def _kind(obs: Any) -> str:
    return type(obs).__name__


def _keys(keys: list) -> str:
    return f"the key{'s' if len(keys) > 1 else ''} {', '.join(short(k) for k in keys)}"


def warn_close(env_id: str, exc: BaseException) -> None:
    """Warn that closing ``env_id`` raised ``exc``, which is not raised (see
    :meth:`GymVecEnv.close`)."""
    warnings.warn(
        f"closing {env_id!r} raised {short(exc)}; ignored, "
        "as the run it ended has its own result or error",
        RuntimeWarning,
        stacklevel=3,
    )
