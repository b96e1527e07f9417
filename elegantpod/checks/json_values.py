"""Values JSON carries unchanged: the check for a user's dict, and the conversion of
anything to strict JSON (NaN and inf as ``None``)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any


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
