"""Market data: prices read and checked, dates split, indicators computed.

- ``prices``: FinRL's long format or a wide table of closes, validated; the shipped
  S&P 500 sample (``data/``).
- ``names``: ticker and index names, checked.
- ``splits``: dates and the train / validation / backtest splits.
- ``indicators``: technical indicators from past data only.
- ``series_checks``: checks of a return series and its frequency.
- ``trading_inputs``: a trading env's inputs, checked and cut to size.
- ``benchmarks``: equal-weight buy & hold and an index, as values: what every agent is
  compared with (the verdict, the baselines, backtests and reports).
"""
