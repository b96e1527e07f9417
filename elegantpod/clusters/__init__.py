"""Where pods run: Dask clients on the embedded default, a GPU node, an address or a gateway.

The folder is plural so that it never shadows :func:`elegantpod.cluster`, the function
users call (defined in ``cluster``). One module per kind of cluster, each with its own
factory; ``cluster()`` chooses among them, and a new kind is a new module (see
``docs/internals/cluster-kinds.md``).

- ``cluster``: ``cluster()``, the chooser, and the dashboard link on JupyterHub.
- ``local``: ``local_client()``, the embedded ``LocalCluster`` of single-thread
  processes, and how local worker processes start (forked from a forkserver with torch
  imported; settings, deadline, the script guard).
- ``gpu``: ``gpu_client()``, a GPU node's workers, ``pods_per_gpu`` processes per GPU.
- ``address``: ``address_client()``, a scheduler that already runs (TLS checked).
- ``gateway``: ``gateway_cluster()`` on Dask Gateway (JupyterHub, Kubernetes).
- ``shutdown``: ``shutdown()``, closing a client and its cluster, quietly.
- ``gc_pause``: starting and closing clients with no finalizer able to deadlock them.
"""
