"""How a pod is put together: its learner(s), their seeds and devices, its iteration
graphs; and the checks that a saved learner state fits them.

Kept apart from :mod:`elegantpod.pod` so that the pod reads as what it does (run,
evaluate, steer, save and load) and this as what it is made of.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import torch

from elegantpod.agents.base import Learner
from elegantpod.agents.fusion import part_of
from elegantpod.checkpoint import checked_rng_state
from elegantpod.collector import Collector
from elegantpod.config import PodSpec
from elegantpod.envs.base import VecEnv


def env_dims(env: VecEnv) -> tuple[int, int]:
    """Observation and action dimensions (discrete: choices) of ``env``, for memory checks."""
    obs = env.observation_space
    act = env.action_space
    obs_dim = math.prod(obs.shape) if obs.shape else 1
    if isinstance(act, gymnasium.spaces.Discrete):
        return obs_dim, int(act.n)
    return obs_dim, math.prod(act.shape) if act.shape else 1


def learner_seeds(spec: PodSpec) -> list[int]:
    """The seed of each learner's generator: ``spec.seed``, then one apart per fused one."""
    return [spec.seed + 7919 * i for i in range(spec.learners)]


def each_learner(learner) -> list[Learner]:
    """The learners behind ``learner``: itself, or each of fused learners."""
    return list(getattr(learner, "learners", [learner]))


def device_types(spec: PodSpec) -> list[str]:
    """Device types of the env and of each learner: what the saved generator states fit."""
    learners = spec.learner_devices or (spec.device,) * spec.learners
    return [torch.device(d).type for d in (spec.device, *learners)]


def check_learner_rng(state: dict[str, Any], learner, where: str) -> None:
    """Raise :class:`CheckpointError` naming a learner generator state that does not fit
    the learner it would be loaded into (see :func:`~elegantpod.agents.fusion.part_of`)."""
    for i, target in enumerate(each_learner(learner)):
        holder, place = part_of(state, i)
        if holder.get("generator") is not None:
            field = f"learner.{place}.generator" if place else "learner.generator"
            checked_rng_state(holder["generator"], target.generator, where, field)


def iterations_left(max_steps: int | None, env_steps: int, per_rollout: int) -> int | None:
    """Iterations a run has left (this one included) before its step budget; ``None``:
    no step budget (a time budget)."""
    return None if max_steps is None else -(-(max_steps - env_steps) // per_rollout)


def iteration_graphs(collector: Collector, learner: Learner, spec: PodSpec):
    """The pod's iteration graphs where ``spec.capture`` asks for them and they fit."""
    if spec.capture is False:
        return None
    from elegantpod.capture import IterationGraphs, unsupported

    reason = unsupported(collector, learner)
    if reason is None:
        return IterationGraphs(collector, learner)
    if spec.capture:
        raise ValueError(f"capture=True, but this pod's iterations cannot be captured: {reason}")
    return None


def build_learner(algo, env: VecEnv, hparams, spec: PodSpec):
    """One learner, or ``spec.learners`` fused ones (on ``spec.learner_devices``)."""
    if spec.learners == 1:
        return algo(env.observation_space, env.action_space, hparams, spec.device, spec.seed)
    from elegantpod.agents.fusion import FusedLearners

    devices = spec.learner_devices or (spec.device,) * spec.learners
    return FusedLearners(
        [
            algo(env.observation_space, env.action_space, hparams, dev, seed)
            for dev, seed in zip(devices, learner_seeds(spec), strict=True)
        ]
    )
