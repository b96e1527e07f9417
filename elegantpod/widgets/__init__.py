"""The live notebook dashboard: a thin view over public ``Tournament`` methods.

- ``dashboard``: the ipywidgets dashboard (leaderboard, curves, buttons), refreshed
  from a thread; every button calls one public method.
- ``html``: the static, escaped HTML tables a notebook shows without widgets.
"""

from elegantpod.widgets.html import leaderboard_html

__all__ = ["Dashboard", "leaderboard_html"]


def __getattr__(name):
    if name == "Dashboard":  # ipywidgets is optional: import it only when asked for
        from elegantpod.widgets.dashboard import Dashboard

        return Dashboard
    raise AttributeError(name)
