"""The backtest report: one self-contained HTML file.

Charts are PNGs embedded as base64 ``data:`` URIs and the monthly-returns heatmap is a
coloured HTML table, so the file opens offline, attaches to an e-mail and makes no
network request. Every string that came from a user (ticker names, agent names, data
paths, hyperparameters) is HTML-escaped: a ticker called ``<script>`` stays text. In the
charts such strings are drawn as plain text: no mathtext (an agent called ``$\\foo{$``
would not parse) and no LaTeX, whatever the user's matplotlibrc says.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from elegantpod.checkpoint import atomic_write_bytes
from elegantpod.finance import metrics

METRIC_LABELS = {
    "cumulative_return": ("Cumulative return", "pct"),
    "annual_return": ("Annual return", "pct"),
    "annual_volatility": ("Annual volatility", "pct"),
    "max_drawdown": ("Max drawdown", "pct"),
    "sharpe": ("Sharpe", "ratio"),
    "calmar": ("Calmar", "ratio"),
    "sortino": ("Sortino", "ratio"),
}
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
"""


def esc(value: Any) -> str:
    """HTML-escape anything (quotes too: the text may land in an attribute)."""
    return html.escape(str(value), quote=True)


def fmt_metric(value: float, kind: str) -> str:
    """A metric for people: percent for returns and drawdowns, 2 decimals for ratios, '-' NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{100 * value:.2f}%" if kind == "pct" else f"{value:.2f}"


def metrics_table_html(result) -> str:
    """The metrics table: the agent's row first, then each benchmark."""
    table = result.metrics()
    head = "".join(f"<th>{esc(METRIC_LABELS[m][0])}</th>" for m in table.columns)
    rows = []
    for i, (name, row) in enumerate(table.iterrows()):
        cells = "".join(
            f"<td>{fmt_metric(float(row[m]), METRIC_LABELS[m][1])}</td>" for m in table.columns
        )
        cls = ' class="agent"' if i == 0 else ""
        rows.append(f'<tr{cls}><td class="name">{esc(name)}</td>{cells}</tr>')
    return (
        f'<table class="metrics" id="metrics"><thead><tr><th class="name">Strategy</th>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_html(result, title: str | None = None) -> str:
    """The whole report as one HTML string."""
    title = title or f"Backtest: {result.name}"
    dates = result.dates
    tickers = list(result.positions.columns)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = (
        f"{esc(f'{dates[0]:%Y-%m-%d}')} to {esc(f'{dates[-1]:%Y-%m-%d}')} "
        f"({len(dates)} trading days, {result.periods_per_year} per year) &middot; "
        f"data: {esc(result.data_source or '-')} &middot; initial amount "
        f"{result.initial_amount:,.0f} &middot; transaction cost {100 * result.cost:.2f}% "
        f"per side &middot; generated {esc(generated)}"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{meta}</p>',
        f'<p class="meta">Tickers: {esc(", ".join(tickers))}</p>',
        "<h2>Performance</h2>",
        metrics_table_html(result),
        '<p class="note">Returns are daily simple returns of account values; annual figures '
        f"use {result.periods_per_year} periods per year; Sharpe and Sortino assume a zero "
        "risk-free rate; max drawdown is measured from the running peak, the start included."
        "</p>",
        "<h2>Equity curve</h2>",
        _img(_equity_png(result), "equity curve of the agent and its benchmarks", "equity"),
        "<h2>Drawdown</h2>",
        _img(_drawdown_png(result), "drawdown of the agent and its benchmarks", "drawdown"),
        "<h2>Monthly returns</h2>",
        _monthly_html(result),
        "<h2>Trades</h2>",
        _trades_html(result),
        "<h2>Agent</h2>",
        _agent_html(result.agent),
        "</body></html>",
    ]
    return "\n".join(parts)


def check_report_path(path: str | Path) -> Path:
    """``path`` as a ``Path``; ``ValueError`` unless it ends in .html in an existing folder.

    Called before a backtest runs (by the CLI) as well as before writing.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"report path {str(path)!r} should end in .html")
    if not path.parent.exists():
        raise ValueError(f"report directory {str(path.parent)!r} does not exist")
    return path


def write_report(result, path: str | Path, title: str | None = None) -> Path:
    """Write the report to ``path`` atomically (a failed write leaves no half file)."""
    path = check_report_path(path)
    atomic_write_bytes(path, render_html(result, title).encode("utf-8"))
    return path


# ---------------------------------------------------------------------------- charts
PLAIN_TEXT = {"text.usetex": False, "text.parse_math": False}
"""Matplotlib settings for the charts: user strings are drawn as they are, ``$`` included."""


def _plain_text():
    """A context in which every Text made and drawn is plain (legends, labels, ticks)."""
    import matplotlib

    return matplotlib.rc_context(PLAIN_TEXT)


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(10, 4), dpi=100, layout="constrained")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _img(png: bytes, alt: str, ident: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="chart" id="{ident}" alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def _equity_png(result) -> bytes:
    with _plain_text():
        return _draw_equity(result)


def _draw_equity(result) -> bytes:
    fig = _figure()
    ax = fig.add_subplot()
    for i, (name, series) in enumerate(result.values().items()):
        ax.plot(
            series.index,
            series.to_numpy(),
            color=f"C{i}",
            lw=2.0 if i == 0 else 1.2,
            label=str(name),
        )
    ax.set_ylabel("account value")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    return _png(fig)


def _drawdown_png(result) -> bytes:
    with _plain_text():
        return _draw_drawdown(result)


def _draw_drawdown(result) -> bytes:
    fig = _figure()
    ax = fig.add_subplot()
    for i, (name, series) in enumerate(result.values().items()):
        dd = metrics.drawdown_series(metrics.returns_from_values(series.to_numpy()))
        dd = np.concatenate([[0.0], dd]) * 100.0
        if i == 0:
            ax.fill_between(series.index, dd, 0.0, color="C0", alpha=0.35, label=str(name))
        else:
            ax.plot(series.index, dd, color=f"C{i}", lw=1.0, label=str(name))
    ax.set_ylabel("drawdown (%)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    return _png(fig)


def _heat_color(r: float) -> str:
    if not math.isfinite(r):
        return "#ffffff"
    x = min(abs(r) / 0.10, 1.0)  # full colour at +-10% a month
    if r >= 0:
        return f"rgb({int(255 - 155 * x)},{int(255 - 55 * x)},{int(255 - 155 * x)})"
    return f"rgb(255,{int(255 - 155 * x)},{int(255 - 155 * x)})"


def _monthly_html(result) -> str:
    table = metrics.monthly_returns(result.account_value)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    head = "".join(f"<th>{m}</th>" for m in months) + "<th>Year</th>"
    rows = []
    for year, row in table.iterrows():
        cells = []
        for m in range(1, 13):
            r = float(row.get(m, np.nan))
            text = "" if not math.isfinite(r) else f"{100 * r:.1f}"
            cells.append(f'<td style="background:{_heat_color(r)}">{text}</td>')
        finite = [float(v) for v in row.to_numpy() if math.isfinite(float(v))]
        yearly = math.prod(1.0 + v for v in finite) - 1.0 if finite else math.nan
        text = f"{100 * yearly:.1f}" if math.isfinite(yearly) else ""
        cells.append(f'<td style="background:{_heat_color(yearly / 4)}"><b>{text}</b></td>')
        rows.append(f'<tr><td class="name">{esc(year)}</td>{"".join(cells)}</tr>')
    return (
        f'<p class="note">{esc(result.name)}: compounded return within each month, in '
        "percent.</p>"
        f'<table class="heat" id="monthly"><thead><tr><th class="name">Year</th>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _trades_html(result) -> str:
    summary = result.trades_summary()
    cols = [
        ("buys", "Buy orders", "{:,.0f}"),
        ("sells", "Sell orders", "{:,.0f}"),
        ("shares_bought", "Shares bought", "{:,.0f}"),
        ("shares_sold", "Shares sold", "{:,.0f}"),
        ("traded_value", "Traded value", "{:,.0f}"),
        ("costs", "Costs", "{:,.2f}"),
    ]
    head = "".join(f"<th>{label}</th>" for _, label, _ in cols)
    rows = []
    for tic, row in summary.iterrows():
        cells = "".join(f"<td>{f.format(float(row[c]))}</td>" for c, _, f in cols)
        rows.append(f'<tr><td class="name">{esc(tic)}</td>{cells}</tr>')
    days = int(result.trades["date"].nunique()) if len(result.trades) else 0
    total_days = len(result.dates) - 1
    turnover = float(summary.loc["total", "traded_value"]) / max(
        float(result.account_value.mean()), 1e-9
    )
    return (
        f'<p class="note">{len(result.trades):,} orders on {days} of {total_days} trading days; '
        f"turnover {turnover:.2f}x the average account value.</p>"
        f'<table id="trades"><thead><tr><th class="name">Ticker</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


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
        ("Leaderboard score", agent.get("score")),
    ]
    rows = "".join(
        f'<tr><td class="name">{esc(k)}</td><td class="name">{esc(v)}</td></tr>'
        for k, v in facts
        if v is not None
    )
    out = [f'<table id="agent">{rows}</table>']
    lineage = agent.get("lineage") or []
    if lineage:
        lrows = "".join(
            f'<tr><td class="name">{esc(e.get("pod"))}</td><td class="name">'
            f'{esc(e.get("parent") or "-")}</td><td class="name">{esc(e.get("algo"))}</td>'
            f'<td class="name">{esc(_compact(e.get("mutation")) or "-")}</td></tr>'
            for e in lineage
        )
        out.append(
            "<h3>Lineage</h3><p class='note'>From the agent back to its founding pod.</p>"
            '<table id="lineage"><thead><tr><th class="name">Pod</th><th class="name">Parent'
            '</th><th class="name">Algo</th><th class="name">Mutation</th></tr></thead>'
            f"<tbody>{lrows}</tbody></table>"
        )
    if spec:
        out.append(
            "<h3>Spec</h3><pre id='spec'>"
            + esc(json.dumps(spec, indent=2, sort_keys=True, default=str))
            + "</pre>"
        )
    return "\n".join(out)


def _compact(x: Any) -> str:
    if not x:
        return ""
    if isinstance(x, dict):
        return ", ".join(f"{k}={v}" for k, v in x.items())
    return str(x)
