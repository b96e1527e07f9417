"""A tournament whose store is a bucket on a real S3-compatible server (moto, via s3fs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from elegantpod import Pod, Tournament, cluster
from elegantpod.pod.checkpoint import load_checkpoint
from elegantpod.tournament.store.store import Store

CLIENT = textwrap.dedent(
    """
    import sys, time
    from distributed import Client
    from elegantpod import Tournament

    client = Client(sys.argv[1])
    t = Tournament(
        env="CartPole-v1", algos=["ppo"], pods=3, store=sys.argv[2], client=client,
        max_steps=10_000_000, segment_steps=2048, eval_episodes=2,
        hparams={"ppo": {"num_envs": 16, "horizon": 16}},
    )
    t.start()
    print("started", flush=True)
    while True:
        time.sleep(1)
    """
)


@pytest.mark.slow
def test_tournament_on_s3_resumes_after_its_client_is_killed(s3, tmp_path):
    url = f"s3://elegantpod-test/{uuid.uuid4().hex}/t1"
    # the workers reach the bucket the way cloud workers do: through their environment
    c = cluster(n_workers=2, dashboard_address=None, env=dict(s3))
    try:
        address = c.scheduler.address
        p = subprocess.Popen(
            [sys.executable, "-c", CLIENT, address, url],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        try:
            assert p.stdout.readline().strip() == "started"
            deadline = time.monotonic() + 120
            while True:
                saved = Store(url).load_state()
                if saved and len(saved["leaderboard"]) >= 2:
                    break
                assert time.monotonic() < deadline, "no leaderboard in the bucket"
                time.sleep(0.3)
            time.sleep(0.5)
        finally:
            p.send_signal(signal.SIGKILL)  # the notebook kernel dies, mid-whatever
            p.wait()
        saved = Store(url).load_state()  # whole, whatever the kill interrupted
        steps_before = saved["state"]["total_steps"]
        assert steps_before > 0 and saved["leaderboard"]

        with pytest.raises(ValueError, match="already holds a tournament"):
            Tournament(env="CartPole-v1", store=url, client=c)
        # The killed client's lease names a process of this machine that no longer runs:
        # a resume takes it over without force (a live writer's, or another machine's,
        # is refused: tests/tournament/store/test_lease.py)
        assert Store(url).read_json("lease.json")["owner"].endswith(f"pid {p.pid}")
        t = Tournament.resume(url, client=c, max_steps=steps_before + 30_000)
        assert list(t.leaderboard["pod"]) == [e["pod_id"] for e in saved["leaderboard"]]
        segments = {r["pod_id"]: r["segment"] for r in saved["pods"]}
        t.start()
        s = t.wait(timeout=300)
        assert s["status"] == "finished", s["error"]
        assert s["pods_failed"] == 0
        assert s["env_steps_total"] >= steps_before + 30_000
        assert any(t.pod(pod)["segment"] > n for pod, n in segments.items())
        assert s["best_checkpoint"].startswith("s3://elegantpod-test/")
        best = Pod.from_checkpoint(s["best_checkpoint"])
        assert best.spec.env_id == "CartPole-v1"
        final = Store(url).load_state()
        assert [e["pod_id"] for e in final["leaderboard"]] == list(t.leaderboard["pod"])
        store = Store(url)
        for pod in store.pod_ids():
            for ckpt in store.fs.ls(store._fs_path("pods", pod), detail=False):
                load_checkpoint("s3://" + ckpt)
    finally:
        cl = c.cluster
        c.close()
        cl.close()


def test_resume_from_an_empty_bucket_is_a_clear_error(s3):
    url = f"s3://elegantpod-test/{uuid.uuid4().hex}/none"
    with pytest.raises(ValueError, match="holds no tournament"):
        Tournament.resume(url)
