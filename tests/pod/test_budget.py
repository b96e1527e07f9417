"""A run's budget is one checked value (issue 33: segments wrote theirs into the spec)."""

import math

import pytest

from elegantpod import Pod, PodSpec
from elegantpod.agents.ppo import PPOConfig
from elegantpod.pod.budget import Budget
from elegantpod.pod.checkpoint import load_checkpoint

HP = PPOConfig(num_envs=8, horizon=16, minibatch_size=64)
PER_ROLLOUT = 8 * 16


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"steps": 0}, "Budget.steps"),
        ({"steps": 1.5}, "Budget.steps"),
        ({"steps": True}, "Budget.steps"),
        ({"evaluate_every": -1}, "Budget.evaluate_every"),
        ({"seconds": 0}, "Budget.seconds"),
        ({"seconds": math.inf}, "Budget.seconds"),
        ({"seconds": math.nan}, "Budget.seconds"),
        ({"evaluate_at_end": 1}, "Budget.evaluate_at_end"),
    ],
)
def test_a_bad_budget_is_named(kwargs, named):
    with pytest.raises(ValueError, match=named):
        Budget(**kwargs)


def test_the_spec_budget_is_the_default():
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=HP, max_steps=4 * PER_ROLLOUT)
    pod = Pod(spec)
    budget = Budget.of(pod.spec, pod.learner)
    assert budget == Budget(steps=4 * PER_ROLLOUT, evaluate_every=pod.learner.default_eval_every())
    timed = Budget.of(PodSpec(env_id="CartPole-v1", algo="ppo", max_seconds=3.0), pod.learner)
    assert timed.steps is None and timed.seconds == 3.0 and timed.is_bounded


def test_a_budget_bounds_a_run_without_touching_the_spec(tmp_path):
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=HP, eval_episodes=2)
    pod = Pod(spec, out_dir=tmp_path)
    before = pod.spec
    # steps is a total: a second run with the same budget trains nothing more
    result = pod.run(Budget(steps=3 * PER_ROLLOUT, evaluate_every=2 * PER_ROLLOUT))
    assert pod.env_steps == 3 * PER_ROLLOUT and pod.spec == before
    # evaluated at 2 rollouts, and at the end (the budget spent)
    assert [p.env_steps for p in result.curve] == [2 * PER_ROLLOUT, 3 * PER_ROLLOUT]
    pod.run(Budget(steps=5 * PER_ROLLOUT, evaluate_at_end=False))  # no evaluation at all
    assert pod.env_steps == 5 * PER_ROLLOUT and pod.evaluations == 2
    saved = load_checkpoint(tmp_path / "checkpoint.pt")
    assert PodSpec.from_json(saved["spec"]) == before  # no budget leaked into the file
