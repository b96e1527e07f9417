"""Backtests: run an agent deterministically over held-out dates and compare it.

:func:`backtest` takes a trained agent (a pod, a checkpoint file or run folder, a
tournament or its store: whatever :meth:`Deployment.of
<elegantpod.tournament.deployment.Deployment.of>` resolves), replays its
:class:`~elegantpod.policy.policy.Policy` (the deployed actor alone, as it would trade)
over a date range it never trained on, and returns a
:class:`BacktestResult` with daily account values, every trade, and the benchmarks an
honest report needs: equal-weight buy-and-hold of the same stocks, and an index when one
is given. ``result.metrics()`` tabulates cumulative/annual return, volatility, max
drawdown, Sharpe, Calmar and Sortino for all of them; ``result.concentration`` says how
much of the account its largest position held (a bet on one stock is flagged);
``result.to_html(path)`` writes the self-contained report.
"""

from __future__ import annotations

import dataclasses
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
    from elegantpod.tournament.deployment import Deployment

    trials = _check_trials(trials)
    if name is not None:
        check_name(name, "agent name")
    try:
        agent = Deployment.of(agent, device=device)
    except TypeError:
        raise TypeError(
            "agent must be a Pod, a checkpoint path, a run folder, a Tournament or its "
            f"store, got {type(agent).__name__}"
        ) from None
    spec = agent.spec  # what it trained with: its own dates, even when data stands in
    if spec.env_id != ENV_ID:
        raise ValueError(f"backtests need an agent trained on {ENV_ID!r}, not {spec.env_id!r}")
    info: dict[str, Any] = agent.selection.as_dict()
    if agent.checkpoint is not None:
        info["checkpoint"] = agent.checkpoint
    samples = _sample_ranges(spec)
    trained = _env_kwargs(agent, data, allow_remote, device)
    kwargs = {**trained, **env_overrides}
    for key in ("start", "end", "episode_days"):
        kwargs.pop(key, None)
    if data is not None:
        kwargs["data"] = data
    # the data's columns put in the order the policy trades them, or refused naming the
    # tickers or features it lacks: matched by position, another order would trade one
    # stock by another's slot without an error anywhere
    layout = agent.layout
    if layout is None:  # a checkpoint saved before its layout field: the env it trained on
        layout = StockTradingEnv(num_envs=1, device=device, seed=0, **trained).layout()
    layout = {k: list(v) for k, v in layout.items()}
    kwargs = StockTradingEnv.fit_layout(kwargs, layout)
    if start is None:
        start = _after(samples)
    env = StockTradingEnv(
        num_envs=1, device=device, seed=0, start=start, end=end, episode_days=None, **kwargs
    )
    if list(env.tickers) != layout["tickers"]:
        raise ValueError(
            f"the backtest data's tickers {list(env.tickers)} differ from the agent's "
            f"{layout['tickers']}: the policy acts per stock, in that order"
        )
    if tuple(env.observation_space.shape) != tuple(agent.policy.obs_shape):
        raise ValueError(
            f"the backtest env's observations {env.observation_space.shape} differ from the "
            f"agent's {agent.policy.obs_shape} (other indicators?)"
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
        spec=spec.to_dict(),
        sample_ranges={label: [_day(lo), _day(hi)] for label, lo, hi in samples},
    )
    result = _run(agent.policy, env, info, bench_index)
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


def _env_kwargs(agent, data, allow_remote: bool, device: str) -> dict[str, Any]:
    """The env keywords the agent trained with, as a backtest may read them: a file or
    URL that only a checkpoint names is read only with ``allow_remote`` or when it is
    your own, the caller's ``data`` stands in for it (without its dates, unless it is
    that very file), and the tickers are put in the order the checkpoint records, as a
    pod rebuilt from it would be (:func:`~elegantpod.pod.restore.spec_to_rebuild`, on the
    checkpoint the deployment read)."""
    from elegantpod.envs.registry import external_sources
    from elegantpod.pod.restore import spec_to_rebuild
    from elegantpod.provenance import same_file

    spec = agent.spec
    if agent.live:  # a live pod or tournament: the data it was given
        return dict(spec.env_kwargs)
    own = None
    if data is not None and not allow_remote:
        named = external_sources(spec.env_kwargs) or external_sources(spec.eval_env_kwargs)
        if named and all(same_file(data, v) for v in named.values()):
            own = {"data": data}  # the very file it names: its own dates still hold
        elif named:
            own = {"data": data, "start": None, "end": None}
    rebuilt = spec_to_rebuild(agent.saved, device, env_kwargs=own, allow_remote=allow_remote)
    return dict(rebuilt.env_kwargs)


@torch.inference_mode()
def _run(policy, env: StockTradingEnv, info: dict, bench_index) -> BacktestResult:
    obs = env.reset(seed=0)
    days, tickers = env.num_days, list(env.tickers)
    values = np.empty(days)
    values[0] = env.initial_amount
    traded = np.zeros((days, env.num_stocks))  # by the day the orders filled
    costs = np.zeros(days)
    lag = env.execution_lag
    for t in range(days - 1):
        action, _ = policy.predict(obs, deterministic=True)  # the deployed actor alone
        obs, _, _, truncated, step_info = env.step(action)
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
