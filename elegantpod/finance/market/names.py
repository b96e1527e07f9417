"""Ticker and index names, checked: safe as column names of the frames users export.

Tickers become column names of ``to_pyfolio()`` frames and of whatever CSV or sheet a
user exports them to, and agent and index names appear in reports: a name is refused
before it can run as a spreadsheet formula (CSV injection) or garble a line.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from elegantpod.checks.text import UNPRINTABLE

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (CSV injection)."""
MAX_NAME = 64
"""Longest ticker or index name."""


def check_name(name: Any, what: str = "ticker", source: str = "") -> str:
    """``name`` if it is safe as a column name, else a ``ValueError`` naming it.

    Tickers become column names of ``to_pyfolio()`` frames and of whatever CSV or sheet a
    user exports them to; a name like ``=HYPERLINK(...)`` runs as a formula when a
    spreadsheet opens that file. So a name may not start with ``= + - @``, a tab or a
    carriage return, hold a control or format character
    (:data:`~elegantpod.checks.text.UNPRINTABLE`), be empty, or run past :data:`MAX_NAME`
    characters. Index names such as ``^GSPC`` and ``S&P 500`` are fine.
    """
    text = str(name)
    bad = (
        not text.strip()
        or text.startswith(FORMULA_START)
        or len(text) > MAX_NAME
        or any(unicodedata.category(c) in UNPRINTABLE for c in text)
    )
    if bad:
        where = f"data {source!r}: " if source else ""
        raise ValueError(
            f"{where}{what} {text[:200]!r} is refused: a name must be 1..{MAX_NAME} "
            "characters, without control or format characters, and not start with = + - @ "
            "(a spreadsheet would run it as a formula)"
        )
    return text
