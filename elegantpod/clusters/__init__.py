"""Where pods run: Dask clients on the embedded default, a GPU node, an address or a gateway.

The folder is plural so that it never shadows :func:`elegantpod.cluster`, the function
users call (defined in ``cluster``).

- ``cluster``: ``cluster()`` and ``shutdown()``: a ``LocalCluster`` of single-thread
  processes, per-GPU processes, or an existing scheduler.
- ``local``: how local worker processes start (forked from a forkserver with torch
  imported; settings, deadline, the script guard).
- ``gpu``: a GPU node's workers, ``pods_per_gpu`` processes per GPU.
- ``gateway``: ``gateway_cluster()`` on Dask Gateway (JupyterHub, Kubernetes).
- ``gc_pause``: starting and closing clients with no finalizer able to deadlock them.
"""
