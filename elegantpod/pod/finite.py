"""Non-finite training: the checks that fail a pod whose losses or state went NaN or
infinite, and the diagnosis that says whether its env caused it.

Why: an env that emits NaN, infinite or huge observations (3e38 overflows to infinity
in a network's first layer) turns a learner's losses, then its weights and optimizer
moments, non-finite. The pod learns nothing from then on, every checkpoint it writes is
one :func:`~elegantpod.pod.checkpoint.load_checkpoint` refuses (it holds NaN), yet the
run would end as a finished one. So a pod fails instead, with a
:class:`NonFiniteError` that says what went non-finite and what the env did, and never
saves such a state.

What it costs: a learner's statistics are Python floats already (each update reads
them from the device once), so checking them after each update is free; the state
(weights, optimizer moments, replay) is checked once per checkpoint, whose
serialization reads it all anyway, and once at the end of a run that writes none, with
one device synchronisation per device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

HUGE = 1e18
"""An observation or reward beyond this is huge: its square overflows float32
(3.4e38), as a network's sums and a loss's squares soon do."""

MUST_BE_FINITE = ("modules", "optimizers")
"""The learner state's fields (weights and optimizer moments) that must hold no NaN nor
infinity; elsewhere (a replay's observations, an action bound) an infinity may be
meaningful, so only NaN is refused there, as the loader does."""

SHOWN = 5
"""Non-finite tensors or losses a message names; the rest are counted."""


class NonFiniteError(FloatingPointError):
    """A pod's losses or state went NaN or infinite: it can neither learn on nor be saved.

    The first line of the message is the reason alone (what the env did, or that the
    learning diverged), the same for every pod of the env: a tournament counts pods
    failing alike by it. The lines after it name the pod, what went non-finite and the
    values the env gave.
    """


def nonfinite_stats(stats: dict[str, float]) -> list[str]:
    """``"losses/q = nan"`` for each statistic of an update (``stats``: its losses and
    charts) that is NaN or infinite.

    Charts too, not only losses: with 3e38 observations a DQN's mean Q value is
    ``-inf`` while its Huber loss (and its weights) may stay finite; the pod learns
    nothing all the same.
    """
    return [
        f"{k} = {v}"
        for k, v in stats.items()
        if isinstance(v, int | float) and not math.isfinite(v)
    ]


def nonfinite_state(payload: dict[str, Any]) -> list[str]:
    """The tensors of a checkpoint ``payload`` that make it unusable, by place
    (``learner.modules.q.net.0.weight``): weights and optimizer moments that hold NaN or
    infinity, and any other tensor that holds NaN (what the loader refuses)."""
    learner = payload.get("learner") or {}
    strict = {k: learner[k] for k in MUST_BE_FINITE if k in learner}
    rest = {k: v for k, v in payload.items() if k != "learner"}
    rest["learner"] = {k: v for k, v in learner.items() if k not in MUST_BE_FINITE}
    flags = [(n, ~torch.isfinite(t).all()) for n, t in _float_tensors(strict, "learner")]
    flags += [(n, torch.isnan(t).any()) for n, t in _float_tensors(rest, "")]
    return _flagged(flags)


def _float_tensors(data: Any, name: str) -> Iterator[tuple[str, torch.Tensor]]:
    """The non-empty floating tensors in nested dicts, lists and tuples, by place."""
    stack = [(name, data)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{name}.{k}" if name else str(k), v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            yield name, value


def _flagged(flags: list[tuple[str, torch.Tensor]]) -> list[str]:
    """The names whose flag (a 0-d bool tensor) is set, read with one synchronisation
    per device rather than one per tensor."""
    by_device: dict[torch.device, list[tuple[str, torch.Tensor]]] = {}
    for name, flag in flags:
        by_device.setdefault(flag.device, []).append((name, flag))
    found = []
    for pairs in by_device.values():
        values = torch.stack([flag for _, flag in pairs]).tolist()
        found += [name for (name, _), bad in zip(pairs, values, strict=True) if bad]
    return sorted(found)


def env_values(values: dict[str, list[torch.Tensor]]) -> tuple[list[str], list[str]]:
    """What the env's recent ``values`` (``{"observations": [...], "rewards": [...]}``,
    see :meth:`Collector.env_values <elegantpod.pod.collector.Collector.env_values>`)
    say: the causes (``"observations are NaN or infinite"``) and, for each kind, its
    largest finite magnitude."""
    causes, ranges = [], []
    for kind, tensors in values.items():
        tensors = [t.float() for t in tensors if t.numel()]
        if not tensors:
            continue
        nonfinite = any(bool((~torch.isfinite(t)).any()) for t in tensors)
        largest = max(float(t.nan_to_num(0.0, 0.0, 0.0).abs().max()) for t in tensors)
        if nonfinite:
            causes.append(f"{kind} are NaN or infinite")
        if largest > HUGE:
            causes.append(f"{kind} are huge (beyond {HUGE:.0e})")
        ranges.append(f"{kind} up to {largest:.3g} in magnitude")
    return causes, ranges


def non_finite_error(
    pod_text: str, found: list[str], values: dict[str, list[torch.Tensor]]
) -> NonFiniteError:
    """The error of a pod (``pod_text``: ``"ppo on NanObs-v0 (seed 0), env step 128"``)
    whose ``found`` losses or tensors are non-finite, traced back to the env's recent
    ``values`` where they show the cause."""
    causes, ranges = env_values(values)
    if causes:
        reason = "the env's " + " and ".join(causes)
        advice = "fix the env, or wrap it to clip or drop such values"
    else:
        reason = "the learning diverged (the env's recent observations and rewards are finite)"
        advice = "a smaller learning rate or gradient-norm clip may help"
    shown = ", ".join(found[:SHOWN])
    if len(found) > SHOWN:
        shown += f" and {len(found) - SHOWN} more"
    lines = [f"training went non-finite: {reason}", f"pod: {pod_text}", f"non-finite: {shown}"]
    if ranges:
        lines.append(f"the env's recent output, NaN and infinities aside: {', '.join(ranges)}")
    lines.append(f"the pod stops here and saves nothing of this state: {advice}")
    return NonFiniteError("\n  ".join(lines))
