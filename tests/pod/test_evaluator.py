"""Evaluations are numbered; one can be repeated exactly (issue 33: a rerun segment
decremented the evaluator's counter to repeat its evaluation)."""

import pytest

from elegantpod import Pod, PodSpec
from elegantpod.pod.evaluator import Evaluator


def test_an_evaluation_repeats_by_index_without_counting():
    pod = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", eval_episodes=3))
    ev = Evaluator("Pendulum-v1", 3, "cpu", seed=5)
    first, second = ev.evaluate(pod.learner), ev.evaluate(pod.learner)
    assert ev.count == 2 and first.returns != second.returns  # other start states
    assert ev.evaluate(pod.learner, episode_index=1).returns == first.returns
    assert ev.evaluate(pod.learner, episode_index=2).returns == second.returns
    assert ev.count == 2  # repeats are not counted
    for bad in (0, 3, -1):
        with pytest.raises(ValueError, match=rf"episode_index must be one of .*got {bad}"):
            ev.evaluate(pod.learner, episode_index=bad)
    with pytest.raises(TypeError, match="episode_index must be an integer"):
        ev.evaluate(pod.learner, episode_index=1.0)


def test_a_snapshot_counts_the_evaluation_that_follows_it(tmp_path):
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=2))
    written = []
    ev = pod.snapshot_and_evaluate(written.append, origin=None)
    assert pod.evaluations == 1 and len(written) == 1
    path = tmp_path / "snap.pt"
    path.write_bytes(written[0])
    twin = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=2))
    twin.load(path)
    assert twin.evaluations == 1  # counted ahead, as the snapshot promised
    assert twin.evaluate(episode_index=twin.evaluations).returns == ev.returns
