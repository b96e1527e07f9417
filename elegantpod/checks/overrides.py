"""The one way to override a frozen config's fields: from keywords, strings (``--set
key=value``) or JSON read back from a store, each value coerced to its field's type and
checked, so a typo or a hostile file fails with the field's name rather than deep inside
torch; and the command line's ``key=value`` lists they come from (``--set``,
``--env-arg``), parsed here so that every command, finance's ``backtest`` included,
reads them alike.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any

from elegantpod.checks.text import short


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


def env_kwargs(items: list[str]) -> dict:
    """``["start=2016-01-01", "episode_days=null"]`` (``--env-arg``) -> ``{"start":
    "2016-01-01", "episode_days": None}``: values that parse as JSON are taken as JSON.
    The env checks the values it is built with."""
    import json

    out = {}
    for key, text in parse_assignments(items).items():
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out
