"""The statistics of trading results: honest about luck.

- ``metrics``: returns, drawdowns and risk-adjusted ratios of an account.
- ``bootstrap``: block-bootstrap intervals of Sharpe ratios.
- ``selection``: probabilistic and deflated Sharpe ratios (the luck of picking a best).
- ``verdict``: did an agent beat equal-weight buy & hold, and how sure can we be.
- ``concentration``: the largest single position, said in words.
"""
