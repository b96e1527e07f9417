"""The comparison report: one self-contained HTML page, its notebook view, and Markdown.

The page holds, top to bottom: the verdict of the first method against each other
(pays, loses or undecided, from the interval of the time-to-target difference), the
table of every method's figures with their 95% intervals, four charts (time-to-target
curves, performance profiles, IQMs with intervals, probabilities of improvement), the
pairs' table, every run (its source, seconds to the target, final score), and how the
figures were computed. Charts are PNGs inside the page (:mod:`elegantpod.figures`); no
script, no request leaves it.

Every string a user or a store supplied (method names, run sources, the title) is
escaped by :func:`elegantpod.html_table.table` or :func:`~elegantpod.html_table.escape`,
and drawn as plain text in the charts.
"""

from __future__ import annotations

import html
import math

import numpy as np

from elegantpod import figures
from elegantpod.comparison import statistics as st
from elegantpod.html_table import Markup, escape, table, td, th

VERDICT_TEXT = {
    "pays": "faster, interval below zero",
    "loses": "slower, interval above zero",
    "undecided": "interval includes zero",
    "too few runs": f"fewer than {st.MIN_RUNS} runs of one of them: no interval to judge by",
}


def _num(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, ``-`` where it is not finite."""
    return f"{x:.{digits}g}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def interval_text(iv: st.Interval, digits: int = 3) -> str:
    """``value [low, high]`` (the value alone where there is no interval)."""
    if not math.isfinite(iv.low):
        return _num(iv.value, digits)
    return f"{_num(iv.value, digits)} [{_num(iv.low, digits)}, {_num(iv.high, digits)}]"


def fraction_text(iv: st.Interval, runs: int) -> str:
    """``solved/runs [low, high]``."""
    return f"{round(iv.value * runs)}/{runs} [{_num(iv.low, 2)}, {_num(iv.high, 2)}]"


# ------------------------------------------------------------------------- tables
def methods_table(c) -> Markup:
    """One row per method: runs, solved fraction, IQMs, each with its interval (``id``
    ``methods``); method names escaped."""
    head = [
        th("method", class_="name"),
        "runs",
        "solved [95% CI]",
        "IQM seconds to target [95% CI]",
        "IQM final score [95% CI]",
    ]
    rows = [
        [
            td(f.method, class_="name"),
            str(f.runs),
            fraction_text(f.solved, f.runs),
            interval_text(f.time_iqm),
            interval_text(f.final_iqm),
        ]
        for f in c.figures.values()
    ]
    return table(head, rows, id="methods")


def pairs_table(c) -> Markup:
    """One row per pair (the first method against another): the IQM differences and the
    probabilities of improvement with their intervals, and the verdict, its cell classed
    ``pays``, ``loses`` or ``undecided`` (``id`` ``pairs``)."""
    head = [
        th("method", class_="name"),
        "against",
        "IQM seconds difference [95% CI]",
        "P(faster) [95% CI]",
        "IQM final difference [95% CI]",
        "P(higher final) [95% CI]",
        "verdict",
    ]
    rows = [
        [
            td(v.method, class_="name"),
            v.other,
            interval_text(v.time_difference),
            interval_text(v.faster, 2),
            interval_text(v.final_difference),
            interval_text(v.better, 2),
            td(v.verdict, class_=v.verdict.replace(" ", "-")),
        ]
        for v in c.versus
    ]
    return table(head, rows, id="pairs")


def runs_table(c) -> Markup:
    """One row per run: method, source (as the user named it, escaped), kind, seconds to
    the target, final score and evaluations (``id`` ``runs``)."""
    head = [
        th("method", class_="name"),
        "run",
        "kind",
        "seconds to target",
        "final score",
        "evaluations",
    ]
    rows = []
    for r in c.run_table().to_dict("records"):
        rows.append(
            [
                td(r["method"], class_="name"),
                r["source"],
                r["kind"],
                _num(r["seconds_to_target"], 4),
                _num(r["final_score"], 4),
                str(r["evaluations"]),
            ]
        )
    return table(head, rows, id="runs")


# ------------------------------------------------------------------------- charts
def _draw_curves(c) -> bytes:
    """Left: the fraction of runs that reached the target by each second. Right: the
    performance profile of the final scores, with its bootstrap 95% band."""
    fig = figures.figure(height=3.6)
    ax_t, ax_p = fig.subplots(1, 2)
    grid = np.linspace(0.0, c.budget, 200)
    finals_all = np.concatenate([c.finals(m) for m in c.runs])
    finals_all = finals_all[np.isfinite(finals_all)]
    lo, hi = (float(finals_all.min()), float(finals_all.max())) if finals_all.size else (0.0, 1.0)
    pad = 0.05 * (hi - lo or 1.0)
    taus = np.linspace(lo - pad, hi + pad, 200)
    rng = np.random.default_rng(c.seed)
    for i, method in enumerate(c.runs):
        color = f"C{i % 10}"
        ax_t.step(
            grid, st.solved_by(c.times(method), grid), where="post", color=color, label=method
        )
        finals = c.finals(method)
        finals = finals[np.isfinite(finals)]
        if not finals.size:
            continue
        prof = st.performance_profile(finals, taus)
        boots = rng.integers(0, finals.size, size=(500, finals.size))
        band = np.array([st.performance_profile(finals[b], taus) for b in boots])
        ax_p.plot(taus, prof, color=color, label=method)
        ax_p.fill_between(taus, *np.quantile(band, [0.025, 0.975], axis=0), color=color, alpha=0.12)
    ax_t.set_xlabel("seconds")
    ax_t.set_ylabel("fraction of runs at the target")
    ax_t.set_ylim(-0.02, 1.02)
    ax_t.grid(alpha=0.3)
    ax_t.legend(loc="upper left", fontsize=8)
    ax_p.axvline(c.target, color="0.4", ls="--", lw=1)
    ax_p.set_xlabel("final score (best by the budget); dashed: the target")
    ax_p.set_ylabel("fraction of runs scoring above")
    ax_p.set_ylim(-0.02, 1.02)
    ax_p.grid(alpha=0.3)
    return figures.png(fig)


def _draw_intervals(c) -> bytes:
    """IQMs with their intervals (time and final score), and the probabilities of
    improvement of the first method over each other."""
    fig = figures.figure(height=max(2.4, 0.45 * len(c.runs) + 1.4))
    axes = fig.subplots(1, 3)
    methods = list(c.runs)
    ys = np.arange(len(methods))[::-1]
    for ax, attr, label in (
        (axes[0], "time_iqm", "IQM seconds to target (lower is better)"),
        (axes[1], "final_iqm", "IQM final score (higher is better)"),
    ):
        for y, m in zip(ys, methods, strict=True):
            iv = getattr(c.figures[m], attr)
            if math.isfinite(iv.low):
                ax.plot(
                    [iv.low, iv.high], [y, y], color=f"C{methods.index(m) % 10}", lw=6, alpha=0.5
                )
            ax.plot([iv.value], [y], "k|", ms=14)
        ax.set_yticks(ys, methods)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3, axis="x")
    ax = axes[2]
    yv = np.arange(len(c.versus))[::-1]
    for y, v in zip(yv, c.versus, strict=True):
        if math.isfinite(v.faster.low):
            ax.plot([v.faster.low, v.faster.high], [y, y], color="C0", lw=6, alpha=0.5)
        ax.plot([v.faster.value], [y], "k|", ms=14)
    ax.axvline(0.5, color="0.4", ls="--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_yticks(yv, [f"vs {v.other}" for v in c.versus])
    first = next(iter(c.runs))
    ax.set_xlabel(f"P({first} faster to the target)")
    ax.grid(alpha=0.3, axis="x")
    return figures.png(fig)


# ------------------------------------------------------------------------- pages
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th.name, td.name { text-align: left; }
td.pays { background: #d9f2d9; }
td.loses { background: #f8d7d7; }
td.undecided, td.too-few-runs { background: #f3f3f3; }
img.chart { max-width: 100%; }
p.note { color: #555; font-size: 0.9em; }
"""


def verdict_lines(c) -> list[str]:
    """One sentence per pair, plain text (escaped where it is placed)."""
    out = []
    for v in c.versus:
        d = v.time_difference
        out.append(
            f"{v.method} vs {v.other}: {v.verdict} ({VERDICT_TEXT[v.verdict]}): "
            f"IQM seconds difference {interval_text(d)}, P(faster) {interval_text(v.faster, 2)}"
        )
    return out


def method_note(c) -> str:
    """How the figures are computed, in words, with this comparison's target, budget and
    resamples (plain text: escaped where it is placed)."""
    return (
        f"Each run is judged on its first {_num(c.budget, 4)} seconds. Seconds to target: "
        f"until an evaluation first scored at least {_num(c.target, 4)}; a run that never "
        "did counts at the budget (a lower bound, the same for every method; the solved "
        "column says how many are censored). Final score: the best evaluation by the "
        "budget. IQM: the mean of the middle half of the runs. Intervals: 95%, percentile "
        f"stratified bootstrap ({c.reps:,} resamples, each method's runs resampled on "
        "their own), Wilson score intervals for the solved fractions. P(faster): the "
        "probability that a run of the first method reaches the target before a run of "
        "the other (ties count half). A method pays only where the interval of the IQM "
        "seconds difference lies wholly below zero (Agarwal et al. 2021, Deep RL at the "
        "Edge of the Statistical Precipice)."
    )


def html_report(c) -> str:
    """The whole page."""
    import datetime as dt

    from elegantpod import __version__

    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    curves = figures.plain(_draw_curves, c)
    intervals = figures.plain(_draw_intervals, c)
    verdicts = "".join(f"<li>{escape(line)}</li>" for line in verdict_lines(c))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(c.title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(c.title)}</h1>"
        f"<ul id='verdicts'>{verdicts}</ul>"
        f"<h2>Methods</h2>{methods_table(c)}"
        "<h2>Time to target and final scores</h2>"
        + figures.img(
            curves, "fraction of runs at the target over time; performance profiles", "curves"
        )
        + figures.img(intervals, "IQMs with 95% intervals; probability of improvement", "intervals")
        + f"<h2>Pairs</h2>{pairs_table(c)}"
        f"<h2>Runs</h2>{runs_table(c)}"
        f"<h2>How these figures are computed</h2><p class='note'>{escape(method_note(c))}</p>"
        f"<p class='note'>elegantpod {escape(__version__)}, generated {escape(generated)}</p>"
        "</body></html>\n"
    )


def notebook_view(c) -> str:
    """The notebook's rich view: the title, verdicts and the two tables (no charts, so a
    saved notebook stays small; ``c.save(path)`` writes the whole report)."""
    verdicts = "".join(f"<li>{escape(line)}</li>" for line in verdict_lines(c))
    return (
        f"<div class='elegantpod-comparison'><b>{escape(c.title)}</b>"
        f"<ul>{verdicts}</ul>{methods_table(c)}{pairs_table(c)}</div>"
    )


def _md(text: str) -> str:
    """A Markdown table cell: pipes and newlines would break the row, and Markdown
    renders HTML tags (a method named ``<b>`` is text here too)."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def markdown(c) -> str:
    """The methods as a Markdown table (a README's), the verdict of the first method
    against each other in the last column."""
    verdict = {
        v.other: f"{v.verdict}: {interval_text(v.time_difference)} s, "
        f"P(faster) {interval_text(v.faster, 2)}"
        for v in c.versus
    }
    lines = [
        "| task | method | solved [95% CI] | IQM s to target [95% CI] | IQM final [95% CI] | vs "
        + _md(next(iter(c.runs)))
        + " (seconds difference, P(faster)) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for f in c.figures.values():
        lines.append(
            f"| {_md(c.title)} | {_md(f.method)} | {fraction_text(f.solved, f.runs)} | "
            f"{interval_text(f.time_iqm)} | {interval_text(f.final_iqm)} | "
            f"{_md(verdict.get(f.method, '-'))} |"
        )
    return "\n".join(lines)
