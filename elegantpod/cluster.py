"""``cluster()``: a Dask client on the embedded default, a GPU node, or an existing scheduler.

This module and :mod:`elegantpod.tournament.orchestrator` are the only places that talk
to Dask's client API.
"""

from __future__ import annotations

import os
import warnings

import dask
from distributed import Client, LocalCluster


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def cluster(
    address: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    gpu: bool | str = "auto",
    dashboard_address: str | None = "127.0.0.1:0",
    memory_limit: str | float | None = "auto",
    timeout: float = 10.0,
    **kwargs,
) -> Client:
    """Return a ``distributed.Client`` for running pods.

    Parameters
    ----------
    address
        An existing scheduler (``"tcp://10.0.0.5:8786"``, a Dask Gateway or
        dask-kubernetes cluster's ``scheduler_address``). ``None`` starts a local one.
    n_workers
        Local worker processes; ``None``: one per CPU core (or per GPU).
    threads_per_worker
        Threads per local worker. One pod per thread; torch uses one thread per pod.
    gpu
        ``"auto"``: a ``dask_cuda.LocalCUDACluster`` (one worker per GPU, each with a
        ``GPU`` resource) when GPUs and ``dask-cuda`` are present, else CPU workers.
        ``True`` requires it; ``False`` never uses it.
    dashboard_address
        Where the Dask dashboard listens; loopback by default. ``None``: no dashboard.
    memory_limit, timeout, **kwargs
        Passed to the local cluster (``timeout``: how long to wait for ``address``).

    Raises
    ------
    ValueError
        When no scheduler answers at ``address`` or the arguments are invalid.
    """
    if n_workers is not None and (isinstance(n_workers, bool) or int(n_workers) < 1):
        raise ValueError(f"n_workers must be >= 1, got {n_workers!r}")
    if int(threads_per_worker) < 1:
        raise ValueError(f"threads_per_worker must be >= 1, got {threads_per_worker!r}")
    if address is not None:
        try:
            return Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"no Dask scheduler reachable at {address!r}: {exc}") from exc
    n_gpus = _gpu_count() if gpu else 0
    if n_gpus:
        try:
            from dask_cuda import LocalCUDACluster

            lc = LocalCUDACluster(
                n_workers=n_workers,
                threads_per_worker=1,
                resources={"GPU": 1},
                dashboard_address=dashboard_address or ":0",
                ip="127.0.0.1",
                **kwargs,
            )
            return Client(lc)
        except Exception as exc:  # ImportError, NVMLError on a machine without drivers
            if gpu is True:
                raise ValueError(f"gpu=True but no LocalCUDACluster could start: {exc}") from exc
            warnings.warn(f"falling back to CPU workers: {exc}", stacklevel=2)
    elif gpu is True:
        raise ValueError("gpu=True but torch sees no CUDA device")
    n = int(n_workers) if n_workers is not None else max(1, os.cpu_count() or 1)
    if dashboard_address is None:
        # distributed would still serve its HTTP endpoints on :8787 on every interface;
        # keep them on loopback and switch the dashboard off.
        kwargs["scheduler_kwargs"] = {
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",
            **kwargs.get("scheduler_kwargs", {}),
        }
    # distributed's nanny starts workers with MALLOC_TRIM_THRESHOLD_=64 KiB so that freed
    # memory goes back to the OS at once; for a pod that allocates and frees the same
    # tensors every iteration that means page faults all the time (about 20% of its
    # steps/s, see benchmarks/dask_overhead.py). Pods keep their memory instead.
    environ = {
        **dask.config.get("distributed.nanny.pre-spawn-environ", {}),
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD,
    }
    # The worker's statistical profiler samples every thread's stack every 10 ms, which
    # costs a Python-heavy pod real steps/s; the tournament's own events say where time
    # goes instead.
    settings = {
        "distributed.nanny.pre-spawn-environ": environ,
        "distributed.worker.profile.enabled": False,
    }
    # A pod on a CPU env may step it in worker processes of its own (gymnasium's async
    # vector env, MuJoCo): daemonic Dask workers could not start them. The nanny reads
    # this when it (re)starts a worker, so it is set for the process, not just here.
    dask.config.set({"distributed.worker.daemon": False})
    with dask.config.set(settings):
        lc = _local_cluster(n, threads_per_worker, dashboard_address, memory_limit, kwargs)
    return Client(lc)


TRIM_THRESHOLD = 256 * 1024 * 1024
"""glibc keeps up to this much freed memory in a worker before trimming (256 MiB)."""


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
