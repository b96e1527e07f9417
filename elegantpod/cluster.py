"""``cluster()``: a Dask client on the embedded default, a GPU node, or an existing scheduler.

This module and :mod:`elegantpod.tournament.orchestrator` are the only places that talk
to Dask's client API.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings

import dask
from distributed import Client, LocalCluster
from distributed.security import Security


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


GPU_THREADS = 1
"""Threads of a local GPU worker process: one pod per process (see
:mod:`elegantpod.gpu_layout`); a GPU is shared by ``pods_per_gpu`` processes instead."""


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
    single-thread worker processes per GPU, see :mod:`elegantpod.gpu_layout`), an
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
        resource of ``1 / pods_per_gpu``), else CPU workers. ``True`` requires them;
        ``False`` never uses them.
    pods_per_gpu
        Worker processes per GPU (a power of two). ``None``: as many as the smallest
        GPU's memory holds for pods of ``pod_bytes`` (each also pays its process's CUDA
        context, about 0.5 GiB), at most 8, and at most the CPU cores per GPU.
    pod_bytes
        A pod's estimated size for that choice (``None``: 1 GiB); a tournament passes
        the size of its largest pod (:func:`elegantpod.memory.estimate_pod_bytes`).
    dashboard_address
        Where the Dask dashboard listens; loopback by default. ``None``: no dashboard.
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
    _check_not_bootstrapping()
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
            return Client(address, timeout=timeout, security=security)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"no Dask scheduler reachable at {address!r}: {exc}") from exc
    if security is not None:
        kwargs["security"] = security
    n_gpus = _gpu_count() if gpu else 0
    if n_gpus:
        from elegantpod.gpu_layout import DEFAULT_POD_BYTES, GPUCluster, gpu_layout

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
            with _start_deadline(float(start_timeout)) as expired:
                try:
                    lc = GPUCluster(
                        layout,
                        host="127.0.0.1",
                        dashboard_address=dashboard_address,
                        memory_limit=memory_limit,
                        **_dashboard_off(dashboard_address, kwargs),
                    )
                except (RuntimeError, TimeoutError) as exc:
                    raise RuntimeError(
                        _start_failure(exc, start_timeout if expired else None)
                    ) from exc
            return Client(lc)
        except Exception as exc:  # workers that died starting, a driver that fails
            if gpu is True:
                raise ValueError(f"gpu=True but no GPU workers could start: {exc}") from exc
            warnings.warn(f"falling back to CPU workers: {exc}", stacklevel=2)
    elif gpu is True:
        raise ValueError("gpu=True but torch sees no CUDA device")
    n = int(n_workers) if n_workers is not None else max(1, os.cpu_count() or 1)
    kwargs = _dashboard_off(dashboard_address, kwargs)
    dask.config.set({"distributed.worker.daemon": False})  # see worker_settings()
    settings = worker_settings()
    with dask.config.set(settings), _start_deadline(float(start_timeout)) as expired:
        try:
            lc = _local_cluster(n, threads_per_worker or 1, dashboard_address, memory_limit, kwargs)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(_start_failure(exc, start_timeout if expired else None)) from exc
    return Client(lc)


def worker_settings() -> dict:
    """Dask config for local worker processes, CPU and GPU alike (set while they start).

    distributed's nanny starts workers with MALLOC_TRIM_THRESHOLD_=64 KiB so that freed
    memory goes back to the OS at once; for a pod that allocates and frees the same
    tensors every iteration that means page faults all the time (about 20% of its
    steps/s, see benchmarks/dask_overhead.py). Pods keep their memory instead.
    And setting any malloc threshold switches glibc's dynamic mmap threshold off, so
    every allocation over 128 KiB (a minibatch, an activation) became an mmap, a
    munmap and fresh page faults: a pod ran at 0.77x its in-process speed in a worker
    (benchmarks/dask_overhead.py). Up to 32 MiB now comes from the reused heap (1.02x).

    The worker's statistical profiler samples every thread's stack every 10 ms, which
    costs a Python-heavy pod real steps/s; the tournament's own events say where time
    goes instead.

    Callers also set ``distributed.worker.daemon`` to ``False`` for the process: a pod on
    a CPU env may step it in worker processes of its own (gymnasium's async vector env,
    MuJoCo), which daemonic Dask workers could not start, and the nanny reads it when it
    (re)starts a worker, so it is set for the process, not just while workers start.
    """
    environ = {
        **dask.config.get("distributed.nanny.pre-spawn-environ", {}),
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD,
        "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD,
    }
    return {
        "distributed.nanny.pre-spawn-environ": environ,
        "distributed.worker.profile.enabled": False,
    }


def _dashboard_off(dashboard_address: str | None, kwargs: dict) -> dict:
    """``kwargs`` with the scheduler's HTTP endpoints on loopback when there is no
    dashboard: distributed would still serve them on :8787 on every interface."""
    if dashboard_address is not None:
        return kwargs
    scheduler_kwargs = {
        "dashboard": False,
        "dashboard_address": "127.0.0.1:0",
        **kwargs.get("scheduler_kwargs", {}),
    }
    return {**kwargs, "scheduler_kwargs": scheduler_kwargs}


@contextlib.contextmanager
def _start_deadline(seconds: float):
    """Stop this process's worker processes that are still starting after ``seconds``.

    Why: a worker process that never comes up (one that runs the script's own code
    again, stuck before it could fail) kept ``LocalCluster()`` waiting forever, and
    distributed's own start timeout (the nanny's ``death_timeout``) then hung in the
    nanny's close. A worker killed here is one that failed to start: ``LocalCluster``
    raises and cleans up. Yields a list that is non-empty once the deadline passed.
    """
    expired: list[bool] = []
    done = threading.Event()
    since = time.time()

    def watch() -> None:
        if not done.wait(seconds):
            expired.append(True)
            _kill_spawned_children(since)

    watcher = threading.Thread(target=watch, name="elegantpod-worker-start-deadline", daemon=True)
    watcher.start()
    try:
        yield expired
    finally:
        done.set()


def _kill_spawned_children(since: float) -> None:
    """Kill this process's multiprocessing children (spawned workers) made since ``since``."""
    import psutil

    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.create_time() >= since - 1 and "--multiprocessing-fork" in child.cmdline():
                child.kill()


def _start_failure(exc: BaseException, timed_out: float | None) -> str:
    """The error of local workers that did not start, with the likely cause in a script."""
    import sys

    message = f"local Dask workers did not start: {exc}"
    if timed_out is not None:
        message = f"local Dask workers did not start within {timed_out:g} s (start_timeout)"
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None):  # a script (or python -m), not a notebook
        message += (
            "\n\nIf the script calls elegantpod.cluster() (or starts a Tournament) outside "
            f'`if __name__ == "__main__":`, that is why.\n{SCRIPT_GUARD}'
        )
    return message


SCRIPT_GUARD = """\
In a script, local workers are new Python processes that import the script again, so the
code that starts the cluster must run only in the main process: put it in a function and
call it under the guard (see "In a script" in the README):

    import elegantpod

    def main():
        client = elegantpod.cluster()
        ...

    if __name__ == "__main__":
        main()
"""
"""What a script without the ``__main__`` guard is told (it would otherwise hang)."""


def _check_not_bootstrapping() -> None:
    """Raise at once when called while a spawned process re-imports the main script.

    Why: a script without ``if __name__ == "__main__":`` calls ``cluster()`` again in
    every worker process that multiprocessing's spawn starts, where it cannot start
    processes; the worker never comes up and the script's own ``cluster()`` waited
    forever. Failing in the worker ends it, and the parent sees the worker die.
    """
    import multiprocessing.process

    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        raise RuntimeError(
            "elegantpod.cluster() was called in a worker process that was still starting "
            f"(it imported the script again).\n{SCRIPT_GUARD}"
        )


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


TRIM_THRESHOLD = 256 * 1024 * 1024
"""glibc keeps up to this much freed memory in a worker before trimming (256 MiB)."""
MMAP_THRESHOLD = 32 * 1024 * 1024
"""Allocations below this come from glibc's heap, not fresh mmaps (32 MiB, glibc's most):
with a fixed trim threshold glibc no longer raises it by itself."""


def _local_cluster(n, threads_per_worker, dashboard_address, memory_limit, kwargs):
    return LocalCluster(
        n_workers=n,
        threads_per_worker=int(threads_per_worker),
        processes=True,
        host="127.0.0.1",
        dashboard_address=dashboard_address,
        memory_limit=memory_limit,
        **kwargs,
    )


GATEWAY_OPTIONS = ("worker_cores", "worker_memory", "worker_gpus")
"""Cluster options with their own keyword in :func:`gateway_cluster` (when offered)."""


def gateway_cluster(
    gateway: str | bool = True,
    *,
    name: str | None = None,
    n_workers: int | None = None,
    adapt: tuple[int, int] | None = None,
    worker_cores: float | None = None,
    worker_memory: float | None = None,
    worker_gpus: int | None = None,
    options: dict | None = None,
    proxy_address: str | None = None,
    auth=None,
    shutdown_on_close: bool | None = None,
) -> Client:
    """A client on a Dask Gateway cluster: a new one, or an existing one by ``name``.

    Why a gateway: on a JupyterHub over Kubernetes users may not start pods themselves;
    the gateway starts scheduler and workers for them, with resource limits set by the
    admins, and the cluster outlives the notebook kernel (reconnect with ``name``).

    Parameters
    ----------
    gateway
        Gateway address (``"http://..."``; the proxy's HTTP address on a daskhub), or
        ``True`` for the one in the Dask config (``gateway.address``).
    name
        Reconnect to this running cluster (``client.cluster.name`` of an earlier call)
        instead of creating one. A reconnected cluster is not shut down on close unless
        ``shutdown_on_close=True``.
    n_workers
        Scale to this many workers (``None``: leave the gateway's default).
    adapt
        ``(minimum, maximum)``: adaptive scaling instead of a fixed ``n_workers``.
    worker_cores, worker_memory, worker_gpus
        Cluster options, when the gateway offers them (memory in GiB, as gateways
        usually take it). Others by name in ``options``. An option the gateway does
        not offer is an error naming the ones it does.
    proxy_address, auth
        Passed to ``dask_gateway.Gateway`` (``auth``: ``"basic"``, ``"jupyterhub"``,
        ``"kerberos"`` or an auth object; ``None``: the Dask config's).
    shutdown_on_close
        Shut the cluster down when its client's ``cluster.close()`` runs (what a
        tournament that made its own client does at its end). Default: yes for a new
        cluster, no for a reconnected one. :func:`shutdown` always shuts it down.

    Raises
    ------
    ValueError
        For bad arguments (before contacting anything), a missing ``dask-gateway``
        package, no configured address, an unknown cluster name or cluster option, or
        a gateway that does not answer.
    """
    if isinstance(gateway, str):
        if not gateway.startswith(("http://", "https://")):
            raise ValueError(f"gateway must be an http(s):// address or True, got {gateway!r}")
    elif gateway is not True:
        raise ValueError(f"gateway must be an http(s):// address or True, got {gateway!r}")
    if n_workers is not None and (
        isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0
    ):
        raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
    if adapt is not None:
        if n_workers is not None:
            raise ValueError("give either n_workers or adapt=(minimum, maximum), not both")
        ok = (
            isinstance(adapt, tuple | list)
            and len(adapt) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in adapt)
            and adapt[0] <= adapt[1]
        )
        if not ok:
            raise ValueError(
                f"adapt must be (minimum, maximum) integers, 0 <= min <= max, got {adapt!r}"
            )
    wanted = dict(options or {})
    for key, value in (
        ("worker_cores", worker_cores),
        ("worker_memory", worker_memory),
        ("worker_gpus", worker_gpus),
    ):
        if value is not None:
            wanted[key] = value
    try:
        from dask_gateway import Gateway
    except ImportError as exc:
        raise ValueError(
            "gateway= needs the dask-gateway client: pip install 'elegantpod[gateway]'"
        ) from exc
    address = gateway if isinstance(gateway, str) else dask.config.get("gateway.address", None)
    if not address:
        raise ValueError(
            "gateway=True but no gateway is configured (gateway.address in the Dask "
            "config, DASK_GATEWAY__ADDRESS); pass gateway='http://...'"
        )
    gw = Gateway(address, proxy_address=proxy_address, auth=auth)
    try:
        if name is not None:
            known = [c.name for c in gw.list_clusters()]
            if name not in known:
                raise ValueError(
                    f"no running gateway cluster named {name!r} at {address}; running: "
                    f"{', '.join(known) or 'none'}"
                )
            gc = gw.connect(name, shutdown_on_close=bool(shutdown_on_close))
        else:
            opts = gw.cluster_options() if wanted else None
            for key, value in wanted.items():
                if key not in opts:
                    raise ValueError(
                        f"gateway {address} offers no cluster option {key!r}; it offers "
                        f"{sorted(opts) or 'none'}"
                    )
                try:
                    opts[key] = value
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"cluster option {key}={value!r}: {exc}") from exc
            gc = gw.new_cluster(
                opts, shutdown_on_close=True if shutdown_on_close is None else shutdown_on_close
            )
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"no Dask Gateway answering at {address!r}: {exc}") from exc
    finally:
        close_gateway(gw)
    if adapt is not None:
        gc.adapt(minimum=adapt[0], maximum=adapt[1])
    elif n_workers is not None:
        gc.scale(n_workers)
    return gc.get_client()  # the default client, as Client(LocalCluster()) is


def shutdown(client: Client) -> None:
    """Close ``client`` and shut its cluster down (local, gateway or any ``SpecCluster``).

    What the tournament's owner calls when the work is done: a gateway cluster would
    otherwise keep its workers (and the cloud bill) until the gateway's idle timeout.
    The shutdown is quiet (see :func:`quiet_shutdown`).
    """
    cl = getattr(client, "cluster", None)
    with quiet_shutdown():
        client.close()
        if cl is None:
            return
        if hasattr(cl, "shutdown"):
            cl.shutdown()  # dask_gateway.GatewayCluster: stops scheduler and workers
            close_gateway(getattr(cl, "gateway", None))
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


def close_gateway(gw) -> None:
    """Close a ``dask_gateway.Gateway`` once and for all.

    dask-gateway 2026.3's ``Gateway.__del__`` closes it again, and with distributed
    2026.8 a second close raises (its loop runner is gone) and prints a traceback at
    garbage collection. Dropping the runner after the first close makes ``__del__``
    skip it.
    """
    if gw is None or not hasattr(gw, "_loop_runner"):
        return
    with contextlib.suppress(RuntimeError):
        gw.close()
    with contextlib.suppress(AttributeError):
        del gw._loop_runner
