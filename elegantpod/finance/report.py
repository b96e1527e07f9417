"""The backtest report: one self-contained HTML file.

Charts are PNGs embedded as base64 ``data:`` URIs and the monthly-returns heatmap is a
coloured HTML table, so the file opens offline, attaches to an e-mail and makes no
network request. Every string that came from a user (ticker names, agent names, data
paths, hyperparameters) is HTML-escaped: a ticker called ``<script>`` stays text. In the
charts such strings are drawn as plain text: no mathtext (an agent called ``$\\foo{$``
would not parse) and no LaTeX, whatever the user's matplotlibrc says.

Sections, top to bottom: an "in-sample" banner when the backtest overlaps the agent's
training or validation dates; the metrics table; "Did it beat doing nothing?" (the
agent against equal-weight buy & hold with bootstrap intervals and the deflated Sharpe
ratio, summed up by :func:`verdict`); equity and drawdown charts; the tear sheet of
:mod:`elegantpod.finance.tearsheet` (worst drawdowns, alpha, beta, information ratio,
excess return, rolling Sharpe, volatility and beta, exposure and weights, concentration
with a bet on one stock flagged in words, return distribution, monthly returns of the
agent and each benchmark); trades; the agent (its spec as people read it: a tournament
segment's "evaluate only at the end" in words, scores to 4 significant digits, mutations
as ``old → new``); and the caveats of the data.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elegantpod.checkpoint import atomic_write_bytes
from elegantpod.finance import metrics, selection, tearsheet
from elegantpod.finance.backtest import EQUAL_WEIGHT, UNKNOWN_SELECTION
from elegantpod.progress import number

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
.banner{background:#ffebe9;border:2px solid #cf222e;color:#82071e;padding:10px 14px;
margin:0 0 12px;font-size:1.05em;border-radius:6px}
.verdict{font-size:1.05em;background:#f6f8fa;border-left:4px solid #0969da;padding:8px 12px}
.flag{background:#fff8c5;border-left:4px solid #bf8700;padding:8px 12px}
.caveats li{margin:4px 0}
"""
BOOTSTRAP_SAMPLES = 2000
"""Resamples of the report's bootstrap intervals (seed 0: a report is reproducible)."""
TOP_HOLDINGS = 8
"""Holdings drawn one by one in the weights chart; the rest are summed as "other"."""


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
        f"({len(dates):,} trading days, {result.periods_per_year} per year) &middot; "
        f"data: {esc(result.data_source or '-')} &middot; initial amount "
        f"{result.initial_amount:,.0f} &middot; transaction cost {100 * result.cost:.2f}% "
        f"per side &middot; {esc(_fills(result.execution_lag))} &middot; "
        f"generated {esc(generated)}"
    )
    returns = _returns(result)
    beat = _beat(result)
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
        _img(_equity_png(result), "equity curve of the agent and its benchmarks", "equity"),
        "<h2>Drawdown</h2>",
        _img(_drawdown_png(result), "drawdown of the agent and its benchmarks", "drawdown"),
        "<h2>Worst drawdown periods</h2>",
        _drawdowns_html(result),
        "<h2>Against the benchmarks</h2>",
        _relative_html(result, returns),
        _img(_plain(_draw_excess, returns), "excess return over each benchmark", "excess"),
        "<h2>Rolling risk</h2>",
        _rolling_html(result, returns),
        "<h2>Positions</h2>",
        _positions_html(result),
        "<h2>Return distribution</h2>",
        _img(_plain(_draw_distribution, returns), "histogram of daily returns", "distribution"),
        _distribution_html(returns),
        "<h2>Monthly returns</h2>",
        _monthly_html(result),
        "<h2>Trades</h2>",
        _trades_html(result),
        "<h2>Agent</h2>",
        _agent_html(result.agent),
        "<h2>Caveats of the data</h2>",
        _caveats_html(result),
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
    if not path.parent.is_dir():
        raise ValueError(f"report directory {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"report path {str(path)!r} is a folder")
    # prove the folder takes a file now, not after a backtest of minutes
    probe = path.parent / f".{path.name}.write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(
            f"report directory {str(path.parent)!r} is not writable: {exc.strerror or exc}"
        ) from None
    return path


def write_report(result, path: str | Path, title: str | None = None) -> Path:
    """Write the report to ``path`` atomically (a failed write leaves no half file)."""
    path = check_report_path(path)
    atomic_write_bytes(path, render_html(result, title).encode("utf-8"))
    return path


# ---------------------------------------------------------------------------- luck
@dataclass(frozen=True)
class _Beat:
    """The agent against equal weight, as the report section and :func:`verdict` say it."""

    sharpe: selection.BootstrapInterval
    benchmark: selection.BootstrapInterval
    difference: selection.BootstrapInterval
    deflated: selection.DeflatedSharpe | None
    block: int
    has_benchmark: bool


def _returns(result) -> list[tuple[str, pd.Series]]:
    """Daily returns of the agent (first) and each benchmark, dated by the day they end.

    Pairs, not a frame: an agent may carry a benchmark's name."""
    out = [(result.name, result.account_value)] + list(result.benchmarks.items())
    return [
        (str(name), pd.Series(metrics.returns_from_values(v.to_numpy()), index=v.index[1:]))
        for name, v in out
    ]


def _beat(result) -> _Beat:
    agent = _returns(result)[0][1].to_numpy()
    ew = result.benchmarks.get(EQUAL_WEIGHT)
    nan = selection.BootstrapInterval(math.nan, math.nan, math.nan)
    if len(agent) < 3:  # too short for any of it
        return _Beat(nan, nan, nan, None, 1, ew is not None)
    kw = {"samples": BOOTSTRAP_SAMPLES, "seed": 0}
    ppy = result.periods_per_year
    sharpe = selection.bootstrap_sharpe_ci(agent, ppy, **kw)
    benchmark = difference = nan
    if ew is not None:
        ew_returns = metrics.returns_from_values(ew.to_numpy())
        benchmark = selection.bootstrap_sharpe_ci(ew_returns, ppy, **kw)
        difference = selection.bootstrap_sharpe_difference_ci(agent, ew_returns, ppy, **kw)
    deflated = selection.deflated_sharpe_ratio(agent, result.trials, periods_per_year=ppy)
    block = selection.default_block_length(len(agent))
    return _Beat(sharpe, benchmark, difference, deflated, block, ew is not None)


def verdict(result) -> str:
    """One plain sentence: did the agent beat equal-weight buy & hold, risk-adjusted, and
    how sure can we be?

    It compares Sharpe ratios with the 95% interval of their difference from a paired
    block bootstrap (the same resampled days for both), and adds the agent's deflated
    Sharpe ratio over ``result.trials`` trials: a difference whose interval lies above
    zero beat equal weight on these dates; a deflated Sharpe ratio of 0.95 or more says
    that Sharpe ratio is unlikely to be the luck of picking the best of that many.

    When one stock dominated the account (more than half its value on the last day or
    on most days: :attr:`~elegantpod.finance.tearsheet.Concentration.is_concentrated`),
    a second sentence says so: a bet on one stock is not a diversified portfolio,
    however its Sharpe ratio compares.

    Parameters
    ----------
    result : BacktestResult
        A backtest with its equal-weight benchmark.

    Returns
    -------
    str
        The sentence, unescaped (it names the agent and tickers: escape it for HTML).
    """
    return _verdict(result, _beat(result))


def _concentration_sentence(result) -> str:
    conc = result.concentration
    return "" if conc is None else conc.sentence()


def _verdict(result, beat: _Beat) -> str:
    bet = _concentration_sentence(result)
    return f"{_sharpe_verdict(result, beat)} {bet}".strip()


def _sharpe_verdict(result, beat: _Beat) -> str:
    name = result.name
    start, end = f"{result.dates[0]:%Y-%m-%d}", f"{result.dates[-1]:%Y-%m-%d}"
    prefix = "In-sample (so this measures memory, not skill): " if result.in_sample else ""
    a, e = beat.sharpe.estimate, beat.benchmark.estimate
    if not beat.has_benchmark:
        return f"{prefix}{name}: no equal-weight benchmark to compare with."
    if beat.deflated is None:
        return f"{prefix}{name}: {len(result.dates)} days are too few to compare Sharpe ratios."
    if not math.isfinite(a):
        return (
            f"{prefix}{name}'s account value never changed from {start} to {end}, so it has no "
            f"Sharpe ratio: it did not beat equal-weight buy & hold ({_num(e)})."
        )
    lo, hi, d = beat.difference
    head = (
        f"{prefix}From {start} to {end}, {name} had a Sharpe ratio of {a:.2f} against "
        f"{_num(e)} for equal-weight buy & hold"
    )
    interval = f"95% interval of the difference {lo:+.2f} to {hi:+.2f}"
    if not math.isfinite(d):
        judged = ", and equal weight's has no Sharpe ratio to compare with"
    elif lo > 0:
        judged = f": it beat equal weight risk-adjusted with 95% confidence ({interval})"
    elif hi < 0:
        judged = f": it did worse than equal weight risk-adjusted ({interval})"
    else:
        judged = (
            f", a difference of {d:+.2f} that is not significant ({interval} includes zero): "
            "no evidence that it beat equal weight risk-adjusted"
        )
    ds = beat.deflated
    n = ds.trials
    tried = "1 trial" if n == 1 else f"{n} trials"
    if not math.isfinite(ds.dsr):
        luck = ""
    elif a > 0 and getattr(result, "selection", "") == UNKNOWN_SELECTION:  # never silently 1
        luck = (
            f"; selection unknown: its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, "
            "which holds only if this agent was not picked from others (pass trials=N, or "
            "--trials N, if it was the best of N)"
        )
    elif a <= 0:
        unknown = getattr(result, "selection", "") == UNKNOWN_SELECTION
        luck = (
            f"; {'selection unknown: ' * unknown}its deflated Sharpe ratio over {tried} is "
            f"{ds.dsr:.2f}: no skill to deflate"
        )
    elif ds.dsr >= 0.95:
        luck = f"; its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, so luck is unlikely"
    else:
        luck = (
            f"; its deflated Sharpe ratio over {tried} is {ds.dsr:.2f}, below 0.95, so "
            "luck alone could explain its Sharpe ratio"
        )
    return f"{head}{judged}{luck}."


def _num(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def _ci(ci: selection.BootstrapInterval, sign: str = "") -> str:
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return "-"
    return f"[{ci.low:{sign}.2f}, {ci.high:{sign}.2f}]"


def _beat_html(result, beat: _Beat) -> str:
    rows = [
        (result.name, _num(beat.sharpe.estimate), _ci(beat.sharpe)),
        (EQUAL_WEIGHT, _num(beat.benchmark.estimate), _ci(beat.benchmark)),
        (
            "Difference (agent - equal weight), paired",
            "-" if not math.isfinite(beat.difference.estimate) else f"{beat.difference[2]:+.2f}",
            _ci(beat.difference, "+"),
        ),
    ]
    body = "".join(
        f'<tr><td class="name">{esc(n)}</td><td>{v}</td><td>{c}</td></tr>' for n, v, c in rows
    )
    out = [
        f'<p class="verdict" id="verdict">{esc(_verdict(result, beat))}</p>',
        '<table id="sharpe-ci"><thead><tr><th class="name">Strategy</th><th>Sharpe</th>'
        f"<th>95% bootstrap interval</th></tr></thead><tbody>{body}</tbody></table>",
    ]
    ds = beat.deflated
    if ds is not None:
        ppy = result.periods_per_year
        facts = [
            (f"Deflated Sharpe ratio ({ds.trials} trial{'s' * (ds.trials != 1)})", _num(ds.dsr)),
            ("Probabilistic Sharpe ratio (against 0)", _num(ds.psr)),
            (
                f"Sharpe ratio the best of {ds.trials} luck-only agents would show",
                _num(ds.sr_star * math.sqrt(ppy)),
            ),
        ]
        rows = "".join(f'<tr><td class="name">{esc(k)}</td><td>{v}</td></tr>' for k, v in facts)
        out.append(f'<table id="deflated"><tbody>{rows}</tbody></table>')
    out.append(
        '<p class="note">Intervals: circular block bootstrap of the daily returns '
        f"({BOOTSTRAP_SAMPLES:,} resamples, blocks of {beat.block} days, seed 0), the "
        "difference resampling both strategies on the same days. The deflated Sharpe "
        "ratio (Bailey and L&oacute;pez de Prado, 2014) is the probability that the "
        "agent's true Sharpe ratio exceeds what the best of that many skill-less agents "
        "would show over these days, with their spread set by the sampling error of a "
        "Sharpe ratio over this many days; 0.95 or more is the usual bar. The trials are "
        "the pods its selection scored: correlated pods and a backtest on dates the "
        "selection never saw both make it conservative.</p>"
    )
    return "\n".join(out)


# ---------------------------------------------------------------------------- tear sheet
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


def _table(ident: str, head: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """A table of names (escaped) and pre-formatted cells (numbers: nothing to escape)."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head[1:])
    body = "".join(
        f'<tr><td class="name">{esc(name)}</td>{"".join(f"<td>{c}</td>" for c in cells)}</tr>'
        for name, cells in rows
    )
    return (
        f'<table id="{ident}"><thead><tr><th class="name">{esc(head[0])}</th>{th}</tr>'
        f"</thead><tbody>{body}</tbody></table>"
    )


def _pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}%" if math.isfinite(x) else "-"


def _drawdowns_html(result) -> str:
    table = tearsheet.drawdown_periods(result.account_value, top=5)
    if table.empty:
        return '<p class="note" id="drawdowns">The account never fell below a previous peak.</p>'
    rows = [
        (
            str(i + 1),
            [
                f"{r.peak:%Y-%m-%d}",
                f"{r.valley:%Y-%m-%d}",
                "not recovered" if pd.isna(r.recovery) else f"{r.recovery:%Y-%m-%d}",
                _pct(r.depth),
                f"{r.duration:,}",
            ],
        )
        for i, r in enumerate(table.itertuples())
    ]
    head = ["#", "Peak", "Valley", "Recovery", "Depth", "Duration (trading days)"]
    return (
        _table("drawdowns", head, rows) + '<p class="note">The deepest falls of the agent\'s '
        "account from a peak, deepest first; a period lasts from the peak until the account "
        "is back at it (or the last day).</p>"
    )


def _relative_html(result, returns) -> str:
    (_, agent), benchmarks = returns[0], returns[1:]
    ppy = result.periods_per_year
    rows = []
    for name, bench in benchmarks:
        alpha, beta = tearsheet.alpha_beta(agent, bench, periods_per_year=ppy)
        ex = tearsheet.excess_return(agent, bench)
        rows.append(
            (
                name,
                [
                    _pct(alpha),
                    _num(beta),
                    _num(tearsheet.information_ratio(agent, bench, periods_per_year=ppy)),
                    _pct(tearsheet.tracking_error(agent, bench, periods_per_year=ppy)),
                    _pct(float(ex.iloc[-1]) if len(ex) else math.nan),
                ],
            )
        )
    head = ["Benchmark", "Alpha (annual)", "Beta", "Information ratio", "Tracking error"]
    return (
        _table("relative", [*head, "Excess return"], rows)
        + f'<p class="note">{esc(result.name)} against each benchmark: alpha and beta from a '
        "regression of daily returns (alpha compounded to a year, zero risk-free rate); the "
        "information ratio is the annualized Sharpe ratio of the daily return difference, "
        "the tracking error its annualized volatility; the excess return is the agent's "
        "value over the benchmark's, minus 1 (the chart shows it day by day).</p>"
    )


def _window(days: int) -> int:
    """The rolling window: half a year, or a quarter of a backtest shorter than a year."""
    return tearsheet.DEFAULT_WINDOW if days > 2 * tearsheet.DEFAULT_WINDOW else max(5, days // 4)


def _rolling_html(result, returns) -> str:
    window = _window(len(returns[0][1]))
    return _img(
        _plain(_draw_rolling, returns, result.periods_per_year, window),
        "rolling Sharpe ratio, volatility and beta",
        "rolling",
    ) + (
        f'<p class="note">Over the trailing {window} trading days: annualized Sharpe ratio '
        "and volatility of each strategy, and the agent's beta to each benchmark.</p>"
    )


def _positions_html(result) -> str:
    if result.prices is None:
        return '<p class="note" id="positions">No prices in this result: no position values.</p>'
    weights = tearsheet.position_weights(result.positions, result.prices, result.account_value)
    ex = tearsheet.exposure(weights)
    conc = tearsheet.concentration(weights)
    stats = [
        ("Invested (gross exposure)", ex["gross"], _pct),
        ("Cash", ex["cash"], _pct),
        ("Largest position", conc["largest"], _pct),
        ("Herfindahl index of the holdings", conc["herfindahl"], _num),
        ("Effective number of holdings", conc["effective_holdings"], lambda x: _num(x, 1)),
    ]
    rows = []
    for label, series, f in stats:
        x = series.to_numpy(dtype=np.float64)
        seen = x[np.isfinite(x)]
        cells = [f(float(v)) for v in (seen.mean(), seen.min(), seen.max())] if seen.size else []
        rows.append((label, [*(cells or ["-"] * 3), f(float(x[-1]))]))
    largest = tearsheet.largest_position(weights)
    return (
        _img(
            _plain(_draw_weights, weights, largest),
            "position weights and cash over time, with the largest position's share",
            "exposure",
        )
        + _one_stock_html(largest)
        + _table("concentration", ["Per day", "Average", "Min", "Max", "Last day"], rows)
        + '<p class="note">Weights are each holding\'s value at the close over the account '
        "value. The Herfindahl index is the sum of the squared shares of the invested money "
        "(1 for a single stock, 1/N for N equal positions; days with nothing held are left "
        "out), the effective number of holdings its inverse.</p>"
    )


def _one_stock_html(conc: tearsheet.Concentration) -> str:
    """The largest position in words; flagged when one stock dominated (see
    :attr:`~elegantpod.finance.tearsheet.Concentration.is_concentrated`)."""
    days = len(conc.largest)
    over = f"{conc.threshold:.0%}" if conc.threshold != 0.5 else "half"
    figures = (
        f"The largest single position held {conc.mean:.0%} of the portfolio on average and "
        f"{conc.max:.0%} at most"
    )
    if conc.is_concentrated:
        return f'<p class="flag" id="one-stock">{esc(conc.sentence())} {esc(figures)}.</p>'
    if conc.num_tickers < 2:
        said = f"One ticker: nothing to diversify into. {figures}."
    else:
        last = f", {conc.end:.0%} in {conc.end_ticker}" if conc.end_ticker else ", none"
        said = (
            f"No single stock dominated the portfolio. {figures}{last} on the last day; one "
            f"stock held over {over} of it on {conc.dominated_days:.0%} of the {days:,} "
            "trading days."
        )
    return f'<p class="note" id="one-stock">{esc(said)}</p>'


_STATS = (
    ("skew", "Skewness", _num),
    ("kurtosis", "Excess kurtosis", _num),
    ("var", "Value at risk (95%, 1 day)", _pct),
    ("cvar", "Conditional VaR (95%, 1 day)", _pct),
    ("best_day", "Best day", _pct),
    ("worst_day", "Worst day", _pct),
    ("best_month", "Best month", _pct),
    ("worst_month", "Worst month", _pct),
    ("win_rate", "Days with a gain", lambda x: _pct(x, 1)),
)


def _distribution_html(returns) -> str:
    stats = [tearsheet.return_stats(r) for _, r in returns]
    rows = [(label, [f(s[key]) for s in stats]) for key, label, f in _STATS]
    return _table("return-stats", ["Daily returns", *(n for n, _ in returns)], rows) + (
        '<p class="note">Historical value at risk: the 5% quantile of daily returns; the '
        "conditional VaR is the mean of the returns at or below it. Skewness and kurtosis "
        "are the moments of the observed returns; days with a gain count all days, those "
        "in cash included.</p>"
    )


def _caveats_html(result) -> str:
    last = result.dates[-1]
    age = (_dt.datetime.now(_dt.timezone.utc).date() - last.date()).days
    if result.data_source == "sp500":
        from elegantpod.finance.data import cached_load

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


# ---------------------------------------------------------------------------- charts
PLAIN_TEXT = {"text.usetex": False, "text.parse_math": False}
"""Matplotlib settings for the charts: user strings are drawn as they are, ``$`` included."""


def _plain_text():
    """A context in which every Text made and drawn is plain (legends, labels, ticks)."""
    import matplotlib

    return matplotlib.rc_context(PLAIN_TEXT)


def _plain(draw, *args) -> bytes:
    """``draw(*args)`` (a PNG) with every text plain."""
    with _plain_text():
        return draw(*args)


def _figure(height: float = 4.0):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(10, height), dpi=100, layout="constrained")


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


def _draw_excess(returns) -> bytes:
    fig = _figure(3.5)
    ax = fig.add_subplot()
    (_, agent), benchmarks = returns[0], returns[1:]
    for i, (name, bench) in enumerate(benchmarks, start=1):
        ex = tearsheet.excess_return(agent, bench) * 100.0
        ax.plot(ex.index, ex.to_numpy(), color=f"C{i}", lw=1.4, label=f"over {name}")
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.set_ylabel("excess return (%)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    return _png(fig)


def _draw_rolling(returns, ppy: float, window: int) -> bytes:
    fig = _figure(7.5)
    sharpe, vol, beta = fig.subplots(3, 1, sharex=True)
    agent = returns[0][1]
    for i, (name, r) in enumerate(returns):
        lw = 1.8 if i == 0 else 1.0
        s = tearsheet.rolling_sharpe(r, periods_per_year=ppy, window=window)
        sharpe.plot(s.index, s.to_numpy(), color=f"C{i}", lw=lw, label=name)
        v = tearsheet.rolling_volatility(r, periods_per_year=ppy, window=window) * 100.0
        vol.plot(v.index, v.to_numpy(), color=f"C{i}", lw=lw)
        if i > 0:
            b = tearsheet.rolling_beta(agent, r, window=window)
            beta.plot(b.index, b.to_numpy(), color=f"C{i}", lw=1.2, label=f"to {name}")
    for ax, label in ((sharpe, "Sharpe ratio"), (vol, "volatility (%)"), (beta, "beta")):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    sharpe.axhline(0.0, color="0.4", lw=0.8)
    beta.axhline(1.0, color="0.4", lw=0.8)
    if len(agent) > 1:
        beta.set_xlim(agent.index[0], agent.index[-1])  # the dates of the other charts
    sharpe.legend(loc="upper left", fontsize="small")
    if len(returns) > 1:
        beta.legend(loc="upper left", fontsize="small")
    return _png(fig)


def _draw_weights(weights, largest: tearsheet.Concentration) -> bytes:
    fig = _figure(4.0)
    ax = fig.add_subplot()
    order = weights.mean().sort_values(ascending=False).index
    top = [c for c in order[:TOP_HOLDINGS] if weights[c].abs().max() > 0]
    layers = [weights[c].to_numpy() for c in top]
    labels = [str(c) for c in top]
    rest = weights.drop(columns=top).sum(axis=1).to_numpy()
    if len(top) < weights.shape[1]:
        layers.append(rest)
        labels.append("other stocks")
    layers.append(1.0 - weights.sum(axis=1).to_numpy())  # cash
    labels.append("cash")
    colors = [f"C{i % 10}" for i in range(len(layers) - 1)] + ["0.85"]
    ax.stackplot(weights.index, np.vstack(layers) * 100.0, labels=labels, colors=colors)
    share = largest.largest.to_numpy() * 100.0
    ax.plot(weights.index, share, color="k", lw=1.2, label="largest position")
    over = f"{largest.threshold:.0%} of the account"
    ax.axhline(100.0 * largest.threshold, color="k", ls=":", lw=0.8, label=over)
    ax.set_ylabel("share of the account (%)")
    ax.set_ylim(0, 100)
    ax.margins(x=0)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return _png(fig)


def _draw_distribution(returns) -> bytes:
    fig = _figure(3.5)
    ax = fig.add_subplot()
    values = [r.to_numpy() * 100.0 for _, r in returns]
    lo, hi = min(v.min() for v in values), max(v.max() for v in values)
    bins = np.linspace(lo, hi, 61) if hi > lo else 10
    for i, ((name, _), v) in enumerate(zip(returns, values, strict=True)):
        if i == 0:
            ax.hist(v, bins=bins, color="C0", alpha=0.5, label=name)
            var = np.quantile(v, 0.05)
            ax.axvline(var, color="C3", lw=1.2, ls="--", label="agent's 95% VaR")
        else:
            ax.hist(v, bins=bins, histtype="step", color=f"C{i}", lw=1.2, label=name)
    ax.set_xlabel("daily return (%)")
    ax.set_ylabel("days")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return _png(fig)


def _heat_color(r: float) -> str:
    if not math.isfinite(r):
        return "#ffffff"
    x = min(abs(r) / 0.10, 1.0)  # full colour at +-10% a month
    if r >= 0:
        return f"rgb({int(255 - 155 * x)},{int(255 - 55 * x)},{int(255 - 155 * x)})"
    return f"rgb(255,{int(255 - 155 * x)},{int(255 - 155 * x)})"


def _monthly_html(result) -> str:
    """The agent's table, then each benchmark's, to compare month by month."""
    named = [(result.name, result.account_value), *result.benchmarks.items()]
    return "\n".join(
        _monthly_table(values, name, "monthly" if i == 0 else f"monthly-{i}")
        for i, (name, values) in enumerate(named)
    )


def _monthly_table(values: pd.Series, name: str, ident: str) -> str:
    table = metrics.monthly_returns(values)
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
        f'<p class="note">{esc(name)}: compounded return within each month, in percent.</p>'
        f'<table class="heat" id="{ident}"><thead><tr><th class="name">Year</th>{head}</tr>'
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
    turnover = float(summary.loc["total", "traded_value"]) / max(
        float(result.account_value.mean()), 1e-9
    )
    return (
        f'<p class="note" id="trade-days">{len(result.trades):,} orders, filled on {days:,} of '
        f"the {len(result.dates):,} trading days ({_no_fill_day(result.execution_lag)}); "
        f"turnover {turnover:.2f}x the average account value.</p>"
        f'<table id="trades"><thead><tr><th class="name">Ticker</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _no_fill_day(lag: int) -> str:
    """Which of the backtest's trading days can hold no fill, and why."""
    if lag == 0:
        return "none can fill on the last: the backtest ends at its close"
    return "none can fill on the first: orders decided at a close fill at the next one"


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
            f'<td class="name">{esc(_mutation(e.get("mutation")) or "-")}</td></tr>'
            for e in lineage
        )
        out.append(
            "<h3>Lineage</h3><p class='note'>From the agent back to its founding pod. A "
            "mutation lists each hyperparameter the pod changed from its parent's, as "
            "<em>name old &rarr; new</em>.</p>"
            '<table id="lineage"><thead><tr><th class="name">Pod</th><th class="name">Parent'
            '</th><th class="name">Algo</th><th class="name">Mutation (old &rarr; new)</th>'
            f"</tr></thead><tbody>{lrows}</tbody></table>"
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
    """A number to 4 significant digits (:func:`elegantpod.progress.number`); else ``x``."""
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
