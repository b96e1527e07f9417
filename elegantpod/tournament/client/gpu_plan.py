"""How a tournament packs its pods on GPU worker processes: pure, on the client.

Why apart from the runner: the plan is a function of what the scheduler and the workers
said (their resource tables and each process's GPU), with no Dask call and no state, so
it is tested exactly from plain dicts; the runner asks the cluster and hands the answers
in. The memory arithmetic (pods per GPU, resident slots) is
:mod:`elegantpod.clusters.gpu`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from elegantpod.clusters.gpu import pods_per_gpu, resident_slots


@dataclass(frozen=True)
class GpuPlan:
    """How a tournament uses GPU worker processes (see :func:`plan_gpus`)."""

    pods_per_gpu: int
    resident_slots: int
    share: float
    """The ``GPU`` resource a segment asks for: the smallest process's own share."""
    workers: list[str] | None
    """The processes segments go to (``pods_per_gpu`` of each GPU); ``None``: all."""
    mps: bool
    gpu_bytes: int | None


def plan_gpus(
    workers: dict[str, dict],
    found: dict[str, dict],
    given: int | None,
    pod_bytes: int,
    gpu_bytes: int | None = None,
) -> GpuPlan:
    """Plan one pod per GPU worker process from the scheduler's ``workers`` (those with a
    ``GPU`` resource) and what each said of its GPU (``found``, from
    :func:`~elegantpod.clusters.gpu.gpu_worker_info`); ``gpu_bytes``: a GPU's memory if
    already known.

    A GPU's processes (same host and ``CUDA_VISIBLE_DEVICES``) run at most
    ``pods_per_gpu`` pods at once: when fewer fit its memory (or ``given``) than it has
    processes, segments go to that many of them. Each keeps as many pods resident as its
    share of the GPU's memory holds (:func:`~elegantpod.clusters.gpu.resident_slots`).
    """
    if gpu_bytes is None:
        gpu_bytes = min((i["bytes"] for i in found.values() if i.get("bytes")), default=None)
    gpus: dict[str, list[str]] = {}
    for address in sorted(found):
        gpus.setdefault(found[address]["gpu"], []).append(address)
    n = pods_per_gpu(given, gpu_bytes, pod_bytes, min(map(len, gpus.values()), default=1))
    chosen = None
    if any(len(a) > n for a in gpus.values()):
        # by name where it is one: a restarted worker keeps its name, not its address
        chosen = [worker_ref(a, workers[a]) for group in gpus.values() for a in group[:n]]
    return GpuPlan(
        pods_per_gpu=n,
        resident_slots=resident_slots(gpu_bytes, pod_bytes, n),
        share=min(float(w["resources"]["GPU"]) for w in workers.values()),
        workers=chosen,
        mps=any(i.get("mps") for i in found.values()),
        gpu_bytes=gpu_bytes,
    )


def worker_ref(address: str, worker: dict) -> str:
    """How a submission names a worker: its name where that is a string, else its address."""
    name = worker.get("name")
    return name if isinstance(name, str) and name else address
