"""How a pod is put together: its spec in force, its envs, its learner(s), their seeds
and devices, its iteration graphs, its evaluator; and the checks that a saved learner
state fits them.

Kept apart from :mod:`elegantpod.pod.pod` so that the pod reads as what it does (run,
evaluate, steer, save and load) and this as what it is made of.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium
import torch

from elegantpod.agents.base import Learner
from elegantpod.agents.fusion import part_of
from elegantpod.agents.nets import is_image
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.envs.base import VecEnv
from elegantpod.envs.registry import make_env
from elegantpod.pod.checkpoint import checked_rng_state
from elegantpod.pod.collector import Collector
from elegantpod.pod.evaluator import Evaluator
from elegantpod.pod.memory import check_memory


def spec_in_force(spec: PodSpec, algo) -> PodSpec:
    """``spec`` as a pod runs it: the algorithm's default hyperparameters filled in,
    validated with them, and its devices resolved.

    ``"auto"`` is decided here, where the pod runs; a device this machine lacks fails
    now, before any env or network exists.
    """
    if spec.hparams is None:
        spec = dataclasses.replace(spec, hparams=algo.config_cls())
    spec.validate()  # with the hyperparameters in force (defaults filled in)
    return dataclasses.replace(
        spec,
        device=resolve_device(spec.device),
        learner_devices=tuple(resolve_device(d) for d in spec.learner_devices),
    )


def build_env(spec: PodSpec) -> VecEnv:
    """The training env: ``hparams.num_envs`` copies, seeded with ``spec.seed``.

    Memory is checked before (a lower bound, before the envs allocate anything) and after
    (with the env's dimensions, before buffers and networks are allocated): a pod too big
    for its device fails with the sizes named, not deep in an allocation.
    """
    check_memory(spec)
    env = make_env(
        spec.env_id,
        num_envs=spec.hparams.num_envs,
        device=spec.device,
        seed=spec.seed,
        **spec.env_kwargs,
    )
    check_memory(spec, *env_dims(env), pixels=is_image(env.observation_space.shape))
    return env


def build_evaluator(spec: PodSpec) -> Evaluator:
    """The evaluator: its own envs (``eval_env_kwargs`` over ``env_kwargs``) and seed."""
    return Evaluator(
        spec.env_id,
        spec.eval_episodes,
        spec.device,
        spec.seed + 1_000_003,
        {**spec.env_kwargs, **spec.eval_env_kwargs},
    )


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
    from elegantpod.pod.capture import IterationGraphs, unsupported

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
