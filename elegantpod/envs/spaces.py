"""An env's spaces as a checkpoint records them (field ``spaces``), read back as
untrusted input; and the env's own observation space, kept where training flattened it
and used to flatten the env's own observations for a deployed policy.

:func:`spaces_payload` writes the field and :func:`read_spaces` reads its shapes and
action space back, so the one format has one home.

Why: :class:`~elegantpod.envs.gym.GymVecEnv` flattens ``Discrete``, ``MultiDiscrete``,
``MultiBinary``, ``Tuple`` and ``Dict`` observations (and Boxes of more than one
dimension) as gymnasium's ``spaces.flatten`` does, so every learner reads a flat vector.
A user deploying the policy holds the env's *own* observations (a state index, a dict of
arrays), and Stable-Baselines3's ``predict`` takes those. The checkpoint therefore
records the original space (:func:`describe_space`, plain lists, numbers and strings that
``torch.load(weights_only=True)`` reads), :func:`read_space` rebuilds it with every part
checked, and :func:`flatten_observations` turns one observation or a batch into the flat
float32 rows the network reads.

The same flattening is the pre-processing step before an exported ONNX graph, and needs
only gymnasium: ``gymnasium.spaces.flatten(env.observation_space, obs)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch

MAX_DEPTH = 8
"""Deepest nesting of Tuple and Dict spaces a saved description may have."""
MAX_PARTS = 1024
"""Most spaces (leaves and containers) a saved description may hold."""
MAX_SIZE = 1_000_000
"""Most values one described space may flatten to, or one Discrete may count."""
MAX_KEY = 100
"""Longest Dict key, in characters."""
MAX_ACTIONS = 1_000_000
"""Most discrete actions, or action dimensions, a saved action space may declare."""
MAX_PIXELS = 4096 * 4096 * 4
"""Most values one saved image observation may hold (a 4K RGBA frame): an encoder for
a larger one is refused before it is built."""


def spaces_payload(env) -> dict[str, Any]:
    """What a checkpoint records of an env's spaces (field ``spaces``), so a
    :class:`~elegantpod.policy.policy.Policy` loads without building the env: the shape of
    the observations the network reads, the action space (``n`` choices, or the Box's
    ``low`` and ``high``), and where training flattened the env's own observations, that
    space (``observation_space``, :func:`describe_space`)."""
    observation_space, action_space = env.observation_space, env.action_space
    out: dict[str, Any] = {"observation_shape": [int(d) for d in observation_space.shape]}
    if hasattr(action_space, "n"):
        out["action_n"] = int(action_space.n)
    else:
        out["action_low"] = torch.as_tensor(action_space.low, dtype=torch.float32).cpu()
        out["action_high"] = torch.as_tensor(action_space.high, dtype=torch.float32).cpu()
    raw = getattr(env, "raw_observation_space", None)
    if raw is not None:
        out["observation_space"] = describe_space(raw)
    return out


def read_spaces(spaces: Any, where: str) -> tuple[gymnasium.spaces.Box, gymnasium.spaces.Space]:
    """The observation and action spaces a checkpoint's ``spaces`` describe (what
    :func:`spaces_payload` wrote), each part checked as untrusted input; ``ValueError``
    naming the field and the bad value (what each algorithm takes is its own
    ``check_spaces``')."""
    if not isinstance(spaces, dict):
        raise ValueError(f"{where}: field 'spaces' must be a dict, got {type(spaces).__name__}")
    shape = spaces.get("observation_shape")
    if (
        not isinstance(shape, list | tuple)
        or len(shape) not in (1, 3)
        or not all(type(d) is int and 1 <= d <= MAX_ACTIONS for d in shape)
        or math.prod(shape) > MAX_PIXELS
    ):
        raise ValueError(
            f"{where}: field 'spaces.observation_shape' must be [n] with 1 <= n <= "
            f"{MAX_ACTIONS}, or [height, width, channels] of at most {MAX_PIXELS:,} values, "
            f"got {str(shape)[:200]}"
        )
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
    n = spaces.get("action_n")
    if n is not None:
        if type(n) is not int or not 1 <= n <= MAX_ACTIONS:
            raise ValueError(
                f"{where}: field 'spaces.action_n' must be an integer in 1..{MAX_ACTIONS}, "
                f"got {str(n)[:200]}"
            )
        return observation_space, gymnasium.spaces.Discrete(n)
    bounds = [spaces.get("action_low"), spaces.get("action_high")]
    for name, b in zip(("action_low", "action_high"), bounds, strict=True):
        if (
            not torch.is_tensor(b)
            or b.dtype != torch.float32
            or b.dim() != 1
            or not 1 <= b.numel() <= MAX_ACTIONS
            or b.isnan().any()
        ):
            raise ValueError(
                f"{where}: field 'spaces.{name}' must be a 1-d float32 tensor of 1 to "
                f"{MAX_ACTIONS} numbers, none NaN, got {str(b)[:200]}"
            )
    low, high = bounds
    if low.shape != high.shape or not (low <= high).all():
        raise ValueError(
            f"{where}: fields 'spaces.action_low' and 'action_high' must have one shape "
            "and low <= high"
        )
    box = gymnasium.spaces.Box(low.numpy(), high.numpy(), tuple(low.shape), np.float32)
    return observation_space, box


def describe_space(space: gymnasium.spaces.Space) -> dict[str, Any]:
    """The JSON-like description of a flattened observation space that a checkpoint
    records (field ``spaces.observation_space``): ``{"kind": ..., ...}`` per part.

    Raises ``ValueError`` for a space that training does not flatten (see
    :data:`~elegantpod.envs.gym.FLATTENED`).
    """
    if isinstance(space, gymnasium.spaces.Discrete):
        return {"kind": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return {
            "kind": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
        }
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return {"kind": "MultiBinary", "shape": [int(d) for d in space.shape]}
    if isinstance(space, gymnasium.spaces.Box):
        return {"kind": "Box", "shape": [int(d) for d in space.shape]}
    if isinstance(space, gymnasium.spaces.Tuple):
        return {"kind": "Tuple", "spaces": [describe_space(s) for s in space.spaces]}
    if isinstance(space, gymnasium.spaces.Dict):
        return {
            "kind": "Dict",
            "keys": [str(k) for k in space.spaces],
            "spaces": [describe_space(s) for s in space.spaces.values()],
        }
    raise ValueError(f"observation space {space!r} is not one that training flattens")


def read_space(desc: Any, where: str) -> gymnasium.spaces.Space:
    """The observation space a checkpoint's description holds, every part checked as
    untrusted input; ``ValueError`` naming the field and the bad value."""
    count = [0]
    return _read(desc, f"{where}: field 'spaces.observation_space'", 0, count)


def _read(desc: Any, field: str, depth: int, count: list[int]) -> gymnasium.spaces.Space:
    count[0] += 1
    if count[0] > MAX_PARTS:
        raise ValueError(f"{field}: more than {MAX_PARTS} parts")
    if depth > MAX_DEPTH:
        raise ValueError(f"{field}: nested deeper than {MAX_DEPTH}")
    if not isinstance(desc, dict) or not isinstance(desc.get("kind"), str):
        raise ValueError(f"{field} must be a dict with a 'kind', got {str(desc)[:200]}")
    kind = desc["kind"]
    if kind == "Discrete":
        n, start = desc.get("n"), desc.get("start", 0)
        if not (_int(n) and 1 <= n <= MAX_SIZE and _int(start) and abs(start) <= 2**62):
            raise ValueError(f"{field}: a Discrete needs 1 <= n <= {MAX_SIZE} and an integer start")
        return gymnasium.spaces.Discrete(n, start=start)
    if kind == "MultiDiscrete":
        nvec, start = desc.get("nvec"), desc.get("start")
        flat_n, flat_s = _int_list(nvec), _int_list(start)
        if (
            flat_n is None
            or flat_s is None
            or np.shape(nvec) != np.shape(start)
            or not flat_n
            or not all(1 <= v <= MAX_SIZE for v in flat_n)
            or sum(flat_n) > MAX_SIZE
            or not all(abs(v) <= 2**62 for v in flat_s)
        ):
            raise ValueError(f"{field}: a MultiDiscrete needs nvec of counts in 1..{MAX_SIZE}")
        return gymnasium.spaces.MultiDiscrete(np.asarray(nvec), start=np.asarray(start))
    if kind in ("MultiBinary", "Box"):
        shape = desc.get("shape")
        if (
            not isinstance(shape, list)
            or not 1 <= len(shape) <= 8
            or not all(_int(d) and d >= 1 for d in shape)
            or math.prod(shape) > MAX_SIZE
        ):
            raise ValueError(f"{field}: a {kind} needs a shape of at most {MAX_SIZE} values")
        if kind == "MultiBinary":
            return gymnasium.spaces.MultiBinary(shape)
        return gymnasium.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
    parts = desc.get("spaces")
    if kind not in ("Tuple", "Dict") or not isinstance(parts, list) or not parts:
        raise ValueError(
            f"{field}: kind must be Discrete, MultiDiscrete, MultiBinary, Box, Tuple or Dict "
            f"(a Tuple or Dict with a list of spaces), got {str(kind)[:100]}"
        )
    subs = [_read(p, f"{field}[{i}]", depth + 1, count) for i, p in enumerate(parts)]
    if kind == "Tuple":
        return gymnasium.spaces.Tuple(subs)
    keys = desc.get("keys")
    if (
        not isinstance(keys, list)
        or len(keys) != len(subs)
        or not all(isinstance(k, str) and 0 < len(k) <= MAX_KEY for k in keys)
        or len(set(keys)) != len(keys)
    ):
        raise ValueError(f"{field}: a Dict needs one distinct string key per space")
    # an ordered pairing: gymnasium keeps this order (the one training flattened in)
    return gymnasium.spaces.Dict(list(zip(keys, subs, strict=True)))


def _int(x: Any) -> bool:
    return type(x) is int


def _int_list(x: Any) -> list[int] | None:
    """The integers of a nested list, ``None`` where it holds anything else."""
    if _int(x):
        return [x]
    if not isinstance(x, list):
        return None
    out: list[int] = []
    for v in x:
        part = _int_list(v)
        if part is None:
            return None
        out += part
    return out


def flat_size(space: gymnasium.spaces.Space) -> int:
    """Values one observation of ``space`` flattens to (gymnasium's ``flatdim``)."""
    return int(gymnasium.spaces.flatdim(space))


# -- the env's own observations, flattened -----------------------------------------------
def flatten_observations(space: gymnasium.spaces.Space, obs: Any) -> tuple[np.ndarray, bool] | None:
    """``obs`` as the env's own observation (``space`` holds it) or a batch of them (as
    a gymnasium vector env returns them: a leading batch dimension on every array, a
    dict of such arrays for a Dict, a tuple for a Tuple), flattened to float32 rows.

    Returns ``(rows, single)``: ``rows`` of shape ``(batch, flatdim)``, ``single`` when
    ``obs`` was one observation; ``None`` when ``obs`` has neither form (the caller then
    reads it as observations flattened already). Raises ``ValueError`` naming the value
    for an observation of the right form that ``space`` does not hold (a state index out
    of range, a MultiBinary value that is not 0 or 1).
    """
    if _fits(space, obs, batch=None):
        return gymnasium.spaces.flatten(space, _as_raw(space, obs)).astype(np.float32)[None], True
    n = _batch_size(space, obs)
    if n is None or not _fits(space, obs, batch=n):
        return None
    rows = [gymnasium.spaces.flatten(space, _row(space, obs, i)) for i in range(n)]
    return np.stack(rows).astype(np.float32).reshape(n, flat_size(space)), False


def _fits(space: gymnasium.spaces.Space, x: Any, batch: int | None) -> bool:
    """Does ``x`` have the form of one observation of ``space`` (``batch`` None) or of
    ``batch`` of them? Values are checked by :func:`_as_raw` once the form fits."""
    lead = () if batch is None else (batch,)
    if isinstance(space, gymnasium.spaces.Dict):
        return (
            isinstance(x, Mapping)
            and set(x) == set(space.spaces)
            and all(_fits(s, x[k], batch) for k, s in space.spaces.items())
        )
    if isinstance(space, gymnasium.spaces.Tuple):
        return (
            isinstance(x, tuple | list)
            and len(x) == len(space.spaces)
            and all(_fits(s, v, batch) for s, v in zip(space.spaces, x, strict=True))
        )
    if isinstance(x, Mapping | str | bytes) or x is None:
        return False
    try:
        a = np.asarray(x)
    except (TypeError, ValueError):
        return False
    if isinstance(space, gymnasium.spaces.Discrete):
        return a.shape == lead and a.dtype.kind in "iu"
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return a.shape == lead + space.shape and a.dtype.kind in "iu"
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return a.shape == lead + space.shape and a.dtype.kind in "iub"
    return a.shape == lead + space.shape and a.dtype.kind in "fiu"  # a Box


def _batch_size(space: gymnasium.spaces.Space, x: Any) -> int | None:
    """The leading dimension of the first array in ``x`` (``None``: no array)."""
    while isinstance(space, gymnasium.spaces.Dict | gymnasium.spaces.Tuple):
        if isinstance(space, gymnasium.spaces.Dict):
            if not isinstance(x, Mapping) or not space.spaces:
                return None
            key = next(iter(space.spaces))
            if key not in x:
                return None
            space, x = space.spaces[key], x[key]
        else:
            if not isinstance(x, tuple | list) or not x:
                return None
            space, x = space.spaces[0], x[0]
    try:
        shape = np.shape(x)
    except (TypeError, ValueError):
        return None
    return int(shape[0]) if len(shape) >= 1 and shape[0] >= 1 else None


def _row(space: gymnasium.spaces.Space, x: Any, i: int) -> Any:
    """Observation ``i`` of a batch, checked as one observation."""
    if isinstance(space, gymnasium.spaces.Dict):
        return {k: _row(s, x[k], i) for k, s in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(_row(s, v, i) for s, v in zip(space.spaces, x, strict=True))
    return _as_raw(space, np.asarray(x)[i])


def _as_raw(space: gymnasium.spaces.Space, x: Any) -> Any:
    """One observation in the form ``gymnasium.spaces.flatten`` takes, its values
    checked against ``space`` (what a one-hot of an index out of range would hide)."""
    if isinstance(space, gymnasium.spaces.Dict):
        return {k: _as_raw(s, x[k]) for k, s in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(_as_raw(s, v) for s, v in zip(space.spaces, x, strict=True))
    a = np.asarray(x)
    if isinstance(space, gymnasium.spaces.Discrete):
        v = int(a)
        if not space.start <= v < space.start + space.n:
            raise ValueError(
                f"observation {v} is not a state of Discrete({space.n}"
                + (f", start={space.start}" if space.start else "")
                + ")"
            )
        return np.int64(v)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        lo = np.asarray(space.start)
        if ((a < lo) | (a >= lo + space.nvec)).any():
            raise ValueError(
                f"observation {a.tolist()} is not in MultiDiscrete({space.nvec.tolist()})"
            )
        return a.astype(np.int64)
    if isinstance(space, gymnasium.spaces.MultiBinary):
        if not np.isin(a, (0, 1)).all():
            raise ValueError(f"a MultiBinary observation holds only 0 and 1, got {a.tolist()}")
        return a.astype(np.int8)
    return a.astype(np.float32)
