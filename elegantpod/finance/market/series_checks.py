"""Checks of a return series and its frequency, shared by the selection statistics.

A NaN in returns means a gap upstream that a statistic would otherwise skip silently, so
it is named by its date (or position); three periods are the fewest for which a
skewness, a kurtosis and ``sqrt(T - 1)`` say anything at all.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike


def check_returns(returns: ArrayLike, name: str = "returns") -> np.ndarray:
    """``returns`` as a float64 ``(T,)`` array with ``T >= 3`` finite values.

    Three periods is the fewest for which skewness, kurtosis and ``sqrt(T - 1)`` make a
    (very wide) statement; a NaN is named by its position or date, since it means a gap
    upstream that would otherwise be skipped silently.
    """
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"{name} must be one series of shape (T,), got shape {r.shape}")
    if r.shape[0] < 3:
        raise ValueError(f"{name} has T={r.shape[0]} periods; need at least 3")
    bad = ~np.isfinite(r)
    if bad.any():
        i = int(np.argmax(bad))
        label = returns.index[i] if isinstance(returns, pd.Series) else None
        if isinstance(label, pd.Timestamp) and label == label.normalize():
            label = f"{label:%Y-%m-%d}"
        where = f"at position {i}" if label is None else f"at {label} (position {i})"
        raise ValueError(f"{name} must be finite: {float(r[i])!r} {where}")
    return r


def check_periods_per_year(periods_per_year: float) -> float:
    """``periods_per_year`` as a positive float, else a ``ValueError`` naming it."""
    is_number = isinstance(periods_per_year, numbers.Real) and not isinstance(
        periods_per_year, bool
    )
    if not (is_number and periods_per_year > 0):
        raise ValueError(f"periods_per_year must be positive, got {periods_per_year!r}")
    return float(periods_per_year)
