"""What a tournament's cluster has and does, for the dashboard and ``cluster_info()``:
the cluster's own figures with the tournament's runner's on top (pod slots, pods in
flight, pods per GPU as planned, CUDA MPS as asked on the GPU workers' machines)."""

from __future__ import annotations

from typing import Any

from elegantpod.tournament.runner import cluster_info


def tournament_cluster_info(client, runner) -> dict[str, Any]:
    """The cluster's figures (zeros before a client exists) and the ``runner``'s (the
    current run's, or ``None`` when not running)."""
    info = {"workers": 0, "threads": 0, "memory_bytes": 0, "gpus": 0, "dashboard": None}
    info.update({"gpu_processes": 0, "mps": None, "can_scale": False})
    if client is not None:
        info.update(cluster_info(client))
    info["pods_in_flight"] = runner.in_flight() if runner is not None else 0
    info["pods_per_gpu"] = runner.pods_per_gpu if runner is not None and info["gpus"] else 0
    if runner is not None and runner.mps is not None:
        info["mps"] = runner.mps  # asked on the GPU workers' own machines
    info["slots"] = runner.capacity()[0] if runner is not None else None
    return info


def scale_cluster(client, n_workers: int) -> None:
    """Ask ``client``'s cluster for ``n_workers`` workers; ``ValueError`` for a bad count
    or a cluster that cannot be scaled from here."""
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
        raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
    cluster = getattr(client, "cluster", None)
    if cluster is None or not hasattr(cluster, "scale"):
        raise ValueError("this client's cluster cannot be scaled from here")
    cluster.scale(n_workers)
