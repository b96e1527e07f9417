"""The report's tear sheet in HTML: drawdowns, relative risk, positions, returns, trades.

The numbers come from :mod:`~elegantpod.finance.report.tearsheet` and
:mod:`~elegantpod.finance.stats.metrics`, the charts from :mod:`~elegantpod.finance.report.charts`;
each function here returns one section of :func:`~elegantpod.finance.report.report.render_html`,
names escaped.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from elegantpod.figures import img
from elegantpod.finance.report import charts, tearsheet
from elegantpod.finance.report.markup import named_table
from elegantpod.finance.stats import metrics
from elegantpod.finance.stats.concentration import Concentration, largest_position
from elegantpod.html_table import Markup, table, td, th
from elegantpod.html_table import escape as esc
from elegantpod.number_text import fixed, percent


def drawdowns_html(result) -> str:
    """The worst drawdown periods of the agent's account: peak, valley, recovery, depth."""
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
                percent(r.depth),
                f"{r.duration:,}",
            ],
        )
        for i, r in enumerate(table.itertuples())
    ]
    head = ["#", "Peak", "Valley", "Recovery", "Depth", "Duration (trading days)"]
    return (
        named_table("drawdowns", head, rows) + '<p class="note">The deepest falls of the agent\'s '
        "account from a peak, deepest first; a period lasts from the peak until the account "
        "is back at it (or the last day).</p>"
    )


def relative_html(result, returns) -> str:
    """Alpha, beta, information ratio, tracking error and excess return against each
    benchmark (``returns``: the agent's daily returns first, then each benchmark's)."""
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
                    percent(alpha),
                    fixed(beta),
                    fixed(tearsheet.information_ratio(agent, bench, periods_per_year=ppy)),
                    percent(tearsheet.tracking_error(agent, bench, periods_per_year=ppy)),
                    percent(float(ex.iloc[-1]) if len(ex) else math.nan),
                ],
            )
        )
    head = ["Benchmark", "Alpha (annual)", "Beta", "Information ratio", "Tracking error"]
    return (
        named_table("relative", [*head, "Excess return"], rows)
        + f'<p class="note">{esc(result.name)} against each benchmark: alpha and beta from a '
        "regression of daily returns (alpha compounded to a year, zero risk-free rate); the "
        "information ratio is the annualized Sharpe ratio of the daily return difference, "
        "the tracking error its annualized volatility; the excess return is the agent's "
        "value over the benchmark's, minus 1 (the chart shows it day by day).</p>"
    )


def _window(days: int) -> int:
    """The rolling window: half a year, or a quarter of a backtest shorter than a year."""
    return tearsheet.DEFAULT_WINDOW if days > 2 * tearsheet.DEFAULT_WINDOW else max(5, days // 4)


def rolling_html(result, returns) -> str:
    """The rolling Sharpe ratio, volatility and beta chart, with its window in words."""
    window = _window(len(returns[0][1]))
    return img(
        charts.rolling_png(returns, result.periods_per_year, window),
        "rolling Sharpe ratio, volatility and beta",
        "rolling",
    ) + (
        f'<p class="note">Over the trailing {window} trading days: annualized Sharpe ratio '
        "and volatility of each strategy, and the agent's beta to each benchmark.</p>"
    )


def positions_html(result) -> str:
    """Position weights and cash over time, the largest position in words, and the
    concentration table (a result without prices has none)."""
    if result.prices is None:
        return '<p class="note" id="positions">No prices in this result: no position values.</p>'
    weights = tearsheet.position_weights(result.positions, result.prices, result.account_value)
    ex = tearsheet.exposure(weights)
    conc = tearsheet.concentration(weights)
    stats = [
        ("Invested (gross exposure)", ex["gross"], percent),
        ("Cash", ex["cash"], percent),
        ("Largest position", conc["largest"], percent),
        ("Herfindahl index of the holdings", conc["herfindahl"], fixed),
        ("Effective number of holdings", conc["effective_holdings"], lambda x: fixed(x, 1)),
    ]
    rows = []
    for label, series, f in stats:
        x = series.to_numpy(dtype=np.float64)
        seen = x[np.isfinite(x)]
        cells = [f(float(v)) for v in (seen.mean(), seen.min(), seen.max())] if seen.size else []
        rows.append((label, [*(cells or ["-"] * 3), f(float(x[-1]))]))
    largest = largest_position(weights)
    return (
        img(
            charts.weights_png(weights, largest),
            "position weights and cash over time, with the largest position's share",
            "exposure",
        )
        + _one_stock_html(largest)
        + named_table("concentration", ["Per day", "Average", "Min", "Max", "Last day"], rows)
        + '<p class="note">Weights are each holding\'s value at the close over the account '
        "value. The Herfindahl index is the sum of the squared shares of the invested money "
        "(1 for a single stock, 1/N for N equal positions; days with nothing held are left "
        "out), the effective number of holdings its inverse.</p>"
    )


def _one_stock_html(conc: Concentration) -> str:
    """The largest position in words; flagged when one stock dominated (see
    :attr:`~elegantpod.finance.stats.concentration.Concentration.is_concentrated`)."""
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
    ("skew", "Skewness", fixed),
    ("kurtosis", "Excess kurtosis", fixed),
    ("var", "Value at risk (95%, 1 day)", percent),
    ("cvar", "Conditional VaR (95%, 1 day)", percent),
    ("best_day", "Best day", percent),
    ("worst_day", "Worst day", percent),
    ("best_month", "Best month", percent),
    ("worst_month", "Worst month", percent),
    ("win_rate", "Days with a gain", lambda x: percent(x, 1)),
)


def distribution_html(returns) -> str:
    """The shape of each strategy's daily returns: moments, value at risk, best and
    worst days and months, days with a gain."""
    stats = [tearsheet.return_stats(r) for _, r in returns]
    rows = [(label, [f(s[key]) for s in stats]) for key, label, f in _STATS]
    return named_table("return-stats", ["Daily returns", *(n for n, _ in returns)], rows) + (
        '<p class="note">Historical value at risk: the 5% quantile of daily returns; the '
        "conditional VaR is the mean of the returns at or below it. Skewness and kurtosis "
        "are the moments of the observed returns; days with a gain count all days, those "
        "in cash included.</p>"
    )


def _heat_color(r: float) -> str:
    if not math.isfinite(r):
        return "#ffffff"
    x = min(abs(r) / 0.10, 1.0)  # full colour at +-10% a month
    if r >= 0:
        return f"rgb({int(255 - 155 * x)},{int(255 - 55 * x)},{int(255 - 155 * x)})"
    return f"rgb(255,{int(255 - 155 * x)},{int(255 - 155 * x)})"


def monthly_html(result) -> str:
    """The agent's table, then each benchmark's, to compare month by month."""
    named = [(result.name, result.account_value), *result.benchmarks.items()]
    return "\n".join(
        _monthly_table(values, name, "monthly" if i == 0 else f"monthly-{i}")
        for i, (name, values) in enumerate(named)
    )


def _monthly_table(values: pd.Series, name: str, ident: str) -> str:
    returns = metrics.monthly_returns(values)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    rows = []
    for year, row in returns.iterrows():
        cells = [td(year, class_="name")]
        for m in range(1, 13):
            r = float(row.get(m, np.nan))
            text = "" if not math.isfinite(r) else f"{100 * r:.1f}"
            cells.append(td(text, style=f"background:{_heat_color(r)}"))
        finite = [float(v) for v in row.to_numpy() if math.isfinite(float(v))]
        yearly = math.prod(1.0 + v for v in finite) - 1.0 if finite else math.nan
        text = f"{100 * yearly:.1f}" if math.isfinite(yearly) else ""
        bold = Markup(f"<b>{esc(text)}</b>")
        cells.append(td(bold, style=f"background:{_heat_color(yearly / 4)}"))
        rows.append(cells)
    return f'<p class="note">{esc(name)}: compounded return within each month, in percent.</p>' + (
        table([th("Year", class_="name"), *months, "Year"], rows, class_="heat", id=ident)
    )


def trades_html(result) -> str:
    """Orders per ticker (buys, sells, shares, traded value, costs) and the turnover."""
    summary = result.trades_summary()
    cols = [
        ("buys", "Buy orders", "{:,.0f}"),
        ("sells", "Sell orders", "{:,.0f}"),
        ("shares_bought", "Shares bought", "{:,.0f}"),
        ("shares_sold", "Shares sold", "{:,.0f}"),
        ("traded_value", "Traded value", "{:,.0f}"),
        ("costs", "Costs", "{:,.2f}"),
    ]
    rows = [(tic, [f.format(float(row[c])) for c, _, f in cols]) for tic, row in summary.iterrows()]
    days = int(result.trades["date"].nunique()) if len(result.trades) else 0
    turnover = float(summary.loc["total", "traded_value"]) / max(
        float(result.account_value.mean()), 1e-9
    )
    return (
        f'<p class="note" id="trade-days">{len(result.trades):,} orders, filled on {days:,} of '
        f"the {len(result.dates):,} trading days ({_no_fill_day(result.execution_lag)}); "
        f"turnover {turnover:.2f}x the average account value.</p>"
        + named_table("trades", ["Ticker", *(label for _, label, _ in cols)], rows)
    )


def _no_fill_day(lag: int) -> str:
    """Which of the backtest's trading days can hold no fill, and why."""
    if lag == 0:
        return "none can fill on the last: the backtest ends at its close"
    return "none can fill on the first: orders decided at a close fill at the next one"
