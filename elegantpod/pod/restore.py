"""A checkpoint checked against the pod that loads it: :class:`Restore`.

A :class:`~elegantpod.pod.saved.SavedPod` holds a checkpoint's fields, each parsed once;
whether they fit a given pod (its algorithm, its network, its devices, its number of
fused learners) only that pod can tell. :meth:`Restore.check` decides it, once, and
raises before anything of the pod changes; :meth:`Pod.load <elegantpod.pod.pod.Pod.load>`
then applies the value (:meth:`Restore.load_into`); :func:`rebuilt_spec` says which pod
a checkpoint rebuilds (for
:meth:`Pod.from_checkpoint <elegantpod.pod.pod.Pod.from_checkpoint>`). Kept apart from
:mod:`elegantpod.pod.pod` so that a load reads there as what it changes, and here as what
fits and what a load keeps.

What a checkpoint holds
-----------------------
:meth:`Pod.save <elegantpod.pod.pod.Pod.save>` writes the spec, the env-step count, the best
score, the learner's state (networks, optimizer moments, step clocks, an off-policy
learner's replay and exploration noise process, its random generator; for fused
learners each learner's), the training env's random generator (torch envs) and the
evaluator's episode counter, which seeds its next evaluation. Not saved: the training
env's internal state (episodes in progress), the training-return statistics, the
learning curve and the last evaluation.

What a load restores
--------------------
After a load (or ``Pod(spec, out_dir, resume=True)``) the weights, optimizer moments,
step clocks, replay and random generators are those of the saved pod, and
:meth:`Pod.evaluate <elegantpod.pod.pod.Pod.evaluate>` gives what the saved pod's next
evaluation would have given (same weights, same episode seeds). The training env,
however, is not resumed: episodes in progress at the save are dropped, and training
continues from the fresh episodes the pod's env started at construction (reset with
``spec.seed``), while later resets draw from the restored env generator. So the first
rollouts after a resume, and what the learner learns from them, differ from those of an
uninterrupted run; training returns restart their count and the learning curve
(``curve``, ``last_eval``) starts empty. With the episodes, a correlated exploration
noise (OU, colored) restarts at the first rollout, drawn from the restored generator, so
a resumed pod's noise is still reproducible.

A checkpoint without a replay (see :func:`~elegantpod.pod.checkpoint.strip_replay_from_file`) loads
with an empty replay. Its step clock is restored, so the learner does not redo its
uniform-random warm-up (nor wait ``learning_starts`` env steps again): it keeps exploring
with its policy and takes its next gradient step once its replay holds
``min(learning_starts, 4 * batch_size, buffer_size)`` transitions again (a fused learner:
its share of ``learning_starts``).

A checkpoint from other device types (a GPU pod's, loaded on a CPU) or another number of
fused learners restores all of this except the random generators (a state fits only its
device type, and each learner needs its own stream): the pod keeps its own seeded
streams.

``restore_rng=False`` keeps the pod's own random streams: a child pod copies its
parent's networks, optimizer state, step clocks and replay but explores on its own seed
(its learners' generators are reseeded from its spec; its env generator and its
evaluator's episode counter stay as they are).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import torch

from elegantpod.agents.base import Learner
from elegantpod.agents.fusion import strip
from elegantpod.config import PodSpec
from elegantpod.envs.base import VecEnv
from elegantpod.pod.build import check_learner_rng, device_types, each_learner, learner_seeds
from elegantpod.pod.checkpoint import (
    CheckpointError,
    check_devices,
    check_module_state,
    check_optimizer_state,
    checked_rng_state,
    resolve_checkpoint,
    resolve_env_kwargs,
)
from elegantpod.pod.evaluator import Evaluator
from elegantpod.pod.saved import SavedPod


@dataclass(frozen=True)
class Restore:
    """What a pod takes from a checkpoint, every part of it checked to fit that pod.

    Built by :meth:`check` (which changes nothing); the pod hands its parts to
    :meth:`load_into` and sets its own counters.
    """

    where: str
    """``checkpoint '<path>'``: how errors name the file."""
    algo: str
    """The algorithm both the checkpoint and the pod run."""
    learner_state: dict[str, Any]
    """The saved learner state; without its generators and exploration noise where those
    do not fit (other device types, another number of learners, ``restore_rng=False``)."""
    env_steps: int
    """The saved pod's env-step count."""
    best_score: float | None
    """The saved pod's best evaluation score (``None``: none yet, or an older checkpoint)."""
    eval_count: int | None = None
    """The evaluator's episode counter to set; ``None``: keep the pod's (an older
    checkpoint, or ``restore_rng=False``)."""
    env_rng: torch.Tensor | None = None
    """The training env generator's state to set; ``None``: keep the env's."""
    reseed: tuple[int, ...] | None = None
    """With ``restore_rng=False``, the seed of each learner's generator (the pod's own
    streams); ``None``: the loaded generators stay."""

    @classmethod
    def check(
        cls,
        saved: SavedPod,
        spec: PodSpec,
        learner: Learner,
        env: VecEnv,
        restore_rng: bool = True,
    ) -> Restore:
        """Check ``saved`` against the pod of ``spec`` with ``learner`` and ``env``.

        Every random-generator state is tried, and the networks and optimizer states
        checked against the learner's (:func:`check_learner_state`), before anything
        changes, so a bad one leaves the pod as it was.

        Raises
        ------
        CheckpointError
            Naming the file: another algorithm or env, a generator state (field
            ``learner....generator`` or ``env_rng``) that is not one, or a tensor that
            does not fit the learner.
        """
        where = f"checkpoint {saved.path!r}"
        if saved.spec.algo != spec.algo or saved.spec.env_id != spec.env_id:
            raise CheckpointError(
                f"{where} holds a {saved.spec.algo!r} agent for {saved.spec.env_id!r}, "
                f"not {spec.algo!r} for {spec.env_id!r}"
            )
        check_layout(saved, env, where)
        learner_state = saved.learner
        # A generator's state only fits generators of its device type: after a move (a
        # GPU pod's checkpoint loaded on a CPU), or into another number of fused
        # learners, the pod keeps its own seeded streams.
        is_same_kind = device_types(saved.spec) == device_types(spec)
        if not (restore_rng and is_same_kind):
            # nor the exploration noise drawn from them: a fresh stream starts fresh noise
            learner_state = strip(learner_state, "generator", "noise")
        check_learner_rng(learner_state, learner, where)
        check_learner_state(learner_state, learner, spec.algo, where)
        env_gen = getattr(env, "generator", None)
        env_rng = saved.env_rng if restore_rng and is_same_kind else None
        if env_rng is not None and env_gen is not None:
            env_rng = checked_rng_state(env_rng, env_gen, where, "env_rng")
        return cls(
            where=where,
            algo=spec.algo,
            learner_state=learner_state,
            env_steps=saved.env_steps,
            best_score=saved.best_score,
            eval_count=saved.eval_count if restore_rng else None,
            env_rng=env_rng if env_gen is not None else None,
            reseed=None if restore_rng else tuple(learner_seeds(spec)),
        )

    def load_into(self, learner: Learner, env: VecEnv, evaluator: Evaluator) -> None:
        """Load :attr:`learner_state` into ``learner`` (then reseed its generators where
        :attr:`reseed` says so), and set ``evaluator``'s episode counter and ``env``'s
        generator where the checkpoint's fit (:attr:`eval_count`, :attr:`env_rng`).
        When the learner state does not fit, counter and generator stay as they were.

        Raises
        ------
        CheckpointError
            Naming the file and the field ``learner``, when the state does not fit the
            network (another ``hidden``, another observation size).
        """
        try:
            learner.load_state_dict(self.learner_state)
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(
                f"{self.where}: field 'learner' does not fit {_network(self.algo, learner)}: "
                f"{first}"
            ) from exc
        if self.reseed is not None:
            for part, seed in zip(each_learner(learner), self.reseed, strict=True):
                part.generator.manual_seed(seed)
        if self.eval_count is not None:
            evaluator.count = self.eval_count
        if self.env_rng is not None:
            env.generator.set_state(self.env_rng)


def check_learner_state(state: dict[str, Any], learner: Learner, algo: str, where: str) -> None:
    """Raise :class:`CheckpointError` naming the first tensor of a saved learner state
    that does not fit ``learner``: its networks' (field ``learner.modules``; see
    :func:`~elegantpod.pod.checkpoint.check_module_state`) and its optimizers' (field
    ``learner.optimizers``; see :func:`~elegantpod.pod.checkpoint.check_optimizer_state`).

    Why before the load: ``load_state_dict`` loads one network after the other, so a
    misfit found by loading would leave the pod half loaded; and an optimizer loads any
    moment at all, which its next step then overruns. Fused learners share one
    architecture and load one saved network and optimizer state: the lead's is checked.
    """
    network = _network(algo, learner)
    modules = state.get("modules")
    if not isinstance(modules, dict):
        raise CheckpointError(f"{where}: field 'learner.modules' is missing or not a dict")
    for name, module in learner.modules.items():
        check_module_state(module, modules.get(name), where, f"learner.modules.{name}", network)
    optimizers = state.get("optimizers", {})
    if not isinstance(optimizers, dict):
        raise CheckpointError(f"{where}: field 'learner.optimizers' must be a dict")
    for name, optimizer in learner.optimizers.items():
        if name in optimizers:
            check_optimizer_state(optimizer, optimizers[name], where, name)


def _network(algo: str, learner: Learner) -> str:
    """How errors name a learner's network: ``this ppo network (hidden=(64, 64))``."""
    hidden = getattr(learner.config, "hidden", None)
    return f"this {algo} network" + (f" (hidden={hidden})" if hidden is not None else "")


def check_layout(saved: SavedPod, env: VecEnv, where: str) -> None:
    """Raise :class:`CheckpointError` unless ``env`` lays out the policy's inputs and
    outputs as the saved agent did (same tickers, in the same order, same features)."""
    if saved.layout is None or not hasattr(env, "layout"):
        return
    now = env.layout()
    if now is None:
        return
    for kind, names in saved.layout.items():
        have = tuple(now.get(kind, ()))
        if have != names:
            raise CheckpointError(
                f"{where}: the agent's {kind} are {_shown(names)}, and this env's are "
                f"{_shown(have)}: a policy's inputs and outputs match by position"
            )


def _shown(names) -> str:
    text = ", ".join(str(n) for n in names[:12])
    return f"[{text}{f' and {len(names) - 12} more' if len(names) > 12 else ''}]"


def rebuilt_spec(
    path: str | os.PathLike,
    device: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    allow_remote: bool = False,
) -> tuple[PodSpec, SavedPod]:
    """The spec of the pod that the checkpoint at ``path`` (or in the run folder
    ``path``) rebuilds, and the checkpoint as read.

    ``device`` replaces the checkpoint's (and its learners'); ``None`` keeps it, and it
    must exist here. The files and URLs the spec names for the env are read only when
    ``env_kwargs`` names them or ``allow_remote`` says so (see
    :func:`~elegantpod.pod.checkpoint.resolve_env_kwargs`).
    """
    saved = SavedPod.read(resolve_checkpoint(path))
    return spec_to_rebuild(saved, device, env_kwargs, allow_remote), saved


def spec_to_rebuild(
    saved: SavedPod,
    device: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    allow_remote: bool = False,
) -> PodSpec:
    """:func:`rebuilt_spec` of a checkpoint already read: for a caller that has read it
    for something else too (a deployment), so that it is read once."""
    spec = saved.spec
    if device is not None:
        spec = dataclasses.replace(spec, device=device, learner_devices=())
    else:
        check_devices(spec, saved.path)
    spec = resolve_env_kwargs(spec, env_kwargs, saved.path, allow_remote)
    return fit_layout(spec, saved, given=bool(env_kwargs))


def fit_layout(spec: PodSpec, saved: SavedPod, given: bool) -> PodSpec:
    """``spec`` with env keywords that build the env in the saved agent's layout (a
    trading env's data in the agent's ticker order: see
    :meth:`~elegantpod.envs.hooks.EnvHooks.fit_layout`), or a :class:`CheckpointError`
    that names what the data lacks.

    ``given``: the caller's keywords replaced some of the checkpoint's (other data stands
    in). A checkpoint older than its layout field is then refused for an env that has a
    layout: nothing says which stock each of its outputs trades.
    """
    from elegantpod.envs.hooks import EnvHooks
    from elegantpod.envs.registry import env_hooks

    hooks = env_hooks(spec.env_id)
    if hooks.fit_layout.__func__ is EnvHooks.fit_layout.__func__:
        return spec  # an env whose layout is fixed by its id
    where = f"checkpoint {saved.path!r}"
    if saved.layout is None:
        if not given:
            return spec
        raise CheckpointError(
            f"{where} records no layout of its agent's inputs (saved by an elegantpod "
            "older than that field), so nothing says which stock each output trades on "
            "other data: load it on the data it was trained on, or pass the tickers "
            "in the order it was trained (env_kwargs tickers=[...])"
        )
    layout = {k: list(v) for k, v in saved.layout.items()}
    try:
        env_kwargs = hooks.fit_layout(spec.env_kwargs, layout)
        if spec.eval_env_kwargs:  # the evaluation env: its own keywords over those
            hooks.fit_layout({**env_kwargs, **spec.eval_env_kwargs}, layout)
    except ValueError as exc:
        raise CheckpointError(f"{where}: {exc}") from None
    return dataclasses.replace(spec, env_kwargs=env_kwargs)
