"""The trading env and what doing nothing scores.

- ``env``: :class:`~elegantpod.finance.trading.env.StockTradingEnv`, vectorized in torch.
- ``baselines``: buy-and-hold baselines on the range agents are ranked on.
- ``leaderboard``: the deflated Sharpe ratio a trading tournament's leaderboard adds.
"""
