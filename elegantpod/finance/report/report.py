"""The backtest report: one self-contained HTML page, assembled and written.

Charts are PNGs embedded as base64 ``data:`` URIs and the monthly-returns heatmap is a
coloured HTML table, so the file opens offline, attaches to an e-mail and makes no
network request. Every string that came from a user (ticker names, agent names, data
paths, hyperparameters) is HTML-escaped: a ticker called ``<script>`` stays text.

Sections, top to bottom: an "in-sample" banner when the backtest overlaps the agent's
training or validation dates; the metrics table; "Did it beat doing nothing?" (the
agent against equal-weight buy & hold with bootstrap intervals and the deflated Sharpe
ratio, summed up by :func:`~elegantpod.finance.stats.verdict.verdict`); equity and drawdown
charts; the tear sheet (worst drawdowns, alpha, beta, information ratio, excess return,
rolling Sharpe, volatility and beta, exposure and weights, concentration with a bet on
one stock flagged in words, return distribution, monthly returns of the agent and each
benchmark); trades; the agent (its spec as people read it: a tournament segment's
"evaluate only at the end" in words, scores to 4 significant digits, mutations as
``old → new``); and the caveats of the data.

This module assembles the page and writes it; the statistics and sentence of the
verdict are in :mod:`~elegantpod.finance.stats.verdict`, the charts in
:mod:`~elegantpod.finance.report.charts`, the tear sheet's sections in
:mod:`~elegantpod.finance.report.tearsheet_html` and the HTML helpers in
:mod:`~elegantpod.finance.report.markup`. None of them imports the backtest: a report reads a
:class:`~elegantpod.finance.backtests.result.BacktestResult` it is given.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from elegantpod.figures import img
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.report import charts, tearsheet_html
from elegantpod.finance.report.markup import named_table
from elegantpod.finance.stats import bootstrap
from elegantpod.finance.stats.metrics import BY_NAME
from elegantpod.finance.stats.verdict import (
    BOOTSTRAP_SAMPLES,
    Beat,
    compare,
    daily_returns,
    verdict_of,
)
from elegantpod.html_table import Markup, table, td, th, tr
from elegantpod.html_table import escape as esc
from elegantpod.number_text import fixed, number, percent
from elegantpod.safe_files import atomic_write_bytes, check_report_path

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;color:#1f2328;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{font-size:1.2em;margin-top:32px;
border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a;font-size:.9em}
table{border-collapse:collapse;font-size:.9em;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right}
th{background:#f6f8fa}td.name,th.name{text-align:left}
tr.agent td{font-weight:600}
img.chart{width:100%;max-width:1000px;display:block}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:.85em}
.heat td{min-width:44px}
.note{color:#57606a;font-size:.85em}
.banner{background:#ffebe9;border:2px solid #cf222e;color:#82071e;padding:10px 14px;
margin:0 0 12px;font-size:1.05em;border-radius:6px}
.verdict{font-size:1.05em;background:#f6f8fa;border-left:4px solid #0969da;padding:8px 12px}
.flag{background:#fff8c5;border-left:4px solid #bf8700;padding:8px 12px}
.caveats li{margin:4px 0}
"""


def fmt_metric(value: float, kind: str) -> str:
    """A metric for people: percent for returns and drawdowns, 2 decimals for ratios, '-' NaN
    (a :class:`~elegantpod.finance.stats.metrics.Metric`'s ``unit`` says which)."""
    if value is None:
        return "-"
    return percent(value) if kind == "pct" else fixed(value)


def metrics_table_html(result) -> str:
    """The metrics table: the agent's row first, then each benchmark."""
    metrics = result.metrics()
    declared = [BY_NAME[m] for m in metrics.columns]  # each metric's label and unit
    head = [th("Strategy", class_="name"), *(m.label for m in declared)]
    rows = [
        tr(
            [
                td(name, class_="name"),
                *(fmt_metric(float(row[m.name]), m.unit) for m in declared),
            ],
            class_="agent" if i == 0 else None,
        )
        for i, (name, row) in enumerate(metrics.iterrows())
    ]
    return table(head, rows, class_="metrics", id="metrics")


def render_html(result, title: str | None = None) -> str:
    """The whole report as one HTML string."""
    title = title or f"Backtest: {result.name}"
    dates = result.dates
    tickers = list(result.positions.columns)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = (
        f"{esc(f'{dates[0]:%Y-%m-%d}')} to {esc(f'{dates[-1]:%Y-%m-%d}')} "
        f"({len(dates):,} trading days, {result.periods_per_year} per year) &middot; "
        f"data: {esc(result.data_source or '-')} &middot; initial amount "
        f"{result.initial_amount:,.0f} &middot; transaction cost {100 * result.cost:.2f}% "
        f"per side &middot; {esc(_fills(result.execution_lag))} &middot; "
        f"generated {esc(generated)}"
    )
    returns = daily_returns(result)
    beat = compare(result)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        _banner_html(result),
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{meta}</p>',
        f'<p class="meta">Tickers: {esc(", ".join(tickers))}</p>',
        "<h2>Performance</h2>",
        metrics_table_html(result),
        '<p class="note">Returns are daily simple returns of account values; annual figures '
        f"use {result.periods_per_year} periods per year; Sharpe and Sortino assume a zero "
        "risk-free rate; max drawdown is measured from the running peak, the start included."
        "</p>",
        "<h2>Did it beat doing nothing?</h2>",
        _beat_html(result, beat),
        "<h2>Equity curve</h2>",
        img(charts.equity_png(result), "equity curve of the agent and its benchmarks", "equity"),
        "<h2>Drawdown</h2>",
        img(charts.drawdown_png(result), "drawdown of the agent and its benchmarks", "drawdown"),
        "<h2>Worst drawdown periods</h2>",
        tearsheet_html.drawdowns_html(result),
        "<h2>Against the benchmarks</h2>",
        tearsheet_html.relative_html(result, returns),
        img(charts.excess_png(returns), "excess return over each benchmark", "excess"),
        "<h2>Rolling risk</h2>",
        tearsheet_html.rolling_html(result, returns),
        "<h2>Positions</h2>",
        tearsheet_html.positions_html(result),
        "<h2>Return distribution</h2>",
        img(charts.distribution_png(returns), "histogram of daily returns", "distribution"),
        tearsheet_html.distribution_html(returns),
        "<h2>Monthly returns</h2>",
        tearsheet_html.monthly_html(result),
        "<h2>Trades</h2>",
        tearsheet_html.trades_html(result),
        "<h2>Agent</h2>",
        _agent_html(result.agent),
        "<h2>Caveats of the data</h2>",
        _caveats_html(result),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(result, path: str | Path, title: str | None = None) -> Path:
    """Write the report to ``path`` atomically (a failed write leaves no half file)."""
    path = check_report_path(path)
    atomic_write_bytes(path, render_html(result, title).encode("utf-8"))
    return path


# ---------------------------------------------------------------------------- luck
def _ci(ci: bootstrap.BootstrapInterval, sign: str = "") -> str:
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return "-"
    return f"[{ci.low:{sign}.2f}, {ci.high:{sign}.2f}]"


def _beat_html(result, beat: Beat) -> str:
    rows = [
        (result.name, fixed(beat.sharpe.estimate), _ci(beat.sharpe)),
        (EQUAL_WEIGHT, fixed(beat.benchmark.estimate), _ci(beat.benchmark)),
        (
            "Difference (agent - equal weight), paired",
            "-" if not math.isfinite(beat.difference.estimate) else f"{beat.difference[2]:+.2f}",
            _ci(beat.difference, "+"),
        ),
    ]
    out = [
        f'<p class="verdict" id="verdict">{esc(verdict_of(result, beat))}</p>',
        named_table(
            "sharpe-ci",
            ["Strategy", "Sharpe", "95% bootstrap interval"],
            [(n, [v, c]) for n, v, c in rows],
        ),
    ]
    ds = beat.deflated
    if ds is not None:
        ppy = result.periods_per_year
        facts = [
            (f"Deflated Sharpe ratio ({ds.trials} trial{'s' * (ds.trials != 1)})", fixed(ds.dsr)),
            ("Probabilistic Sharpe ratio (against 0)", fixed(ds.psr)),
            (
                f"Sharpe ratio the best of {ds.trials} luck-only agents would show",
                fixed(ds.sr_star * math.sqrt(ppy)),
            ),
        ]
        out.append(table(None, ([td(k, class_="name"), v] for k, v in facts), id="deflated"))
    out.append(
        '<p class="note">Intervals: circular block bootstrap of the daily returns '
        f"({BOOTSTRAP_SAMPLES:,} resamples, blocks of {beat.block} days, seed 0), the "
        "difference resampling both strategies on the same days. The deflated Sharpe "
        "ratio (Bailey and L&oacute;pez de Prado, 2014) is the probability that the "
        "agent's true Sharpe ratio exceeds what the best of that many skill-less agents "
        "would show over these days, with their spread set by the sampling error of a "
        "Sharpe ratio over this many days; 0.95 or more is the usual bar. The trials are "
        "the evaluations its selection compared (every scored evaluation of every pod, "
        "not the pods): correlated evaluations and a backtest on dates the "
        "selection never saw both make it conservative.</p>"
    )
    return "\n".join(out)


def _fills(lag: int) -> str:
    if lag == 1:
        return "orders fill at the next day's close (execution lag 1)"
    if lag == 0:
        return "orders fill at the observed close (execution lag 0, optimistic)"
    return f"execution lag {lag} days"


def _banner_html(result) -> str:
    if not result.in_sample:
        return ""
    return (
        f'<div class="banner" id="in-sample"><strong>In-sample backtest.</strong> '
        f"{esc(result.in_sample)}</div>"
    )


def _caveats_html(result) -> str:
    last = result.dates[-1]
    age = (_dt.datetime.now(_dt.timezone.utc).date() - last.date()).days
    if result.data_source == "sp500":
        from elegantpod.finance.market.prices import cached_load

        data_end = cached_load("sp500").dates[-1]
        survivors = (
            "Survivorship bias: the shipped sample holds 20 stocks picked, in hindsight, "
            "among companies that traded over its whole range (1990 to "
            f"{data_end:%Y}); those that went bankrupt, were taken over or delisted in that "
            "time cannot be in it. That flatters every long-only strategy here, "
            "equal-weight buy &amp; hold included (an index benchmark held the failures)."
        )
        stale = (
            f"Stale data: the shipped sample ends on {data_end:%Y-%m-%d} and is never "
            f"updated; this backtest's last day, {last:%Y-%m-%d}, was {age:,} days before "
            "the report was generated."
        )
    else:
        survivors = (
            "Survivorship bias: if these tickers were chosen as companies that exist today "
            "(or were in an index at the end of the range), the data leaves out those that "
            "failed or were delisted over the range, which flatters long-only strategies, "
            "equal-weight buy &amp; hold included."
        )
        stale = (
            f"Stale data: the backtest's last day is {last:%Y-%m-%d}, {age:,} days before "
            "the report was generated; it says nothing about the market since."
        )
    costs = (
        f"Costs are a flat {100 * result.cost:.2f}% of the traded value on each side: no "
        "bid-ask spread, slippage, market impact, taxes or financing, and every order fills "
        "in full at the close whatever its size."
    )
    timing = (
        "Execution timing: the agent decides on a day's close and its orders fill at the "
        "next day's close (execution lag 1), so it never trades at a price it has seen."
        if result.execution_lag == 1
        else "Execution timing: orders fill at the very close the agent decided on "
        f"(execution lag {result.execution_lag}), an optimistic fill no trader gets: a "
        "strategy that reacts to the last move looks better than it could be."
    )
    items = "".join(f"<li>{x}</li>" for x in (survivors, stale, costs, timing))
    return f'<ul class="caveats" id="caveats">{items}</ul>'


def _agent_html(agent: dict[str, Any]) -> str:
    spec = agent.get("spec") or {}
    facts = [
        ("Name", agent.get("name")),
        ("Algorithm", agent.get("algo")),
        ("Seed", agent.get("seed")),
        ("Env steps trained", f"{agent['env_steps']:,}" if "env_steps" in agent else None),
        ("Checkpoint", agent.get("checkpoint")),
        ("Tournament store", agent.get("tournament_store")),
        ("Fitness", agent.get("fitness") or spec.get("fitness")),
        ("Leaderboard score", _readable(agent.get("score"))),
    ]
    rows = ([td(k, class_="name"), td(v, class_="name")] for k, v in facts if v is not None)
    out = [table(None, rows, id="agent")]
    lineage = agent.get("lineage") or []
    if lineage:
        head = ["Pod", "Parent", "Algo", Markup("Mutation (old &rarr; new)")]
        lineage_rows = (
            [
                td(x, class_="name")
                for x in (
                    e.get("pod"),
                    e.get("parent") or "-",
                    e.get("algo"),
                    _mutation(e.get("mutation")) or "-",
                )
            ]
            for e in lineage
        )
        out.append(
            "<h3>Lineage</h3><p class='note'>From the agent back to its founding pod. A "
            "mutation lists each hyperparameter the pod changed from its parent's, as "
            "<em>name old &rarr; new</em>.</p>"
            + table([th(h, class_="name") for h in head], lineage_rows, id="lineage")
        )
    if spec:
        out.append(
            "<h3>Spec</h3><pre id='spec'>"
            + esc(json.dumps(_readable_spec(spec), indent=2, sort_keys=True, default=str))
            + "</pre>"
        )
    return "\n".join(out)


EVAL_AT_SEGMENT_END = 2**60
"""``eval_every_steps`` at or above this means "evaluate only at the end": a tournament's
segment sets it so (its pods are scored once a segment) and the report says so in words
rather than show the number."""


def _readable_spec(x: Any) -> Any:
    """The spec as people read it: ``eval_every_steps`` sentinels in words, at any depth."""
    if isinstance(x, dict):
        return {
            k: "at the end of each segment"
            if k == "eval_every_steps" and _is_number(v) and v >= EVAL_AT_SEGMENT_END
            else _readable_spec(v)
            for k, v in x.items()
        }
    if isinstance(x, list | tuple):
        return [_readable_spec(v) for v in x]
    return x


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _readable(x: Any) -> Any:
    """A number to 4 significant digits (:func:`elegantpod.number_text.number`); else ``x``."""
    return number(float(x)) if _is_number(x) else x


def _mutation(x: Any) -> str:
    """``{"lr": [0.001, 0.0008]}`` as ``lr 0.001 → 0.0008``; anything else as text."""
    if not x:
        return ""
    if not isinstance(x, dict):
        return str(x)
    parts = []
    for k, v in x.items():
        if isinstance(v, list | tuple) and len(v) == 2:
            old, new = (_readable(y) for y in v)
            parts.append(f"{k} {old} \u2192 {new}")
        else:
            parts.append(f"{k}={_readable(v)}")
    return ", ".join(parts)


# verdict is the report's first sentence; it stays importable from here as it always was
__all__ = ["metrics_table_html", "render_html", "write_report"]
