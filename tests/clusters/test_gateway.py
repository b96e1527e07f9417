"""``elegantpod.cluster(gateway=...)`` against a real dask-gateway-server on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from elegantpod import Tournament, cluster, gateway_cluster, shutdown
from elegantpod.clusters.gateway import close_gateway
from tests.helpers import wait_until
from tests.servers import gateway_clusters, gateway_server, processes_under

pytest.importorskip("dask_gateway_server")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with gateway_server(tmp_path_factory.mktemp("gateway")) as (address, workdir):
        yield address, workdir


def _gateway_clusters(address):
    return gateway_clusters(address)


def test_bad_gateway_arguments_fail_before_contacting_anything():
    # a listening socket counts the connections the bad calls make: there must be none
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        there = f"http://127.0.0.1:{port}"
        with pytest.raises(ValueError, match="http"):
            cluster(gateway=f"127.0.0.1:{port}")
        with pytest.raises(ValueError, match="n_workers must be an integer >= 0, got -1"):
            cluster(gateway=there, n_workers=-1)
        with pytest.raises(ValueError, match=r"adapt must be .*got \(3, 1\)"):
            cluster(gateway=there, adapt=(3, 1))
        with pytest.raises(ValueError, match="not both"):
            cluster(f"tcp://127.0.0.1:{port}", gateway=there)
        with pytest.raises(ValueError, match="no gateway is configured"):
            cluster(gateway=True)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected


def test_unreachable_gateway_is_a_clear_error():
    with pytest.raises(ValueError, match="no Dask Gateway answering at 'http://127.0.0.1:9'"):
        cluster(gateway="http://127.0.0.1:9", auth="basic")


def test_cluster_options_scale_reconnect_and_shutdown(gateway):
    address, workdir = gateway
    with pytest.raises(ValueError, match=r"no cluster option 'worker_gpus'.*worker_cores"):
        cluster(gateway=address, auth="basic", worker_gpus=1)
    with pytest.raises(ValueError, match="worker_cores=5"):
        cluster(gateway=address, auth="basic", worker_cores=5)
    assert _gateway_clusters(address) == []  # nothing was started by the bad calls
    c = cluster(gateway=address, auth="basic", worker_cores=1, worker_memory=1.5, n_workers=2)
    try:
        c.wait_for_workers(2, timeout=90)
        workers = c.scheduler_info(n_workers=-1)["workers"].values()
        assert all(w["nthreads"] == 1 for w in workers)
        assert all(abs(w["memory_limit"] - 1.5 * 2**30) < 2**20 for w in workers)
        assert c.submit(lambda x: x + 1, 1).result(timeout=60) == 2
        name = c.cluster.name
        # a second kernel reconnects by name; closing it leaves the cluster running
        again = gateway_cluster(address, name=name, auth="basic")
        assert again.submit(lambda: 7).result(timeout=60) == 7
        again.close()
        again.cluster.close()
        close_gateway(again.cluster.gateway)
        assert _gateway_clusters(address) == [name]
        with pytest.raises(ValueError, match="no running gateway cluster named 'nope'"):
            gateway_cluster(address, name="nope", auth="basic")
        # adaptive scaling is the gateway's
        c.cluster.adapt(minimum=1, maximum=2)
    finally:
        shutdown(c)
    wait_until(lambda: _gateway_clusters(address) == [], timeout=60)
    wait_until(lambda: not processes_under(workdir), timeout=60)


# A kernel that dropped a Gateway without closing it (one made to list the user's
# clusters, say), then asks for a cluster. The collector runs at every allocation
# (threshold 1); a gc callback plays the collector finding the dropped Gateway: when a
# collection starts while distributed's LoopRunner lock is held (a Gateway,
# GatewayCluster or Client starting), the last reference goes, and Gateway.__del__ runs
# right there, inside the new one's start. Before elegantpod.clusters.gc_pause that deadlocked
# (its close waits for the lock this thread holds) or, when the collection ran on the
# new IO-loop thread, failed after 10 s.
DROPPED_GATEWAY_KERNEL = """
import faulthandler, gc, sys, threading
faulthandler.dump_traceback_later(90, exit=True)  # a deadlock: every stack, exit 1
from dask_gateway import Gateway
from distributed.utils import LoopRunner
from elegantpod import cluster, shutdown

address = sys.argv[1]
listing = Gateway(address, auth="basic")
print("clusters before:", len(listing.list_clusters()))
dropped = [listing]  # never closed; only the hook below holds it
del listing
fired = []

def collector_finds_the_dropped_gateway(phase, info):
    if phase == "start" and dropped and LoopRunner._lock.locked():
        fired.append(threading.current_thread().name)
        dropped.clear()  # its __del__ runs now, inside this collection

gc.callbacks.append(collector_finds_the_dropped_gateway)
gc.set_threshold(1)
try:
    client = cluster(gateway=address, auth="basic")
finally:
    gc.set_threshold(700, 10, 10)
    gc.callbacks.remove(collector_finds_the_dropped_gateway)
assert client.scheduler_info()["type"] == "Scheduler"  # connected
shutdown(client)
print("collections under the LoopRunner lock:", fired)
dropped.clear()  # finalised here, outside any start
gc.collect()
print("ok")
"""


def test_a_dropped_gateway_cannot_deadlock_the_next_cluster_call(gateway, tmp_path):
    address, workdir = gateway
    script = tmp_path / "kernel.py"
    script.write_text(textwrap.dedent(DROPPED_GATEWAY_KERNEL))
    try:
        out = subprocess.run(
            [sys.executable, str(script), address],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the second cluster(gateway=...) hung:\n{exc.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr[-6000:]
    assert "collections under the LoopRunner lock: []" in out.stdout
    assert out.stdout.rstrip().endswith("ok")
    wait_until(lambda: _gateway_clusters(address) == [], timeout=60)
    wait_until(lambda: not processes_under(workdir), timeout=60)


def test_a_failed_gateway_start_is_closed_at_once():
    """The retry's failed Gateway is closed there, not left for the collector."""
    from dask_gateway import Gateway

    from elegantpod.clusters.gateway import _gateway_client

    made = []

    class FailingGateway(Gateway):  # a real Gateway whose loop start fails after it began
        def __init__(self, *args, **kwargs):
            made.append(self)
            super().__init__(*args, **kwargs)
            raise AssertionError  # as LoopRunner.start does when its thread is late

    with pytest.raises(RuntimeError, match="could not start its IO loop"):
        _gateway_client(FailingGateway, "http://127.0.0.1:9", None, "basic")
    assert len(made) == 2
    assert not any(hasattr(g, "_loop_runner") for g in made)  # closed, runner dropped


def _busy_worker(t, client):
    """A worker running one of the tournament's segments (or None)."""
    prefix = f"elegantpod-{t.id}-"
    for w, keys in client.processing().items():
        if any(str(k).startswith(prefix) for k in keys):
            return w
    return None


@pytest.mark.slow
def test_tournament_on_gateway_survives_a_killed_worker(gateway, tmp_path):
    address, workdir = gateway
    c = gateway_cluster(address, auth="basic", n_workers=2)
    c.close()  # a client that is not the default one: the orchestrator must not need it
    c = c.cluster.get_client(set_as_default=False)
    try:
        c.wait_for_workers(2, timeout=90)
        t = Tournament(
            env="CartPole-v1",
            algos=["ppo"],
            pods=2,
            max_steps=60_000,
            segment_steps=16384,
            eval_episodes=2,
            hparams={"ppo": {"num_envs": 16, "horizon": 16}},
            store=tmp_path / "store",
            client=c,
        )
        # the dashboard's cluster panel reads the gateway cluster and can scale it
        info = t.cluster_info()
        assert info["workers"] == 2 and info["can_scale"]
        assert info["dashboard"] and "127.0.0.1" in info["dashboard"]
        t.start()
        # kill a worker that is mid-segment: the scheduler's own events count the death
        assert wait_until(lambda: _busy_worker(t, c) is not None, timeout=120)
        worker = _busy_worker(t, c)
        pid = c.run(os.getpid, workers=[worker])[worker]
        os.kill(pid, signal.SIGKILL)
        s = t.wait(timeout=300)
        assert s["status"] == "finished", s["error"]
        assert s["pods_failed"] == 0 and s["env_steps_total"] >= 60_000
        assert s["worker_deaths_survived"] >= 1
        assert worker not in c.scheduler_info(n_workers=-1)["workers"]
        # the dashboard's cluster panel shows the gateway cluster; its button scales it
        d = t.dashboard(refresh_seconds=3600)
        try:
            d.refresh()
            assert "workers 2" in d.cluster.value and "Dask dashboard" in d.cluster.value
            assert not d.scale_up.disabled
            d.scale_up.click()
            c.wait_for_workers(3, timeout=90)
            d.refresh()
            assert "workers 3" in d.cluster.value
        finally:
            d.close()
        assert len(t.leaderboard) >= 1
        t.best()  # the best checkpoint loads
    finally:
        shutdown(c)
    wait_until(lambda: _gateway_clusters(address) == [], timeout=60)
    wait_until(lambda: not processes_under(workdir), timeout=60)
