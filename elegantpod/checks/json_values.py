"""Values JSON carries unchanged: the check for a user's dict, the conversion of anything
to strict JSON (NaN and inf as ``None``), and JSON read from an untrusted file."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from elegantpod.checks.text import MAX_SHOWN


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


def parse_json(data: str | bytes, where: str) -> Any:
    """``json.loads(data)``, or one ``ValueError`` that starts with ``where`` (say, the
    file) for anything it cannot read.

    Why: JSON from a file someone else made fails in more ways than
    ``json.JSONDecodeError``: ``[[[...]]]`` nested 100,000 deep raises ``RecursionError``
    (a raw traceback, not a ``ValueError``), an integer past Python's 4,300 digits a
    ``ValueError`` of its own, bytes that are not UTF-8 a ``UnicodeDecodeError``. Each
    becomes ``"{where}: ..."``, at most :data:`~elegantpod.checks.text.MAX_SHOWN`
    characters of the reason after it.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{where}: nested too deeply to read (hostile or corrupt JSON)") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the digit limit
        raise ValueError(f"{where}: {str(exc)[:MAX_SHOWN]}") from None
