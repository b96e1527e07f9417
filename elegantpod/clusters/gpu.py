"""``gpu_client()``: a GPU node's Dask workers, ``pods_per_gpu`` single-thread processes per GPU.

Why one pod per process: by PyTorch's CUDA-graph notes no other CUDA work may run in a
process, on any thread, while a graph is captured there (a device-wide synchronize from
any thread invalidates the capture); ``torch.compile`` is not thread-safe, and from torch
2.12 dynamo's config is thread-local. Pods that ran as threads of one worker also shared
its default stream and its GIL, so they overlapped little even when nothing broke. Here
every pod has a process of its own, pinned to one GPU by ``CUDA_VISIBLE_DEVICES``, with
one thread: one pod runs in it at a time (idle pods may stay resident within the memory
planned for it). The processes of a GPU share it by time slicing, or run their kernels
concurrently under CUDA MPS (optional: ``docs/guides/gpus.md``).

The workers are Dask's own: nanny specs of a ``LocalCluster`` (a ``SpecCluster``), one
per process. dask-cuda's ``LocalCUDACluster`` starts one worker per GPU and cannot start
several; its CPU-affinity plugin is added where dask-cuda is installed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import time
import warnings
from collections.abc import Sequence
from typing import Any

from distributed import Client, LocalCluster, Nanny

from elegantpod.clusters.gc_pause import gc_paused
from elegantpod.clusters.local import (
    dashboard_off,
    forget_stdin_main,
    start_deadline,
    start_failure,
    worker_settings,
)

_logger = logging.getLogger(__name__)

GPU_THREADS = 1
"""Threads of a local GPU worker process: one pod per process (the module's docstring
says why); a GPU is shared by ``pods_per_gpu`` processes instead."""

MAX_PODS_PER_GPU = 8
"""Automatic packing stops here: past it, small pods contend for the GPU's streams."""
CUDA_OVERHEAD = 512 * 2**20
"""Memory a pod takes on a GPU beyond its tensors (allocator slack, kernels, workspace)."""
CUDA_CONTEXT = 512 * 2**20
"""Memory each worker process's CUDA context takes on its GPU (about 0.5 GiB), whatever
its pods: with one pod per process every packed pod pays it."""
GPU_MEMORY_SHARE = 0.8
"""Of a GPU's memory, the part that packing plans for (the rest is headroom)."""
DEFAULT_POD_BYTES = 2**30
"""A pod's size assumed when a GPU node starts before any pod is known (1 GiB)."""
MAX_RESIDENT = 32
"""Idle pods a worker process keeps resident at most."""
COMPILE_THREADS = "1"
"""``TORCHINDUCTOR_COMPILE_THREADS`` of a GPU worker process unless the user set it.

Why: each process that first compiles with Inductor starts a compile sidecar and
``min(32, cores)`` forked compile workers, idle for 60 s before they quit. With 8 worker
processes on a 16-core GPU machine that is about 150 processes starting at once beside
8 CUDA contexts (a GPU check's machine stopped answering there). A pod compiles one
fused env step per size, so a pool of compile workers buys nothing."""


def pods_per_gpu(
    given: int | None, gpu_bytes: int | None, pod_bytes: int, processes: int | None = None
) -> int:
    """How many pods (each in its own process) share one GPU: ``given``, or as many as its
    memory holds.

    A pod is counted at twice its estimated tensors, plus :data:`CUDA_OVERHEAD`, plus its
    process's CUDA context (:data:`CUDA_CONTEXT`), within :data:`GPU_MEMORY_SHARE` of
    the GPU's memory and at most :data:`MAX_PODS_PER_GPU`; never more than the
    ``processes`` a GPU has (one pod runs per process). Memory unknown: one. The result
    is a power of two.
    """
    if given is not None:
        n = int(given)
    elif gpu_bytes:
        per_pod = 2 * max(int(pod_bytes), 1) + CUDA_OVERHEAD + CUDA_CONTEXT
        n = min(int(GPU_MEMORY_SHARE * gpu_bytes // per_pod), MAX_PODS_PER_GPU)
    else:
        n = 1
    if processes is not None:
        n = min(n, max(1, int(processes)))
    n = max(1, n)
    return 1 << (n.bit_length() - 1)


_plan = pods_per_gpu  # gpu_layout's argument of that name hides the function


def resident_slots(gpu_bytes: int | None, pod_bytes: int, pods_per_gpu: int) -> int:
    """Pods a GPU worker process may hold (one running, the others idle and resident):
    what its share of the GPU's memory holds after its CUDA context, at least one."""
    if not gpu_bytes:
        return 1
    share = GPU_MEMORY_SHARE * gpu_bytes / max(1, pods_per_gpu) - CUDA_CONTEXT
    fit = int(share // (2 * max(int(pod_bytes), 1) + CUDA_OVERHEAD))
    return max(1, min(MAX_RESIDENT, fit))


def gpu_layout(
    gpus: Sequence[int | str],
    gpu_memory: Sequence[int | None] | None = None,
    *,
    pod_bytes: int = DEFAULT_POD_BYTES,
    pods_per_gpu: int | None = None,
    cpus: int | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Nanny specs for a ``SpecCluster``: ``pods_per_gpu`` processes per GPU.

    Parameters
    ----------
    gpus
        The GPUs, as ``CUDA_VISIBLE_DEVICES`` names them (indices or ``GPU-...`` UUIDs).
    gpu_memory
        Each GPU's total memory in bytes (``None``: unknown), for the automatic
        ``pods_per_gpu`` (see :func:`pods_per_gpu`): the smallest GPU decides.
    pod_bytes
        A pod's estimated size.
    pods_per_gpu
        Processes per GPU (rounded down to a power of two); ``None``: from memory, and at
        most ``cpus`` per node in all (each process drives its GPU from one core).
    options
        Nanny options shared by every process (``memory_limit``, ``host``...).

    Returns
    -------
    dict
        ``{name: {"cls": Nanny, "options": {...}}}``, names ``"gpu<i>-<k>"``: one thread,
        ``CUDA_VISIBLE_DEVICES`` of its GPU alone, a ``GPU`` resource of
        ``1 / pods_per_gpu`` (a GPU's processes add up to one), one Inductor compile
        thread (:data:`COMPILE_THREADS`, unless ``TORCHINDUCTOR_COMPILE_THREADS`` is set
        here or in ``options["env"]``), and the worker settings of
        :func:`elegantpod.clusters.local.worker_settings` in its config.
    """
    gpus = [str(g) for g in gpus]
    if not gpus:
        raise ValueError("gpu_layout needs at least one GPU")
    if pods_per_gpu is not None and (
        isinstance(pods_per_gpu, bool) or not isinstance(pods_per_gpu, int) or pods_per_gpu < 1
    ):
        raise ValueError(f"pods_per_gpu must be an integer >= 1, got {pods_per_gpu!r}")
    known = [int(b) for b in (gpu_memory or ()) if b]
    n = _plan(pods_per_gpu, min(known, default=None), pod_bytes)
    if pods_per_gpu is None and cpus:  # each process drives its GPU from one core
        n = _plan(min(n, max(1, int(cpus) // len(gpus))), None, 0)
    base = dict(options or {})
    # a variable set here reaches the workers as it is (a Nanny inherits the environment)
    compile_env = (
        {}
        if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ
        else {"TORCHINDUCTOR_COMPILE_THREADS": COMPILE_THREADS}
    )
    specs = {}
    for i, gpu in enumerate(gpus):
        plugins = _affinity_plugins(gpu)
        for k in range(n):
            name = f"gpu{i}-{k}"
            opts = {
                **base,
                "name": name,
                "nthreads": GPU_THREADS,
                "env": {**compile_env, **base.get("env", {}), "CUDA_VISIBLE_DEVICES": gpu},
                "resources": {**base.get("resources", {}), "GPU": 1 / n},
                "config": {**base.get("config", {}), **worker_settings()},
            }
            if plugins:
                opts["plugins"] = {*base.get("plugins", ()), *plugins}
            specs[name] = {"cls": Nanny, "options": opts}
    return specs


def nvml_index(entry: str) -> int:
    """The NVML index of the GPU a ``CUDA_VISIBLE_DEVICES`` entry names: the number itself
    (NVML counts GPUs as CUDA does under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, as dask-cuda
    assumes too), or the index of the GPU with that ``GPU-...`` UUID.

    Why not the GPU's position in the list: with ``CUDA_VISIBLE_DEVICES=2,3`` the first
    GPU is NVML's 2, and the processes of GPU 2 were pinned to the cores of GPU 0."""
    entry = str(entry).strip()
    if entry.isdigit():
        return int(entry)
    import pynvml

    pynvml.nvmlInit()
    return int(pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(entry)))


def _affinity_plugins(gpu: str) -> set:
    """dask-cuda's CPU-affinity plugin for a GPU's processes (the cores nearest the GPU
    that ``gpu``, a ``CUDA_VISIBLE_DEVICES`` entry, names), where dask-cuda is installed
    and NVML answers; else none."""
    try:
        try:
            from dask_cuda.plugins import CPUAffinity
        except ImportError:
            from dask_cuda.utils import CPUAffinity
        from dask_cuda.utils import get_cpu_affinity

        return {CPUAffinity(get_cpu_affinity(nvml_index(gpu)))}
    except Exception:  # no dask-cuda, no NVML, a fake GPU list
        return set()


class GPUCluster(LocalCluster):
    """A local cluster whose workers are the processes of a :func:`gpu_layout`.

    ``LocalCluster``'s scheduler, security and host handling; the workers come from
    ``layout``, started with the worker settings of
    :func:`elegantpod.clusters.local.worker_settings`. ``scale(n)`` keeps the layout's first
    ``n`` processes (at most the layout: more would not fit the GPUs' memory plan).
    """

    def __init__(self, layout: dict[str, dict[str, Any]], *, memory_limit="auto", **kwargs):
        import dask
        from distributed.worker_memory import parse_memory_limit

        if not layout:
            raise ValueError("GPUCluster needs a layout with at least one process")
        self._layout = dict(layout)
        limit = parse_memory_limit(memory_limit, 1, total_cores=len(layout), logger=_logger)
        super().__init__(
            n_workers=0,
            threads_per_worker=GPU_THREADS,
            processes=True,
            memory_limit=limit,
            **kwargs,
        )
        dask.config.set({"distributed.worker.daemon": False})  # see cluster()
        with dask.config.set(worker_settings()):
            for name in self._layout:
                self.worker_spec.update(self._spec(name))
            try:
                self.sync(self._correct_state)
            except Exception:
                self.sync(self.close)
                self._loop_runner.stop()
                raise

    def _spec(self, name: str) -> dict[str, dict[str, Any]]:
        spec = self._layout[name]
        options = {**self.new_spec["options"], **spec["options"]}
        return {name: {"cls": spec["cls"], "options": options}}

    def scale(self, n=0, memory=None, cores=None):
        if n > len(self._layout):
            warnings.warn(
                f"this GPU node's layout has {len(self._layout)} worker processes; "
                f"scaling to {n} keeps {len(self._layout)}",
                stacklevel=2,
            )
        return super().scale(min(n, len(self._layout)), memory, cores)

    def new_worker_spec(self):
        for name in self._layout:  # the first process of the layout not running
            if name not in self.worker_spec:
                return self._spec(name)
        raise ValueError("every process of the GPU layout is running")


def gpu_count() -> int:
    """How many CUDA devices torch sees here (0 without torch's CUDA)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def visible_gpus() -> tuple[list[str], list[int | None]]:
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


def gpu_client(
    gpus: int | None = None,
    *,
    required: bool = False,
    pods_per_gpu: int | None = None,
    pod_bytes: int | None = None,
    dashboard_address: str | None = "127.0.0.1:0",
    memory_limit: str | float | None = "auto",
    start_timeout: float = 60.0,
    **kwargs,
) -> Client:
    """A client on a :class:`GPUCluster`: ``pods_per_gpu`` single-thread worker
    processes per GPU of this machine, each pinned to its GPU.

    What :func:`elegantpod.cluster` starts where torch sees CUDA devices.

    Parameters
    ----------
    gpus
        How many of the visible GPUs to use (``None``: all).
    required
        ``True`` (``cluster(gpu=True)``): a failure to start is a ``ValueError`` saying
        so; otherwise a ``RuntimeError`` that names ``cluster(gpu=False)``. Never a quiet
        fall back to the CPU.
    pods_per_gpu, pod_bytes
        The layout (:func:`gpu_layout`): processes per GPU, or as many as the smallest
        GPU's memory holds for pods of ``pod_bytes`` (``None``: 1 GiB).
    dashboard_address, memory_limit, **kwargs
        Passed to the ``LocalCluster`` under it.
    start_timeout
        Seconds the workers may take to start.

    Examples
    --------
    On a node with 2 GPUs (skipped here; the GPU check, ``benchmarks/gpu_check.sh``,
    starts one through ``cluster(gpu=True)``)::

        >>> from elegantpod.clusters.gpu import gpu_client
        >>> client = gpu_client(pods_per_gpu=4)  # doctest: +SKIP
        >>> len(client.scheduler_info()["workers"])  # 4 per GPU  # doctest: +SKIP
        8
    """
    n_gpus = gpu_count()
    try:
        names, memory = visible_gpus()
        use = min(len(names), int(gpus)) if gpus is not None else len(names)
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
        if required:
            raise ValueError(f"gpu=True but no GPU workers could start: {exc}") from exc
        raise RuntimeError(
            f"torch sees {n_gpus} CUDA device(s), but no GPU worker "
            f"could start: {exc}. cluster(gpu=False) starts CPU workers instead."
        ) from exc


MPS_PIPE_DIRECTORY = "/tmp/nvidia-mps"
"""Where ``nvidia-cuda-mps-control -d`` puts its control socket unless
``CUDA_MPS_PIPE_DIRECTORY`` says otherwise."""
_MPS_PROCESSES = ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")


def mps_running(pipe_dir: str | None = None) -> bool:
    """Whether a CUDA MPS control daemon answers on this machine.

    Its control socket (``control`` in ``pipe_dir``, ``$CUDA_MPS_PIPE_DIRECTORY`` or
    :data:`MPS_PIPE_DIRECTORY`) accepts a connection; else whether an MPS process runs.
    A socket left behind by a daemon that is gone refuses the connection.
    """
    directory = pipe_dir or os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DIRECTORY
    path = os.path.join(directory, "control")
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                s.connect(path)
                return True
    if pipe_dir is not None:
        return False
    return _mps_process()


def _mps_process() -> bool:
    import psutil

    return any(p.info.get("name") in _MPS_PROCESSES for p in psutil.process_iter(["name"]))


_mps_seen: tuple[float, bool] = (-float("inf"), False)


def mps_running_cached(seconds: float = 10.0) -> bool:
    """:func:`mps_running`, asked at most once per ``seconds`` (the dashboard polls)."""
    global _mps_seen
    t, seen = _mps_seen
    if time.monotonic() - t >= seconds:
        seen = mps_running()
        _mps_seen = (time.monotonic(), seen)
    return seen


def gpu_worker_info(memory: bool = True) -> dict[str, Any]:
    """On a worker: its GPU (host and ``CUDA_VISIBLE_DEVICES``), the GPU's total memory
    (``None`` without CUDA, or when ``memory`` is false: that imports torch) and whether
    CUDA MPS runs on its machine."""
    visible = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0]
    info: dict[str, Any] = {"gpu": f"{socket.gethostname()}:{visible}", "bytes": None}
    info["mps"] = mps_running()
    if not memory:
        return info
    import torch

    if torch.cuda.is_available():
        info["bytes"] = int(torch.cuda.get_device_properties(0).total_memory)
    return info
