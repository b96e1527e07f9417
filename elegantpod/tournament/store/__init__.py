"""Where a tournament keeps its state: a folder or fsspec URL, one writer at a time.

- ``store``: :class:`~elegantpod.tournament.store.store.Store`, the store's layout.
- ``files``: its files, read and written whole, atomically.
- ``lease``: one writer per store (``lease.json``, fencing tokens).
- ``snapshots``: numbered state snapshots and the pointer to the newest.
- ``saver``: when and how the running tournament saves.
- ``state``, ``saved``: a snapshot read back as untrusted input, and the tournament
  rebuilt from it to resume.
- ``reading``: a store read from outside, without its lease (its best agent).
"""
