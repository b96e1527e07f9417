"""Matplotlib figures for the HTML reports: made without pyplot, drawn with plain text,
and embedded as PNG ``data:`` URIs.

Why one module: the backtest report, its tear sheet and the comparison report all draw
user strings (agent, ticker, method and store names) into charts and put the charts in
a page that must need no other file. Three rules, kept here once:

- no pyplot: a :class:`~matplotlib.figure.Figure` of its own (pyplot's global state is not
  safe in a dashboard's background thread, and a report must not open windows);
- plain text: no mathtext and no LaTeX, whatever the user's matplotlibrc says (a name
  such as ``$\\foo{$`` would not parse; :data:`PLAIN_TEXT`);
- a chart is a base64 PNG inside its ``<img>`` (:func:`img`), its ``alt`` escaped.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

from elegantpod.html_table import escape

__all__ = ["PLAIN_TEXT", "figure", "img", "plain", "png"]

PLAIN_TEXT = {"text.usetex": False, "text.parse_math": False}
"""Matplotlib settings for every chart: user strings are drawn as they are, ``$`` included."""


def plain(draw: Callable[..., bytes], *args: Any) -> bytes:
    """``draw(*args)`` (which returns a PNG) with every text made and drawn plain
    (legends, labels, ticks)."""
    import matplotlib

    with matplotlib.rc_context(PLAIN_TEXT):
        return draw(*args)


def figure(height: float = 4.0, width: float = 10.0):
    """A constrained-layout :class:`~matplotlib.figure.Figure` with the Agg canvas (the
    Agg backend is chosen only if none is yet)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def png(fig) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def img(data: bytes, alt: str, ident: str) -> str:
    """A PNG as an ``<img>`` with a base64 ``data:`` URI: the page needs no other file.
    ``ident`` is the caller's own fixed id; ``alt`` is escaped."""
    encoded = base64.b64encode(data).decode("ascii")
    return (
        f'<img class="chart" id="{escape(ident)}" alt="{escape(alt)}" '
        f'src="data:image/png;base64,{encoded}">'
    )
