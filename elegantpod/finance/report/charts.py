"""The report's charts: matplotlib figures rendered to PNG bytes.

User strings (agent and ticker names) are drawn as plain text, in figures made without
pyplot (:mod:`elegantpod.figures`). Each public function returns one PNG;
:mod:`~elegantpod.finance.report.report` embeds it. Matplotlib is imported on first use,
with the Agg backend unless one is chosen already.
"""

from __future__ import annotations

import numpy as np

from elegantpod.figures import figure as _figure
from elegantpod.figures import plain as _plain
from elegantpod.figures import png as _png
from elegantpod.finance.report import tearsheet
from elegantpod.finance.stats import metrics
from elegantpod.finance.stats.concentration import Concentration

TOP_HOLDINGS = 8
"""Holdings drawn one by one in the weights chart; the rest are summed as "other"."""


def equity_png(result) -> bytes:
    """Account values of the agent (thick) and each benchmark."""
    return _plain(_draw_equity, result)


def drawdown_png(result) -> bytes:
    """Drawdowns from the running peak, in percent: the agent's filled, the benchmarks' lines."""
    return _plain(_draw_drawdown, result)


def excess_png(returns) -> bytes:
    """The agent's value over each benchmark's, minus 1, day by day (``returns``: the
    agent's daily returns first, then each benchmark's, as ``(name, Series)`` pairs)."""
    return _plain(_draw_excess, returns)


def rolling_png(returns, ppy: float, window: int) -> bytes:
    """Rolling Sharpe ratio and volatility of each strategy, and the agent's beta to each
    benchmark, over the trailing ``window`` days."""
    return _plain(_draw_rolling, returns, ppy, window)


def weights_png(weights, largest: Concentration) -> bytes:
    """Stacked position weights and cash over time (the :data:`TOP_HOLDINGS` largest one
    by one), with the largest position's share and its threshold."""
    return _plain(_draw_weights, weights, largest)


def distribution_png(returns) -> bytes:
    """Histograms of daily returns, with the agent's 95% value at risk."""
    return _plain(_draw_distribution, returns)


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


def _draw_weights(weights, largest: Concentration) -> bytes:
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
