"""HTML building blocks of the finance reports: escaping, numbers, tables, images.

Every string that came from a user (ticker names, agent names, data paths) goes through
:func:`esc`; numbers are formatted here so that every section writes them alike.
"""

from __future__ import annotations

import base64
import html
import math
from typing import Any


def esc(value: Any) -> str:
    """HTML-escape anything (quotes too: the text may land in an attribute)."""
    return html.escape(str(value), quote=True)


def num(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` decimals, ``-`` where it is not a finite number."""
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def pct(x: float, digits: int = 2) -> str:
    """A fraction in percent (``0.1234`` -> ``12.34%``), ``-`` where it is not finite."""
    return f"{100 * x:.{digits}f}%" if math.isfinite(x) else "-"


def named_table(ident: str, head: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """A table with id ``ident``: names (escaped) and pre-formatted cells (numbers:
    nothing to escape); ``head`` names the name column first."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head[1:])
    body = "".join(
        f'<tr><td class="name">{esc(name)}</td>{"".join(f"<td>{c}</td>" for c in cells)}</tr>'
        for name, cells in rows
    )
    return (
        f'<table id="{ident}"><thead><tr><th class="name">{esc(head[0])}</th>{th}</tr>'
        f"</thead><tbody>{body}</tbody></table>"
    )


def img(png: bytes, alt: str, ident: str) -> str:
    """A PNG as an ``<img>`` with a base64 ``data:`` URI: the page needs no other file."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="chart" id="{ident}" alt="{esc(alt)}" src="data:image/png;base64,{data}">'
