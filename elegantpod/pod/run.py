"""One call of :meth:`Pod.run <elegantpod.pod.pod.Pod.run>`: when it evaluates, when it
ends, and the :class:`~elegantpod.types.TrainResult` it returns.

Kept apart from the pod because none of it is the pod's state: a pod outlives its runs
(a tournament runs it segment after segment), while the evaluation schedule, the clock
and whether the target was met belong to one run. The pod keeps the loop itself (what it
changes: its step count, curve and checkpoints) and asks a :class:`PodRun` the questions.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from elegantpod.config import PodSpec
from elegantpod.pod.budget import Budget
from elegantpod.pod.collector import Collector
from elegantpod.types import EvalResult, Progress, TrainResult

EVAL_GRACE_SECONDS = 2.0
"""Least time past the budget an evaluation on an env without a time limit may take."""


@dataclass
class PodRun:
    """A run's schedule and outcome so far (see :meth:`starting`)."""

    budget: Budget
    target: float | None
    """The score that ends the run (``spec.target_reward``; ``None``: none)."""
    next_eval: int | None
    """The env-step count at which the next scheduled evaluation is due."""
    start: float = field(default_factory=time.perf_counter)
    """``time.perf_counter()`` at the start: ``wall_seconds`` count from it, to the end of
    the evaluation that first met the target, or to the end of training."""
    solved: bool = False
    """Whether an evaluation met the target."""
    is_spent: bool = False
    """Whether the budget's steps or seconds ran out (as of the last :meth:`is_due`)."""

    @classmethod
    def starting(cls, budget: Budget, target: float | None, env_steps: int) -> PodRun:
        """A run starting now, from a pod at ``env_steps``: its evaluations fall on
        multiples of ``budget.evaluate_every`` of the pod's total count."""
        every = budget.evaluate_every
        next_eval = None if every is None else (env_steps // every + 1) * every
        return cls(budget, target, next_eval)

    def deadline(self) -> float | None:
        """``time.perf_counter()`` past which an evaluation on an env without a time
        limit stops (``None``: no seconds budget): the budget's end, plus a grace of a
        tenth of the budget and at least :data:`EVAL_GRACE_SECONDS`, so the evaluation
        that a spent budget asks for still runs its episodes when they do end."""
        seconds = self.budget.seconds
        if seconds is None:
            return None
        return self.start + float(seconds) + max(EVAL_GRACE_SECONDS, 0.1 * float(seconds))

    def elapsed(self) -> float:
        """Wall seconds since the start."""
        return time.perf_counter() - self.start

    def is_due(self, env_steps: int) -> bool:
        """After an update that brought the pod to ``env_steps``: whether to evaluate now
        (a scheduled evaluation came, or the budget ran out and asks for a last one).

        Records whether the budget ran out (:attr:`is_spent`), measured now: an
        evaluation that follows does not count against it.
        """
        budget = self.budget
        out_of_steps = budget.steps is not None and env_steps >= budget.steps
        out_of_time = budget.seconds is not None and self.elapsed() >= budget.seconds
        self.is_spent = out_of_steps or out_of_time
        due = self.next_eval is not None and env_steps >= self.next_eval
        if due or (self.is_spent and budget.evaluate_at_end):
            if self.next_eval is not None:
                self.next_eval += budget.evaluate_every
            return True
        return False

    def progress(
        self,
        env_steps: int,
        ev: EvalResult,
        collector: Collector,
        stats: dict,
        fitness: str,
    ) -> Progress:
        """What an evaluation at ``env_steps`` reports: its result ``ev``, the training
        episodes' mean return since the last one (taken from ``collector``), the last
        update's ``stats`` and the ``fitness`` score (``None``: the return)."""
        return Progress(
            env_steps=env_steps,
            wall_seconds=self.elapsed(),
            eval_return_mean=ev.mean,
            eval_return_std=ev.std,
            train_return_mean=collector.pop_train_return(),
            stats=dict(stats),
            score=None if fitness == "return" else ev.score(fitness)[0],
        )

    def evaluated(self, progress: Progress) -> float:
        """Record an evaluation: the run is solved once its score (the fitness, else the
        mean return) meets the target. Returns that score."""
        score = progress.eval_return_mean if progress.score is None else progress.score
        self.solved = self.target is not None and score >= self.target
        return score

    @property
    def is_over(self) -> bool:
        """Whether the run ends here: solved, or its budget spent."""
        return self.solved or self.is_spent

    def result(
        self,
        spec: PodSpec,
        env_steps: int,
        last_eval: EvalResult | None,
        curve: list[Progress],
        wall_seconds: float,
        checkpoint: str | Path | None,
    ) -> TrainResult:
        """What the run reports, from the pod's state at its end."""
        return TrainResult(
            env=spec.env_id,
            algo=spec.algo,
            seed=spec.seed,
            solved=self.solved,
            eval_return_mean=last_eval.mean if last_eval else math.nan,
            eval_return_std=last_eval.std if last_eval else math.nan,
            env_steps=env_steps,
            wall_seconds=wall_seconds,
            checkpoint=str(checkpoint) if checkpoint else None,
            curve=tuple(curve),
            fitness=spec.fitness,
            score=curve[-1].score if curve else None,
        )
