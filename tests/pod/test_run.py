"""A run's schedule, exactly: when it evaluates, when its budget is spent, when it is
solved (pure logic of :class:`~elegantpod.pod.run.PodRun`, no pod needed)."""

from __future__ import annotations

import math

from elegantpod.config import PodSpec
from elegantpod.pod.budget import Budget
from elegantpod.pod.run import PodRun
from elegantpod.types import Progress


def _progress(mean: float, score: float | None = None) -> Progress:
    return Progress(
        env_steps=0,
        wall_seconds=0.0,
        eval_return_mean=mean,
        eval_return_std=0.0,
        train_return_mean=math.nan,
        score=score,
    )


def test_evaluations_fall_on_multiples_of_the_interval_of_the_pods_total_count():
    run = PodRun.starting(Budget(steps=10_000, evaluate_every=1000), None, env_steps=1500)
    assert run.next_eval == 2000  # a resumed pod keeps its schedule
    assert not run.is_due(1900)
    assert run.is_due(2048) and run.next_eval == 3000
    assert not run.is_due(2900) and not run.is_spent


def test_a_spent_budget_evaluates_once_at_the_end_unless_told_not_to():
    run = PodRun.starting(Budget(steps=2048), None, env_steps=0)
    assert run.next_eval is None
    assert not run.is_due(1024) and not run.is_over
    assert run.is_due(2048) and run.is_spent and run.is_over
    quiet = PodRun.starting(Budget(steps=2048, evaluate_at_end=False), None, env_steps=0)
    assert not quiet.is_due(2048) and quiet.is_over


def test_the_target_is_met_by_the_fitness_score_else_the_mean_return():
    run = PodRun.starting(Budget(steps=10**6), target=10.0, env_steps=0)
    assert run.evaluated(_progress(9.0)) == 9.0 and not run.is_over
    assert run.evaluated(_progress(12.0, score=3.0)) == 3.0 and not run.solved
    assert run.evaluated(_progress(0.0, score=10.0)) == 10.0 and run.solved and run.is_over
    untargeted = PodRun.starting(Budget(steps=10**6), None, env_steps=0)
    assert untargeted.evaluated(_progress(1e9)) == 1e9 and not untargeted.solved


def test_the_result_reports_the_last_evaluation_and_the_curve():
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", seed=3)
    run = PodRun.starting(Budget(steps=4096), None, env_steps=0)
    empty = run.result(spec, 4096, None, [], 1.5, None)
    assert math.isnan(empty.eval_return_mean) and empty.curve == () and empty.score is None
    assert (empty.env, empty.algo, empty.seed, empty.env_steps) == ("CartPole-v1", "ppo", 3, 4096)
    assert empty.checkpoint is None and empty.wall_seconds == 1.5
