"""One way to write an HTML table: every cell is text, escaped, unless marked as markup.

Why: the backtest report, its tear sheet, the walk-forward page and the notebook views
wrote their tables by hand, and each had to remember to escape a ticker, a pod name or an
error that may come from someone else's data or store (and runs in the user's notebook
page). Here escaping is the default. A cell, a header and an attribute value are text;
only a :class:`Markup` value (HTML that the caller built and vouches for) goes in as it
is, so every opt-out is visible where it happens. Numbers are formatted by the caller
(:func:`elegantpod.number_text.number`, or a report's fixed decimals) before they get
here: the table writes text, it does not decide how a number reads.

>>> from elegantpod.html_table import Markup, table, td
>>> table(None, [[td("<b>", class_="name"), Markup("<i>ok</i>")]])
'<table><tbody><tr><td class="name">&lt;b&gt;</td><td><i>ok</i></td></tr></tbody></table>'
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Cell", "Markup", "Row", "escape", "table", "td", "th", "tr"]


class Markup(str):
    """Text that already is HTML: a table writes it as it is, unescaped.

    Wrap only what you built yourself from escaped parts and fixed tags
    (``Markup(f"<b>{escape(name)}</b>")``); anything else is text and is escaped, which
    is what a value from a user, a data file or a store must be.
    """

    __slots__ = ()

    def __html__(self) -> str:
        """The markup itself (the protocol jinja2 and markupsafe read)."""
        return str(self)


def escape(value: Any) -> Markup:
    """``value`` as HTML text: ``str(value)`` with ``& < > " '`` escaped (quotes too, so
    it is safe in an attribute); a :class:`Markup` value is returned as it is."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


_ATTR_NAME = re.compile(r"[a-z][a-z0-9-]*")


def _attrs(attrs: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Keyword attributes as ``(name, value)`` pairs: ``class_`` is ``class``, other
    underscores are hyphens, ``None`` leaves the attribute out."""
    out = []
    for key, value in attrs.items():
        name = key.rstrip("_").replace("_", "-")
        if not _ATTR_NAME.fullmatch(name):
            raise ValueError(f"not an HTML attribute name: {key!r}")
        if value is not None:
            out.append((name, str(value)))
    return tuple(out)


def _open(tag: str, attrs: tuple[tuple[str, str], ...]) -> str:
    return f"<{tag}" + "".join(f' {k}="{escape(v)}"' for k, v in attrs) + ">"


@dataclass(frozen=True)
class Cell:
    """One ``<td>`` or ``<th>`` with attributes (made by :func:`td` and :func:`th`)."""

    content: Any
    """Text (escaped when written) or :class:`Markup`."""
    tag: str = "td"
    """``"td"`` or ``"th"``."""
    attrs: tuple[tuple[str, str], ...] = ()
    """``(name, value)`` pairs, written in this order, values escaped."""

    def html(self) -> str:
        """The cell as HTML."""
        return f"{_open(self.tag, self.attrs)}{escape(self.content)}</{self.tag}>"


@dataclass(frozen=True)
class Row:
    """One ``<tr>`` with attributes (made by :func:`tr`)."""

    cells: tuple[Any, ...]
    """:class:`Cell` values, or contents of plain ``<td>`` cells."""
    attrs: tuple[tuple[str, str], ...] = ()
    """``(name, value)`` pairs, written in this order, values escaped."""

    def html(self, tag: str = "td") -> str:
        """The row as HTML; a cell given as its content becomes a ``tag`` cell."""
        cells = "".join((c if isinstance(c, Cell) else Cell(c, tag)).html() for c in self.cells)
        return f"{_open('tr', self.attrs)}{cells}</tr>"


def td(content: Any, **attrs: Any) -> Cell:
    """A data cell: ``td(name, class_="name")``, ``td(text, colspan=7)``."""
    return Cell(content, "td", _attrs(attrs))


def th(content: Any, **attrs: Any) -> Cell:
    """A header cell: ``th("Strategy", class_="name")``."""
    return Cell(content, "th", _attrs(attrs))


def tr(cells: Iterable[Any], **attrs: Any) -> Row:
    """A row with attributes: ``tr(cells, class_="agent")``. A plain sequence of cells is
    a row without any."""
    return Row(tuple(cells), _attrs(attrs))


def table(head: Sequence[Any] | None, rows: Iterable[Row | Sequence[Any]], **attrs: Any) -> Markup:
    """An HTML table: ``<table attrs><thead>head</thead><tbody>rows</tbody></table>``.

    Parameters
    ----------
    head
        The header row's cells (contents become ``<th>``; a :class:`Cell` as it is), or
        ``None`` for a table without a ``<thead>``.
    rows
        The body: each a :class:`Row` (:func:`tr`) or a sequence of cells, a cell being
        a :class:`Cell` (:func:`td`, :func:`th`) or its content for a plain ``<td>``.
        Every content is escaped unless it is :class:`Markup`.
    **attrs
        The table's attributes, in order (``id="metrics"``, ``class_="heat"``); values
        are escaped, ``None`` leaves one out.
    """
    out = [_open("table", _attrs(attrs))]
    if head is not None:
        out.append(f"<thead>{Row(tuple(head)).html('th')}</thead>")
    body = "".join((r if isinstance(r, Row) else Row(tuple(r))).html() for r in rows)
    out.append(f"<tbody>{body}</tbody></table>")
    return Markup("".join(out))
