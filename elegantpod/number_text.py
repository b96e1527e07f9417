"""How every view writes a number: one rule for the CLI, reprs, progress lines, widgets
and reports, so that one score reads the same wherever it shows.

Counts are exact with thousands separated (``163,840``); other numbers get four
significant digits below 1,000 and whole, separated digits from there (``0.1235``,
``487.3``, ``2,933``): no view shows ``1.235e+04``. Nothing (``None``, NaN, an
infinity, not a number) is ``-``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def number(x: Any) -> str:
    """``x`` as a person reads it (see the module's rule); ``-`` for none."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):  # numpy's numbers too
        return "-"
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    x = float(x)
    if not math.isfinite(x):
        return "-"
    return f"{x:.4g}" if abs(x) < 1e3 else f"{x:,.0f}"


def steps(x: Any) -> str:
    """An env-step count (``163,840``); anything else as it is (``-``: none)."""
    try:
        return f"{int(x):,}"
    except (TypeError, ValueError):
        return str(x)


def fixed(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` decimals (a report's ratios: ``1.23``), ``-`` where it is not a
    finite number."""
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def percent(x: float, digits: int = 2) -> str:
    """A fraction in percent (``0.1234`` -> ``12.34%``), ``-`` where it is not finite."""
    return f"{100 * x:.{digits}f}%" if math.isfinite(x) else "-"
