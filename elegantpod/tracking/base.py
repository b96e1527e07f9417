"""``Logger``: the small interface every experiment-tracking backend implements.

A tournament is logged from the process that runs it (as Ray Tune's MLflow and W&B
callbacks log from the driver): the workers need no credentials, and no worker ever
waits on a tracking server. The engine hands plain data to a
:class:`~elegantpod.tracking.tracker.Tracker`, whose one thread calls these methods;
a backend may therefore block or raise without touching the run (the tracker disables
it with a warning).

One *run* per pod (its ``run_id`` is the pod id), inside one *group* per tournament
(:meth:`Logger.open`). All values are plain JSON-able data.
"""

from __future__ import annotations

import html
import importlib
import math
import re
from typing import Any


class Logger:
    """An experiment-tracking backend (TensorBoard, MLflow, W&B, or your own).

    Subclass it and override what your backend records; every method defaults to doing
    nothing. The methods are called from one background thread, in order, never
    concurrently, between :meth:`open` and :meth:`close`.
    """

    name = "logger"
    """A short name for warnings (``"tensorboard"``...)."""

    def open(self, group: str, config: dict[str, Any]) -> None:
        """A tournament (or a ``train()`` run) begins: ``group`` names it (unique per
        start), ``config`` is its spec as JSON-able values."""

    def start_run(
        self, run_id: str, name: str, tags: dict[str, str], params: dict[str, Any]
    ) -> None:
        """A pod appears: ``tags`` hold its ``parent``, ``algo``, ``generation`` (its
        depth in the lineage) and ``origin``; ``params`` its first hyperparameters."""

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int) -> None:
        """Finite numbers of one segment (or one evaluation) at ``step`` env steps."""

    def log_params_change(self, run_id: str, changes: dict[str, list], step: int) -> None:
        """Hyperparameters changed at ``step`` env steps: ``{name: [old, new]}`` (a
        mutation by the generator or :meth:`Tournament.mutate`)."""

    def log_tables(self, tables: dict[str, list[dict[str, Any]]]) -> None:
        """At the end: named tables (``leaderboard``, ``lineage``, ``schedule``), each a
        list of rows with the same keys."""

    def close(self) -> None:
        """Flush and end every run; :meth:`open` may follow (a tournament started again)."""


def require(module: str, extra: str):
    """Import ``module`` or raise an ``ImportError`` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{extra} tracking needs the {extra!r} package: pip install 'elegantpod[{extra}]'"
        ) from exc


def finite_metrics(values: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of ``values`` as floats (``None``, NaN and text dropped):
    every backend refuses or mangles the rest."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


_MARKDOWN = re.compile(r"([\\`*_\[\]()#!|~])")


def markdown_text(value: Any) -> str:
    """``value`` as literal text in Markdown: HTML's ``& < >`` as entities, Markdown's
    punctuation backslash-escaped, newlines as spaces.

    Why: pod ids, mutation keys and origins come from a store, which may come from
    someone else, and TensorBoard's text tab renders Markdown with some HTML: a store
    string ``<img src=x onerror=...>`` or ``[click](javascript:...)`` must show as those
    characters, as it does in every other view."""
    text = " ".join(str(value).splitlines())
    text = html.escape(text, quote=False)
    return _MARKDOWN.sub(r"\\\1", text)


def markdown_code(text: str) -> str:
    """``text`` in a fenced code block that nothing in it can close: the fence is one
    backtick longer than the longest run of backticks in ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def markdown_table(rows: list[dict[str, Any]], limit: int = 200) -> str:
    """Rows as a Markdown table (TensorBoard's text plugin renders it); every cell is
    literal text (:func:`markdown_text`), so a value can neither break the table nor
    become a link, an image or HTML."""
    if not rows:
        return "(empty)"
    cols = list(dict.fromkeys(k for r in rows for k in r))

    def cell(v: Any) -> str:
        return markdown_text(v)

    lines = ["| " + " | ".join(map(cell, cols)) + " |", "|" + " --- |" * len(cols)]
    for r in rows[:limit]:
        lines.append("| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |")
    if len(rows) > limit:
        lines.append(f"\n({len(rows) - limit} more rows)")
    return "\n".join(lines)
