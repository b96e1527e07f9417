"""HTML building blocks of the finance reports: named tables.

Every string that came from a user (ticker names, agent names, data paths) goes through
:func:`elegantpod.html_table.escape`, and every table through
:func:`elegantpod.html_table.table`, which escapes each cell; numbers are formatted here
with :func:`elegantpod.number_text.fixed` and :func:`~elegantpod.number_text.percent`,
so that every section writes them alike. Charts go in through
:func:`elegantpod.figures.img`.
"""

from __future__ import annotations

from elegantpod.html_table import Markup, table, td, th


def named_table(ident: str, head: list[str], rows: list[tuple[str, list[str]]]) -> Markup:
    """A table with id ``ident`` whose first column names each row: ``head`` names that
    column first; each row is ``(name, cells)``. Names and cells are text (escaped)."""
    return table(
        [th(head[0], class_="name"), *head[1:]],
        ([td(name, class_="name"), *cells] for name, cells in rows),
        id=ident,
    )
