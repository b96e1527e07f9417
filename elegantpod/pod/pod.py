"""A pod: collector (rollouts), learner (updates) and evaluator (deterministic episodes).

The pod is the unit a tournament schedules. It trains for a budget of env steps and/or
seconds, or until an evaluation reaches a target return, reporting :class:`Progress`
after each evaluation, and it checkpoints so that a resumed pod continues from its step
count with identical weights, optimizer moments, replay and RNG streams (see
:mod:`elegantpod.pod.restore` for what a resume does not restore).

Randomness is per pod, never torch's process-wide RNG: the learner's generator(s) (on the
learner's device, seeded from ``spec.seed``) draw initial weights, actions, exploration
noise, minibatches and replay samples, and each env has its own generator for its
resets. Pods that share a process (a Dask worker's threads) therefore repeat exactly
what each would do alone.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from elegantpod.agents import get_algo
from elegantpod.agents.base import Learner
from elegantpod.checks.overrides import replace_checked
from elegantpod.config import PodSpec
from elegantpod.envs.spaces import spaces_payload
from elegantpod.pod.budget import Budget
from elegantpod.pod.build import (
    build_env,
    build_evaluator,
    build_learner,
    iteration_graphs,
    iterations_left,
    spec_in_force,
)
from elegantpod.pod.checkpoint import (
    BEST_FILE,
    CHECKPOINT_FILE,
    checkpoint_bytes,
    save_checkpoint,
    without_replay,
    write_checkpoint_bytes,
)
from elegantpod.pod.collector import Collector
from elegantpod.pod.evaluator import EvaluationIncomplete
from elegantpod.pod.finite import non_finite_error, nonfinite_state, nonfinite_stats
from elegantpod.pod.hooks import PodHooks, continues
from elegantpod.pod.restore import Restore, rebuilt_spec
from elegantpod.pod.run import PodRun
from elegantpod.pod.saved import SavedPod
from elegantpod.threads import torch_threads
from elegantpod.types import EvalResult, Progress, TrainResult

logger = logging.getLogger(__name__)


class Pod:
    """Collector + learner + evaluator for one :class:`PodSpec`.

    Run it with :meth:`run` (a :class:`~elegantpod.pod.budget.Budget` and
    :class:`~elegantpod.pod.hooks.PodHooks`: the only ways to bound, watch and stop a run),
    evaluate it with :meth:`evaluate`, change its hyperparameters with
    :meth:`set_hparams`, and save and load it with :meth:`save` and :meth:`load`.

    Parameters
    ----------
    spec
        What to train and for how long. Its device ``"auto"`` is decided here (see
        :func:`~elegantpod.devices.resolve_device`): ``pod.spec`` names the concrete one.
    out_dir
        Where ``checkpoint.pt`` goes (``None``: no checkpoints).
    resume
        Load ``out_dir/checkpoint.pt`` first and continue from its step count.

    Examples
    --------
    >>> from elegantpod import Pod, PodSpec
    >>> from elegantpod.pod.budget import Budget
    >>> with Pod(PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=2)) as pod:
    ...     result = pod.run(Budget(steps=4_096))
    ...     pod.set_hparams(lr=1e-3)  # the next update trains with it
    ...     print(pod.env_steps, pod.learner.config.lr)
    4096 0.001
    """

    def __init__(self, spec: PodSpec, out_dir: str | Path | None = None, resume: bool = False):
        algo = get_algo(spec.algo)
        self.spec = spec = spec_in_force(spec, algo)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.env = build_env(spec)  # memory checked before and after
        self.learner: Learner = build_learner(algo, self.env, spec.hparams, spec)
        self.collector = Collector(self.env, self.learner, spec.hparams.horizon, spec.seed)
        self.graphs = iteration_graphs(self.collector, self.learner, spec)
        """The pod's :class:`~elegantpod.pod.capture.IterationGraphs`, or ``None``: eager."""
        self.evaluator = build_evaluator(spec)
        self.env_steps = 0
        self.curve: list[Progress] = []
        self.last_eval: EvalResult | None = None
        self.best_score: float | None = None
        """The best evaluation score (fitness) so far, the one ``best.pt`` holds."""
        self._hooks: PodHooks | None = None  # the run in progress's
        # The pod owns its learner's stop check: the hooks of the run in progress.
        self.learner.should_stop = self._should_stop
        self._saved_at: int | None = None  # env_steps of the last checkpoint written
        if resume:
            if self.out_dir is None:
                raise ValueError("resume=True needs out_dir")
            self.load(self.checkpoint_path)

    @property
    def checkpoint_path(self) -> Path | None:
        """``out_dir/checkpoint.pt`` when the pod has an output folder, else ``None``."""
        return None if self.out_dir is None else self.out_dir / CHECKPOINT_FILE

    @property
    def best_path(self) -> Path | None:
        """``out_dir/best.pt``: the evaluation with the best score so far, or ``None``."""
        return None if self.out_dir is None else self.out_dir / BEST_FILE

    def __repr__(self) -> str:
        spec = self.spec
        text = f"{spec.algo} on {spec.env_id}, seed {spec.seed}, {spec.device}"
        text += f", {self.env_steps:,} env steps"
        if self.best_score is not None:
            text += f", best {spec.fitness} {self.best_score:.4g}"
        elif self.last_eval is not None and (
            spec.fitness == "return" or spec.fitness in self.last_eval.metrics
        ):
            text += f", last {spec.fitness} {self.last_eval.score(spec.fitness)[0]:.4g}"
        text += f", out {str(self.out_dir)!r}" if self.out_dir is not None else ""
        return f"Pod({text})"

    # -- training ---------------------------------------------------------------------
    def run(
        self,
        budget: Budget | None = None,
        hooks: PodHooks | None = None,
        threads: int | None = None,
    ) -> TrainResult:
        """Train until the budget is spent, the spec's target is reached, or the hooks
        stop the run. ``wall_seconds`` count from here (envs and networks built) to the
        end of training.

        Parameters
        ----------
        budget
            Steps, seconds and when to evaluate; ``None``: what the spec asks for
            (:meth:`Budget.of <elegantpod.pod.budget.Budget.of>`).
        hooks
            Called after each update and each evaluation, and polled between gradient
            steps (see :class:`~elegantpod.pod.hooks.PodHooks`); a stop then ends even a long
            update within one gradient step, and the run ends (checkpointed) with the
            weights learned so far.
        threads
            Torch's intra-op thread count during the run (restored after it): ``None``
            is :func:`~elegantpod.threads.default_threads` of the pod's device (one on a
            CPU), ``0`` leaves torch's own setting alone.

        Raises
        ------
        NonFiniteError
            When an update's losses, or the state at a checkpoint or at the end, go NaN
            or infinite (an env's NaN or huge observations, or a diverged learning): the
            pod can learn nothing more, so the run fails rather than end as finished,
            and that state is never saved (see :mod:`elegantpod.pod.finite`).
        """
        budget = Budget.of(self.spec, self.learner) if budget is None else budget
        hooks = PodHooks() if hooks is None else hooks
        with torch_threads(threads, self.spec.device):
            return self._run(budget, hooks)

    def _should_stop(self) -> bool:
        """The learner's stop check: the run in progress's hooks (outside a run, never)."""
        hooks = self._hooks
        return hooks is not None and hooks.should_stop()

    def _run(self, budget: Budget, hooks: PodHooks) -> TrainResult:
        spec = self.spec
        run = PodRun.starting(budget, spec.target_reward, self.env_steps)
        stats = {}
        per_rollout = self.env.num_envs * self.collector.horizon
        self._hooks = hooks
        stopped_early = None
        try:
            while True:
                if self.graphs is not None and self.graphs.capture:
                    left = iterations_left(budget.steps, self.env_steps, per_rollout)
                    stats = self.graphs.run(iterations_left=left) or stats
                else:
                    stats = self.learner.update(self.collector.rollout()) or stats
                self.env_steps += per_rollout
                self._fail_if(nonfinite_stats(stats))  # floats already: no device sync
                if hooks.should_stop() or not continues(hooks.on_update(self, stats)):
                    break
                if run.is_due(self.env_steps):
                    try:
                        ev = self.evaluator.evaluate(self.learner, deadline=run.deadline())
                    except EvaluationIncomplete as exc:  # keep the budget and the training
                        stopped_early = str(exc)
                        logger.warning("%s; the run ends with what it trained", exc)
                        break
                    self.last_eval = ev
                    progress = run.progress(self.env_steps, ev, self.collector, stats, spec.fitness)
                    self.curve.append(progress)
                    score = run.evaluated(progress)
                    if self.out_dir is not None:
                        self._save_evaluated(score)
                    if not continues(hooks.on_evaluation(self, progress)):
                        break
                if run.is_over:
                    break
        finally:
            self._hooks = None
        wall = run.elapsed()
        ckpt = None
        if self.out_dir is not None:
            # an evaluation that ended the run has just saved this very state
            ckpt = self.checkpoint_path if self._saved_at == self.env_steps else self.save()
        else:  # a save checks the state it writes; a run that writes none checks it here
            self._fail_if(nonfinite_state({"learner": self._weights_and_moments()}))
        result = run.result(spec, self.env_steps, self.last_eval, self.curve, wall, ckpt)
        return dataclasses.replace(result, stopped_early=stopped_early)

    def _fail_if(self, found: list[str]) -> None:
        """Raise :class:`~elegantpod.pod.finite.NonFiniteError` for the ``found``
        non-finite losses or tensors, if any, with what the env's recent output says."""
        if found:
            spec = self.spec
            pod = f"{spec.algo} on {spec.env_id} (seed {spec.seed}), env step {self.env_steps:,}"
            raise non_finite_error(pod, found, self.collector.env_values())

    def _weights_and_moments(self) -> dict[str, Any]:
        """The learner's networks and optimizer state as its ``state_dict`` has them,
        without the copies it makes of the rest (a replay)."""
        learner = self.learner
        return {
            "modules": {k: m.state_dict() for k, m in learner.modules.items()},
            "optimizers": {k: o.state_dict() for k, o in learner.optimizers.items()},
        }

    def _save_evaluated(self, score: float) -> None:
        """After an evaluation: ``checkpoint.pt``, and ``best.pt`` on a best score yet."""
        payload = self.checkpoint_payload()
        best = is_best(score, self.best_score)
        if best:
            self.best_score = payload["best_score"] = float(score)
        write_evaluated(payload, self.checkpoint_path, self.best_path if best else None)
        self._saved_at = self.env_steps

    def evaluate(self, episode_index: int | None = None) -> EvalResult:
        """A deterministic evaluation of the current policy: the next one, or with
        ``episode_index`` a repeat of an earlier one's episodes (see
        :meth:`Evaluator.evaluate <elegantpod.pod.evaluator.Evaluator.evaluate>`)."""
        return self.evaluator.evaluate(self.learner, episode_index)

    @property
    def evaluations(self) -> int:
        """Evaluations run so far, across saves and loads (the last one's ``episode_index``)."""
        return self.evaluator.count

    @property
    def eval_seconds(self) -> float:
        """Wall seconds this pod object has spent evaluating."""
        return self.evaluator.seconds

    def pop_train_return(self) -> float:
        """Mean return of the training episodes finished since the last call (NaN if
        none); a run's evaluations take it too (``Progress.train_return_mean``)."""
        return self.collector.pop_train_return()

    def snapshot_and_evaluate(
        self, write: Callable[[bytes], Any], origin: dict[str, str] | None = None
    ) -> EvalResult:
        """Snapshot the pod, evaluate it while ``write(snapshot_bytes)`` runs in the
        background, and return the evaluation once both are done.

        What a tournament segment does at its end: the checkpoint leaves the critical
        path, and the snapshot counts the evaluation that follows it (a pod loaded from it
        evaluates next what this pod would). ``origin`` is recorded in the snapshot (see
        :func:`~elegantpod.pod.checkpoint.origin_of`). An error of either is raised.
        """
        payload = self.checkpoint_payload(evaluations_ahead=1)
        if origin is not None:
            payload["origin"] = dict(origin)
        return while_writing(write, checkpoint_bytes(payload), self.evaluate)

    # -- a pod that stays built between runs ---------------------------------------------
    def restart_episodes(self) -> None:
        """Put the training env and collector where ``Pod(spec).load(checkpoint)`` puts them.

        Why: a tournament can keep a pod built on its worker between segments instead of
        rebuilding it from its checkpoint. After its own :meth:`save`, this call makes the
        pod indistinguishable from a pod freshly built from the same spec that loaded
        that checkpoint (``restore_rng=True``): the same next rollouts, updates and
        evaluations, bit for bit on a CPU.

        What it does: the training env starts fresh episodes, reset with ``spec.seed`` as
        at construction, while its random generator keeps its state (as a load restores
        it); the training-return statistics, ``curve`` and ``last_eval`` are cleared.
        All else (weights, optimizer moments, step clocks, replay, generators, counters)
        stays as it is.
        """
        generator = getattr(self.env, "generator", None)
        kept = generator.get_state() if generator is not None else None
        self.collector.restart()
        if kept is not None:
            generator.set_state(kept)
        # Graphs stay: the env's and collector's new tensors are copied into the graphs'
        # own before the next replay, the episode counters were zeroed in place.
        self.curve = []
        self.last_eval = None

    def apply_hparams(self, hparams: Any) -> None:
        """Switch to ``hparams`` (the algorithm's config; ``None``: its defaults, as for a
        spec without hyperparameters) without rebuilding the pod.

        Only those that fix no network or buffer shape may change (see
        :func:`live_changes`); they take effect as ``learner.set_hparams`` makes
        them (learning rates reach the optimizers), and ``spec.hparams`` becomes ``hparams``.

        Raises
        ------
        ValueError
            Naming a structural hyperparameter that differs, a config of another
            algorithm or a bad value; the pod is unchanged then.
        """
        spec, changes = live_changes(self.spec, self.learner.config, hparams)
        if changes:
            # Graphs stay unless they must go: their fingerprint sees a changed constant
            # (a clipping range, say) before the next replay; a new learning rate is
            # written into the tensor a captured Adam reads.
            self.learner.set_hparams(**changes)
        self.spec = spec

    def set_hparams(self, **changes: Any) -> None:
        """Change hyperparameters by name, live (``pod.set_hparams(lr=3e-4)``).

        Checked like :meth:`apply_hparams` (structural ones refused, bad values named,
        the pod unchanged then); ``spec.hparams`` follows, so a checkpoint saved after
        it records the settings in force.
        """
        self.apply_hparams(replace_checked(self.learner.config, changes))

    def close(self) -> None:
        """Release the envs (an async gymnasium env's worker processes, say)."""
        self.env.close()
        self.evaluator.close()

    def __enter__(self) -> Pod:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- checkpoints --------------------------------------------------------------------
    def save(self, path: str | Path | None = None) -> str:
        """Write an atomic checkpoint (to ``out_dir/checkpoint.pt`` by default).

        ``path`` may be a local path or an fsspec URL (``s3://...``); it is passed on as
        given, since ``Path`` would mangle a URL's ``//``. What a checkpoint holds, and
        what it leaves out (episodes in progress, the learning curve): see
        :mod:`elegantpod.pod.restore`.
        """
        path = path if path is not None else self.checkpoint_path
        if path is None:
            raise ValueError("no checkpoint path: give one or construct the pod with out_dir")
        return save_checkpoint(path, self.checkpoint_payload())

    def checkpoint_payload(self, evaluations_ahead: int = 0) -> dict[str, Any]:
        """What :meth:`save` writes, as a dict (serialize it with
        :func:`~elegantpod.pod.checkpoint.checkpoint_bytes` to snapshot the pod now).

        ``evaluations_ahead``: evaluations the caller will run before anything else
        changes the pod (a segment snapshots, then evaluates while it is written): the
        evaluator's episode counter is saved as it will be after them.

        Raises
        ------
        NonFiniteError
            When weights or optimizer moments hold NaN or infinity, or any other tensor
            NaN (:func:`~elegantpod.pod.finite.nonfinite_state`): a checkpoint the loader
            would refuse, or one that could only train to nothing, is never written.
        """
        payload = {
            "spec": self.spec.to_json(),
            "env_steps": self.env_steps,
            "best_score": self.best_score,
            "learner": self.learner.state_dict(),
            "env_rng": self.env.generator.get_state() if hasattr(self.env, "generator") else None,
            "eval_count": self.evaluator.count + int(evaluations_ahead),
            "spaces": spaces_payload(self.env),
            "env_layout": self.env.layout() if hasattr(self.env, "layout") else None,
        }
        self._fail_if(nonfinite_state(payload))
        return payload

    def load(
        self,
        path: str | Path | SavedPod,
        *,
        restore_rng: bool = True,
        expect: dict[str, Any] | None = None,
    ) -> None:
        """Restore learner, step count and RNG state from a checkpoint of the same architecture.

        Weights, optimizer moments, step clocks, replay and random generators become the
        saved pod's, and :meth:`evaluate` gives what its next evaluation would have given;
        the training env's episodes in progress are not restored. See
        :mod:`elegantpod.pod.restore` for what that changes, for a checkpoint without a
        replay, and for one from other device types.

        Parameters
        ----------
        path
            A local path or fsspec URL, or a :class:`~elegantpod.pod.saved.SavedPod`
            already read (a caller that inspected the file first reads it once).
        restore_rng
            ``False`` keeps this pod's own random streams: a child pod copies its
            parent's networks, optimizer state, step clocks and replay but explores on its
            own seed (see :mod:`elegantpod.pod.restore`).
        expect
            Keywords of :func:`~elegantpod.pod.checkpoint.check_origin` (``tournament``,
            ``env_id``, ``algo``, ``pod``): a store's checkpoint must say it is what its
            record says before anything of it is used.

        Raises
        ------
        CheckpointError
            Naming the file and the field that is missing, malformed or does not fit.
        """
        saved = path if isinstance(path, SavedPod) else SavedPod.read(path, self.spec.device)
        if expect is not None:
            saved.check_origin(**expect)
        self._restore(saved, restore_rng)

    def _restore(self, saved: SavedPod, restore_rng: bool = True) -> None:
        # checked before anything changes: a bad checkpoint leaves the pod as it was
        restore = Restore.check(saved, self.spec, self.learner, self.env, restore_rng)
        restore.load_into(self.learner, self.env, self.evaluator)
        self.env_steps = restore.env_steps
        self._saved_at = None  # a loaded state is not the file in out_dir
        self.best_score = restore.best_score
        if self.graphs is not None:
            # capture again before the next replay: the load replaced tensors and
            # generator states the graphs hold (a fingerprint would see most of it)
            self.graphs.invalidate()

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str | None = None,
        *,
        env_kwargs: dict[str, Any] | None = None,
        allow_remote: bool = False,
    ) -> Pod:
        """Rebuild a pod (spec, weights, step count) from a checkpoint file.

        A checkpoint may come from anyone, so a file or URL that its spec names for the
        env (a trading env's ``data``: :func:`~elegantpod.envs.registry.external_sources`)
        is read only if you name it yourself in ``env_kwargs``, or say ``allow_remote``.

        Parameters
        ----------
        path
            Local path or fsspec URL of the checkpoint, or a run's folder (``train(...,
            out=folder)``): its ``best.pt``, the best evaluation, else its
            ``checkpoint.pt``.
        device
            Where the pod lives; ``None``: the checkpoint's device, which must exist here.
        env_kwargs
            Env keywords of your own, e.g. ``{"data": "prices.csv"}``: they replace the
            checkpoint's, for the training and the evaluation env alike.
        allow_remote
            Read the files and URLs the checkpoint names: only for one you trust.

        Raises
        ------
        CheckpointError
            Naming the file and the field: a missing, corrupt or foreign file, a bad spec
            or state, a device this machine lacks, or data you did not pass.
        """
        spec, saved = rebuilt_spec(path, device, env_kwargs, allow_remote)
        pod = cls(spec)
        pod._restore(saved)
        return pod


# ----------------------------------------------------------------------
# The files a pod writes as it trains: ``checkpoint.pt`` and ``best.pt`` after an
# evaluation, and a snapshot written in the background of the evaluation that follows it.
#
# The order of the writes and the thread they run on are a contract of their own (a
# killed run must never leave a ``checkpoint.pt`` that claims a best ``best.pt`` does not
# hold); the pod's methods above only decide what to save and when.


T = TypeVar("T")

_WRITER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="elegantpod-checkpoint")
"""Writes snapshots in the background of the evaluation that follows them."""


def is_best(score: float, best_score: float | None) -> bool:
    """Whether an evaluation's ``score`` beats the best so far (a NaN or infinite one
    never does)."""
    return math.isfinite(score) and (best_score is None or score > best_score)


def write_evaluated(
    payload: dict[str, Any],
    checkpoint_path: str | os.PathLike,
    best_path: str | os.PathLike | None = None,
) -> None:
    """After an evaluation: ``checkpoint.pt`` (a killed run loses at most one evaluation
    interval) and, given ``best_path`` (the score is the best yet), ``best.pt`` too, so
    that a later, worse stretch of training never overwrites the agent worth keeping.

    ``best.pt`` is written first: ``checkpoint.pt`` records ``best_score``, so a kill
    between the two writes must not leave it claiming a best that ``best.pt`` does not
    hold. ``best.pt`` is the agent to use, not a run to resume: it has no replay
    (``checkpoint.pt`` keeps it).
    """
    if best_path is not None:
        write_checkpoint_bytes(best_path, checkpoint_bytes(without_replay(payload)))
    write_checkpoint_bytes(checkpoint_path, checkpoint_bytes(payload))


def while_writing(write: Callable[[bytes], Any], data: bytes, work: Callable[[], T]) -> T:
    """``work()``, while ``write(data)`` runs on a background thread; returns once both
    have ended, raising the error of either."""
    written = _WRITER.submit(write, data)
    try:
        return work()
    finally:
        written.result()


# ----------------------------------------------------------------------
# Which hyperparameters a built pod may change, and the check that refuses the rest.
#
# A pod's networks and buffers are allocated from some of its hyperparameters (an
# algorithm's ``structural_hparams``: hidden sizes, buffer size, env count); the others (a
# learning rate, a clipping range) can change between two updates. A population-based
# tournament changes them on a pod that stays built, so the check lives in one place:
# :meth:`Pod.apply_hparams <elegantpod.pod.pod.Pod.apply_hparams>` asks it before changing
# anything.


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
