"""How long a pod runs and when it evaluates: one value, passed to :meth:`Pod.run`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elegantpod.checks.limits import MAX_ENV_STEPS


@dataclass(frozen=True)
class Budget:
    """A run's budget; the run ends at the first limit reached (or the spec's target).

    Why a value, not spec fields: a tournament runs a pod in segments, each with its own
    budget, while the pod's spec keeps saying what the pod is. Writing the segment's
    budget into the spec leaked it into checkpoints (a report once showed the
    "evaluate only at the end" sentinel as a number).

    Attributes
    ----------
    steps
        Stop once the pod's env-step count reaches this total (not "this many more": a
        resumed pod continues its count). ``None``: no step limit.
    seconds
        Stop after this many wall seconds of this run. ``None``: no time limit.
    evaluate_every
        Evaluate every this many env steps (counted on the pod's total). ``None``: only
        at the end.
    evaluate_at_end
        Evaluate when the budget is spent (unless an evaluation just ran). ``False``:
        the caller evaluates itself (a segment snapshots first, then evaluates while the
        snapshot is written: :meth:`Pod.snapshot_and_evaluate`).
    """

    steps: int | None = None
    seconds: float | None = None
    evaluate_every: int | None = None
    evaluate_at_end: bool = True

    def __post_init__(self) -> None:
        for name in ("steps", "evaluate_every"):
            value = getattr(self, name)
            if value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 < value <= MAX_ENV_STEPS
            ):
                # the spec's own limit (PodSpec.max_steps): a spec that passes runs
                raise ValueError(f"Budget.{name} must be an integer in [1, 2**62], got {value!r}")
        s = self.seconds
        if s is not None and (
            isinstance(s, bool)
            or not isinstance(s, int | float)
            or not (math.isfinite(s) and s > 0)
        ):
            raise ValueError(f"Budget.seconds must be a positive finite number, got {s!r}")
        if not isinstance(self.evaluate_at_end, bool):
            raise ValueError(f"Budget.evaluate_at_end must be a bool, got {self.evaluate_at_end!r}")

    @classmethod
    def of(cls, spec, learner) -> Budget:
        """The budget a :class:`~elegantpod.config.PodSpec` asks for: its ``max_steps``
        (else the algorithm's default step budget, unless ``max_seconds`` is set),
        ``max_seconds`` and ``eval_every_steps`` (else the algorithm's default)."""
        steps = spec.max_steps or (None if spec.max_seconds else learner.default_max_steps)
        every = spec.eval_every_steps or learner.default_eval_every()
        return cls(steps=steps, seconds=spec.max_seconds, evaluate_every=every)

    @property
    def is_bounded(self) -> bool:
        """Whether the run ends by itself (a step or time limit)."""
        return self.steps is not None or self.seconds is not None
