"""The data contract between env, worker, buffers and learners, and typed results."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from elegantpod.number_text import number

Tensor = torch.Tensor


@dataclass
class Batch:
    """Transitions as device tensors.

    Time-major ``(T, N, ...)`` from a worker, flat ``(B, ...)`` from a replay buffer.

    ``next_obs`` is the true next observation (``info["final_obs"]`` of the env), so a
    learner bootstraps a truncated episode from its real last state. ``terminated``
    stops bootstrapping; ``truncated`` only ends the episode.
    """

    obs: Tensor
    action: Tensor
    reward: Tensor
    next_obs: Tensor
    terminated: Tensor
    truncated: Tensor

    @property
    def done(self) -> Tensor:
        """Episode ended, for whatever reason."""
        return self.terminated | self.truncated

    def flatten(self) -> Batch:
        """Merge the leading time and env dimensions: ``(T, N, ...) -> (T*N, ...)``."""
        return Batch(
            **{f.name: getattr(self, f.name).flatten(0, 1) for f in dataclasses.fields(self)}
        )

    def __len__(self) -> int:
        return self.reward.numel()


@dataclass(frozen=True)
class EvalResult:
    """Deterministic evaluation of a policy: one return per episode.

    ``metrics`` holds per-episode values of whatever else the env measures (a trading
    env's Sharpe, Calmar...), so a tournament can rank pods by a fitness other than the
    return.
    """

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    metrics: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def score(self, fitness: str = "return") -> tuple[float, float]:
        """``(mean, std)`` over episodes of ``fitness``: ``"return"`` or a key of ``metrics``."""
        if fitness == "return":
            return self.mean, self.std
        if fitness not in self.metrics:
            raise ValueError(
                f"fitness {fitness!r} was not measured by this env; it reports "
                f"{['return', *sorted(self.metrics)]}"
            )
        values = torch.tensor(self.metrics[fitness], dtype=torch.float64)
        return float(values.mean()), float(values.std(unbiased=False))

    @property
    def mean(self) -> float:
        """Mean return over the evaluation episodes."""
        return float(torch.tensor(self.returns, dtype=torch.float64).mean())

    @property
    def std(self) -> float:
        """Standard deviation of the returns (population, ddof=0)."""
        return float(torch.tensor(self.returns, dtype=torch.float64).std(unbiased=False))


@dataclass(frozen=True)
class Progress:
    """One point of a pod's learning curve, reported after each evaluation."""

    env_steps: int
    wall_seconds: float
    eval_return_mean: float
    eval_return_std: float
    train_return_mean: float
    stats: dict[str, float] = field(default_factory=dict)
    score: float | None = None
    """The evaluation's fitness (``PodSpec.fitness``) when it is not the return."""


@dataclass(frozen=True, repr=False)
class TrainResult:
    """What a finished pod run reports (and what ``elegantpod train --json`` prints).

    ``eval_return_mean`` is the *last* evaluation; training is noisy, so the best one
    (``best_eval_return_mean``) can be far above it (a Hopper run ended at 1,435 while
    its best evaluation scored 2,897). ``checkpoint`` names the agent to use: the best
    evaluation's ``best.pt`` when the run has one, else the latest state
    (``checkpoint.pt``, also in ``last_checkpoint``: what a resume continues).
    """

    env: str
    algo: str
    seed: int
    solved: bool
    eval_return_mean: float
    eval_return_std: float
    env_steps: int
    wall_seconds: float
    checkpoint: str | None
    """The agent to use: ``best.pt`` (the best evaluation) when the run wrote one, else
    ``checkpoint.pt``; ``None`` without an output folder."""
    curve: tuple[Progress, ...] = ()
    fitness: str = "return"
    score: float | None = None
    """The last evaluation's ``fitness`` (``None`` when the fitness is the return)."""
    best_eval_return_mean: float = math.nan
    """Mean return of the best evaluation by ``fitness`` (the one ``best.pt`` holds).
    NaN when unknown: no evaluation yet, or, for a resumed run, a best scored before
    the resume by a fitness other than the return (the curve starts at the resume)."""
    best_score: float | None = None
    """The best evaluation's ``fitness`` (``None`` when the fitness is the return)."""
    best_env_steps: int | None = None
    """Env steps at the best evaluation (``None`` when it predates a resume)."""
    last_checkpoint: str | None = None
    """The latest state, ``checkpoint.pt`` (what ``resume=True`` continues)."""
    stopped_early: str | None = None
    """Why the run ended before its budget, where something other than the budget or
    the target ended it: an evaluation whose episodes never ended (an env without a time
    limit), with what to set. ``None``: the budget or target ended it."""

    def to_dict(self, *, with_curve: bool = False) -> dict:
        """The result as JSON-able values (``with_curve``: include the learning curve)."""
        d = dataclasses.asdict(self)
        if not with_curve:
            d.pop("curve")
        return d

    def __repr__(self) -> str:
        # the whole curve, with a dict of losses per point, made the default repr pages long
        is_return = self.fitness == "return"
        last = self.eval_return_mean if is_return else self.score
        best = self.best_eval_return_mean if is_return else self.best_score
        where = "" if self.best_env_steps is None else f" at {self.best_env_steps:,} steps"
        text = f"{self.algo} on {self.env}, seed {self.seed}"
        text += ": solved" if self.solved else ""
        text += f"; last {self.fitness} {number(last)}"
        if is_return:
            text += f" ± {number(self.eval_return_std)}"
        text += f", best {number(best)}{where}"
        text += f"; {self.env_steps:,} env steps in {self.wall_seconds:,.1f} s"
        n = len(self.curve)
        text += f"; {n} evaluation{'s' * (n != 1)}" if n else ""
        text += f"; checkpoint {self.checkpoint!r}" if self.checkpoint else ""
        return f"TrainResult({text})"
