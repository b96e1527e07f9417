"""Limits of an env's size, seed, time limit and observations, checked before any work.

Why: ``num_envs=10**9``, a seed of ``2**64`` or a time limit of ``10**18`` failed late
(an ``OverflowError`` deep in torch, or an aborted process) instead of raising a
``ValueError`` that names the value; every env checks its arguments here first.
"""

from __future__ import annotations

from typing import Any

MAX_NUM_ENVS = 2**24
"""Most sub-envs in one env: ``num_envs=10**9`` asked an MJX env for terabytes and
aborted the process (``std::bad_alloc``) instead of raising."""
MAX_SEED = 2**62
"""Largest env seed (in size; a tournament's pods may have negative seeds): torch's
generators take 64-bit seeds, and a pod adds offsets to its seed (one per evaluation),
which must stay within them. gymnasium's envs take seeds >= 0 only."""
MAX_OBS_VALUES = 2**22
"""Most numbers in one observation of a gymnasium env: a flattened observation's width
(a ``Discrete(n)`` state is its one-hot vector of ``n``) or a frame's pixels times
channels (1024x1024x4 fits; Atari's frames are 100,800). ``Discrete(10**9)`` asked
for a billion-wide vector and 2048x2048x3 frames for a billion-weight image encoder,
both failing in an allocation before the pod's memory check could name the sizes."""
MAX_EPISODE_STEPS = 10**9
"""Longest time limit: a step counter in 32 bits (MJX) holds it, and no episode is longer."""


def _integer(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an ``int`` in ``[low, high]``, or a ``ValueError`` naming it."""
    import operator

    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:200] + "..."
        raise ValueError(f"{name} must be an integer, got {shown}") from None
    if not low <= number <= high:
        # str() of a 5000-digit int raises; its size is what matters anyway
        shown = str(number) if abs(number) < 10**40 else f"a {number.bit_length()}-bit number"
        bound = f">= {low:,}" if number < low else f"<= {high:,}"
        raise ValueError(f"{name} must be {bound}, got {shown}")
    return number


def check_num_envs(num_envs: Any) -> int:
    """``num_envs`` as an ``int`` in ``[1, MAX_NUM_ENVS]``, else a ``ValueError``."""
    return _integer("num_envs", num_envs, 1, MAX_NUM_ENVS)


def check_seed(seed: Any) -> int | None:
    """``seed`` (``None`` or an integer within ``+-MAX_SEED``), else a ``ValueError``."""
    return None if seed is None else _integer("seed", seed, -MAX_SEED, MAX_SEED)


def check_max_episode_steps(steps: Any) -> int | None:
    """``None`` or an integer in ``[1, MAX_EPISODE_STEPS]``, else a ``ValueError``."""
    return None if steps is None else _integer("max_episode_steps", steps, 1, MAX_EPISODE_STEPS)
