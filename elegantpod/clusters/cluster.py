"""``cluster()``: the chooser of where pods run, over one factory per kind of cluster.

Each kind is a module with its own documented factory, so a new kind is a new module
and one branch here:

- :mod:`elegantpod.clusters.local`: the embedded ``LocalCluster`` (the default);
- :mod:`elegantpod.clusters.gpu`: a GPU node's processes, ``pods_per_gpu`` per GPU;
- :mod:`elegantpod.clusters.address`: a scheduler that already runs at an address;
- :mod:`elegantpod.clusters.gateway`: a Dask Gateway cluster (JupyterHub, Kubernetes).

:mod:`elegantpod.clusters.shutdown` closes whichever it was. These modules and the
tournament's runner (:mod:`elegantpod.tournament.client.runner`) are the only places
that talk to Dask's client API.

Why ``clusters`` and not ``cluster`` for the folder: Python sets a package attribute to
every submodule it imports, so a submodule named like the function replaced
``elegantpod.cluster`` with itself as soon as anything imported it ("'module' object is
not callable"; it bit twice). Here the module ``elegantpod.clusters.cluster`` sits in
its own folder, and ``elegantpod.cluster`` stays the function.
"""

from __future__ import annotations

import os

import dask
from distributed import Client

from elegantpod.clusters.address import address_client
from elegantpod.clusters.gateway import gateway_cluster
from elegantpod.clusters.gpu import gpu_client, gpu_count
from elegantpod.clusters.local import check_not_bootstrapping, local_client

DASK_DEFAULT_LINK = "{scheme}://{host}:{port}/status"
"""Dask's own ``distributed.dashboard.link``: a URL on the scheduler's host and port."""
HUB_LINK = "{JUPYTERHUB_SERVICE_PREFIX}proxy/{port}/status"
"""The dashboard through the user's server on JupyterHub (``jupyter-server-proxy``)."""


def hub_dashboard_link() -> str:
    """Point the Dask dashboard link through JupyterHub when this runs on a hub, and
    return the link template in force.

    On a JupyterHub user's server the scheduler's ``127.0.0.1:<port>`` is the server's
    own loopback, which the user's browser cannot reach; ``jupyter-server-proxy`` (in the
    hub image and the local daskhub) serves it at ``<prefix>proxy/<port>/status`` on the
    hub's own address. Dask fills the template from the environment, so
    ``JUPYTERHUB_SERVICE_PREFIX`` (``/user/alice/``, set by JupyterHub) makes it right for
    every user. A link the user or the deployment configured (daskhub's chart sets
    ``DASK_DISTRIBUTED__DASHBOARD__LINK``) is left as it is.
    """
    link = dask.config.get("distributed.dashboard.link", DASK_DEFAULT_LINK)
    if os.environ.get("JUPYTERHUB_SERVICE_PREFIX") and link == DASK_DEFAULT_LINK:
        dask.config.set({"distributed.dashboard.link": HUB_LINK})
        link = HUB_LINK
    return link


def cluster(
    address: str | None = None,
    *,
    gateway: str | bool | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    gpu: bool | str = "auto",
    dashboard_address: str | None = "127.0.0.1:0",
    memory_limit: str | float | None = "auto",
    timeout: float = 10.0,
    start_timeout: float = 60.0,
    security=None,
    pods_per_gpu: int | None = None,
    pod_bytes: int | None = None,
    **kwargs,
) -> Client:
    """Return a ``distributed.Client`` for running pods.

    A chooser over the four kinds, each a factory of its own module:

    - an embedded ``LocalCluster`` of single-thread CPU processes, the default
      (:func:`~elegantpod.clusters.local.local_client`);
    - on a GPU node, ``pods_per_gpu`` single-thread processes per GPU
      (:func:`~elegantpod.clusters.gpu.gpu_client`);
    - an existing scheduler at ``address``
      (:func:`~elegantpod.clusters.address.address_client`);
    - a Dask Gateway cluster, ``gateway=``, the JupyterHub way
      (:func:`~elegantpod.clusters.gateway.gateway_cluster`, with the gateway's own
      options: cluster options, adaptive scaling, reconnecting by name).

    Parameters
    ----------
    address
        An existing scheduler (``"tcp://10.0.0.5:8786"``, a dask-kubernetes cluster's
        ``scheduler_address``). ``None`` starts a local one.
    gateway
        A Dask Gateway server address (``"http://gateway.example:8000"``), or ``True``
        for the gateway configured in the environment (``gateway.address`` in the Dask
        config, as JupyterHub's daskhub sets it). Other keyword arguments go to
        :func:`gateway_cluster` then.
    n_workers
        Local worker processes; ``None``: one per CPU core. On a GPU node: how many of
        its GPUs to use (``None``: all). With a gateway: workers to scale to.
    threads_per_worker
        Threads per local CPU worker: one pod runs per thread. ``None``: 1 (torch uses
        one thread per pod). GPU workers always have one thread: one pod per process.
    gpu
        ``"auto"``: GPU workers when torch sees CUDA devices (``pods_per_gpu`` processes
        per GPU, each pinned to it by ``CUDA_VISIBLE_DEVICES`` and holding a ``GPU``
        resource of ``1 / pods_per_gpu``), else CPU workers; GPU workers that fail to
        start are an error, never a quiet fall back to the CPU. ``True`` requires them;
        ``False`` never uses them.
    pods_per_gpu
        Worker processes per GPU (a power of two). ``None``: as many as the smallest
        GPU's memory holds for pods of ``pod_bytes`` (each also pays its process's CUDA
        context, about 0.5 GiB), at most 8, and at most the CPU cores per GPU.
    pod_bytes
        A pod's estimated size for that choice (``None``: 1 GiB); a tournament passes
        the size of its largest pod (:func:`elegantpod.pod.memory.estimate_pod_bytes`).
    dashboard_address
        Where the Dask dashboard listens; loopback by default. ``None``: no dashboard.
        On a JupyterHub user's server the client's ``dashboard_link`` goes through the
        hub (:func:`hub_dashboard_link`), so it opens from the user's browser.
    memory_limit, timeout, **kwargs
        Passed to the local cluster (``timeout``: how long to wait for ``address``).
    start_timeout
        Seconds local workers may take to start; past it their processes are stopped
        and ``cluster()`` raises (it never waits forever).
    security
        TLS for a ``tls://`` scheduler at ``address``: a
        ``distributed.security.Security`` with the CA and this client's certificate and
        key (``None``: the Dask config's ``distributed.comm.tls.*``, see
        :data:`TLS_HELP`). For a local cluster it is passed on (``True``: temporary
        self-signed certificates), and scheduler, workers and client speak TLS.

    Raises
    ------
    ValueError
        When no scheduler answers at ``address``, a ``tls://`` address comes without
        certificates, or the arguments are invalid.
    RuntimeError
        When local workers die while starting or take longer than ``start_timeout``,
        and at once when called in a worker process that is starting: a script without
        ``if __name__ == "__main__":`` (the message shows the guard).

    Examples
    --------
    >>> from elegantpod import cluster, shutdown
    >>> client = cluster(n_workers=2, dashboard_address=None)  # the embedded default
    >>> len(client.scheduler_info()["workers"])
    2
    >>> shutdown(client)
    >>> cluster("tcp://10.0.0.5:8786")  # an existing scheduler  # doctest: +SKIP
    >>> cluster(gateway=True, n_workers=8)  # JupyterHub's Dask Gateway  # doctest: +SKIP
    """
    check_not_bootstrapping()
    hub_dashboard_link()
    if gateway is not None and gateway is not False:
        if address is not None:
            raise ValueError("give either address= or gateway=, not both")
        if security is not None:
            raise ValueError(
                "security= is for address= or a local cluster; a Dask Gateway sets up "
                "TLS to its clusters itself"
            )
        return gateway_cluster(gateway, n_workers=n_workers, **kwargs)
    if n_workers is not None and (isinstance(n_workers, bool) or int(n_workers) < 1):
        raise ValueError(f"n_workers must be >= 1, got {n_workers!r}")
    if threads_per_worker is not None and (
        isinstance(threads_per_worker, bool) or int(threads_per_worker) < 1
    ):
        raise ValueError(f"threads_per_worker must be >= 1, got {threads_per_worker!r}")
    if not isinstance(start_timeout, int | float) or not start_timeout > 0:  # also NaN
        raise ValueError(f"start_timeout must be > 0 seconds, got {start_timeout!r}")
    if address is not None:
        return address_client(address, security=security, timeout=timeout)
    if security is not None:
        kwargs["security"] = security
    started = dict(
        dashboard_address=dashboard_address,
        memory_limit=memory_limit,
        start_timeout=start_timeout,
        **kwargs,
    )
    if gpu and gpu_count():
        return gpu_client(
            n_workers,
            required=gpu is True,
            pods_per_gpu=pods_per_gpu,
            pod_bytes=pod_bytes,
            **started,
        )
    if gpu is True:
        raise ValueError("gpu=True but torch sees no CUDA device")
    return local_client(n_workers, threads_per_worker or 1, **started)
