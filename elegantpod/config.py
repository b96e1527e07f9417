"""The pod spec: the whole recipe of one training run.

With the same spec (seeds included) a pod repeats itself, and a tournament records specs
as lineage. Mutating a spec is ``dataclasses.replace``; every spec round-trips through
JSON. The checks its fields pass are in :mod:`elegantpod.checks` and
:mod:`elegantpod.devices`; its memory estimate is in :mod:`elegantpod.pod.memory`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from elegantpod.checks.json_values import check_json, parse_json
from elegantpod.checks.limits import (
    MAX_ENV_STEPS,
    MAX_EVAL_EPISODES,
    MAX_LEARNERS,
    MAX_POD_SEED,
    MAX_SECONDS,
    Limit,
    check_learners,
)
from elegantpod.checks.overrides import config_values
from elegantpod.checks.settings import check_settings, setting
from elegantpod.devices import check_device_name


@dataclass(frozen=True, kw_only=True)
class PodSettings:
    """The settings a tournament shares with every pod it trains, which a single pod
    has too: declared here once, inherited by :class:`PodSpec` and by
    :class:`~elegantpod.tournament.core.spec.TournamentSpec`, whose ``pod_spec`` copies
    each of them into every pod's spec. A field added here is a field of both specs,
    checked by both (:func:`~elegantpod.checks.settings.check_settings`), a flag of
    both commands and a key of their run files, and a setting of every pod of a
    tournament. One thing more is written by hand: :func:`~elegantpod.training.train`'s
    keyword of that name, whose default reads the declaration (``POD``) and whose
    entry in its docstring says it to a Python user; ``tests/checks/test_settings.py``
    fails until it is there."""

    env_id: str = setting(flag=False)
    """Native or gymnasium env id (``--env`` on the command line)."""
    device: str = setting(
        "auto",
        resume=True,
        help="torch device: auto (a GPU where torch sees one, on the machine the pod runs "
        "on, else the CPU), cpu, cuda, cuda:N, mps",
    )
    """Torch device of envs, buffers and networks. ``"auto"`` is decided where the pod is
    built (see :func:`~elegantpod.devices.resolve_device`): a pod built on a GPU worker
    trains on that GPU even if the machine that wrote the spec has none. A built pod's
    ``spec.device`` (and so its checkpoints) names the concrete device it used."""
    target_reward: float | None = setting(
        None,
        resume=True,
        help="stop at the first evaluation whose mean return (or --fitness) reaches it",
    )
    """Stop at the first evaluation whose mean return (or ``fitness``) reaches this (a
    tournament: whose segment's evaluation does, confirmed as ``confirm_target`` says)."""
    eval_episodes: int = setting(
        10,
        limit=Limit(0, MAX_EVAL_EPISODES, integer=True, open_low=True),
        resume=True,
        help="deterministic episodes per evaluation",
    )
    """Deterministic episodes per evaluation (a tournament: per segment's score), run in
    parallel on a separate env."""
    env_kwargs: dict[str, Any] = setting(default_factory=dict, flag=False)
    """Keyword arguments of the env (JSON values: they travel to Dask workers), e.g. a
    trading env's ``data``, ``start`` and ``end`` (``--env-arg KEY=VALUE``)."""
    eval_env_kwargs: dict[str, Any] = setting(default_factory=dict, flag=False)
    """Overrides of ``env_kwargs`` for the evaluator's env, e.g. validation dates
    (``--eval-env-arg KEY=VALUE``)."""
    fitness: str = setting(
        "return",
        help="what ranks pods: the return, or a metric the env's evaluations report "
        "(StockTrading-v0: its finance metrics, e.g. sharpe); another name is refused, "
        "with the env's list",
    )
    """What ranks and stops the pod: ``"return"`` (mean evaluation return) or a metric
    the env reports (its ``EnvHooks.fitnesses``)."""
    learners: int = setting(
        1,
        limit=Limit(0, MAX_LEARNERS, integer=True, open_low=True),
        help="fused learners per pod (paper 4.3)",
    )
    """Learners that train on shards of the pod's data and fuse their parameters after
    every update epoch (paper 4.3; :class:`~elegantpod.agents.fusion.FusedLearners`);
    1: a single learner."""

    def check_pod_settings(self) -> None:
        """Raise ``ValueError`` naming the first bad shared setting (declared checks,
        then what a declaration cannot say: the device's form, the fitness the env
        reports, JSON env keywords)."""
        check_device_name(self.device)
        from elegantpod.envs.registry import check_fitness  # envs import this module

        check_fitness(self.fitness, self.env_id)
        check_json("env_kwargs", self.env_kwargs)
        check_json("eval_env_kwargs", self.eval_env_kwargs)


@dataclass(frozen=True, kw_only=True)
class PodSpec(PodSettings):
    """Everything a pod needs to train: env, algorithm and its hyperparameters, budget.

    The settings it shares with a tournament's pods are :class:`PodSettings`'."""

    algo: str = setting(flag=False)
    """Algorithm name: ``"ppo"``, ``"sac"``, ``"td3"``, ``"ddpg"`` or ``"dqn"`` (``--algo``)."""
    hparams: Any = setting(None, flag=False)
    """The algorithm's frozen config (``PPOConfig`` / ``SACConfig``); ``None``: defaults
    (``--set KEY=VALUE``)."""
    seed: int = setting(
        0,
        limit=Limit(-MAX_POD_SEED, MAX_POD_SEED, integer=True, domain=True),
        help="seeds torch, the envs and the evaluator: same seed, same run",
    )
    """Seeds torch, the envs and the evaluator."""
    max_steps: int | None = setting(
        None,
        limit=Limit(0, MAX_ENV_STEPS, integer=True, open_low=True),
        help="env-step budget over all sub-envs (default: the algorithm's)",
    )
    """Env-step budget (over all sub-envs); ``None``: the algorithm's default budget."""
    max_seconds: float | None = setting(
        None, limit=Limit(0, MAX_SECONDS, open_low=True), help="wall-clock budget in seconds"
    )
    """Wall-clock budget in seconds; ``None``: none."""
    eval_every_steps: int | None = setting(
        None,
        limit=Limit(0, MAX_ENV_STEPS, integer=True, open_low=True),
        help="env steps between evaluations (default: the algorithm's)",
    )
    """Env steps between evaluations; ``None``: the algorithm's default."""
    extra: dict[str, Any] = setting(default_factory=dict, flag=False)
    """Free-form metadata carried into checkpoints (tournament lineage, notes)."""
    learner_devices: tuple[str, ...] = setting((), flag=False)
    """One device per learner (the GPUs a pod owns; ``"auto"`` allowed); empty: all on
    ``device``."""
    capture: bool | None = setting(None, flag=False)
    """Replay each PPO iteration (rollout and update) as CUDA graphs
    (:mod:`elegantpod.pod.capture`). ``None``: wherever the pod supports it (one PPO
    learner, a native env, a CUDA device), else eagerly; ``True``: refuse a pod that
    does not; ``False``: always eager (for debugging or profiling kernel by kernel)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        check_settings(self)
        if self.learner_devices and len(self.learner_devices) != self.learners:
            raise ValueError(
                f"learner_devices names {len(self.learner_devices)} device(s) for "
                f"{self.learners} learner(s): give one per learner, or none"
            )
        # The form only: whether the device exists is asked where the pod is built.
        for device in self.learner_devices:
            check_device_name(device)
        self.check_pod_settings()
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
