"""A pod checkpoint's fields, parsed and checked once: :class:`SavedPod`.

A checkpoint is untrusted input (it may come from a store someone else can write), so
every field a pod restores is checked like user input, with an error that names the file
and the field, before anything of the pod changes. Parsing it here, once, lets a caller
read a file once and both inspect it (whose is it? :meth:`SavedPod.origin`) and load it
(:meth:`Pod.load <elegantpod.pod.Pod.load>` takes a :class:`SavedPod`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checkpoint import (
    CheckpointError,
    check_origin,
    load_checkpoint,
    origin_of,
    spec_from_payload,
)
from elegantpod.config import PodSpec


@dataclass(frozen=True)
class SavedPod:
    """What a pod checkpoint holds, each field checked (see :meth:`parse`).

    The learner's state and the generator states stay as saved: whether they fit a pod
    (its network, its devices) only that pod can tell, when it loads them.
    """

    path: str
    spec: PodSpec
    env_steps: int
    learner: dict[str, Any]
    env_rng: Any = None
    best_score: float | None = None
    eval_count: int | None = None
    """Evaluations the saved pod had run; ``None`` in checkpoints older than the field."""
    data: dict[str, Any] = field(default_factory=dict, repr=False)
    """The whole checkpoint as loaded (for :meth:`origin` and :meth:`check_origin`)."""

    @classmethod
    def read(cls, path: str | os.PathLike, map_location: Any = "cpu") -> SavedPod:
        """Load ``path`` safely (``weights_only``) and :meth:`parse` it."""
        return cls.parse(load_checkpoint(path, map_location=map_location), path)

    @classmethod
    def parse(cls, data: dict[str, Any], path: Any) -> SavedPod:
        """Check a loaded checkpoint's fields.

        Raises
        ------
        CheckpointError
            Naming the file and the first field that is missing or malformed.
        """
        where = f"checkpoint {str(path)!r}"
        spec = spec_from_payload(data, path)
        env_steps = data.get("env_steps")
        if isinstance(env_steps, bool) or not isinstance(env_steps, int) or env_steps < 0:
            raise CheckpointError(
                f"{where}: field 'env_steps' must be an integer >= 0, got {env_steps!r}"
            )
        learner = data.get("learner")
        if not isinstance(learner, dict):
            raise CheckpointError(f"{where}: field 'learner' is missing or not a dict")
        best = data.get("best_score")  # older checkpoints: none saved
        if best is not None and (
            isinstance(best, bool) or not isinstance(best, int | float) or not math.isfinite(best)
        ):
            raise CheckpointError(
                f"{where}: field 'best_score' must be a finite number or None, got {best!r}"
            )
        count = data.get("eval_count")  # older checkpoints: none saved
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 0
        ):
            raise CheckpointError(
                f"{where}: field 'eval_count' must be an integer >= 0, got {count!r}"
            )
        return cls(
            path=str(path),
            spec=spec,
            env_steps=env_steps,
            learner=learner,
            env_rng=data.get("env_rng"),
            best_score=None if best is None else float(best),
            eval_count=count,
            data=data,
        )

    def origin(self) -> dict[str, str] | None:
        """The tournament, pod and writer that saved it (``None``: saved outside a
        tournament); a malformed one is a :class:`CheckpointError`."""
        return origin_of(self.data, self.path)

    def check_origin(self, **expect: Any) -> None:
        """Raise :class:`CheckpointError` unless it is what a store's record says
        (keywords of :func:`~elegantpod.checkpoint.check_origin`)."""
        check_origin(self.data, self.path, **expect)
