"""Dates: a date given by a user, checked, and the train / validation / backtest splits.

A backtest is honest only on dates its agent never trained or was selected on;
:class:`DateSplits` holds the three ranges in order, not overlapping, and turns them into
the keyword arguments of a tournament. Also importable from
:mod:`~elegantpod.finance.market.prices`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd


def to_timestamp(value: Any, name: str) -> pd.Timestamp:
    """``value`` as a timezone-naive ``pandas.Timestamp``, else a ``ValueError`` naming
    ``name``."""
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ValueError(f"{name} {value!r} is not a date (use YYYY-MM-DD)") from None
    if ts is pd.NaT:
        raise ValueError(f"{name} {value!r} is not a date (use YYYY-MM-DD)")
    return ts.tz_localize(None) if ts.tzinfo is not None else ts


@dataclass(frozen=True)
class DateSplits:
    """Train / validation / backtest date ranges (inclusive), in order, not overlapping.

    Training episodes are drawn from ``train``; pods are scored on ``validation`` (the
    tournament's fitness); ``backtest`` is touched only once, by the final report.

    >>> splits = DateSplits(train=("1990-01-01", "2015-12-31"),
    ...                     validation=("2016-01-01", "2018-12-31"),
    ...                     backtest=("2019-01-01", "2022-12-31"))
    >>> splits.tournament_options(data="sp500")["eval_env_kwargs"]["start"]
    '2016-01-01'
    """

    train: tuple[str, str]
    validation: tuple[str, str]
    backtest: tuple[str, str]

    def __post_init__(self) -> None:
        bounds = []
        for name in ("train", "validation", "backtest"):
            pair = getattr(self, name)
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ValueError(f"{name} must be a (start, end) pair of dates, got {pair!r}")
            # Whole days: ranges are compared as the dates they are stored as.
            a, b = (to_timestamp(x, f"{name} date").normalize() for x in pair)
            if b < a:
                raise ValueError(f"{name} ends ({pair[1]!r}) before it starts ({pair[0]!r})")
            object.__setattr__(self, name, (f"{a:%Y-%m-%d}", f"{b:%Y-%m-%d}"))
            bounds.append((name, a, b))
        for (n1, _, end1), (n2, start2, _) in zip(bounds, bounds[1:], strict=False):
            if start2 <= end1:
                raise ValueError(
                    f"{n2} must start after {n1} ends: {n2} starts {start2:%Y-%m-%d}, "
                    f"{n1} ends {end1:%Y-%m-%d}"
                )

    def train_kwargs(self, **env: Any) -> dict[str, Any]:
        """Trading-env keyword arguments for training (random windows in ``train``)."""
        return {**env, "start": self.train[0], "end": self.train[1]}

    def validation_kwargs(self, windows: int = 1) -> dict[str, Any]:
        """Overrides for evaluation: the whole validation range, one deterministic run
        (``windows > 1``: that range split into consecutive windows, one per account)."""
        out = {"start": self.validation[0], "end": self.validation[1], "episode_days": None}
        return {**out, "windows": windows} if windows != 1 else out

    def tournament_options(
        self, fitness: str = "sharpe", windows: int = 1, **env: Any
    ) -> dict[str, Any]:
        """Keyword arguments for :class:`~elegantpod.tournament.Tournament` (or
        :func:`~elegantpod.train`): env settings and validation scoring by ``fitness``.

        What the fitness measures: with ``windows=1``, ``fitness`` (the Sharpe ratio,
        say) of one deterministic run over the whole validation range: one number per
        evaluation, with no spread to tell luck from skill. With ``windows=k``, the
        mean of ``fitness`` over ``k`` consecutive windows of that range (evaluated at
        once, ``k`` accounts, at the cost of one run), and their spread is the noise a
        tournament weighs before it replaces a pod on evidence.
        """
        return {
            "env_kwargs": self.train_kwargs(**env),
            "eval_env_kwargs": self.validation_kwargs(windows),
            "fitness": fitness,
            "eval_episodes": windows,
        }
