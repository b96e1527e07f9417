"""A GPU node's layout, one pod per process: built from fake GPU lists on CPU (a fake GPU
is just a ``CUDA_VISIBLE_DEVICES`` value to a worker that never touches CUDA)."""

import os
import shutil
import socket
import tempfile
import time

import dask
import pytest
from distributed import Client, get_worker

from elegantpod.clusters.gpu import (
    COMPILE_THREADS,
    CUDA_CONTEXT,
    GPUCluster,
    gpu_layout,
    gpu_worker_info,
    mps_running,
    pods_per_gpu,
    resident_slots,
)
from elegantpod.clusters.local import MMAP_THRESHOLD, TRIM_THRESHOLD
from elegantpod.tournament.client.gpu_plan import plan_gpus
from elegantpod.tournament.client.runner import cluster_info

GIB = 2**30


def test_layout_from_a_fake_gpu_list_is_single_thread_processes_pinned_per_gpu():
    layout = gpu_layout(["0", "GPU-5e1f"], pods_per_gpu=2, options={"memory_limit": 123})
    assert sorted(layout) == ["gpu0-0", "gpu0-1", "gpu1-0", "gpu1-1"]
    visible = {n: s["options"]["env"]["CUDA_VISIBLE_DEVICES"] for n, s in layout.items()}
    assert visible == {"gpu0-0": "0", "gpu0-1": "0", "gpu1-0": "GPU-5e1f", "gpu1-1": "GPU-5e1f"}
    for name, spec in layout.items():
        options = spec["options"]
        assert spec["cls"].__name__ == "Nanny"
        assert options["name"] == name and options["nthreads"] == 1
        assert options["resources"] == {"GPU": 0.5}  # a GPU's two processes add up to one
        assert options["memory_limit"] == 123
        # the CPU branch's worker settings
        assert options["config"]["distributed.worker.profile.enabled"] is False
        environ = options["config"]["distributed.nanny.pre-spawn-environ"]
        assert environ["MALLOC_TRIM_THRESHOLD_"] == TRIM_THRESHOLD
        assert environ["MALLOC_MMAP_THRESHOLD_"] == MMAP_THRESHOLD
    with pytest.raises(ValueError, match="pods_per_gpu must be an integer >= 1"):
        gpu_layout(["0"], pods_per_gpu=0)
    with pytest.raises(ValueError, match="at least one GPU"):
        gpu_layout([])


def test_gpu_workers_compile_with_one_thread_unless_the_user_set_it(monkeypatch):
    # Inductor forks min(32, cores) compile workers per compiling process otherwise
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    options = gpu_layout(["0"], pods_per_gpu=2)["gpu0-1"]["options"]
    assert options["env"]["TORCHINDUCTOR_COMPILE_THREADS"] == COMPILE_THREADS == "1"
    given = gpu_layout(["0"], options={"env": {"TORCHINDUCTOR_COMPILE_THREADS": "4"}})
    assert given["gpu0-0"]["options"]["env"]["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")  # inherited as it is
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in gpu_layout(["0"])["gpu0-0"]["options"]["env"]


def test_pods_per_gpu_from_memory_counts_each_process_cuda_context():
    assert CUDA_CONTEXT == 512 * 2**20
    # 24 GiB, 2 GiB pods: 0.8 * 24 / (2 * 2 + 0.5 + 0.5) = 3.8 processes -> 2 (without
    # the context it was 4.3 -> 4)
    assert pods_per_gpu(None, 24 * GIB, 2 * GIB) == 2
    assert pods_per_gpu(None, 141 * GIB, 100 * 2**20) == 8  # the automatic cap
    assert pods_per_gpu(None, 141 * GIB, 100 * 2**20, processes=4) == 4  # the processes
    assert pods_per_gpu(None, 8 * GIB, 2 * GIB) == 1  # memory bounds it
    assert pods_per_gpu(None, 4 * GIB, 4 * GIB) == 1  # never less than one
    assert pods_per_gpu(None, None, 10**6) == 1  # memory unknown: one
    assert pods_per_gpu(3, 141 * GIB, 1) == 2  # given: a power of two
    # the layout: the smallest GPU decides, and at most the cores per GPU
    layout = gpu_layout(["0", "1"], [24 * GIB, 80 * GIB], pod_bytes=2 * GIB)
    assert len(layout) == 4 and layout["gpu1-1"]["options"]["resources"] == {"GPU": 0.5}
    assert len(gpu_layout(["0", "1"], [141 * GIB] * 2, pod_bytes=2**20, cpus=4)) == 4
    assert len(gpu_layout(["0"], [141 * GIB], pod_bytes=2**20, cpus=64)) == 8


def test_resident_pods_per_process_fit_its_share_after_its_context():
    # 141 GiB / 8 processes: 14.1 GiB each, 13.6 after the context, 0.7 GiB per 100 MiB pod
    assert resident_slots(141 * GIB, 100 * 2**20, 8) == 19
    assert resident_slots(141 * GIB, 2**20, 1) == 32  # the cap
    assert resident_slots(24 * GIB, 2 * GIB, 2) == 2
    assert resident_slots(8 * GIB, 4 * GIB, 1) == 1  # at least the running one
    assert resident_slots(None, 2**20, 4) == 1  # memory unknown


def _workers(layout, base=40000):
    """The scheduler's view of a layout's workers, by made-up addresses."""
    return {
        f"tcp://10.0.0.1:{base + i}": {
            "name": name,
            "nthreads": spec["options"]["nthreads"],
            "resources": spec["options"]["resources"],
        }
        for i, (name, spec) in enumerate(sorted(layout.items()))
    }


def test_plan_routes_segments_to_as_many_processes_per_gpu_as_fit():
    workers = _workers(gpu_layout(["0", "1"], pods_per_gpu=4))
    found = {
        a: {"gpu": f"node:{w['name'][3]}", "bytes": 24 * GIB, "mps": False}
        for a, w in workers.items()
    }
    # 2 GiB pods: two fit a 24 GiB GPU, so two of each GPU's four processes take segments
    plan = plan_gpus(workers, found, None, 2 * GIB)
    assert plan.pods_per_gpu == 2 and plan.share == 0.25 and plan.resident_slots == 2
    assert sorted(plan.workers) == ["gpu0-0", "gpu0-1", "gpu1-0", "gpu1-1"]
    assert plan.mps is False and plan.gpu_bytes == 24 * GIB
    # small pods: all four processes, each with pods resident
    plan = plan_gpus(workers, found, None, 2**20)
    assert plan.pods_per_gpu == 4 and plan.workers is None and plan.resident_slots == 8
    # the spec's pods_per_gpu, and MPS reported by any worker
    found[next(iter(found))]["mps"] = True
    plan = plan_gpus(workers, found, 1, 2**20)
    assert sorted(plan.workers) == ["gpu0-0", "gpu1-0"] and plan.mps is True
    # a worker of another deployment (one per GPU, several threads): one pod at a time
    other = {"tcp://10.0.0.2:1": {"name": 0, "nthreads": 4, "resources": {"GPU": 1}}}
    info = {"tcp://10.0.0.2:1": {"gpu": "box:", "bytes": None, "mps": False}}
    plan = plan_gpus(other, info, None, 2**20)
    assert (plan.pods_per_gpu, plan.share, plan.workers) == (1, 1.0, None)


@pytest.fixture
def pipe_dir(monkeypatch):
    # a short path: a unix socket's path is limited to about 100 bytes
    path = tempfile.mkdtemp(prefix="mps", dir="/tmp")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_mps_detected_by_its_control_socket(pipe_dir):
    assert mps_running(pipe_dir) is False  # no control socket
    control = os.path.join(pipe_dir, "control")
    with open(control, "w"):
        pass
    assert mps_running(pipe_dir) is False  # a plain file is not the daemon
    os.unlink(control)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(control)  # left behind by a daemon that is gone: refuses connections
    try:
        assert mps_running(pipe_dir) is False
    finally:
        stale.close()
        os.unlink(control)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.bind(control)
        daemon.listen(1)
        assert mps_running(pipe_dir) is True
        assert mps_running() is True  # found through CUDA_MPS_PIPE_DIRECTORY


def test_a_fake_gpu_layout_starts_one_single_thread_worker_per_process():
    t0 = time.monotonic()
    layout = gpu_layout(["0", "1"], pods_per_gpu=2)
    with GPUCluster(layout, dashboard_address=None, memory_limit="1 GiB") as lc, Client(lc) as c:
        workers = c.scheduler_info(n_workers=-1)["workers"]
        assert sorted(w["name"] for w in workers.values()) == sorted(layout)
        assert all(w["nthreads"] == 1 for w in workers.values())
        assert all(w["resources"] == {"GPU": 0.5} for w in workers.values())
        names = {a: w["name"] for a, w in workers.items()}
        visible = c.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"])
        assert {names[a]: v for a, v in visible.items()} == {
            "gpu0-0": "0",
            "gpu0-1": "0",
            "gpu1-0": "1",
            "gpu1-1": "1",
        }
        settings = c.run(
            lambda: (
                os.environ["MALLOC_TRIM_THRESHOLD_"],
                os.environ["MALLOC_MMAP_THRESHOLD_"],
                dask.config.get("distributed.worker.profile.enabled"),
            )
        )
        assert set(settings.values()) == {(str(TRIM_THRESHOLD), str(MMAP_THRESHOLD), False)}
        info = cluster_info(c)
        assert (info["gpus"], info["gpu_processes"], info["pods_per_gpu"]) == (2, 4, 2)
        assert info["mps"] in (True, False)  # asked on this machine
        # one pod per GPU at most: segments go to one process of each fake GPU
        found = c.run(gpu_worker_info, False)
        plan = plan_gpus(workers, found, 1, 2**20)
        chosen = {names[a]: v for a, v in visible.items() if names[a] in plan.workers}
        assert len(chosen) == 2 and set(chosen.values()) == {"0", "1"}

        # as the tournament submits: at most one segment per chosen process in flight
        # (its capacity), loosely restricted so that a restarted worker never strands one
        def where():  # local: pickled by value, so workers never import this module
            time.sleep(0.2)
            return get_worker().name, os.environ["CUDA_VISIBLE_DEVICES"]

        ran = set()
        for _ in range(2):
            futures = [
                c.submit(
                    where,
                    resources={"GPU": plan.share},
                    workers=plan.workers,
                    allow_other_workers=True,
                    pure=False,
                )
                for _ in plan.workers
            ]
            ran |= {f.result(timeout=30) for f in futures}
        assert ran == set(chosen.items())
        with pytest.warns(UserWarning, match="layout has 4 worker processes"):
            lc.scale(8)  # more than the GPUs' memory plan: kept at the layout
        assert len(lc.worker_spec) == 4
    assert time.monotonic() - t0 < 60  # about 7 s on 2 busy cores


def _uuid(index: int) -> str:
    import torch

    return _normal(str(torch.cuda.get_device_properties(index).uuid))


def _normal(uuid: str) -> str:
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


def _visible_gpu() -> dict:
    """On a worker: its CUDA_VISIBLE_DEVICES entry, the UUID of the GPU it computes on."""
    import torch

    return {
        "pid": os.getpid(),
        "count": torch.cuda.device_count(),
        "visible": (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0],
        "uuid": _uuid(0),
    }


@pytest.mark.gpu
def test_cluster_on_a_gpu_node_runs_pods_per_gpu_processes_on_their_gpu():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from elegantpod import cluster

    c = cluster(dashboard_address=None, gpu=True, pods_per_gpu=2)
    try:
        workers = c.scheduler_info(n_workers=-1)["workers"]
        assert len(workers) == 2 * torch.cuda.device_count()
        assert all(w["nthreads"] == 1 for w in workers.values())
        seen = c.run(_visible_gpu)
        assert {r["count"] for r in seen.values()} == {1}  # each process sees its GPU alone
        assert len({r["pid"] for r in seen.values()}) == len(workers)
        # pinned where the plan says: the GPU a worker computes on is the one its
        # CUDA_VISIBLE_DEVICES entry names (by UUID, as NVML and torch give it). A device
        # count alone passed on a one-GPU machine whether or not the variable took effect;
        # this fails there too when a worker has no entry or its entry is not its GPU.
        uuids = {str(i): _uuid(i) for i in range(torch.cuda.device_count())}
        for r in seen.values():
            entry = r["visible"]
            assert entry, "a GPU worker without CUDA_VISIBLE_DEVICES"
            assert r["uuid"] == uuids.get(entry, _normal(entry)), r
        per_gpu = {}
        for r in seen.values():
            per_gpu[r["uuid"]] = per_gpu.get(r["uuid"], 0) + 1
        assert sorted(per_gpu.values()) == [2] * torch.cuda.device_count()
        info = cluster_info(c)
        assert info["gpus"] == torch.cuda.device_count() and info["pods_per_gpu"] == 2
    finally:
        cl = c.cluster
        c.close()
        cl.close()


def test_cpu_affinity_follows_the_gpu_a_process_is_pinned_to_not_its_place_in_the_list():
    """With CUDA_VISIBLE_DEVICES=2,3 the first GPU is NVML's 2: its processes were given
    the cores of GPU 0 (the list position was passed as the NVML index)."""
    from elegantpod.clusters.gpu import nvml_index

    assert [nvml_index(g) for g in ("2", "3", " 7")] == [2, 3, 7]
    layout = gpu_layout(["2", "3"], pods_per_gpu=1)
    assert [s["options"]["env"]["CUDA_VISIBLE_DEVICES"] for s in layout.values()] == ["2", "3"]
