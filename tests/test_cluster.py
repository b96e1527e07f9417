import time

import pytest

from elegantpod import cluster


def test_default_local_cluster_is_processes_on_loopback():
    c = cluster(n_workers=2)
    try:
        info = c.scheduler_info()
        assert len(info["workers"]) == 2
        assert all(w["nthreads"] == 1 for w in info["workers"].values())
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in info["workers"])
        assert c.scheduler.address.startswith("tcp://127.0.0.1:")
        assert "127.0.0.1" in c.dashboard_link
        pids = set(c.run(lambda: __import__("os").getpid()).values())
        assert len(pids) == 2 and __import__("os").getpid() not in pids
        # a pod may step a CPU env in processes of its own (gymnasium's async vector env)
        fut = c.submit(_async_env_steps, pure=False)
        assert fut.result(timeout=120) == (2, 4)
    finally:
        cl = c.cluster
        c.close()
        cl.close()


def test_existing_scheduler_by_address():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=True, host="127.0.0.1", dashboard_address=None) as lc:
        c = cluster(lc.scheduler_address)
        try:
            assert c.submit(lambda x: x + 1, 1).result() == 2
        finally:
            c.close()


def test_unreachable_address_is_a_clear_error():
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="no Dask scheduler reachable at 'tcp://127.0.0.1:9'"):
        cluster("tcp://127.0.0.1:9", timeout=2)
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 0}, "n_workers must be >= 1, got 0"),
        ({"threads_per_worker": 0}, "threads_per_worker must be >= 1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cluster(**kwargs)


def test_gpu_required_without_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="gpu=True"):
        cluster(gpu=True)


def _async_env_steps():
    import torch

    from elegantpod.envs import make_env

    env = make_env("CartPole-v1", num_envs=2, native=False, vectorization_mode="async")
    try:
        obs = env.reset(seed=0)
        env.step(torch.zeros(2, dtype=torch.int64))
        return tuple(obs.shape)
    finally:
        env.close()
