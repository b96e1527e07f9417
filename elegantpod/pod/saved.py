"""A pod checkpoint's fields, parsed and checked once: :class:`SavedPod`.

A checkpoint is untrusted input (it may come from a store someone else can write), so
every field a pod restores is checked like user input, with an error that names the file
and the field, before anything of the pod changes. Parsing it here, once, lets a caller
read a file once and both inspect it (whose is it? :meth:`SavedPod.origin`) and load it
(:meth:`Pod.load <elegantpod.pod.pod.Pod.load>` takes a :class:`SavedPod`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.limits import MAX_ENV_STEPS
from elegantpod.checks.text import UNPRINTABLE
from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import (
    CheckpointError,
    check_origin,
    load_checkpoint,
    origin_of,
    spec_from_payload,
)


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
    layout: dict[str, tuple[str, ...]] | None = None
    """What the policy's inputs and outputs stand for, in order (a trading env's tickers
    and features: :meth:`~elegantpod.envs.hooks.EnvHooks.layout`); ``None`` where the env
    has none, or the checkpoint is older than the field."""
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
        if (
            isinstance(env_steps, bool)
            or not isinstance(env_steps, int)
            or not 0 <= env_steps <= MAX_ENV_STEPS
        ):
            raise CheckpointError(
                f"{where}: field 'env_steps' must be an integer >= 0 (at most 2**62), got "
                f"{str(env_steps)[:40]}"
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
        _check_network_size(spec, data, learner, where)
        layout = _checked_layout(data.get("env_layout"), where)
        return cls(
            path=str(path),
            layout=layout,
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
        (keywords of :func:`~elegantpod.pod.checkpoint.check_origin`)."""
        check_origin(self.data, self.path, **expect)


def _check_network_size(spec: PodSpec, data: dict, learner: dict, where: str) -> None:
    """Refuse a spec whose networks hold more weights than the file holds numbers.

    Why: a pod or policy is built from the spec before its weights are loaded, and only
    loading finds a mismatch. A hand-made checkpoint of a few kilobytes may describe an
    8 x 4096 network: 40 s and gigabytes to build, to then be refused. A real checkpoint
    holds every weight of its actor (and more: critics, optimizer moments), so the
    actor's size, counted from the spec alone, is a bound that never refuses one.
    """
    from elegantpod.pod.checkpoint import check_tensors
    from elegantpod.pod.memory import network_params

    spaces = data.get("spaces") if isinstance(data.get("spaces"), dict) else {}
    shape = spaces.get("observation_shape")
    obs_dim = shape[0] if isinstance(shape, list) and shape and type(shape[0]) is int else 1
    act = spaces.get("action_n") or spaces.get("action_low")
    act_dim = act if type(act) is int else (act.numel() if hasattr(act, "numel") else 1)
    need = network_params(spec, max(1, obs_dim), max(1, act_dim))
    have = check_tensors(learner, where)
    if need > have:
        raise CheckpointError(
            f"{where}: its spec describes networks of {need:,} weights (hidden="
            f"{list(getattr(spec.hparams, 'hidden', []))[:8]}), but the file holds "
            f"{have:,} numbers of learner state: not a checkpoint of that spec"
        )


MAX_LAYOUT = 4096
"""Most labels of one kind a checkpoint's layout may list (tickers, features)."""


def _checked_layout(layout: Any, where: str) -> dict[str, tuple[str, ...]] | None:
    """A checkpoint's ``env_layout``: ``None``, or at most 8 kinds of at most
    :data:`MAX_LAYOUT` distinct names each, every name 1..64 printable characters (they
    reach messages and reports: untrusted text, checked like a data file's tickers)."""
    if layout is None:
        return None
    if not isinstance(layout, dict) or len(layout) > 8:
        raise CheckpointError(f"{where}: field 'env_layout' must be a small mapping of lists")
    out = {}
    for kind, names in layout.items():
        if not isinstance(kind, str) or not kind.isidentifier() or len(kind) > 32:
            raise CheckpointError(f"{where}: field 'env_layout' has a bad key {str(kind)[:40]!r}")
        if not isinstance(names, list | tuple) or len(names) > MAX_LAYOUT:
            raise CheckpointError(
                f"{where}: field 'env_layout.{kind}' must be a list of at most {MAX_LAYOUT} names"
            )
        bad = next((n for n in names if not _is_label(n)), None)
        if bad is not None or len(set(names)) != len(names):
            shown = f": {str(bad)[:64]!r}" if bad is not None else ""
            raise CheckpointError(
                f"{where}: field 'env_layout.{kind}' must list distinct names of 1..64 "
                f"printable characters{shown}"
            )
        out[kind] = tuple(names)
    return out


def _is_label(name: Any) -> bool:
    """A string of 1..64 characters, none a control, format (bidirectional overrides),
    separator-of-lines or unassigned character."""
    import unicodedata

    return (
        isinstance(name, str)
        and 0 < len(name) <= 64
        and name.strip() != ""
        and all(unicodedata.category(c) not in UNPRINTABLE for c in name)
    )
