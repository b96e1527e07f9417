"""The comparison report: one self-contained HTML page, its notebook view, and Markdown.

The page holds, top to bottom: the verdict of each comparison of the family (the
permutation test of the RMST difference, Holm-adjusted, at the declared level), the
table of every method's figures with their 95% intervals and the solved fraction beside
them, four charts (Kaplan-Meier time-to-target curves, performance profiles, RMSTs and
final-score IQMs with intervals, probabilities of improvement), the pairs' table, every
run (its source, seconds to the target, final score), and how the figures were
computed. A figure that censoring makes a bound is marked so: an IQM of times that
includes runs counted at the budget reads ``>= x``, and an unsolved run's time
``> budget (censored)``. Charts are PNGs inside the page (:mod:`elegantpod.figures`); no
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


def time_iqm_text(f) -> str:
    """A method's time IQM with its interval, a "greater than or equal" sign before it
    where runs counted at the budget enter it (then it is a lower bound, its interval's
    top pinned at the budget)."""
    text = interval_text(f.time_iqm)
    return f"\u2265 {text}" if f.time_iqm_censored else text


def difference_text(c, v) -> str:
    """The IQM time difference of a comparison, ``(censored)`` after it where either
    IQM is a bound: the difference of two lower bounds bounds nothing."""
    text = interval_text(v.time_difference)
    if c.figures[v.method].time_iqm_censored or c.figures[v.other].time_iqm_censored:
        return f"{text} (censored)"
    return text


def p_text(p: float) -> str:
    """A p-value: 3 significant digits, ``< 0.0001`` below it."""
    if not math.isfinite(p):
        return "-"
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def solved_pair_text(c, v) -> str:
    """``a/n vs b/m``: both methods' solved runs, beside every time figure."""
    fa, fb = c.figures[v.method], c.figures[v.other]
    return f"{fa.runs - fa.censored}/{fa.runs} vs {fb.runs - fb.censored}/{fb.runs}"


def test_text(v) -> str:
    """Which test, in a few words: ``paired exact (10 seeds)``, ``unpaired``..."""
    kind = "paired" if v.test.paired else "unpaired"
    how = "exact" if v.test.exact else f"{v.test.permutations:,} permutations"
    return f"{kind}, {how}, {v.alternative}"


# ------------------------------------------------------------------------- tables
def methods_table(c) -> Markup:
    """One row per method: runs, solved fraction, RMST, IQMs, each with its interval
    (``id`` ``methods``); a censored IQM marked ``>=``; method names escaped."""
    head = [
        th("method", class_="name"),
        "runs",
        "solved [95% CI]",
        f"RMST seconds at {_num(c.budget, 4)} s [95% CI]",
        "IQM seconds to target [95% CI] (\u2265: censored)",
        "IQM final score [95% CI]",
    ]
    rows = [
        [
            td(f.method, class_="name"),
            str(f.runs),
            fraction_text(f.solved, f.runs),
            interval_text(f.rmst),
            time_iqm_text(f),
            interval_text(f.final_iqm),
        ]
        for f in c.figures.values()
    ]
    return table(head, rows, id="methods")


def pairs_table(c) -> Markup:
    """One row per comparison of the family: both solved fractions, the RMST difference,
    the permutation test's raw and Holm-adjusted p-values and its verdict at the level
    (classed ``family-faster``, ``family-slower``, ``family-not-shown``...), the
    log-rank p-value, the IQM differences and the probabilities of improvement with
    their intervals, and the IQM rule's verdict, its cell classed ``pays``, ``loses`` or
    ``undecided`` (``id`` ``pairs``)."""
    head = [
        th("method", class_="name"),
        "against",
        "solved",
        "RMST seconds difference [95% CI]",
        "test",
        "p",
        "Holm p",
        f"at family-wise {_num(c.level)}",
        "log-rank p",
        "IQM seconds difference [95% CI]",
        "P(faster) [95% CI]",
        "IQM final difference [95% CI]",
        "P(higher final) [95% CI]",
        "IQM rule",
    ]
    rows = [
        [
            td(v.method, class_="name"),
            v.other,
            solved_pair_text(c, v),
            interval_text(v.rmst_difference),
            test_text(v),
            p_text(v.p_value),
            p_text(v.p_adjusted),
            td(v.family_verdict, class_="family-" + v.family_verdict.replace(" ", "-")),
            p_text(v.logrank.p_value(v.alternative)),
            difference_text(c, v),
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
    censored = f"> {_num(c.budget, 4)} (censored)"
    for r in c.run_table().to_dict("records"):
        seconds = r["seconds_to_target"]
        rows.append(
            [
                td(r["method"], class_="name"),
                r["source"],
                r["kind"],
                (
                    (_num(seconds, 4) + (" (stopped there)" if r["stopped_at_target"] else ""))
                    if math.isfinite(seconds)
                    else censored
                ),
                _num(r["final_score"], 4),
                str(r["evaluations"]),
            ]
        )
    return table(head, rows, id="runs")


# ------------------------------------------------------------------------- charts
def _draw_curves(c) -> bytes:
    """Left: the Kaplan-Meier curves of ``P(not yet at the target)``, a ``+`` where a
    run was censored before the budget, the budget dashed. Right: the performance
    profile of the final scores, with its bootstrap 95% band."""
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
        f = c.figures[method]
        km = f.kaplan_meier
        ax_t.step(
            grid,
            km.at(grid),
            where="post",
            color=color,
            label=f"{method}: RMST {_num(f.rmst.value)} s, {f.runs - f.censored}/{f.runs} solved",
        )
        early = [t for t, n in zip(km.times, km.censored, strict=True) if n and t < c.budget]
        if early:
            ax_t.plot(early, km.at(early), "+", color=color, ms=9)
        finals = c.finals(method)
        finals = finals[np.isfinite(finals)]
        if not finals.size:
            continue
        prof = st.performance_profile(finals, taus)
        boots = rng.integers(0, finals.size, size=(500, finals.size))
        band = np.array([st.performance_profile(finals[b], taus) for b in boots])
        ax_p.plot(taus, prof, color=color, label=method)
        ax_p.fill_between(taus, *np.quantile(band, [0.025, 0.975], axis=0), color=color, alpha=0.12)
    ax_t.axvline(c.budget, color="0.4", ls="--", lw=1)
    ax_t.set_xlabel("seconds; dashed: the budget (unsolved runs censored there)")
    ax_t.set_ylabel("P(not yet at the target), Kaplan-Meier")
    ax_t.set_ylim(-0.02, 1.02)
    ax_t.grid(alpha=0.3)
    ax_t.legend(loc="lower left", fontsize=8)
    ax_p.axvline(c.target, color="0.4", ls="--", lw=1)
    ax_p.set_xlabel("final score (best by the budget); dashed: the target")
    ax_p.set_ylabel("fraction of runs scoring above")
    ax_p.set_ylim(-0.02, 1.02)
    ax_p.grid(alpha=0.3)
    return figures.png(fig)


def _draw_intervals(c) -> bytes:
    """RMSTs and final-score IQMs with their intervals, and the probabilities of
    improvement of each comparison of the family."""
    fig = figures.figure(height=max(2.4, 0.45 * len(c.runs) + 1.4))
    axes = fig.subplots(1, 3)
    methods = list(c.runs)
    ys = np.arange(len(methods))[::-1]
    for ax, attr, label in (
        (axes[0], "rmst", f"RMST seconds at {_num(c.budget)} s (lower is better)"),
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
    first = next(iter(c.runs))
    # "vs other" where the family is the first against each other (the labels share the
    # panel's width with two others: a long name would squeeze the axes to nothing)
    ax.set_yticks(
        yv, [f"vs {v.other}" if v.method == first else f"{v.method} vs {v.other}" for v in c.versus]
    )
    ax.set_xlabel("P(a run of the first reaches the target sooner)")
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
td.family-faster { background: #d9f2d9; font-weight: bold; }
td.family-slower { background: #f8d7d7; font-weight: bold; }
img.chart { max-width: 100%; }
p.note { color: #555; font-size: 0.9em; }
"""


def verdict_lines(c) -> list[str]:
    """One sentence per comparison of the family, plain text (escaped where it is
    placed): the test's verdict at the family-wise level with the RMST difference and
    both p-values, the solved fractions, then the IQM rule's verdict."""
    out = []
    for v in c.versus:
        out.append(
            f"{v.method} vs {v.other}: {v.family_verdict} at family-wise {_num(c.level)} "
            f"(Holm over {len(c.versus)}): RMST difference {interval_text(v.rmst_difference)} s, "
            f"{test_text(v)} permutation p {p_text(v.p_value)}, Holm p {p_text(v.p_adjusted)}, "
            f"log-rank p {p_text(v.logrank.p_value(v.alternative))}; solved "
            f"{solved_pair_text(c, v)}; {v.pairing}. IQM rule: {v.verdict} "
            f"({VERDICT_TEXT[v.verdict]}): IQM seconds difference {difference_text(c, v)}, "
            f"P(faster) {interval_text(v.faster, 2)}"
        )
    return out


def method_note(c) -> str:
    """How the figures are computed, in words, with this comparison's target, budget,
    resamples, family and level (plain text: escaped where it is placed)."""
    return (
        f"Each run is judged on its first {_num(c.budget, 4)} seconds. Seconds to target: "
        f"until an evaluation first scored at least {_num(c.target, 4)}; a run that never "
        "did is censored at the budget (its time is only known to exceed it). "
        "Kaplan-Meier: the estimate of P(not yet at the target) over time. RMST: the "
        "restricted mean seconds to the target at the budget, the area under that curve "
        "(with every unsolved run censored at the budget, the mean of min(time, budget)): "
        "a figure defined for every method whatever it censors; lower is faster. IQM: "
        "the mean after dropping the lowest and highest quarter of the runs (rounded "
        "down: of 10 runs, the middle six). An IQM of times that includes runs counted "
        "at the budget is marked \u2265: it is a lower bound whose bias grows with the "
        "method's censored fraction, not the same bound for every method, and a "
        "difference of two such bounds is marked censored. Final score: the best "
        "evaluation by the budget. Intervals: 95%, percentile bootstrap "
        f"({c.reps:,} resamples; each method's runs resampled on their own, or seeds "
        "resampled together for a paired RMST difference); Wilson score intervals for "
        "the solved fractions. Test: a permutation test of the RMST difference, paired "
        "by seed where both methods ran the same seeds (labels swapped within each seed: "
        f"all 2^n swaps up to 20 seeds), unpaired otherwise; p-values {c.alternative}, "
        f"adjusted by Holm over the {len(c.versus)} comparison(s) of the declared family, "
        f"a verdict where the adjusted p-value is at most {_num(c.level)}. Log-rank: the "
        "test of equal Kaplan-Meier curves (unadjusted). P(faster): the probability that "
        "a run of the first method reaches the target before a run of the other (ties "
        "count half). IQM rule: pays where the interval of the IQM seconds difference "
        "lies wholly below zero (Agarwal et al. 2021), per comparison, uncorrected."
    )


def html_report(c) -> str:
    """The whole page."""
    import datetime as dt

    from elegantpod import __version__

    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    curves = figures.plain(_draw_curves, c)
    intervals = figures.plain(_draw_intervals, c)
    verdicts = "".join(f"<li>{escape(line)}</li>" for line in verdict_lines(c))
    notes = c.notes()  # each rebuilds the runs table: once
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(c.title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(c.title)}</h1>"
        f"<ul id='verdicts'>{verdicts}</ul>"
        + (
            "<h2>Read with care</h2><ul id='notes'>"
            + "".join(f"<li>{escape(n)}</li>" for n in notes)
            + "</ul>"
            if notes
            else ""
        )
        + f"<h2>Methods</h2>{methods_table(c)}"
        "<h2>Time to target and final scores</h2>"
        + figures.img(
            curves,
            "Kaplan-Meier curves of P(not yet at the target); performance profiles",
            "curves",
        )
        + figures.img(
            intervals, "RMSTs and IQMs with 95% intervals; probability of improvement", "intervals"
        )
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
    """The methods as a Markdown table (a README's), the IQM rule's verdict of the first
    method against each other in the last column; then the family's comparisons, each
    with both solved fractions, the RMST difference, the test and its raw and
    Holm-adjusted p-values and verdict."""
    first = next(iter(c.runs))
    verdict = {
        v.other: f"{v.verdict}: {difference_text(c, v)} s, P(faster) {interval_text(v.faster, 2)}"
        for v in c.versus
        if v.method == first
    }
    lines = [
        "| task | method | solved [95% CI] | RMST s [95% CI] | IQM s to target [95% CI] | "
        "IQM final [95% CI] | vs " + _md(first) + " (IQM seconds difference, P(faster)) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in c.figures.values():
        lines.append(
            f"| {_md(c.title)} | {_md(f.method)} | {fraction_text(f.solved, f.runs)} | "
            f"{interval_text(f.rmst)} | {time_iqm_text(f)} | {interval_text(f.final_iqm)} | "
            f"{_md(verdict.get(f.method, '-'))} |"
        )
    if c.versus:
        lines += [
            "",
            "| task | comparison | solved | RMST difference s [95% CI] | test | p | Holm p | "
            f"at family-wise {_num(c.level)} | log-rank p |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for v in c.versus:
            lines.append(
                f"| {_md(c.title)} | {_md(v.method)} vs {_md(v.other)} | "
                f"{_md(solved_pair_text(c, v))} | {interval_text(v.rmst_difference)} | "
                f"{test_text(v)} | {p_text(v.p_value)} | {p_text(v.p_adjusted)} | "
                f"{v.family_verdict} | {p_text(v.logrank.p_value(v.alternative))} |"
            )
    for note in c.notes():
        lines += ["", f"Read with care: {_md(note)}"]
    return "\n".join(lines)
