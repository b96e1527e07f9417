"""Static HTML views (no ipywidgets needed): every user string is escaped."""

from __future__ import annotations

import html
import math
import numbers
from typing import Any

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
KEY_HPARAMS = {
    "ppo": ("lr", "clip_coef", "epochs"),
    "sac": ("lr", "tau", "batch_size"),
    "td3": ("lr", "tau", "policy_delay"),
    "ddpg": ("lr", "tau", "exploration_noise"),
    "dqn": ("lr", "target_update_every", "batch_size"),
}
"""The hyperparameters worth a glance in the table, per algorithm (others: just lr)."""
MAX_ROWS = 500
"""Rows a table view renders; the rest are counted in a last line. A store from someone
else can hold ten thousand pods with long histories: the page must stay small."""
MAX_CELL = 200
"""Characters of escaped HTML one cell holds (an error, a mutation); longer text is cut."""


def _cap(escaped: str, limit: int = MAX_CELL) -> str:
    """Escaped cell text cut to at most ``limit`` characters, never inside an entity
    such as ``&amp;`` (so escaping still holds)."""
    if len(escaped) <= limit:
        return escaped
    cut = escaped[:limit]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def _more(hidden: int, columns: int, what: str) -> str:
    """The last row of a cut table: how many rows it does not show, and where they are."""
    if hidden <= 0:
        return ""
    return f'<tr><td colspan="{columns}"><i>{hidden:,} more {what} not shown</i></td></tr>'


def key_hparams(algo: str, hparams: dict | None) -> str:
    """``"lr=0.003 clip_coef=0.2 epochs=4"``, escaped."""
    names = KEY_HPARAMS.get(str(algo), ("lr",))
    hp = hparams or {}
    return " ".join(f"{n}={fmt(hp[n])}" for n in names if n in hp)


def fmt(value: Any) -> str:
    """Short, escaped text for a table cell: a number as every view writes one
    (:func:`elegantpod.number_text.number`), anything else escaped."""
    if value is None or isinstance(value, numbers.Real) and not isinstance(value, bool):
        return number(value)
    return html.escape(str(value))


def fmt_score(mean: Any, std: Any) -> str:
    """``mean ± std`` at one precision, set by the spread: the std's first two digits
    decide the decimal places (none from 10 up, at most four), and the mean is rounded
    to the same place (``376 ± 157``, ``120.4 ± 5.0``, ``1.234 ± 0.051``), so that no
    digit is shown that the evaluation cannot tell apart."""
    if not isinstance(std, int | float) or not math.isfinite(std) or std <= 0:
        return f"{fmt(mean)} ± {fmt(std)}"
    if not isinstance(mean, int | float) or not math.isfinite(mean):
        return f"{fmt(mean)} ± {fmt(std)}"
    decimals = min(4, max(0, 1 - math.floor(math.log10(std))))
    return f"{mean:,.{decimals}f} ± {std:,.{decimals}f}"


def leaderboard_rows(board, hparams=None) -> list[list[str]]:
    """Cells of the leaderboard (a ``Tournament.leaderboard`` DataFrame) as escaped text.

    ``hparams``: ``Tournament.leaderboard_hparams()``, whose rows give the key
    hyperparameters of each pod (a board with an ``hparams`` column of dicts needs none).
    """
    by_pod = {} if hparams is None else {h["pod"]: h for h in hparams.to_dict("records")}
    rows = []
    for r in board.to_dict("records"):
        score = fmt_score(r["score_mean"], r["score_std"])
        if "deflated_sharpe" in r:  # trading, ranked by Sharpe: how much is luck
            score += f" (DSR {fmt(r['deflated_sharpe'])})"
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
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = []
    for i, row in enumerate(leaderboard_rows(board.head(MAX_ROWS), hparams)):
        style = ' style="background:#e8f5e9;font-weight:bold"' if i == 0 else ""
        body.append(f"<tr{style}>" + "".join(f"<td>{_cap(c)}</td>" for c in row) + "</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(COLUMNS)}">no finished segment yet</td></tr>')
    body.append(_more(len(board) - MAX_ROWS, len(COLUMNS), "entries"))
    return (
        f"<div><b>{html.escape(title)}</b><table>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{footer}</div>"
    )


def baselines_html(
    baselines: dict[str, float],
    best: float | None,
    fitness: str,
    trials: int | None = None,
    periods: int | None = None,
) -> str:
    """One line under a trading leaderboard: what buy-and-hold scores on the same range.

    ``baselines`` is ``Tournament.baselines()``; ``best`` the leading agent's score. It
    says plainly whether the best agent beats doing nothing (names are escaped: a
    baseline's name may come from data someone else wrote). ``trials`` and ``periods``
    (the leaderboard's ``attrs``) explain its deflated Sharpe column, where it has one."""
    if not baselines:
        return ""
    parts = [f"{html.escape(str(name))} {fmt(value)}" for name, value in baselines.items()]
    line = f"Baselines on the validation range ({html.escape(str(fitness))}): " + " · ".join(parts)
    if best is not None:
        top = max(baselines.values())
        if best > top:
            verdict = "the best agent beats them on this range (selected on it: see the backtest)"
        else:
            verdict = "no agent beats buy-and-hold on this range yet"
        line += f" — {html.escape(verdict)}"
    if trials is not None and periods is not None:
        line += (
            f". DSR: probability that an agent's true Sharpe ratio beats the best of "
            f"{fmt(int(trials))} luck-only agents over {fmt(int(periods))} days "
            "(0.95 is the usual bar)"
        )
    return f'<div class="elegantpod-baselines" style="color:#57606a">{line}</div>'


def lineage_html(edges: list[dict[str, Any]]) -> str:
    """The lineage table (``Tournament.lineage()`` rows): parent, pod, mutation, status.

    Every string may come from a store someone else wrote, and this HTML runs in the
    user's notebook page: each one is escaped, mutation names included. The newest
    :data:`MAX_ROWS` pods are shown, each cell at most :data:`MAX_CELL` characters.
    """
    rows = []
    for edge in edges[-MAX_ROWS:]:
        mutation = ", ".join(
            f"{fmt(k)}: {fmt(v[0])} → {fmt(v[1])}" for k, v in (edge["mutation"] or {}).items()
        )
        rows.append(
            f"<tr><td>{fmt(edge['parent'])}</td><td>→ {fmt(edge['pod'])}</td>"
            f"<td>{fmt(edge['algo'])}</td><td>{_cap(mutation)}</td>"
            f"<td>{_cap(fmt(edge.get('why') or ''))}</td>"
            f"<td>{fmt(edge.get('status'))}</td><td>{_cap(fmt(edge.get('error')))}</td></tr>"
        )
    return (
        "<table><tr><th>parent</th><th>pod</th><th>algo</th>"
        "<th>mutation</th><th>why made</th><th>status</th><th>why it failed</th></tr>"
        + _more(len(edges) - MAX_ROWS, 7, "older pods")
        + "".join(rows)
        + "</table>"
    )


def schedule_html(phases: list[dict[str, Any]], title: str = "Best pod's schedule") -> str:
    """The winner's hyperparameter schedule (``Tournament.schedule()``), one row per phase:
    which pod trained it, from which env step, the fitness at its end and the changes that
    started it. Escaped like every view: names and values may come from a store."""
    if not phases:
        return f"<p><b>{html.escape(title)}</b>: no finished segment yet</p>"
    rows = []
    for ph in phases[-MAX_ROWS:]:  # the newest: the phases that shaped the winner last
        changes = ", ".join(
            f"{fmt(k)}: {fmt(v[0])} → {fmt(v[1])}" for k, v in (ph.get("changes") or {}).items()
        )
        changes = _cap(changes) or ("start" if ph is phases[0] else "copied, unchanged")
        origin = ph.get("origin")
        if origin and origin not in ("first pods", "live mutation", "child"):
            changes += f" <i>({_cap(fmt(origin))})</i>"
        rows.append(
            f"<tr><td>{fmt(ph['from_steps'])}–{fmt(ph['to_steps'])}</td>"
            f"<td>{fmt(ph['from_time'])}–{fmt(ph['to_time'])} s</td><td>{fmt(ph['pod'])}</td>"
            f"<td>{fmt(ph['segments'])}</td><td>{fmt(ph['score'])}</td>"
            f"<td>{changes}</td></tr>"
        )
    changed = sum(1 for ph in phases if ph.get("changes"))
    return (
        f"<div><b>{html.escape(title)}</b> ({changed} change{'s' * (changed != 1)} of "
        "hyperparameters on the way)<table><tr><th>env steps</th><th>time</th><th>pod</th>"
        "<th>segments</th><th>fitness at end</th><th>what changed</th></tr>"
        + _more(len(phases) - MAX_ROWS, 6, "earlier phases")
        + "".join(rows)
        + "</table></div>"
    )
