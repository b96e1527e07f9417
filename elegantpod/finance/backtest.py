"""Backtests: run an agent deterministically over held-out dates and compare it.

:func:`backtest` takes a trained agent (a pod, a checkpoint file, or a tournament's
best), replays its policy over a date range it never trained on, and returns a
:class:`BacktestResult` with daily account values, every trade, and the benchmarks an
honest report needs: equal-weight buy-and-hold of the same stocks, and an index when one
is given. ``result.metrics()`` tabulates cumulative/annual return, volatility, max
drawdown, Sharpe, Calmar and Sortino for all of them; ``result.concentration`` says how
much of the account its largest position held (a bet on one stock is flagged);
``result.to_html(path)`` writes the self-contained report.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from elegantpod.checks import json_safe
from elegantpod.finance import metrics, tearsheet
from elegantpod.finance.data import check_name, sp500_index
from elegantpod.finance.trading_env import ENV_ID, StockTradingEnv

EQUAL_WEIGHT = "Equal-weight buy & hold"
UNKNOWN_SELECTION = "unknown"
"""``BacktestResult.selection`` of an agent whose selection nobody recorded (a bare
checkpoint or pod): its deflated Sharpe ratio assumes 1 trial, and the verdict says so."""
MAX_TRIALS = 10**9


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
    :class:`~elegantpod.finance.trading_env.StockTradingEnv`)."""
    trials: int = 1
    """How many agents the selection that produced this one tried (a tournament's pods),
    for the deflated Sharpe ratio; 1 when the selection is unknown (see :attr:`selection`)."""
    selection: str = ""
    """Where :attr:`trials` comes from: the tournament or store that scored the pods, the
    caller's ``trials=N``, or :data:`UNKNOWN_SELECTION` (the verdict then says that the
    deflated Sharpe ratio assumes 1 trial)."""
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
    def concentration(self) -> tearsheet.Concentration | None:
        """The largest single position's share of the account, per day and summed up.

        ``.largest`` (per day), ``.mean``, ``.max``, ``.end`` and ``.end_ticker``,
        ``.dominated_days`` (the share of days on which one stock held over half the
        account) and ``.is_concentrated`` (over half on the last day or on most days:
        a bet on one stock, which :func:`~elegantpod.finance.report.verdict` and the
        report then say in words, ``.sentence()``). ``None`` without :attr:`prices`.
        """
        weights = self.weights
        return None if weights is None else tearsheet.largest_position(weights)

    def values(self) -> pd.DataFrame:
        """Account values of the agent (first column) and each benchmark."""
        return pd.DataFrame({self.name: self.account_value, **self.benchmarks})

    def returns(self) -> pd.DataFrame:
        """Daily simple returns of the agent and each benchmark."""
        v = self.values()
        return v.pct_change().iloc[1:]

    def metrics(self) -> pd.DataFrame:
        """Rows: agent then benchmarks; columns: :data:`~elegantpod.finance.metrics.METRICS`."""
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
        """Write the self-contained HTML report (see :mod:`elegantpod.finance.report`)."""
        from elegantpod.finance.report import write_report

        return write_report(self, path, title=title)

    def to_pyfolio(self):
        """``(returns, positions, transactions)`` in pyfolio's formats, for
        ``pyfolio.create_full_tear_sheet`` (the ``finance`` extra installs
        pyfolio-reloaded); see :func:`~elegantpod.finance.pyfolio_export.to_pyfolio`."""
        from elegantpod.finance.pyfolio_export import to_pyfolio

        return to_pyfolio(self)

    def _repr_html_(self) -> str:
        from elegantpod.finance.report import metrics_table_html

        return metrics_table_html(self)


def backtest(
    agent: Any,
    *,
    data: Any = None,
    start: Any = None,
    end: Any = None,
    index: Any = None,
    device: str = "cpu",
    name: str | None = None,
    allow_remote: bool = False,
    allow_in_sample: bool = False,
    trials: int | None = None,
    **env_overrides: Any,
) -> BacktestResult:
    """Replay ``agent``'s deterministic policy over ``[start, end]`` and compare it.

    Parameters
    ----------
    agent
        A :class:`~elegantpod.pod.Pod` trained on ``StockTrading-v0``, a checkpoint path
        or URL, a :class:`~elegantpod.tournament.Tournament` (its best agent, with its
        lineage in the report), or a tournament's store (its folder or URL: its best
        agent). A checkpoint that lies in a store (``<store>/pods/p003/seg-00002.pt``)
        carries that store's selection: the deflated Sharpe ratio counts every pod the
        tournament scored. The store is only read (no lease is taken, nothing written).
    data
        Market data for the backtest (``None``: the data the agent trained on). It must
        hold the same tickers: the policy's inputs and outputs are per stock.
    start, end
        The backtest range (inclusive). ``start=None``: the first trading day after the
        agent's training and validation dates (its spec records them), so that the
        default is out of sample; ``end=None``: the end of the data.
    index
        An index benchmark: a date-indexed Series of levels, ``"sp500"`` for the shipped
        S&P 500 series, or ``None`` for none.
    device
        Where the policy and the env run.
    name
        The agent's name in tables and charts.
    allow_in_sample
        Run a backtest whose range overlaps the dates the agent trained or was selected
        on (its training or validation range). Refused otherwise: such a backtest
        measures memory, not skill. The result (and its report) then says "in-sample".
    allow_remote
        Let a checkpoint's own spec name the market data (a file or URL) that its agent
        is rebuilt with: only for a checkpoint you trust. Otherwise ``data`` stands in
        for it, and without ``data`` such a checkpoint is refused (shipped samples such
        as ``"sp500"`` are always fine), unless both are your own: a checkpoint only you
        can write naming a local data table only you can write
        (:mod:`elegantpod.provenance`).
    trials
        How many agents the selection that picked this one tried, for the deflated
        Sharpe ratio; ``None``: what the tournament or store recorded. An agent with no
        recorded selection (a pod, a checkpoint from ``train()``) is deflated as 1 trial
        and its verdict says the selection is unknown.
    **env_overrides
        Other trading-env settings for the backtest (``cost``, ``initial_amount``...);
        by default those the agent trained with.

    Raises
    ------
    ValueError
        For a non-trading agent, tickers or indicators that differ from the agent's, a
        range outside the data, a range that overlaps the agent's training or
        validation dates without ``allow_in_sample``, or a checkpoint that names data you
        did not pass (:class:`~elegantpod.checkpoint.CheckpointError`), before anything
        runs.
    """
    from elegantpod.pod import Pod

    trials = _check_trials(trials)
    if name is not None:
        check_name(name, "agent name")
    info: dict[str, Any] = {}
    trained_spec = None
    if hasattr(agent, "best") and hasattr(agent, "lineage"):
        info.update(_tournament_info(agent))
        agent = agent.best(device=device)
    elif isinstance(agent, str | Path):
        from elegantpod.checkpoint import (
            check_origin,
            checkpoint_spec,
            load_checkpoint,
            resolve_checkpoint,
        )
        from elegantpod.finance.store_selection import best_of_store, is_store, of_checkpoint

        if is_store(agent):
            info.update(best_of_store(agent))  # the store's best agent
            agent = info["checkpoint"]
        else:
            agent = resolve_checkpoint(agent)  # a run folder: its best.pt
            info.update(of_checkpoint(agent))  # {} unless it lies in a store
            info["checkpoint"] = str(agent)
        expected = info.pop("expected", None)
        if expected is not None:  # a store's checkpoint: what its record says it is
            check_origin(load_checkpoint(agent), agent, **expected)
        trained_spec = checkpoint_spec(agent)  # its own dates, even when data stands in
        agent = _from_checkpoint(agent, data, device, allow_remote)
    if not isinstance(agent, Pod):
        raise TypeError(
            f"agent must be a Pod, a checkpoint path or a Tournament, got {type(agent).__name__}"
        )
    spec = agent.spec
    if spec.env_id != ENV_ID:
        raise ValueError(f"backtests need an agent trained on {ENV_ID!r}, not {spec.env_id!r}")
    samples = _sample_ranges(trained_spec or spec)
    kwargs = {**spec.env_kwargs, **env_overrides}
    for key in ("start", "end", "episode_days"):
        kwargs.pop(key, None)
    if data is not None:
        kwargs["data"] = data
    if start is None:
        start = _after(samples)
    env = StockTradingEnv(
        num_envs=1, device=device, seed=0, start=start, end=end, episode_days=None, **kwargs
    )
    trained = tuple(agent.env.tickers)
    if tuple(env.tickers) != trained:
        raise ValueError(
            f"the backtest data's tickers {list(env.tickers)} differ from the agent's "
            f"{list(trained)}: the policy acts per stock, in that order"
        )
    if env.observation_space.shape != agent.env.observation_space.shape:
        raise ValueError(
            f"the backtest env's observations {env.observation_space.shape} differ from the "
            f"agent's {agent.env.observation_space.shape} (other indicators?)"
        )
    in_sample = _in_sample(samples, env.dates, allow_in_sample)
    bench_index = _index_series(index, env.dates) if index is not None else None
    info.update(
        name=name or info.get("name") or f"{spec.algo.upper()} agent",
        algo=spec.algo,
        seed=spec.seed,
        env_steps=agent.env_steps,
        # the dates the agent trained and was selected on, as it records them (a
        # checkpoint's own spec, even where the caller's data stood in for its file)
        spec=(trained_spec or spec).to_dict(),
        sample_ranges={label: [_day(lo), _day(hi)] for label, lo, hi in samples},
    )
    result = _run(agent.learner, env, info, bench_index)
    if trials is not None:
        selection = f"trials={trials} given"
    elif info.get("trials"):
        trials = int(info["trials"])
        selection = f"the {trials} pods that tournament {info.get('tournament_store')} scored"
    else:
        trials, selection = 1, UNKNOWN_SELECTION
    info["trials"] = trials
    return dataclasses.replace(result, in_sample=in_sample, trials=trials, selection=selection)


def _day(ts: pd.Timestamp | None) -> str | None:
    return None if ts is None else f"{ts:%Y-%m-%d}"


def _check_trials(trials: Any) -> int | None:
    if trials is None:
        return None
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer):
        raise ValueError(f"trials must be an integer >= 1, got {str(trials)[:200]!r}")
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"trials must be in 1..{MAX_TRIALS:_}, got {trials!r}")
    return int(trials)


def _sample_ranges(spec) -> list[tuple[str, pd.Timestamp | None, pd.Timestamp | None]]:
    """The date ranges an agent's spec says it trained and was validated on.

    ``None`` bounds are open: an agent trained with ``end=None`` saw its data's last day.
    """
    train = spec.env_kwargs
    ranges = [("training", train.get("start"), train.get("end"))]
    if spec.eval_env_kwargs:
        val = {**train, **spec.eval_env_kwargs}
        ranges.append(("validation", val.get("start"), val.get("end")))
    out = []
    for label, lo, hi in ranges:
        try:
            lo = None if lo is None else pd.Timestamp(lo)
            hi = None if hi is None else pd.Timestamp(hi)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"the agent's {label} range {lo!r}..{hi!r} is not a date range"
            ) from exc
        out.append((label, lo, hi))
    return out


def _after(samples) -> str | None:
    """The day after every sample range ends (as a date string), or ``None`` (no bound)."""
    ends = [hi for _, _, hi in samples]
    if any(hi is None for hi in ends):
        return None  # trained to the data's end: nothing after it; the guard will say so
    return f"{max(ends) + pd.Timedelta(days=1):%Y-%m-%d}"


def _in_sample(samples, dates: pd.DatetimeIndex, allowed: bool) -> str:
    """ "" for a held-out range, else the sentence naming the overlap (or the refusal)."""
    first, last = dates[0], dates[-1]
    hits = []
    for label, lo, hi in samples:
        if (hi is None or first <= hi) and (lo is None or last >= lo):
            span = f"{'the start' if lo is None else f'{lo:%Y-%m-%d}'}.."
            span += "the end of its data" if hi is None else f"{hi:%Y-%m-%d}"
            hits.append(f"its {label} dates ({span})")
    if not hits:
        return ""
    said = (
        f"The backtest range {first:%Y-%m-%d}..{last:%Y-%m-%d} overlaps "
        f"{' and '.join(hits)}: on dates it learned or was selected on, an agent's "
        "results measure memory, not skill."
    )
    if not allowed:
        ends = [hi for _, _, hi in samples if hi is not None]
        hint = (
            f"backtest after {max(ends):%Y-%m-%d} (start=None does)"
            if ends and all(hi is not None for _, _, hi in samples)
            else "backtest on data after its training range"
        )
        raise ValueError(
            f"{said} Refused: {hint}, or pass allow_in_sample=True (--allow-in-sample) "
            "to run it labelled in-sample."
        )
    return said


def _from_checkpoint(path, data, device: str, allow_remote: bool):
    """The checkpoint's agent; the caller's ``data`` stands in for a file or URL that the
    checkpoint names, without its training dates (that data need not cover them). Only
    the policy's input size is checked then (by loading): the agent's tickers are in the
    data that is not read."""
    from elegantpod.checkpoint import checkpoint_spec
    from elegantpod.envs.registry import external_sources
    from elegantpod.pod import Pod
    from elegantpod.provenance import same_file

    own = None
    if data is not None and not allow_remote:
        spec = checkpoint_spec(path)
        named = external_sources(spec.env_kwargs) or external_sources(spec.eval_env_kwargs)
        if named and all(same_file(data, v) for v in named.values()):
            own = {"data": data}  # the very file it names: its own dates still hold
        elif named:
            own = {"data": data, "start": None, "end": None}
    return Pod.from_checkpoint(path, device=device, env_kwargs=own, allow_remote=allow_remote)


@torch.inference_mode()
def _run(learner, env: StockTradingEnv, info: dict, bench_index) -> BacktestResult:
    obs = env.reset(seed=0)
    days, tickers = env.num_days, list(env.tickers)
    values = np.empty(days)
    values[0] = env.initial_amount
    traded = np.zeros((days, env.num_stocks))  # by the day the orders filled
    costs = np.zeros(days)
    lag = env.execution_lag
    for t in range(days - 1):
        obs, _, _, truncated, step_info = env.step(learner.act(obs, deterministic=True))
        values[t + 1] = float(step_info["account_value"][0])
        traded[t + lag] = step_info["shares_traded"][0].cpu().numpy()
        costs[t + lag] = float(step_info["cost_paid"][0])
    positions = np.cumsum(traded, axis=0)  # shares held after each day's fills
    prices = env._prices.cpu().numpy()
    dates = env.dates
    rows, cols = np.nonzero(traded)
    trade_value = traded[rows, cols] * prices[rows, cols]
    value_sum = np.zeros(days)
    np.add.at(value_sum, rows, np.abs(trade_value))
    share = np.divide(
        np.abs(trade_value),
        value_sum[rows],
        out=np.zeros_like(trade_value),
        where=value_sum[rows] > 0,
    )
    trades = pd.DataFrame(
        {
            "date": dates[rows],
            "tic": np.array(tickers, dtype=object)[cols],
            "shares": traded[rows, cols],
            "price": prices[rows, cols],
            "value": trade_value,
            "cost": costs[rows] * share,  # a day's cost split by traded value
        }
    )
    bench = {EQUAL_WEIGHT: _equal_weight(prices, env.initial_amount, env.cost, dates)}
    if bench_index is not None:
        bench[str(bench_index.name or "Index")] = bench_index * (
            env.initial_amount / float(bench_index.iloc[0])
        )
    return BacktestResult(
        execution_lag=lag,
        account_value=pd.Series(values, index=dates, name=info["name"]),
        benchmarks=bench,
        trades=trades,
        positions=pd.DataFrame(positions, index=dates, columns=tickers),
        periods_per_year=env.periods_per_year,
        initial_amount=env.initial_amount,
        cost=env.cost,
        agent=info,
        data_source=env.data.source,
        prices=pd.DataFrame(prices, index=dates, columns=tickers),
    )


def _equal_weight(prices: np.ndarray, amount: float, cost: float, dates) -> pd.Series:
    """Invest ``amount`` equally in every stock on day one (paying ``cost``) and hold.

    Fractional shares, so the benchmark is not handicapped by rounding.
    """
    shares = amount * (1.0 - cost) / prices.shape[1] / prices[0]
    return pd.Series(prices @ shares, index=dates, name=EQUAL_WEIGHT)


def _index_series(index: Any, dates: pd.DatetimeIndex) -> pd.Series:
    series = sp500_index() if isinstance(index, str) and index == "sp500" else index
    if not isinstance(series, pd.Series) or not isinstance(series.index, pd.DatetimeIndex):
        raise ValueError(
            f"index must be 'sp500' or a pandas Series indexed by dates, got {type(index).__name__}"
        )
    check_name(str(series.name or "Index"), "index name")
    series = series.sort_index()
    if series.index[0] > dates[0] or series.index[-1] < dates[-1]:
        raise ValueError(
            f"index {series.name!r} covers {series.index[0]:%Y-%m-%d}..{series.index[-1]:%Y-%m-%d}"
            f", not the backtest's {dates[0]:%Y-%m-%d}..{dates[-1]:%Y-%m-%d}"
        )
    aligned = series.reindex(series.index.union(dates)).ffill().reindex(dates)
    if aligned.isna().any() or (aligned <= 0).any():
        raise ValueError(f"index {series.name!r} has missing or non-positive levels in the range")
    return aligned.astype(np.float64).rename(series.name or "Index")


def _tournament_info(t) -> dict[str, Any]:
    board = t.leaderboard
    best = board.iloc[0].to_dict() if len(board) else {}
    edges = {e["pod"]: e for e in t.lineage()}
    chain, pod = [], best.get("pod")
    while pod is not None and pod in edges and len(chain) < 100:
        e = edges[pod]
        chain.append(
            {"pod": pod, "parent": e["parent"], "algo": e["algo"], "mutation": e["mutation"]}
        )
        pod = e["parent"]
    history = t.history()
    last = history.dropna(subset=["score"]).groupby("pod")["score"].last()
    return {
        # the selection's trials: every pod the tournament scored, with its last score
        # (the deflated Sharpe of the report discounts the winner by how many there were)
        "trials": max(int(len(last)), 1),
        "trial_scores": [float(x) for x in last.to_numpy()],
        "name": f"{str(best.get('algo', 'agent')).upper()} {best.get('pod', '')}".strip(),
        "pod": best.get("pod"),
        "score": best.get("score_mean"),
        "fitness": t.spec.fitness,
        "checkpoint": best.get("checkpoint"),
        "lineage": chain,
        "tournament_store": t.store.url,
    }
