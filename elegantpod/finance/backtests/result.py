"""``BacktestResult``: what a backtest returns, and the tables it makes of itself.

Daily account values of the agent and its benchmarks, every trade, the positions and the
prices traded at; ``metrics()``, ``trades_summary()``, ``concentration``, ``to_dict()``.
Its report and pyfolio export live in :mod:`~elegantpod.finance.report.report` and
:mod:`~elegantpod.finance.report.pyfolio_export`, which read a result and never import this
module, so that ``to_html`` and ``to_pyfolio`` close no import cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from elegantpod.checks.json_values import json_safe
from elegantpod.finance.report import tearsheet
from elegantpod.finance.stats import metrics
from elegantpod.finance.stats.concentration import Concentration, largest_position
from elegantpod.finance.stats.verdict import UNKNOWN_SELECTION


@dataclass(frozen=True, eq=False)
class BacktestResult:
    """Daily account values of an agent and its benchmarks over a backtest range."""

    account_value: pd.Series
    """The agent's account value at each day's close (first day: the initial amount)."""
    benchmarks: dict[str, pd.Series]
    """Benchmark values on the same dates, scaled to start at the initial amount."""
    trades: pd.DataFrame
    """One row per executed order: date, tic, shares (+ buy, - sell), price, value, cost."""
    positions: pd.DataFrame
    """Shares held after each day's trades (dates x tickers)."""
    periods_per_year: int
    initial_amount: float
    cost: float
    agent: dict[str, Any] = field(default_factory=dict)
    """Who traded: name, algo, spec, checkpoint, env steps and lineage (for the report)."""
    data_source: str = ""
    in_sample: str = ""
    """Empty for a held-out backtest; else the sentence saying which of the agent's
    training or validation dates the range overlaps (``allow_in_sample=True``). The
    report says "in-sample" at its top then."""
    execution_lag: int = 0
    """Days between the close an action was decided on and the close it traded at (see
    :class:`~elegantpod.finance.trading.env.StockTradingEnv`)."""
    trials: int = 1
    """How many agents the selection that produced this one tried (a tournament's pods),
    for the deflated Sharpe ratio; 1 when the selection is unknown (see :attr:`selection`)."""
    selection: str = ""
    """Where :attr:`trials` comes from: the tournament or store that scored the pods, the
    caller's ``trials=N``, or :data:`~elegantpod.finance.stats.verdict.UNKNOWN_SELECTION` (the
    verdict then says that the deflated Sharpe ratio assumes 1 trial)."""
    prices: pd.DataFrame | None = None
    """Close prices (dates x tickers) the backtest traded at and valued positions with."""

    @property
    def dates(self) -> pd.DatetimeIndex:
        """Trading days of the backtest."""
        return pd.DatetimeIndex(self.account_value.index)

    @property
    def name(self) -> str:
        """The agent's display name (algorithm and pod)."""
        return str(self.agent.get("name") or "Agent")

    @property
    def weights(self) -> pd.DataFrame | None:
        """Each holding's value over the account value per day (dates x tickers); ``None``
        for a result without :attr:`prices`."""
        if self.prices is None:
            return None
        return tearsheet.position_weights(self.positions, self.prices, self.account_value)

    @property
    def concentration(self) -> Concentration | None:
        """The largest single position's share of the account, per day and summed up.

        ``.largest`` (per day), ``.mean``, ``.max``, ``.end`` and ``.end_ticker``,
        ``.dominated_days`` (the share of days on which one stock held over half the
        account) and ``.is_concentrated`` (over half on the last day or on most days:
        a bet on one stock, which :func:`~elegantpod.finance.stats.verdict.verdict` and the
        report then say in words, ``.sentence()``). ``None`` without :attr:`prices`.
        """
        weights = self.weights
        return None if weights is None else largest_position(weights)

    def values(self) -> pd.DataFrame:
        """Account values of the agent (first column) and each benchmark."""
        return pd.DataFrame({self.name: self.account_value, **self.benchmarks})

    def returns(self) -> pd.DataFrame:
        """Daily simple returns of the agent and each benchmark."""
        v = self.values()
        return v.pct_change().iloc[1:]

    def metrics(self) -> pd.DataFrame:
        """Rows: agent then benchmarks; columns:
        :data:`~elegantpod.finance.stats.metrics.METRICS`."""
        rows = {}
        for name, series in self.values().items():
            r = metrics.returns_from_values(series.to_numpy())
            rows[name] = metrics.summary(r, periods_per_year=self.periods_per_year)
        return pd.DataFrame.from_dict(rows, orient="index")[list(metrics.METRICS)]

    def trades_summary(self) -> pd.DataFrame:
        """Per ticker: buy and sell orders, shares, traded value and costs (plus a total)."""
        t = self.trades
        cols = ["buys", "sells", "shares_bought", "shares_sold", "traded_value", "costs"]
        tickers = list(self.positions.columns)
        out = pd.DataFrame(0.0, index=tickers, columns=cols)
        if len(t):
            g = t.groupby("tic")
            out["buys"] = g["shares"].apply(lambda s: int((s > 0).sum()))
            out["sells"] = g["shares"].apply(lambda s: int((s < 0).sum()))
            out["shares_bought"] = g["shares"].apply(lambda s: float(s.clip(lower=0).sum()))
            out["shares_sold"] = g["shares"].apply(lambda s: float((-s).clip(lower=0).sum()))
            out["traded_value"] = g["value"].apply(lambda s: float(s.abs().sum()))
            out["costs"] = g["cost"].sum()
        out = out.fillna(0.0)
        out.loc["total"] = out.sum()
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: metrics of every strategy, range, trades and the agent."""
        table = self.metrics()
        conc = self.concentration
        return json_safe(
            {
                "start": f"{self.dates[0]:%Y-%m-%d}",
                "end": f"{self.dates[-1]:%Y-%m-%d}",
                "days": len(self.dates),
                "periods_per_year": self.periods_per_year,
                "initial_amount": self.initial_amount,
                "cost": self.cost,
                "data": self.data_source,
                "tickers": list(self.positions.columns),
                "metrics": {
                    name: {k: float(v) for k, v in row.items()} for name, row in table.iterrows()
                },
                "final_value": {k: float(v.iloc[-1]) for k, v in self.values().items()},
                "orders": len(self.trades),
                "total_costs": float(self.trades["cost"].sum()) if len(self.trades) else 0.0,
                "agent": self.agent,
                "in_sample": self.in_sample,
                "execution_lag": self.execution_lag,
                "trials": None if self.selection == UNKNOWN_SELECTION else self.trials,
                "selection": self.selection,
                "concentration": None if conc is None else conc.to_dict(),
            }
        )

    def to_json(self) -> str:
        """The result as JSON (``elegantpod backtest --json``)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_html(self, path: str | Path, title: str | None = None) -> Path:
        """Write the self-contained HTML report (see :mod:`elegantpod.finance.report.report`)."""
        from elegantpod.finance.report.report import write_report

        return write_report(self, path, title=title)

    def to_pyfolio(self):
        """``(returns, positions, transactions)`` in pyfolio's formats, for
        ``pyfolio.create_full_tear_sheet`` (the ``finance`` extra installs
        pyfolio-reloaded); see :func:`~elegantpod.finance.report.pyfolio_export.to_pyfolio`."""
        from elegantpod.finance.report.pyfolio_export import to_pyfolio

        return to_pyfolio(self)

    def _repr_html_(self) -> str:
        from elegantpod.finance.report.report import metrics_table_html

        return metrics_table_html(self)
