"""``cluster()``: a Dask client on the embedded default, a GPU node, or an existing scheduler.

This module (with the three it starts clusters with: :mod:`elegantpod.clusters.local`,
how local workers start; :mod:`elegantpod.clusters.gpu`, a GPU node's processes;
:mod:`elegantpod.clusters.gateway`, a Dask Gateway cluster) and
:mod:`elegantpod.tournament.orchestrator` are the only places that talk to Dask's
client API.

Why ``dask_cluster`` and not ``cluster``: Python sets a package attribute to every
submodule it imports, so a submodule named ``cluster`` replaced the function
``elegantpod.cluster`` with itself as soon as anything imported it ("'module' object is
not callable"; it bit twice). The name says what the module holds, the Dask clusters
elegantpod runs on, and leaves ``elegantpod.cluster`` to the function.
"""

from __future__ import annotations

import contextlib
import os
import threading

import dask
from distributed import Client
from distributed.security import Security

from elegantpod.clusters.gateway import close_cluster, gateway_cluster
from elegantpod.clusters.gc_pause import gc_paused
from elegantpod.clusters.gpu import DEFAULT_POD_BYTES, GPUCluster, gpu_layout
from elegantpod.clusters.local import (
    check_not_bootstrapping,
    dashboard_off,
    forget_stdin_main,
    forkserver_workers,
    local_cluster,
    start_deadline,
    start_failure,
    worker_settings,
)


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def _visible_gpus() -> tuple[list[str], list[int | None]]:
    """This machine's GPUs as ``CUDA_VISIBLE_DEVICES`` names them, and their memory."""
    import torch

    count = torch.cuda.device_count()
    names = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    names = names[:count] if len(names) >= count and all(names) else [str(i) for i in range(count)]
    memory: list[int | None] = []
    for i in range(count):
        try:
            memory.append(int(torch.cuda.get_device_properties(i).total_memory))
        except Exception:
            memory.append(None)
    return names, memory


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

    Three modes: an embedded ``LocalCluster`` (the default; on a GPU node ``pods_per_gpu``
    single-thread worker processes per GPU, see :mod:`elegantpod.clusters.gpu`), an
    existing scheduler ``address``, or a Dask Gateway cluster
    (``gateway=``), the JupyterHub way. See :func:`gateway_cluster` for the gateway's
    own options (cluster options, adaptive scaling, reconnecting by name).

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
        _check_tls(address, security)
        try:
            with gc_paused():  # see elegantpod.clusters.gc_pause: no finalizer inside its start
                return Client(address, timeout=timeout, security=security)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"no Dask scheduler reachable at {address!r}: {exc}") from exc
    if security is not None:
        kwargs["security"] = security
    n_gpus = _gpu_count() if gpu else 0
    if n_gpus:
        try:
            names, memory = _visible_gpus()
            use = min(len(names), int(n_workers)) if n_workers is not None else len(names)
            layout = gpu_layout(
                names[:use],
                memory[:use],
                pod_bytes=int(pod_bytes or DEFAULT_POD_BYTES),
                pods_per_gpu=pods_per_gpu,
                cpus=os.cpu_count(),
            )
            # GPUCluster and Client each start a LoopRunner: no finalizer inside (gc_pause)
            forget_stdin_main()
            with gc_paused():
                with start_deadline(float(start_timeout)) as expired:
                    try:
                        lc = GPUCluster(
                            layout,
                            host="127.0.0.1",
                            dashboard_address=dashboard_address,
                            memory_limit=memory_limit,
                            **dashboard_off(dashboard_address, kwargs),
                        )
                    except (RuntimeError, TimeoutError) as exc:
                        raise RuntimeError(
                            start_failure(exc, start_timeout if expired else None)
                        ) from exc
                return Client(lc)
        except Exception as exc:  # workers that died starting, a driver that fails
            # Never a silent CPU run on a GPU machine: a warning scrolls by while the
            # tournament trains on the CPU for hours (the GPU check lost exactly this).
            if gpu is True:
                raise ValueError(f"gpu=True but no GPU workers could start: {exc}") from exc
            raise RuntimeError(
                f"torch sees {n_gpus} CUDA device(s), but no GPU worker "
                f"could start: {exc}. cluster(gpu=False) starts CPU workers instead."
            ) from exc
    elif gpu is True:
        raise ValueError("gpu=True but torch sees no CUDA device")
    n = int(n_workers) if n_workers is not None else max(1, os.cpu_count() or 1)
    kwargs = dashboard_off(dashboard_address, kwargs)
    dask.config.set({"distributed.worker.daemon": False})  # see worker_settings()
    settings = worker_settings()
    forked = forkserver_workers(settings["distributed.nanny.pre-spawn-environ"])
    if forked is not None:  # workers forked with torch imported (a restart spawns one)
        settings.update(forked["config"])
        kwargs = {**kwargs, "env": {**forked["env"], **kwargs.get("env", {})}}
    # LocalCluster and Client each start a LoopRunner: no finalizer inside (gc_pause)
    with gc_paused():
        with dask.config.set(settings), start_deadline(float(start_timeout)) as expired:
            try:
                lc = local_cluster(
                    n, threads_per_worker or 1, dashboard_address, memory_limit, kwargs
                )
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(start_failure(exc, start_timeout if expired else None)) from exc
        return Client(lc)


TLS_HELP = (
    "in Python pass security=distributed.security.Security(tls_ca_file=..., "
    "tls_client_cert=..., tls_client_key=..., require_encryption=True); from the CLI or "
    "anywhere else set the Dask config distributed.comm.tls.ca-file, "
    "distributed.comm.tls.client.cert and distributed.comm.tls.client.key (environment "
    "variables DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT, DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY)"
)
"""How to give a client the certificates a ``tls://`` scheduler asks for."""


def _check_tls(address: str, security) -> None:
    """A clear error for a ``tls://`` address without a CA file and client certificate.

    Without them distributed fails with a TypeError about a missing ``ssl_context``.
    """
    if not str(address).lower().startswith("tls://"):
        return
    if security is None:
        if dask.config.get("distributed.client.security-loader", None):
            return  # the loader supplies the certificates
        security = Security()  # what the Dask config holds
    elif isinstance(security, dict):
        security = Security(**security)
    elif not isinstance(security, Security):
        return  # True: temporary certificates, for distributed to judge
    tls = security.get_tls_config_for_role("client")
    missing = [
        what
        for key, what in (("ca_file", "CA file"), ("cert", "client certificate"))
        if not tls.get(key)
    ]
    if missing:
        raise ValueError(
            f"{address!r} is a TLS scheduler but no {' and no '.join(missing)} is "
            f"configured: {TLS_HELP}"
        )


def shutdown(client: Client) -> None:
    """Close ``client`` and shut its cluster down (local, gateway or any ``SpecCluster``).

    What the tournament's owner calls when the work is done: a gateway cluster would
    otherwise keep its workers (and the cloud bill) until the gateway's idle timeout.
    The shutdown is quiet (see :func:`quiet_shutdown`).
    """
    cl = getattr(client, "cluster", None)
    # closing stops LoopRunners: the same lock as a start (elegantpod.clusters.gc_pause)
    with quiet_shutdown(), gc_paused():
        client.close()
        if cl is None:
            return
        if hasattr(cl, "gateway"):  # dask_gateway.GatewayCluster
            close_cluster(cl, shutdown=True)  # stops scheduler, workers and its Gateway
        else:
            cl.close()


SHUTDOWN_LOGGERS = (
    "distributed.nanny",
    "distributed.worker",
    "distributed.core",
    "distributed.batched",
    "distributed.comm",
    "distributed.scheduler",
    "distributed.client",
    "tornado.application",
)
"""Loggers that report an ordinary shutdown as trouble: the nanny's "Worker process
still alive after ... seconds, killing" (a worker busy in torch past the nanny's grace
period is killed, which is what closing asks for), and comms closed mid-message."""


@contextlib.contextmanager
def quiet_shutdown():
    """While a cluster closes, its expected noise stays off the user's terminal.

    Only records below ``ERROR`` are held back, and only during the close: a worker that
    fails while training still logs as before.
    """
    import logging

    global _quiet_closers, _quiet_levels
    with _quiet_lock:  # two tournaments may close at once: the last one restores
        if _quiet_closers == 0:
            _quiet_levels = {name: logging.getLogger(name).level for name in SHUTDOWN_LOGGERS}
            for name, level in _quiet_levels.items():
                logging.getLogger(name).setLevel(max(level, logging.ERROR))
        _quiet_closers += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_closers -= 1
            if _quiet_closers == 0:
                for name, level in _quiet_levels.items():
                    logging.getLogger(name).setLevel(level)


_quiet_lock = threading.Lock()
_quiet_closers = 0
_quiet_levels: dict[str, int] = {}
