"""The live notebook dashboard: a thin view over public ``Tournament`` methods.

- ``dashboard``: the ipywidgets dashboard (leaderboard, curves, buttons), refreshed
  from a thread; every button calls one public method. Its tables are the tournament's
  own static HTML (:mod:`elegantpod.tournament.html`), which a notebook shows without
  widgets too.
"""

__all__ = ["Dashboard"]


def __getattr__(name):
    if name == "Dashboard":  # ipywidgets is optional: import it only when asked for
        from elegantpod.widgets.dashboard import Dashboard

        return Dashboard
    raise AttributeError(name)
