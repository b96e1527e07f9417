"""The notebook views of a tournament: a thin view over public ``Tournament`` methods.

Below the tournament: they import nothing from it, and read only what its public
methods return (``leaderboard``, ``pods``, ``curves``...), so ``Tournament.dashboard()``
and its HTML table point down here.

- ``html``: the static, escaped HTML tables a notebook shows without widgets.
- ``dashboard``: the ipywidgets dashboard (leaderboard, curves, buttons), refreshed
  from a thread; every button calls one public method.
"""

__all__ = ["Dashboard"]


def __getattr__(name):
    if name == "Dashboard":  # ipywidgets is optional: import it only when asked for
        from elegantpod.widgets.dashboard import Dashboard

        return Dashboard
    raise AttributeError(name)
