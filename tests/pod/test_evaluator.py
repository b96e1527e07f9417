"""Evaluations are numbered; one can be repeated exactly (issue 33: a rerun segment
decremented the evaluator's counter to repeat its evaluation)."""

from pathlib import Path

import gymnasium
import numpy as np
import pytest

from elegantpod import Pod, PodSpec, train
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


class _NeverEnds(gymnasium.Env):
    """An env without a time limit whose episodes never end."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), 0.0, False, False, {}


@pytest.fixture
def never_ends():
    gymnasium.register("NeverEnds-v0", entry_point=_NeverEnds, max_episode_steps=None)
    yield "NeverEnds-v0"
    gymnasium.registry.pop("NeverEnds-v0", None)


def test_an_env_without_a_time_limit_keeps_the_budget_says_what_to_set_and_returns(
    never_ends, tmp_path, caplog
):
    kw = {"eval_episodes": 2, "progress": False, "threads": 1, "num_envs": 2, "horizon": 16}
    with caplog.at_level("WARNING", logger="elegantpod"):
        r = train(never_ends, "ppo", max_seconds=3, out=tmp_path / "a", **kw)
    said = [r.getMessage() for r in caplog.records]
    assert any("'NeverEnds-v0' has no time limit" in m for m in said), said  # before training
    assert "max_episode_steps" in r.stopped_early and "no time limit" in r.stopped_early
    assert "NeverEnds-v0" in r.stopped_early
    assert r.env_steps > 0 and r.wall_seconds < 30  # a hang guard, not a speed bound
    assert Path(r.checkpoint).exists()  # what was trained is kept
    fixed = train(never_ends, "ppo", max_steps=256, env_kwargs={"max_episode_steps": 20}, **kw)
    assert fixed.stopped_early is None and fixed.eval_return_mean == 0.0
