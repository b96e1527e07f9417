"""Which hyperparameters a built pod may change, and the check that refuses the rest.

A pod's networks and buffers are allocated from some of its hyperparameters (an
algorithm's ``structural_hparams``: hidden sizes, buffer size, env count); the others (a
learning rate, a clipping range) can change between two updates. A population-based
tournament changes them on a pod that stays built, so the check lives in one place:
:meth:`Pod.apply_hparams <elegantpod.pod.Pod.apply_hparams>` asks it before changing
anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.config import PodSpec


def live_changes(spec: PodSpec, current: Any, hparams: Any) -> tuple[PodSpec, dict[str, Any]]:
    """``spec`` with ``hparams`` in force, and the hyperparameters that differ between
    ``current`` and ``hparams``, by name (what the learner's ``set_hparams`` takes).

    Parameters
    ----------
    spec
        The pod's spec: its algorithm's learner class says which hyperparameters are
        structural (``structural_hparams``).
    current
        The config in force (the learner's).
    hparams
        The config to switch to, of the same class; ``None``: the algorithm's defaults
        (as for a spec without hyperparameters).

    Raises
    ------
    ValueError
        ``hparams`` of another class, a bad value (its ``validate()``), or a structural
        hyperparameter that differs (each named, with its old and new value).
    """
    algo = get_algo(spec.algo)
    hparams = hparams if hparams is not None else algo.config_cls()
    if type(hparams) is not type(current):
        raise ValueError(
            f"hparams must be a {type(current).__name__} for this {spec.algo} pod, "
            f"got {type(hparams).__name__}"
        )
    hparams.validate()
    changes = {
        f.name: getattr(hparams, f.name)
        for f in dataclasses.fields(hparams)
        if getattr(hparams, f.name) != getattr(current, f.name)
    }
    fixed = [
        f"{k}: {getattr(current, k)!r} -> {v!r}"
        for k, v in changes.items()
        if k in algo.structural_hparams
    ]
    if fixed:
        raise ValueError(
            f"{', '.join(fixed)}: these fix network or buffer shapes, so this pod "
            "cannot take them; build a new pod"
        )
    return dataclasses.replace(spec, hparams=hparams), changes
