"""Resident pods: kept on their worker between segments, exactly as good as rebuilt ones."""

import os
import shutil
import signal

import pytest
import torch

from elegantpod import Tournament, cluster
from elegantpod.agents.ppo import PPOConfig
from elegantpod.agents.sac import SACConfig
from elegantpod.clusters.gpu import pods_per_gpu
from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import load_checkpoint
from elegantpod.tournament.core.generator import GeneratorConfig
from elegantpod.tournament.store.store import Store
from elegantpod.tournament.worker import resident
from elegantpod.tournament.worker.segment import SegmentTask, run_segment
from tests.helpers import wait_until
from tests.tournament.test_orchestrator import TINY_PPO

SPECS = {
    "ppo": PodSpec(
        env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(num_envs=8, horizon=32), seed=3
    ),
    "sac": PodSpec(
        env_id="Pendulum-v1",
        algo="sac",
        hparams=SACConfig(num_envs=4, learning_starts=64, batch_size=32),
        seed=4,
    ),
}


def task(store, spec, seg, resume_from=None, tid="t"):
    return SegmentTask(
        tournament_id=tid,
        pod_id="p000",
        segment=seg,
        spec_json=spec.to_json(),
        checkpoint=store.checkpoint("p000", seg),
        resume_from=resume_from,
        segment_steps=512,
    )


def weights(path):
    learner = load_checkpoint(path)["learner"]
    return {k: v for k, v in learner.items() if isinstance(v, dict)}


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_resident_pod_continues_exactly_as_a_rebuilt_one(tmp_path, algo):
    spec = SPECS[algo]
    store = Store(tmp_path / "a")
    store.ensure()
    first = run_segment(task(store, spec, 1, tid=algo))
    assert first.rebuilt and resident.resident(algo) == [(algo, "p000", first.checkpoint)]
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same state, for the rebuilt side
    kept = run_segment(task(store, spec, 2, first.checkpoint, tid=algo))
    assert not kept.rebuilt  # it was resident
    other = Store(tmp_path / "b")
    rebuilt = run_segment(task(other, spec, 2, other.checkpoint("p000", 1), tid=f"{algo}-b"))
    assert rebuilt.rebuilt
    assert kept.env_steps == rebuilt.env_steps
    assert kept.score_mean == rebuilt.score_mean
    assert same(weights(kept.checkpoint), weights(rebuilt.checkpoint))
    resident.drop()


def test_a_resident_pod_is_rebuilt_when_its_checkpoint_moved_on(tmp_path):
    spec = SPECS["ppo"]
    store = Store(tmp_path / "s")
    store.ensure()
    first = run_segment(task(store, spec, 1))
    second = run_segment(task(store, spec, 2, first.checkpoint))
    assert not second.rebuilt
    # segment 3 resumes from segment 1 (as after a lost result elsewhere): not the state
    # the resident pod holds, so it is rebuilt from that checkpoint
    third = run_segment(task(store, spec, 3, first.checkpoint))
    assert third.rebuilt and third.env_steps == second.env_steps
    # a structural change (another network) is never served by a resident pod
    bigger = PodSpec(
        env_id="CartPole-v1",
        algo="ppo",
        hparams=PPOConfig(num_envs=8, horizon=32, hidden=(32,)),
        seed=3,
    )
    fresh = run_segment(task(store, bigger, 1, tid="u"))
    assert fresh.rebuilt
    assert resident.drop() == 2
    # a rerun of a segment whose checkpoint exists uses that checkpoint, not the pod in
    # memory (the first run's result was lost; this worker holds an older state)
    run_segment(task(store, spec, 1, tid="v"))
    again = run_segment(task(store, spec, 2, store.checkpoint("p000", 1), tid="v"))
    assert again.rebuilt and again.env_steps == second.env_steps
    assert again.score_mean == second.score_mean  # the same evaluation, repeated
    resident.drop()


def test_a_tournament_that_ended_keeps_no_pod(tmp_path):
    store = Store(tmp_path / "s")
    store.ensure()
    resident.drop("ended")  # it ended while its last segment still ran
    late = run_segment(task(store, SPECS["ppo"], 1, tid="ended"))
    assert late.env_steps > 0 and resident.resident("ended") == []
    resident.drop()


def test_resident_pods_per_process_are_bounded(tmp_path):
    store = Store(tmp_path / "s")
    store.ensure()
    for i in range(3):
        t = SegmentTask(
            tournament_id="bound",
            pod_id=f"p00{i}",
            segment=1,
            spec_json=SPECS["ppo"].to_json(),
            checkpoint=store.checkpoint(f"p00{i}", 1),
            segment_steps=256,
            resident_slots=2,
        )
        run_segment(t)
    assert [p for _, p, _ in resident.resident("bound")] == ["p001", "p002"]  # oldest went
    assert resident.drop("bound") == 2


def test_pods_per_gpu_packing_arithmetic():
    # one pod per process: each also pays its CUDA context (see tests/clusters/test_gpu.py)
    gib = 2**30
    assert pods_per_gpu(None, None, 10**6, processes=4) == 1  # memory unknown: one
    assert pods_per_gpu(None, 141 * gib, 100 * 2**20, processes=4) == 4  # processes bound it
    assert pods_per_gpu(None, 141 * gib, 100 * 2**20, processes=16) == 8  # the automatic cap
    assert pods_per_gpu(None, 8 * gib, 2 * gib, processes=8) == 1  # memory bounds it
    assert pods_per_gpu(None, 24 * gib, 2 * gib, processes=8) == 2  # 3.8 fit: a power of two
    assert pods_per_gpu(3, 141 * gib, 1, processes=8) == 2  # given: still a power of two
    assert pods_per_gpu(16, 141 * gib, 1, processes=4) == 4  # never more than processes


@pytest.mark.slow
def test_on_a_cluster_a_moved_pod_is_rebuilt_and_matches_the_resident_one(client, tmp_path):
    spec = SPECS["ppo"]
    a, b = sorted(client.scheduler_info(n_workers=-1)["workers"])
    store = Store(tmp_path / "a")
    store.ensure()

    def on(worker, t):
        return client.submit(run_segment, t, workers=[worker], pure=False).result()

    first = on(a, task(store, spec, 1, tid="cluster"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    stayed = on(a, task(store, spec, 2, first.checkpoint, tid="cluster"))
    other = Store(tmp_path / "b")
    moved = on(b, task(other, spec, 2, other.checkpoint("p000", 1), tid="cluster"))
    assert (first.rebuilt, stayed.rebuilt, moved.rebuilt) == (True, False, True)
    assert stayed.env_steps == moved.env_steps and stayed.score_mean == moved.score_mean
    assert same(weights(stayed.checkpoint), weights(moved.checkpoint))
    assert sum(client.run(resident.drop, "cluster").values()) == 2


@pytest.mark.slow
def test_pods_stay_resident_on_their_workers_and_a_killed_worker_costs_one_segment(tmp_path):
    seg = 16384
    c = cluster(n_workers=2, dashboard_address=None)
    try:
        t = Tournament(
            "CartPole-v1",
            ["ppo"],
            2,
            store=tmp_path / "s",
            client=c,
            max_seconds=120,
            # never reached: near a spent budget a segment is cut short (see below)
            max_steps=1000 * seg,
            segment_steps=seg,
            hparams=TINY_PPO,
            generator=GeneratorConfig(ready_segments=10**6),  # the same two pods throughout
        )
        t.start()
        assert wait_until(lambda: t.pod("p000")["segment"] >= 5, 90)
        # only each pod's first segment builds it: they return to their workers
        assert t.summary()["resident_share"] >= 0.6
        prefix = f"elegantpod-{t.id}-p000-s"

        def running():  # (worker, segment) of p000's segment in flight, per the scheduler
            for w, keys in c.processing().items():
                for k in keys:
                    if str(k).startswith(prefix):
                        return w, int(str(k)[len(prefix) :].split("-")[0])
            return None

        assert wait_until(lambda: running() is not None, 30)
        victim, nxt = running()
        os.kill(c.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)

        def ends():
            curves = t.curves("p000")
            return {m["segment"]: m["env_steps"] for m in curves if m["type"] == "segment_end"}

        assert wait_until(lambda: nxt in ends(), 60)  # the killed segment ran again
        t.stop()
        s = t.wait(120)
        assert s["status"] == "stopped" and s["pods_failed"] == 0
        assert s["worker_deaths_survived"] >= 1
        ends = ends()
        # the re-run of the killed segment continued from the checkpoint before it
        assert ends[nxt] == ends[nxt - 1] + seg
    finally:
        cl = c.cluster
        c.close()
        cl.close()


@pytest.mark.gpu
def test_a_default_tournament_on_a_gpu_cluster_trains_on_the_gpu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    pytest.importorskip("dask_cuda")
    c = cluster(dashboard_address=None)
    try:
        t = Tournament(
            "CartPole-v1", ["ppo"], 2, store=tmp_path / "s", client=c, max_steps=4 * 8192
        )
        t.start()
        s = t.wait(300)
        assert s["status"] == "finished"
        assert t.cluster_info()["pods_per_gpu"] >= 1
        best = t.best()
        assert next(best.learner.actor.parameters()).device.type == "cuda"
    finally:
        cl = c.cluster
        c.close()
        cl.close()
