"""``python -m elegantpod.cli``: the command line, as the ``elegantpod`` script runs it."""

from elegantpod.cli.main import entry

entry()
