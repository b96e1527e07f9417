"""The generator's ensemble: every algorithm of the family in one tournament on Dask."""

from __future__ import annotations

import pytest

import elegantpod
from elegantpod.pod.pod import Pod


@pytest.mark.parametrize(
    ("env_id", "algos"),
    [("Pendulum-v1", ["ppo", "sac", "td3", "ddpg"]), ("CartPole-v1", ["ppo", "dqn"])],
)
def test_mixed_algorithms_train_side_by_side(client, tmp_path, env_id, algos):
    t = elegantpod.Tournament(
        env_id,
        algos=algos,
        pods=len(algos),
        store=str(tmp_path / "store"),
        client=client,
        max_steps=6_000 * len(algos),
        segment_steps=2_000,
        eval_episodes=2,
    )
    t.start()
    summary = t.wait(timeout=300)
    assert summary["status"] == "finished" and summary["pods_failed"] == 0
    pods = t.pods
    assert set(pods["algo"]) == set(algos)  # the generator keeps every algorithm
    board = t.leaderboard
    assert len(board) >= len(algos)
    for ckpt in board["checkpoint"].head(len(algos)):
        pod = Pod.from_checkpoint(ckpt)
        assert pod.spec.algo in algos and pod.env_steps > 0
