"""The keywords a user passes to an MJX task, checked: gymnasium's defaults, updated.

Why a module of its own: ``make_env(..., backend="mjx", **kwargs)`` hands the user's
keywords (from a notebook, a pod spec's JSON, a ``--set`` override) to the reward,
termination and reset terms of :mod:`elegantpod.envs.mjx.tasks`, which are compiled into
the step. Checked here first, before anything imports JAX or compiles: an unknown name
lists the known ones, a range must be an ordered pair, a weight or noise scale a finite
number within bounds, so that a NaN or an absurd scale fails with its name instead of
starting every world in a state the physics cannot step.
"""

from __future__ import annotations

import math
from typing import Any

from elegantpod.envs.mjx.tasks import Task


def task_params(task: Task, kwargs: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's defaults updated by ``kwargs``; an unknown keyword names the known ones."""
    bad = sorted(set(kwargs) - set(task.defaults))
    if bad:
        raise ValueError(
            f"{task.env_id!r} with backend='mjx' takes no keyword "
            f"{', '.join(repr(b) for b in bad)}; its keywords: "
            f"{', '.join(['physics', 'max_episode_steps', *task.defaults])}"
        )
    params = {**task.defaults, **kwargs}
    for key, value in params.items():
        default = task.defaults[key]
        where = f"{task.env_id}: {key}"
        if isinstance(default, tuple):
            params[key] = _range(where, value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be True or False, got {_shown(value)}")
        else:
            high = MAX_NOISE_SCALE if key == "reset_noise_scale" else MAX_WEIGHT
            low = 0.0 if key == "reset_noise_scale" else -MAX_WEIGHT
            params[key] = _number(where, value, low, high)
    return params


MAX_NOISE_SCALE = 10.0
"""Largest ``reset_noise_scale``: gymnasium's are 0.005 to 0.1, and a scale of 1e300
started every world in a state the physics cannot step."""
MAX_WEIGHT = 1e6
"""Largest size of a reward weight: a weight of 1e300 overflows the float32 reward."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _number(where: str, value: Any, low: float, high: float) -> float:
    """``value`` as a finite float in ``[low, high]``, or a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} must be a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # a 400-digit int
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{where} must be finite, got {_shown(value)}")
    if not low <= number <= high:
        raise ValueError(f"{where} must be in [{low:g}, {high:g}], got {_shown(value)}")
    return number


def _range(where: str, value: Any) -> tuple[float, float]:
    """A ``(low, high)`` pair of numbers, not NaN, ``low <= high``, either end possibly
    infinite (gymnasium's Hopper: ``(0.7, inf)``) but not both on one side."""
    if not (isinstance(value, list | tuple) and len(value) == 2):
        raise ValueError(f"{where} must be a (low, high) pair, got {_shown(value)}")
    ends = []
    for end in value:
        if isinstance(end, bool) or not isinstance(end, int | float):
            raise ValueError(f"{where} must be a (low, high) pair of numbers, got {_shown(value)}")
        try:
            ends.append(float(end))
        except OverflowError:
            ends.append(math.copysign(math.inf, end))
    low, high = ends
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"{where} must not hold NaN, got {_shown(value)}")
    if not low <= high or low == math.inf or high == -math.inf:
        raise ValueError(f"{where} must be an ordered (low, high) pair, got {_shown(value)}")
    return low, high
