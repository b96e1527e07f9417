"""The pod spec: the whole recipe of one training run.

With the same spec (seeds included) a pod repeats itself, and a tournament records specs
as lineage. Mutating a spec is ``dataclasses.replace``; every spec round-trips through
JSON. The checks its fields pass are in :mod:`elegantpod.checks` and
:mod:`elegantpod.devices`; its memory estimate is in :mod:`elegantpod.pod.memory`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.json_values import check_json, parse_json
from elegantpod.checks.limits import (
    MAX_EVAL_EPISODES,
    MAX_LEARNERS,
    bounded,
    check_finite,
    check_learners,
    positive,
)
from elegantpod.checks.overrides import config_values
from elegantpod.devices import check_device_name


@dataclass(frozen=True, kw_only=True)
class PodSpec:
    """Everything a pod needs to train: env, algorithm and its hyperparameters, budget."""

    env_id: str
    """Native or gymnasium env id."""
    algo: str
    """Algorithm name: ``"ppo"``, ``"sac"``, ``"td3"``, ``"ddpg"`` or ``"dqn"``."""
    hparams: Any = None
    """The algorithm's frozen config (``PPOConfig`` / ``SACConfig``); ``None``: defaults."""
    seed: int = 0
    """Seeds torch, the envs and the evaluator."""
    device: str = "auto"
    """Torch device of envs, buffers and networks. ``"auto"`` is decided where the pod is
    built (see :func:`~elegantpod.devices.resolve_device`): a pod built on a GPU worker
    trains on that GPU even if the machine that wrote the spec has none. A built pod's
    ``spec.device`` (and so its checkpoints) names the concrete device it used."""
    max_steps: int | None = None
    """Env-step budget (over all sub-envs); ``None``: the algorithm's default budget."""
    max_seconds: float | None = None
    """Wall-clock budget in seconds; ``None``: none."""
    target_reward: float | None = None
    """Stop at the first evaluation whose mean return (or ``fitness``) reaches this."""
    eval_episodes: int = 10
    """Deterministic episodes per evaluation, run in parallel on a separate env."""
    eval_every_steps: int | None = None
    """Env steps between evaluations; ``None``: the algorithm's default."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form metadata carried into checkpoints (tournament lineage, notes)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the env (JSON values: they travel to Dask workers), e.g. a
    trading env's ``data``, ``start`` and ``end``."""
    eval_env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Overrides of ``env_kwargs`` for the evaluator's env, e.g. validation dates."""
    fitness: str = "return"
    """What ranks and stops the pod: ``"return"`` (mean evaluation return) or a metric
    the env reports (its ``EnvHooks.fitnesses``)."""
    learners: int = 1
    """Learners that train on shards of the pod's data and fuse their parameters after
    every update epoch (paper 4.3); 1: a single learner."""
    learner_devices: tuple[str, ...] = ()
    """One device per learner (the GPUs a pod owns; ``"auto"`` allowed); empty: all on
    ``device``."""
    capture: bool | None = None
    """Replay each PPO iteration (rollout and update) as CUDA graphs
    (:mod:`elegantpod.pod.capture`). ``None``: wherever the pod supports it (one PPO
    learner, a native env, a CUDA device), else eagerly; ``True``: refuse a pod that
    does not; ``False``: always eager (for debugging or profiling kernel by kernel)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        for name in ("env_id", "algo", "device"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if isinstance(self.learners, bool) or not isinstance(self.learners, int):
            raise ValueError(f"learners must be an integer, got {self.learners!r}")
        bounded("learners", self.learners, MAX_LEARNERS, integer=True)
        if self.learner_devices and len(self.learner_devices) != self.learners:
            raise ValueError(
                f"learner_devices names {len(self.learner_devices)} device(s) for "
                f"{self.learners} learner(s): give one per learner, or none"
            )
        # The form only: whether the device exists is asked where the pod is built.
        for device in (self.device, *self.learner_devices):
            check_device_name(device)
        if self.capture is not None and not isinstance(self.capture, bool):
            raise ValueError(f"capture must be True, False or None, got {self.capture!r}")
        from elegantpod.envs.registry import check_fitness  # envs import this module

        check_fitness(self.fitness, self.env_id)
        check_json("env_kwargs", self.env_kwargs)
        check_json("eval_env_kwargs", self.eval_env_kwargs)
        positive("max_steps", self.max_steps, allow_none=True)
        positive("max_seconds", self.max_seconds, allow_none=True)
        bounded("eval_episodes", self.eval_episodes, MAX_EVAL_EPISODES, integer=True)
        positive("eval_every_steps", self.eval_every_steps, allow_none=True)
        check_finite("target_reward", self.target_reward, allow_none=True)
        if self.hparams is not None:
            self.hparams.validate()
            check_learners(self.learners, self.hparams.num_envs)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON-able values (tuples become lists)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["hparams"] = dataclasses.asdict(self.hparams) if self.hparams is not None else None
        return d

    def to_json(self) -> str:
        """The spec as JSON: what checkpoints and segment tasks carry."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PodSpec:
        """Rebuild and validate a spec from :meth:`to_dict` output.

        Raises
        ------
        ValueError
            Naming unknown or missing keys, hyperparameters the algorithm does not have,
            or the first bad value: a spec may come from a file someone else wrote.
        """
        # imported here, not at the top: a spec can be written and read without torch
        from elegantpod.agents import get_algo

        if not isinstance(d, dict):
            raise ValueError(f"a spec must be a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(
                f"unknown spec key(s) {unknown}; valid keys: {', '.join(sorted(names))}"
            )
        missing = [k for k in ("env_id", "algo") if k not in d]
        if missing:
            raise ValueError(f"the spec lacks {missing}")
        d = dict(d)
        if "learner_devices" in d:
            if not isinstance(d["learner_devices"], list | tuple | None):
                raise ValueError(f"learner_devices must be a list, got {d['learner_devices']!r}")
            d["learner_devices"] = tuple(d["learner_devices"] or ())
        hp = d.get("hparams")
        if hp is not None:
            config_cls = get_algo(d["algo"]).config_cls
            if not isinstance(hp, dict):
                raise ValueError(f"hparams must be a JSON object, got {type(hp).__name__}")
            fields = {f.name for f in dataclasses.fields(config_cls)}
            alien = sorted(set(hp) - fields)
            if alien:
                raise ValueError(
                    f"hparams {alien} are not {d['algo']} hyperparameters "
                    f"({config_cls.__name__} has {', '.join(sorted(fields))})"
                )
            try:
                d["hparams"] = config_cls(**config_values(config_cls, hp))
            except TypeError as exc:  # a list where a tuple of numbers belongs, say
                raise ValueError(f"hparams: {exc}") from None
        spec = cls(**d)
        spec.validate()
        return spec

    @classmethod
    def from_json(cls, text: str) -> PodSpec:
        """Rebuild and validate a spec from :meth:`to_json` output."""
        if not isinstance(text, str | bytes):
            raise ValueError(f"a spec must be JSON text, got {type(text).__name__}")
        # a checkpoint's spec is untrusted: nested past the parser is a ValueError too
        return cls.from_dict(parse_json(text, "a spec must be JSON text"))
