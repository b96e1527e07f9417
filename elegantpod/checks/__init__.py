"""Checks of values from users and files, by what they check. Every value that reaches a
config (a user's keyword, a ``--set key=value``, a mutation, a row read back from a
store) passes through them, so a typo or a hostile file fails with the field's name.
They import nothing else from elegantpod, so every layer may use them.

- ``overrides``: a frozen config's fields overridden from keywords, strings or JSON;
  the command line's ``key=value`` lists (``--set``, ``--env-arg``).
- ``limits``: hard limits of hyperparameters and sizes (``Limit``, the ``MAX_*``).
- ``settings``: a setting of a pod or tournament spec, declared once (``setting()``):
  its default, limit, flag and help, read by the checks, ``train`` and the CLI.
- ``text``: untrusted values shown short in messages; characters a name may not hold.
- ``json_values``: values JSON carries unchanged; JSON read from an untrusted file.
"""
