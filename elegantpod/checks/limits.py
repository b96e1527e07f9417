"""Hard limits of hyperparameters and sizes, and the checks that refuse a value past one.

A learner config declares one :class:`Limit` per numeric field (in the field itself,
:func:`elegantpod.agents.hparams.hparam`); the same check
serves a user's value, a mutation and a value read from a store, so a typo or a hostile
file cannot allocate terabytes or never finish. The ``MAX_*`` constants are those limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from elegantpod.checks.text import short


def positive(name: str, value: float | int | None, *, allow_none: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is > 0."""
    if value is None and allow_none:
        return
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number > 0, got {short(value)}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {short(value)}")
    if isinstance(value, float) and not math.isfinite(value):  # math.isfinite(10**400) raises
        raise ValueError(f"{name} must be finite, got {short(value)}")


def in_range(name: str, value: float, low: float, high: float) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``low <= value <= high``."""
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {short(value)}")


MAX_LR = 1.0
"""Hard limit of learning rates: Adam steps of that size already wreck a network, and a
larger value is a typo (``lr=1e308``), never a choice."""

MAX_EPOCHS = 1_000
"""Hard limit of passes over one rollout: an update must end within a segment."""

MAX_NUM_ENVS = 2**22
"""Hard limit of sub-envs per worker (4,194,304; the GPU benchmarks run 262,144)."""

MAX_HORIZON = 100_000
"""Hard limit of vector steps per rollout (defaults: 16 to 64)."""

MAX_LAYER_WIDTH = 65_536
"""Hard limit of units in one hidden layer (one such square layer is 16 GiB of weights)."""

MAX_LAYERS = 64
"""Hard limit of hidden layers."""

MAX_BATCH = 2**24
"""Hard limit of transitions per gradient step (``batch_size``, ``minibatch_size``)."""

MAX_BUFFER = 2**30
"""Hard limit of replay transitions."""

MAX_ROLLOUT = 2**30
"""Hard limit of transitions in one rollout, ``num_envs * horizon`` (as many as a replay
may hold, :data:`MAX_BUFFER`): each of the two is bounded alone, but their product at
both limits is 4e11 transitions, terabytes before the first step."""

MAX_REPLAY_RATIO = 1_000.0
"""Hard limit of gradient steps per collected transition (published values: up to 20)."""

MAX_EVAL_EPISODES = 10_000
"""Hard limit of deterministic episodes per evaluation (each one is a sub-env)."""

MAX_LEARNERS = 1_024
"""Hard limit of fused learners per pod (each needs its own sub-envs and networks)."""

MAX_LOSS_WEIGHT = 100.0
"""Hard limit of a loss term's weight (PPO's ``vf_coef``; published values: 0.25 to 1)."""


MAX_GRAD_NORM = 1e6
"""Hard limit of gradient-norm clips (a larger one clips nothing anyway)."""

LOG_STD_RANGE = (-20.0, 5.0)
"""Hard range of the initial log standard deviation of Gaussian policies: from almost
deterministic (2e-9) to a spread of about 150 action ranges, where nearly every action
sits on the bound it is clipped to (``exp(1e308)`` is inf, and a NaN policy)."""


MAX_NOISE = 10.0
"""Hard limit of an exploration or smoothing noise's scale, in actions of ``[-1, 1]``."""


MAX_STEPS = 10**12
"""Hard limit of step counts in a schedule (epsilon decay, target updates)."""


MAX_POD_SEED = 2**61
"""Largest pod seed, either sign: half an env's largest seed (2**62,
:data:`elegantpod.envs.limits.MAX_SEED`), the other half room for the offsets a pod adds
to its seed (its evaluation env's, each learner's, 7,919 per evaluation)."""

MAX_ENV_STEPS = 2**62
"""Hard limit of a pod's env-step budget, evaluation interval and step counter: past any
real run (a million years at 100 M steps/s) yet within a 64-bit integer with room to
add, so "never" is a value too (a segment's "evaluate only at the end", 2**60, which
checkpoints hold; the GPU benchmarks' "no evaluation", 2**62)."""

MAX_COUNT = 10**15
"""Upper bound of env-step budgets and counters (a thousand years at 30 M steps/s)."""

MAX_SECONDS = 1e9
"""Upper bound of wall-time budgets and counters (about 30 years)."""


@dataclass(frozen=True)
class Limit:
    """A hyperparameter's hard range: a config declares one per numeric field
    (:func:`elegantpod.agents.hparams.hparam`), and :func:`check_limits` refuses
    anything outside it.

    The same check serves a user's value, a mutation and a value read from a store, so
    a typo or a hostile file cannot set ``init_log_std=1e308`` or ``policy_delay=10**40``.
    """

    low: float
    high: float
    integer: bool = False
    """Only integers (``bool`` is not one)."""
    open_low: bool = False
    """``low`` itself is refused too (a rate that must be > 0)."""
    domain: bool = False
    """The range is the quantity's own (a discount in [0, 1]): say it whole in errors
    rather than calling its end a hard limit."""
    optional: bool = False
    """``None`` is allowed (it means "derive a default")."""


def check_limit(name: str, value: Any, limit: Limit) -> None:
    """Raise ``ValueError`` naming ``name`` and the value unless it lies in ``limit``."""
    if value is None and limit.optional:
        return
    if limit.integer:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {short(value)}")
    else:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number, got {short(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {short(value)}")
    # comparisons only (no float()): exact for integers of any size
    above_low = value > limit.low if limit.open_low else value >= limit.low
    if above_low and value <= limit.high:
        return
    if limit.domain:
        ends = f"{'(' if limit.open_low else '['}{limit.low}, {limit.high}]"
        raise ValueError(f"{name} must be in {ends}, got {short(value)}")
    if not above_low:
        sign = ">" if limit.open_low else ">="
        raise ValueError(f"{name} must be {sign} {limit.low:g}, got {short(value)}")
    raise ValueError(f"{name} must be <= {limit.high:,} (a hard limit), got {short(value)}")


def check_limits(cfg: Any, limits: dict[str, Limit]) -> None:
    """Raise ``ValueError`` for the first field of ``cfg`` outside its :class:`Limit` in
    ``limits`` (a learner config's: :func:`elegantpod.agents.hparams.limits`)."""
    for name, limit in limits.items():
        check_limit(name, getattr(cfg, name), limit)


def check_finite(name: str, value: Any, *, allow_none: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is a finite number (``None``
    too with ``allow_none``); an integer too large for a float is not finite here."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a finite number, got {short(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits
        finite = False
    if not finite:
        raise ValueError(f"{name} must be a finite number, got {short(value)}")


def bounded(name: str, value: Any, high: float, *, integer: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``0 < value <= high``.

    ``high`` is a hard limit (one of the ``MAX_*`` constants): a value past it is a typo
    or an attack that would allocate terabytes or never finish, so it fails here, with
    its name, rather than deep inside torch.
    """
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be an integer, got {short(value)}")
    positive(name, value)
    if value > high:
        raise ValueError(f"{name} must be <= {high:,} (a hard limit), got {short(value)}")


def check_hidden(hidden: Any) -> None:
    """Raise ``ValueError`` unless ``hidden`` is 1 to :data:`MAX_LAYERS` layer sizes,
    each an integer in ``[1, MAX_LAYER_WIDTH]``."""
    if not isinstance(hidden, tuple | list) or not hidden:
        raise ValueError(f"hidden must be positive layer sizes, got {short(hidden)}")
    if len(hidden) > MAX_LAYERS:
        raise ValueError(f"hidden has {len(hidden)} layers; at most {MAX_LAYERS} (a hard limit)")
    for h in hidden:
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise ValueError(f"hidden must be positive layer sizes, got {short(hidden)}")
        if h > MAX_LAYER_WIDTH:
            size = f"{h:,}" if h.bit_length() < 64 else short(h)
            raise ValueError(
                f"hidden layer size {size} exceeds {MAX_LAYER_WIDTH:,} (a hard limit), "
                f"in hidden={short(tuple(hidden))}"
            )


def check_rollout(num_envs: int, horizon: int) -> None:
    """Raise ``ValueError`` naming both sizes unless a rollout of ``num_envs * horizon``
    transitions stays within :data:`MAX_ROLLOUT` (each size checked alone first)."""
    n = num_envs * horizon
    if n <= MAX_ROLLOUT:
        return
    # 24 bytes: the least a transition takes (one float each of observation, next
    # observation, action, reward and flags; see elegantpod.pod.memory)
    raise ValueError(
        f"num_envs * horizon must be at most {MAX_ROLLOUT:,} transitions a rollout (a hard "
        f"limit), got num_envs={num_envs}, horizon={horizon}: {n:,} transitions, which "
        f"would need about {24 * n / 2**30:,.0f} GiB at the least"
    )


def check_at_most(name: str, value: int, other: str, high: int, why: str) -> None:
    """Raise ``ValueError`` naming both fields and values unless ``value <= high``, where
    ``high`` is the field ``other``'s value: two sizes each in range alone, impossible
    together (``why`` says why)."""
    if value > high:
        raise ValueError(f"{name}={value} must be at most {other}={high}: {why}")


def check_learners(learners: int, num_envs: int, algo: str | None = None) -> None:
    """Raise ``ValueError`` unless each of ``learners`` fused learners gets a sub-env."""
    if num_envs >= learners:
        return
    where = f"{algo} has" if algo else "got"
    hint = f" (set hparams={{{algo!r}: {{'num_envs': {learners}}}}})" if algo else ""
    raise ValueError(
        f"{learners} fused learners need num_envs >= {learners} (each trains on its own "
        f"sub-envs' data); {where} num_envs={num_envs}{hint}"
    )
