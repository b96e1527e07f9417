"""Value checks and the one way to override a frozen config's fields from strings.

Every value that reaches a config (a user's keyword, a ``--set key=value``, a mutation,
a row read back from a store) passes through these checks, so a typo or a hostile file
fails here with the field's name, rather than deep inside torch. They are functions of
their inputs: this module imports nothing from elegantpod, so every layer (agents, envs,
specs, the tournament) can use them without importing one another.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import reprlib
import types
import typing
from dataclasses import dataclass
from typing import Any

MAX_SHOWN = 200
"""Characters of a value an error message repeats: a value from a store or a command line
can be megabytes, and the message only has to say which one it was."""


class _ShortRepr(reprlib.Repr):
    """``repr`` cut short, and safe where ``repr`` is not: an integer past ``str``'s digit
    limit (Python 3.11 raises ``ValueError`` for 4,300 digits) is described, not written."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, 12, 12, 12
        self.maxset = self.maxfrozenset = self.maxdeque = self.maxarray = 12
        self.maxstring = self.maxother = MAX_SHOWN
        self.maxlong = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 600:
            return f"<an integer of about {int(x.bit_length() * math.log10(2)) + 1:,} digits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()


def short(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for an error message: at most ``limit`` characters (then ``...``),
    nested values cut at a few levels, and never an exception of its own."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # a hostile __repr__, a digit limit: say what it was
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


@functools.lru_cache(maxsize=256)
def _type_hints(cls: type) -> dict[str, Any]:
    # get_type_hints evaluates every annotation anew: cached, reading a store's history
    # (a config check per row) is fast
    return typing.get_type_hints(cls)


def _field_type(cls: type, name: str) -> Any:
    return _type_hints(cls)[name]


def _coerce(value: Any, tp: Any, name: str) -> Any:
    """Convert ``value`` (often a CLI string) to the declared type ``tp`` or raise."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args and (
            value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        ):
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, name)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if errors else f"bad value {short(value)} for {name}")
    if origin is tuple:
        (inner, *_rest) = typing.get_args(tp)
        if isinstance(value, str):
            # "256,256", "(256, 256)" and "[256,256]" all mean the same tuple
            value = [v for v in value.strip().strip("()[]").split(",") if v.strip()]
        return tuple(_coerce(v, inner, name) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{name} must be a boolean (true/false), got {short(value)}")
    if tp is int:
        if isinstance(value, bool):
            raise ValueError(f"{name} must be an integer, got {short(value)}")
        if isinstance(value, int):
            return value
        try:
            f = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{name} must be an integer, got {short(value)}") from None
        if not f.is_integer():
            raise ValueError(f"{name} must be an integer, got {short(value)}")
        return int(f)
    if tp is float:
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a number, got {short(value)}")
        try:
            f = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError(f"{name} must be a finite number, got {short(value)}") from None
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {short(value)}") from None
        if not math.isfinite(f):
            raise ValueError(f"{name} must be a finite number, got {short(value)}")
        return f
    if tp is str:
        return str(value)
    return value


def coerce_value(value: Any, tp: Any, name: str) -> Any:
    """``value`` (a string from a command line or a file, or a plain value) in the type
    ``tp`` (``int``, ``float``, ``bool``, ``str``, a tuple or optional of them), or a
    ``ValueError`` naming ``name``: what ``--set`` and run files share."""
    return _coerce(value, tp, name)


def replace_checked(cfg: Any, overrides: dict[str, Any]) -> Any:
    """``dataclasses.replace`` with names checked and values converted to field types.

    Raises
    ------
    ValueError
        Naming the unknown key (with the valid ones) or the value of the wrong type.
    """
    names = {f.name for f in dataclasses.fields(cfg)}
    changes = {}
    for key, value in overrides.items():
        if key not in names:
            raise ValueError(
                f"unknown hyperparameter {short(key)} for {type(cfg).__name__}; "
                f"valid keys: {', '.join(sorted(names))}"
            )
        changes[key] = _coerce(value, _field_type(type(cfg), key), key)
    new = dataclasses.replace(cfg, **changes)
    validate = getattr(new, "validate", None)
    if validate is not None:
        validate()
    return new


def config_values(config_cls: type, values: dict[str, Any], *, drop_unknown: bool = False):
    """Field values read back from JSON: lists become tuples again where the field is one.

    ``drop_unknown`` skips keys that are not fields (records written by another version).
    """
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    tuples = {name for name, f in fields.items() if "tuple" in str(f.type)}
    return {
        k: tuple(v) if k in tuples and v is not None else v
        for k, v in values.items()
        if not drop_unknown or k in fields
    }


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """Parse ``["lr=1e-3", "gamma=0.98"]`` (from ``--set``) into a dict of strings."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


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
MAX_REPLAY_RATIO = 1_000.0
"""Hard limit of gradient steps per collected transition (published values: up to 20)."""
MAX_EVAL_EPISODES = 10_000
"""Hard limit of deterministic episodes per evaluation (each one is a sub-env)."""


MAX_LEARNERS = 1_024
"""Hard limit of fused learners per pod (each needs its own sub-envs and networks)."""
MAX_LOSS_WEIGHT = 100.0
"""Hard limit of a loss term's weight (PPO's ``vf_coef``; published values: 0.25 to 1)."""
MAX_ENT_COEF = 1.0
"""Hard limit of PPO's entropy bonus (published values: 0 to 0.01)."""
MAX_GRAD_NORM = 1e6
"""Hard limit of gradient-norm clips (a larger one clips nothing anyway)."""
LOG_STD_RANGE = (-20.0, 5.0)
"""Hard range of the initial log standard deviation of Gaussian policies: from almost
deterministic (2e-9) to a spread of about 150 action ranges, where nearly every action
sits on the bound it is clipped to (``exp(1e308)`` is inf, and a NaN policy)."""
MAX_ENTROPY = 10_000.0
"""Hard limit of SAC's ``|target_entropy|`` (nats): a squashed Gaussian over ``d``
action dimensions has at most ``d log 2``, so a larger magnitude is a typo or an attack."""
MAX_TEMPERATURE = 1_000.0
"""Hard limit of SAC's initial temperature ``alpha`` (published values: 0.05 to 1)."""
MAX_NOISE = 10.0
"""Hard limit of an exploration or smoothing noise's scale, in actions of ``[-1, 1]``."""
MAX_DELAY = 1_000
"""Hard limit of TD3's ``policy_delay`` (critic steps per actor step; published: 2)."""
MAX_STEPS = 10**12
"""Hard limit of step counts in a schedule (epsilon decay, target updates)."""


@dataclass(frozen=True)
class Limit:
    """A hyperparameter's hard range: a config declares one per numeric field
    (``limits``), and :func:`check_limits` refuses anything outside it.

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


def check_limits(cfg: Any) -> None:
    """Raise ``ValueError`` for the first field of ``cfg`` outside its declared
    :class:`Limit` (``type(cfg).limits``)."""
    for name, limit in getattr(type(cfg), "limits", {}).items():
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


FITNESSES = ("return", "sharpe", "calmar", "sortino", "annual_return", "cumulative_return")
"""Fitness names: the mean evaluation return, or a finance metric of the evaluation
episodes (higher is better for each)."""


def check_fitness(fitness: Any) -> None:
    """Raise ``ValueError`` naming ``fitness`` unless it is one of :data:`FITNESSES`."""
    if fitness not in FITNESSES:
        raise ValueError(f"unknown fitness {short(fitness)}; choose one of {list(FITNESSES)}")


def check_json(name: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is a dict that JSON can carry unchanged."""
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict, got {type(value).__name__}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must hold JSON values (strings, numbers, lists...): {exc}; "
            "pass market data as a path or sample name, not an object"
        ) from None


def json_safe(x: Any) -> Any:
    """``x`` as strict JSON takes it: NaN and inf become ``None``, tuples lists,
    dataclasses dicts, keys strings, and any other object its text."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return json_safe(dataclasses.asdict(x))
    if x is None or isinstance(x, str | int | bool):
        return x
    return str(x)


UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories a name read from a file may not hold: control characters, format
characters (a right-to-left override would show ``KO`` as another name), surrogates,
private-use, unassigned, and line or paragraph separators."""
