"""Finance: market data, indicators, a vectorized trading env, backtests and reports.

The workflow of the paper's stock-trading application (and of FinRL), vectorized and
checked: load prices (:func:`load`, or the shipped :func:`sp500_sample`), train agents
on ``StockTrading-v0`` (one pod, or a tournament ranked by validation Sharpe), then
:func:`backtest` the best one on held-out dates and write its HTML report.

>>> from elegantpod import finance
>>> splits = finance.DateSplits(train=("1990-01-01", "2015-12-31"),
...                             validation=("2016-01-01", "2018-12-31"),
...                             backtest=("2019-01-01", "2022-12-31"))
"""

from elegantpod.finance.backtest import backtest
from elegantpod.finance.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.data import (
    MarketData,
    load,
    load_long,
    load_wide,
    sp500_index,
    sp500_sample,
)
from elegantpod.finance.indicators import DEFAULT_INDICATORS, compute_features
from elegantpod.finance.metrics import METRICS
from elegantpod.finance.result import BacktestResult
from elegantpod.finance.splits import DateSplits
from elegantpod.finance.trading_env import ENV_ID, StockTradingEnv
from elegantpod.finance.verdict import verdict

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
