"""Walk-forward evaluation: several train / validation / backtest windows, reported together.

Why: one backtest of one selected agent is one sample of a noisy process (a lucky or an
unlucky four years). Rolling the three ranges forward and training a fresh tournament
in each window gives several out-of-sample results of the *procedure*, and a user sees
how often, and by how much, the selected agent beats equal-weight buy-and-hold, with
each window's deflated Sharpe ratio (which discounts the winner by how many agents its
tournament tried) beside it.

>>> from elegantpod.finance.backtests.walkforward import rolling_splits
>>> [s.backtest for s in rolling_splits("2010-01-01", train_years=4, validation_years=1,
...                                      backtest_years=1, windows=2)]
[('2015-01-01', '2015-12-31'), ('2016-01-01', '2016-12-31')]
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.backtests.result import BacktestResult
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.market.splits import DateSplits
from elegantpod.html_table import escape
from elegantpod.html_table import table as html_table
from elegantpod.number_text import number


def rolling_splits(
    start: str,
    *,
    train_years: int,
    validation_years: int = 2,
    backtest_years: int = 1,
    windows: int = 3,
    step_years: int | None = None,
) -> list[DateSplits]:
    """Consecutive windows: each trains ``train_years`` from its start, validates on the
    next ``validation_years`` and backtests on the ``backtest_years`` after that; the
    next window starts ``step_years`` later (default: ``backtest_years``, so the
    backtests tile the calendar without overlapping)."""
    for name, value in (
        ("train_years", train_years),
        ("validation_years", validation_years),
        ("backtest_years", backtest_years),
        ("windows", windows),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    step = backtest_years if step_years is None else step_years
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step_years must be an integer >= 1, got {step_years!r}")
    try:
        first = pd.Timestamp(start).normalize()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"start must be a date, got {start!r}") from exc
    out = []
    for i in range(windows):
        t0 = first + pd.DateOffset(years=i * step)
        v0 = t0 + pd.DateOffset(years=train_years)
        b0 = v0 + pd.DateOffset(years=validation_years)
        b1 = b0 + pd.DateOffset(years=backtest_years)
        day = pd.Timedelta(days=1)

        def span(a, b, day=day):
            return (f"{a:%Y-%m-%d}", f"{b - day:%Y-%m-%d}")

        out.append(DateSplits(train=span(t0, v0), validation=span(v0, b0), backtest=span(b0, b1)))
    return out


@dataclass(frozen=True, eq=False)
class WalkForwardResult:
    """Each window's splits, its tournament's summary and its backtest."""

    splits: list[DateSplits]
    summaries: list[dict[str, Any]]
    backtests: list[BacktestResult]
    options: dict[str, Any] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One row per window: ranges, trials, the agent's and equal weight's backtest
        Sharpe and cumulative return, the Sharpe difference with its bootstrap 95% CI,
        and the agent's deflated Sharpe ratio (probability that its true Sharpe is above
        what the best of that many luck-only agents would show)."""
        from elegantpod.finance.stats import bootstrap, selection

        rows = []
        for split, summary, result in zip(self.splits, self.summaries, self.backtests, strict=True):
            table = result.metrics()
            agent, ew = table.iloc[0], table.loc[EQUAL_WEIGHT]
            returns = result.returns()
            diff = bootstrap.bootstrap_sharpe_difference_ci(
                returns.iloc[:, 0], returns[EQUAL_WEIGHT], result.periods_per_year
            )
            dsr = selection.deflated_sharpe_ratio(returns.iloc[:, 0], result.trials)
            rows.append(
                {
                    "train": f"{split.train[0]}..{split.train[1]}",
                    "validation": f"{split.validation[0]}..{split.validation[1]}",
                    "backtest": f"{split.backtest[0]}..{split.backtest[1]}",
                    "agent": result.name,
                    "validation_sharpe": summary.get("best_score"),
                    "trials": result.trials,
                    "agent_sharpe": float(agent["sharpe"]),
                    "equal_weight_sharpe": float(ew["sharpe"]),
                    "sharpe_difference_ci": (float(diff[0]), float(diff[1])),
                    "agent_cumulative": float(agent["cumulative_return"]),
                    "equal_weight_cumulative": float(ew["cumulative_return"]),
                    "deflated_sharpe": float(dsr.dsr),
                }
            )
        return pd.DataFrame(rows)

    def to_html(self, path: str | Path) -> Path:
        """One self-contained page: the table, then each window's verdict (escaped)."""
        from elegantpod.finance.stats.verdict import verdict
        from elegantpod.safe_files import atomic_write_bytes, check_report_path

        path = check_report_path(path)
        table = self.table()
        rows = ([_cell(v) for v in row.values()] for row in table.to_dict("records"))
        verdicts = "".join(
            f"<li>{escape(s.backtest[0])}..{escape(s.backtest[1])}: {escape(verdict(r))}</li>"
            for s, r in zip(self.splits, self.backtests, strict=True)
        )
        page = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            "<title>Walk-forward evaluation</title></head><body>"
            "<h1>Walk-forward evaluation</h1>"
            f"<p>{len(self.splits)} windows, each a fresh tournament ranked on its "
            "validation range, its best agent backtested once on the range after it.</p>"
            + html_table(list(table.columns), rows, border=1, cellpadding=4)
            + f"<ul>{verdicts}</ul></body></html>"
        )
        atomic_write_bytes(path, page.encode())
        return path


def walk_forward(
    splits: list[DateSplits],
    *,
    client: Any = None,
    store_dir: str | Path | None = None,
    index: Any = "sp500",
    fitness: str = "sharpe",
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    **tournament_kwargs: Any,
) -> WalkForwardResult:
    """Train one tournament per window and backtest each window's best agent.

    Parameters
    ----------
    splits
        The windows (see :func:`rolling_splits`), in order.
    client
        A Dask client every window's tournament runs on (``None``: each starts and
        closes an embedded ``LocalCluster``).
    store_dir
        A folder for the windows' stores (``window-0``, ``window-1``...); ``None``: a
        temporary folder.
    index
        The backtests' index benchmark (``"sp500"``, a Series, or ``None``).
    fitness, env_kwargs
        The tournaments' fitness and trading-env settings (``data``, ``tickers``,
        ``episode_days``...); the dates come from each split.
    **tournament_kwargs
        The rest of each :class:`~elegantpod.tournament.Tournament` (``algos``, ``pods``,
        ``max_seconds``, ``seed``...), the same for every window.
    """
    import tempfile

    from elegantpod.tournament.orchestrator import Tournament

    if not splits:
        raise ValueError("walk_forward needs at least one window")
    if not all(isinstance(s, DateSplits) for s in splits):
        raise ValueError("splits must be DateSplits (see rolling_splits)")
    env = dict(env_kwargs or {})
    root = Path(store_dir) if store_dir is not None else Path(tempfile.mkdtemp(prefix="wf-"))
    # every window's options are checked before the first one trains
    tournaments = [
        Tournament(
            "StockTrading-v0",
            store=root / f"window-{i}",
            **split.tournament_options(fitness=fitness, **env),
            **tournament_kwargs,
        )
        for i, split in enumerate(splits)
    ]
    summaries, results = [], []
    for split, t in zip(splits, tournaments, strict=True):
        if progress:
            print(f"walk-forward: training {split.train} -> {split.backtest}", file=sys.stderr)
        t.start(client)
        summary = t.wait()
        if t.leaderboard.empty:
            raise RuntimeError(f"window {split.backtest}: no pod finished ({summary['error']})")
        summaries.append(summary)
        results.append(backtest(t, start=split.backtest[0], end=split.backtest[1], index=index))
    options = {"fitness": fitness, "env_kwargs": env, **tournament_kwargs}
    return WalkForwardResult(list(splits), summaries, results, options)


def _cell(value: Any) -> str:
    """A table value as text: numbers as every view writes them, an interval in brackets."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return number(value) if isinstance(value, numbers.Real) else str(value)
