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
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from elegantpod.finance.backtests.result import BacktestResult
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT, equal_weight, index_series
from elegantpod.finance.market.names import check_name
from elegantpod.finance.stats.verdict import UNKNOWN_SELECTION
from elegantpod.finance.trading.env import ENV_ID, StockTradingEnv

MAX_TRIALS = 10**9
"""Most trials a backtest's deflated Sharpe ratio takes (``trials=N``)."""


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
        A :class:`~elegantpod.pod.pod.Pod` trained on ``StockTrading-v0``, a checkpoint path
        or URL, a :class:`~elegantpod.tournament.Tournament` (its best agent, with its
        lineage in the report), or a tournament's store (its folder or URL: its best
        agent). A checkpoint that lies in a store (``<store>/pods/p003/seg-00002.pt``)
        carries that store's selection: the deflated Sharpe ratio counts every evaluation
        the tournament scored (a pod scored at five segments is five trials). The store
        is only read (no lease is taken, nothing written).
    data
        Market data for the backtest (``None``: the data the agent trained on). It must
        hold the agent's tickers and features: the policy's inputs and outputs are per
        stock, by position, so the data is put in the order the agent learned (its
        checkpoint records it), and data lacking any of them is refused, naming them.
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
        did not pass (:class:`~elegantpod.pod.checkpoint.CheckpointError`), before anything
        runs.
    """
    from elegantpod.pod.pod import Pod

    trials = _check_trials(trials)
    if name is not None:
        check_name(name, "agent name")
    info: dict[str, Any] = {}
    trained_spec = None
    if hasattr(agent, "best") and hasattr(agent, "lineage"):
        info.update(_tournament_info(agent))
        agent = agent.best(device=device)
    elif isinstance(agent, str | Path):
        from elegantpod.finance.backtests.store_selection import best_of_store, of_checkpoint
        from elegantpod.pod.checkpoint import (
            check_origin,
            checkpoint_spec,
            load_checkpoint,
            resolve_checkpoint,
        )
        from elegantpod.tournament.store.reading import is_store

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
    # the data's columns put in the order the policy trades them, or refused naming the
    # tickers or features it lacks: matched by position, another order would trade one
    # stock by another's slot without an error anywhere
    kwargs = StockTradingEnv.fit_layout(kwargs, agent.env.layout())
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
    bench_index = index_series(index, env.dates) if index is not None else None
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
        selection = (
            f"the {trials} evaluations that tournament {info.get('tournament_store')} scored"
        )
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
    checkpoint names, without its training dates (that data need not cover them). The
    agent's env is built in the layout the checkpoint records (its tickers in order, its
    features), from whichever data is read, or refused
    (:func:`~elegantpod.pod.restore.fit_layout`)."""
    from elegantpod.envs.registry import external_sources
    from elegantpod.pod.checkpoint import checkpoint_spec
    from elegantpod.pod.pod import Pod
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
    prices = env.prices.cpu().numpy()
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
    bench = {EQUAL_WEIGHT: equal_weight(prices, env.initial_amount, env.cost, dates)}
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


def _tournament_info(t) -> dict[str, Any]:
    board = t.leaderboard
    best = board.iloc[0].to_dict() if len(board) else {}
    edges = {e["pod"]: e for e in t.lineage().to_dict("records")}
    chain, pod = [], best.get("pod")
    while pod is not None and pod in edges and len(chain) < 100:
        e = edges[pod]
        chain.append(
            {"pod": pod, "parent": e["parent"], "algo": e["algo"], "mutation": e["mutation"]}
        )
        pod = e["parent"]
    scored = t.history().dropna(subset=["score"])["score"]
    return {
        # the selection's trials: every evaluation the tournament scored and compared
        # (a pod scored at 5 segments had 5 chances to look lucky): the deflated Sharpe
        # of the report discounts the winner by how many there were
        "trials": max(int(len(scored)), 1),
        "trial_scores": [float(x) for x in scored.to_numpy()],
        "name": f"{str(best.get('algo', 'agent')).upper()} {best.get('pod', '')}".strip(),
        "pod": best.get("pod"),
        "score": best.get("score_mean"),
        "fitness": t.spec.fitness,
        "checkpoint": best.get("checkpoint"),
        "lineage": chain,
        "tournament_store": t.store.url,
    }
