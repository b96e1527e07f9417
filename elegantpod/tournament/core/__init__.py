"""The tournament's pure core: no Dask, no I/O, a state machine of pods and a leaderboard.

- ``population``: the state machine of pod records and the leaderboard.
- ``record``, ``history``: one pod's record, and its bounded past.
- ``leaderboard``: entries, ranking and the updater.
- Selection rules: ``rules`` (the protocol every rule follows, their registry and the
  line-ups a study compares), ``exploit`` (replacing a pod only on evidence),
  ``restart`` (a stuck population), ``breeder`` and ``generator`` (new pods: parent
  choice, mutation), ``bandit`` (a child's setting by a Gaussian process of the
  population's improvements, PB2's explore).
- ``spec``, ``search_spaces``: the tournament's recipe and its own search spaces.
- ``protocol``: the statuses, messages and kinds the parts exchange.
- ``views``: read-only tables and summaries for users and the dashboard.
- ``field_checks``, ``hparam_checks``: values read from a store, checked as untrusted
  input.
"""
