"""HTML building blocks of the finance reports: numbers and named tables.

Every string that came from a user (ticker names, agent names, data paths) goes through
:func:`elegantpod.html_table.escape`, and every table through
:func:`elegantpod.html_table.table`, which escapes each cell; numbers are formatted here
so that every section writes them alike. Charts go in through
:func:`elegantpod.figures.img`.
"""

from __future__ import annotations

import math

from elegantpod.html_table import Markup, table, td, th

__all__ = ["named_table", "num", "pct"]


def num(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` decimals, ``-`` where it is not a finite number."""
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def pct(x: float, digits: int = 2) -> str:
    """A fraction in percent (``0.1234`` -> ``12.34%``), ``-`` where it is not finite."""
    return f"{100 * x:.{digits}f}%" if math.isfinite(x) else "-"


def named_table(ident: str, head: list[str], rows: list[tuple[str, list[str]]]) -> Markup:
    """A table with id ``ident`` whose first column names each row: ``head`` names that
    column first; each row is ``(name, cells)``. Names and cells are text (escaped)."""
    return table(
        [th(head[0], class_="name"), *head[1:]],
        ([td(name, class_="name"), *cells] for name, cells in rows),
        id=ident,
    )
