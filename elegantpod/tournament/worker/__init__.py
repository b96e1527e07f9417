"""What runs on a Dask worker: one segment of one pod at a time.

- ``segment``: one segment, controllable and idempotent.
- ``resident``: pods a worker process keeps alive between their segments.
- ``channels``: the segment's control in (pause, mutate, stop) and progress out.
"""
