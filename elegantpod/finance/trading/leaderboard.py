"""What a trading tournament's leaderboard adds: the deflated Sharpe ratio of each entry.

Why: near-identical leaders with Sharpe ratios of 1.23 over a year are told apart from
skill only against the best that as many luck-only agents would show. The trading env's
leaderboard hooks (:class:`~elegantpod.envs.hooks.EnvHooks`) call these; the tournament
itself knows nothing of Sharpe ratios.
"""

from __future__ import annotations

import math

from elegantpod.finance.stats.selection import deflated_sharpe_of_ratio
from elegantpod.finance.trading.baselines import validation_days

COLUMN = "validation_dsr"
"""The leaderboard column these functions add and explain: the deflated Sharpe ratio of
an entry's validation score (a backtest report's ``deflated_sharpe`` is another number,
of the backtest's own returns)."""
MIN_DAYS = 3
"""Fewest daily returns on the validation range that a deflated Sharpe ratio takes."""


def deflated_sharpe_column(board, trials: int, spec) -> dict[str, list]:
    """``{"validation_dsr": [...]}`` for a leaderboard ranked by Sharpe ratio, else ``{}``.

    Each entry's validation Sharpe ratio deflated by ``trials`` (the segment evaluations
    the tournament compared, at least 1: every one was a chance to look lucky) over the
    validation range's daily returns
    (:func:`~elegantpod.finance.stats.selection.deflated_sharpe_of_ratio`, normal returns), NaN
    for an entry without a finite score. Records ``trials`` and
    ``validation_days`` in ``board.attrs``. The range's length is read from the data
    once per set of env keywords (:func:`~elegantpod.finance.trading.baselines.baseline_values`
    keeps it), so that reading the leaderboard stays cheap.
    """
    if spec.fitness != "sharpe":
        return {}
    days = validation_days({**spec.env_kwargs, **spec.eval_env_kwargs})
    if days < MIN_DAYS:
        return {}
    trials = max(trials, 1)
    ppy = float(spec.env_kwargs.get("periods_per_year", 252))
    values = [
        deflated_sharpe_of_ratio(float(s), days, trials, periods_per_year=ppy).dsr
        if s is not None and math.isfinite(s)
        else float("nan")
        for s in board["score_mean"]
    ]
    board.attrs.update(trials=trials, validation_days=days)
    return {COLUMN: values}


def notes(board) -> list[str]:
    """The line that explains ``deflated_sharpe``, where ``board`` has that column."""
    if COLUMN not in board:
        return []
    attrs = board.attrs
    return [
        f"{COLUMN}: probability that the true Sharpe ratio beats the best of "
        f"{attrs['trials']} luck-only evaluations over {attrs['validation_days']}"
        " validation days (0.95 is the usual bar)"
    ]
