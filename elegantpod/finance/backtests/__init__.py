"""Backtests: an agent run over held-out dates and compared.

- ``backtest``: one backtest of a checkpoint or store's best agent.
- ``walkforward``: several train / validation / backtest windows, reported together.
- ``result``: :class:`~elegantpod.finance.backtests.result.BacktestResult` and its tables.
"""
