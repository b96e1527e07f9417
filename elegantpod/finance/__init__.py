"""Finance: market data, indicators, a vectorized trading env, backtests and reports.

The workflow of the paper's stock-trading application (and of FinRL), vectorized and
checked: load prices (:func:`load`, or the shipped :func:`sp500_sample`), train agents
on ``StockTrading-v0`` (one pod, or a tournament ranked by validation Sharpe), then
:func:`backtest` the best one on held-out dates and write its HTML report.

Finance is a client of the generic parts (envs, pods, tournaments), never imported by
them. Its parts, in the order arrows point (each imports only from those above it,
``tests/test_layers.py``):

- ``market/``: prices read and checked, date splits, indicators, the shipped sample,
  and the benchmarks every agent is compared with.
- ``stats/``: metrics, bootstrap intervals, deflated Sharpe ratios, the verdict.
- ``report/``: the self-contained HTML report and pyfolio's formats.
- ``trading/``: ``StockTradingEnv``, its buy-and-hold baselines and what its
  leaderboard adds.
- ``backtests/``: backtests, walk-forward windows and their results.
- ``command``: ``elegantpod backtest`` on the command line.

>>> from elegantpod import finance
>>> splits = finance.DateSplits(train=("1990-01-01", "2015-12-31"),
...                             validation=("2016-01-01", "2018-12-31"),
...                             backtest=("2019-01-01", "2022-12-31"))
"""

from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.backtests.result import BacktestResult
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.market.indicators import DEFAULT_INDICATORS, compute_features
from elegantpod.finance.market.prices import (
    MarketData,
    load,
    load_long,
    load_wide,
    sp500_index,
    sp500_sample,
)
from elegantpod.finance.market.splits import DateSplits
from elegantpod.finance.stats.metrics import METRICS
from elegantpod.finance.stats.verdict import verdict
from elegantpod.finance.trading.env import ENV_ID, StockTradingEnv

__all__ = [
    "DEFAULT_INDICATORS",
    "ENV_ID",
    "EQUAL_WEIGHT",
    "METRICS",
    "BacktestResult",
    "DateSplits",
    "MarketData",
    "StockTradingEnv",
    "backtest",
    "compute_features",
    "load",
    "load_long",
    "load_wide",
    "sp500_index",
    "sp500_sample",
    "verdict",
]
