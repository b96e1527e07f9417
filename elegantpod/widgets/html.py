"""Static HTML views (no ipywidgets needed): every user string is escaped.

Tables go through :func:`elegantpod.html_table.table`. Their cells are built here as
:class:`~elegantpod.html_table.Markup` from :func:`fmt`'s escaped text, so that a cell can
hold a cut (:func:`_cap`) or a fixed tag around escaped values.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from elegantpod.agents import ALGOS
from elegantpod.html_table import Markup, escape, table, td, tr
from elegantpod.number_text import number

COLUMNS = (
    "rank",
    "pod",
    "algo",
    "score",
    "env_steps",
    "steps/s",
    "status",
    "key hparams",
    "parent",
)
ENV_COLUMNS = "env_columns"
"""The key of a leaderboard DataFrame's ``attrs`` that names the columns its env added
(``Tournament.leaderboard`` sets it): they are shown beside the score."""
MAX_ROWS = 500
"""Rows a table view renders; the rest are counted in a last line. A store from someone
else can hold ten thousand pods with long histories: the page must stay small."""
MAX_CELL = 200
"""Characters of escaped HTML one cell holds (an error, a mutation); longer text is cut."""


def _cap(escaped: Markup, limit: int = MAX_CELL) -> Markup:
    """Escaped cell text cut to at most ``limit`` characters, never inside an entity
    such as ``&amp;`` (so escaping still holds)."""
    if len(escaped) <= limit:
        return escaped
    cut = escaped[:limit]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return Markup(cut + "…")


def _more(hidden: int, columns: int, what: str) -> list[Any]:
    """The rows to add to a cut table: one that says how many rows it leaves out and
    which, or none when it shows them all."""
    if hidden <= 0:
        return []
    return [[td(Markup(f"<i>{hidden:,} more {escape(what)} not shown</i>"), colspan=columns)]]


def key_hparams(algo: str, hparams: dict | None) -> Markup:
    """``"lr=0.003 clip_coef=0.2 epochs=4"``, escaped: the learner's
    ``key_hparams`` (just ``lr`` for an algorithm this process does not know, such as
    one a store from elsewhere names)."""
    learner = ALGOS.get(algo) if isinstance(algo, str) else None
    names = learner.key_hparams if learner is not None else ("lr",)
    hp = hparams or {}
    return Markup(" ".join(f"{escape(n)}={fmt(hp[n])}" for n in names if n in hp))


def fmt(value: Any) -> Markup:
    """Short, escaped text for a table cell: a number as every view writes one
    (:func:`elegantpod.number_text.number`), anything else escaped."""
    if value is None or isinstance(value, numbers.Real) and not isinstance(value, bool):
        return escape(number(value))
    return escape(value)


def fmt_score(mean: Any, std: Any) -> Markup:
    """``mean ± std`` at one precision, set by the spread: the std's first two digits
    decide the decimal places (none from 10 up, at most four), and the mean is rounded
    to the same place (``376 ± 157``, ``120.4 ± 5.0``, ``1.234 ± 0.051``), so that no
    digit is shown that the evaluation cannot tell apart."""
    if not isinstance(std, int | float) or not math.isfinite(std) or std <= 0:
        return Markup(f"{fmt(mean)} ± {fmt(std)}")
    if not isinstance(mean, int | float) or not math.isfinite(mean):
        return Markup(f"{fmt(mean)} ± {fmt(std)}")
    decimals = min(4, max(0, 1 - math.floor(math.log10(std))))
    return escape(f"{mean:,.{decimals}f} ± {std:,.{decimals}f}")


def leaderboard_rows(board, hparams=None) -> list[list[Markup]]:
    """Cells of the leaderboard (a ``Tournament.leaderboard`` DataFrame) as escaped text.

    ``hparams``: ``Tournament.leaderboard_hparams()``, whose rows give the key
    hyperparameters of each pod (a board with an ``hparams`` column of dicts needs none).
    """
    by_pod = {} if hparams is None else {h["pod"]: h for h in hparams.to_dict("records")}
    # the columns the env added (EnvHooks.leaderboard_columns), beside the score: a
    # trading board ranked by Sharpe shows how much of it is luck this way
    env_columns = [c for c in board.attrs.get(ENV_COLUMNS, ()) if c in board.columns]
    rows = []
    for r in board.to_dict("records"):
        score = fmt_score(r["score_mean"], r["score_std"])
        added = [f"{escape(k)} {fmt(r[k])}" for k in env_columns]
        if added:
            score = Markup(f"{score} ({'; '.join(added)})")
        rows.append(
            [
                fmt(r["rank"]),
                fmt(r["pod"]),
                fmt(r["algo"]),
                score,
                fmt(r["env_steps"]),
                fmt(r["steps_per_second"]),
                fmt(r["status"]),
                key_hparams(r["algo"], r.get("hparams") or by_pod.get(r["pod"])),
                fmt(r["parent"]),
            ]
        )
    return rows


def leaderboard_html(board, title: str = "Leaderboard", footer: str = "", hparams=None) -> str:
    """A self-contained HTML table of the leaderboard; the best row is highlighted.

    ``footer`` is trusted HTML placed under the table (e.g. :func:`baselines_html`);
    ``hparams`` as for :func:`leaderboard_rows`."""
    best = "background:#e8f5e9;font-weight:bold"
    body: list[Any] = [
        tr([_cap(c) for c in row], style=best if i == 0 else None)
        for i, row in enumerate(leaderboard_rows(board.head(MAX_ROWS), hparams))
    ]
    if not body:
        body.append([td("no finished segment yet", colspan=len(COLUMNS))])
    body += _more(len(board) - MAX_ROWS, len(COLUMNS), "entries")
    return f"<div><b>{escape(title)}</b>{table(COLUMNS, body)}{footer}</div>"


def baselines_html(
    baselines: dict[str, float],
    best: float | None,
    fitness: str,
    notes: list[str] | tuple[str, ...] = (),
) -> str:
    """The lines under a leaderboard: what doing nothing scores on the evaluation range,
    and what the env's added columns mean.

    ``baselines`` is ``Tournament.baselines()`` (a trading env's buy-and-hold; empty for
    an env without baselines); ``best`` the leading agent's score. It says plainly
    whether the best agent beats doing nothing. ``notes`` are
    ``Tournament.leaderboard_notes()``. Everything is escaped: a baseline's name may
    come from data someone else wrote."""
    lines = []
    if baselines:
        parts = [f"{escape(name)} {fmt(value)}" for name, value in baselines.items()]
        line = f"Baselines on the validation range ({escape(fitness)}): " + " · ".join(parts)
        if best is not None:
            if best > max(baselines.values()):
                verdict = "the best agent beats them on this range (selected on it: test it apart)"
            else:
                verdict = "no agent beats them on this range yet"
            line += f" — {escape(verdict)}"
        lines.append(line)
    lines += [str(escape(note)) for note in notes]
    if not lines:
        return ""
    body = "<br>".join(lines)
    return f'<div class="elegantpod-baselines" style="color:#57606a">{body}</div>'


def lineage_html(edges: list[dict[str, Any]]) -> str:
    """The lineage table (``Tournament.lineage()`` rows): parent, pod, mutation, status.

    Every string may come from a store someone else wrote, and this HTML runs in the
    user's notebook page: each one is escaped, mutation names included. The newest
    :data:`MAX_ROWS` pods are shown, each cell at most :data:`MAX_CELL` characters.
    """
    head = ("parent", "pod", "algo", "mutation", "why made", "status", "why it failed")
    rows = _more(len(edges) - MAX_ROWS, len(head), "older pods")
    for edge in edges[-MAX_ROWS:]:
        rows.append(
            [
                fmt(edge["parent"]),
                Markup(f"→ {fmt(edge['pod'])}"),
                fmt(edge["algo"]),
                _cap(_changes(edge["mutation"])),
                _cap(fmt(edge.get("why") or "")),
                fmt(edge.get("status")),
                _cap(fmt(edge.get("error"))),
            ]
        )
    return table(head, rows)


def _changes(changes: dict[str, Any] | None) -> Markup:
    """``{"lr": [old, new]}`` as ``lr: old → new``, escaped."""
    return Markup(
        ", ".join(f"{fmt(k)}: {fmt(v[0])} → {fmt(v[1])}" for k, v in (changes or {}).items())
    )


def schedule_html(phases: list[dict[str, Any]], title: str = "Best pod's schedule") -> str:
    """The winner's hyperparameter schedule (``Tournament.schedule()``), one row per phase:
    which pod trained it, from which env step, the fitness at its end and the changes that
    started it. Escaped like every view: names and values may come from a store."""
    if not phases:
        return f"<p><b>{escape(title)}</b>: no finished segment yet</p>"
    head = ("env steps", "time", "pod", "segments", "fitness at end", "what changed")
    rows = _more(len(phases) - MAX_ROWS, len(head), "earlier phases")
    for ph in phases[-MAX_ROWS:]:  # the newest: the phases that shaped the winner last
        changes = _cap(_changes(ph.get("changes")))
        changes = changes or escape("start" if ph is phases[0] else "copied, unchanged")
        origin = ph.get("origin")
        if origin and origin not in ("first pods", "live mutation", "child"):
            changes = Markup(f"{changes} <i>({_cap(fmt(origin))})</i>")
        rows.append(
            [
                Markup(f"{fmt(ph['from_steps'])}–{fmt(ph['to_steps'])}"),
                Markup(f"{fmt(ph['from_time'])}–{fmt(ph['to_time'])} s"),
                fmt(ph["pod"]),
                fmt(ph["segments"]),
                fmt(ph["score"]),
                changes,
            ]
        )
    changed = sum(1 for ph in phases if ph.get("changes"))
    return (
        f"<div><b>{escape(title)}</b> ({changed} change{'s' * (changed != 1)} of "
        f"hyperparameters on the way){table(head, rows)}</div>"
    )
