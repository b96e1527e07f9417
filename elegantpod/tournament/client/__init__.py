"""The tournament's client side: the loop that drives it, and its only Dask glue.

- ``engine``: the background loop and the run's lifecycle (start, save, finish).
- ``runner``: submits segments, reads their outcomes, publishes control, watches the
  workers (their deaths and heartbeats), and says what the cluster has and does.
- ``tasks``: the task a worker runs next for a pod.
- ``gpu_plan``: how pods are packed on GPU worker processes (pure).
- ``scheduler_events``, ``progress_log``: the scheduler's events and the pods' progress.
"""
