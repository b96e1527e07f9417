"""The command line: ``elegantpod train | tournament | backtest | export | presets | demo``.

- ``main``: the entry point (the ``elegantpod`` script, ``python -m elegantpod.cli``).
- ``args``: the argument parser, and the checks that refuse each parsed value before
  any work.
- ``commands``: what ``train``, ``tournament`` and ``export`` do with their arguments
  (``backtest`` is finance's, in :mod:`elegantpod.finance.command`).
- ``run_config``, ``run_file``: ``--preset`` and ``--config`` run files, read as
  untrusted input; ``presets/``: the shipped presets.
- ``demo``: ``make demo``'s showcase.
"""
