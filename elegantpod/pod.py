"""A pod: collector (rollouts), learner (updates) and evaluator (deterministic episodes).

The pod is the unit a tournament schedules. It trains for a budget of env steps and/or
seconds, or until an evaluation reaches a target return, reporting :class:`Progress`
after each evaluation, and it checkpoints so that a resumed pod continues from its step
count with identical weights, optimizer moments, replay and RNG streams (see
:meth:`Pod.load` for what a resume does not restore).

Randomness is per pod, never torch's process-wide RNG: the learner's generator(s) (on the
learner's device, seeded from ``spec.seed``) draw initial weights, actions, exploration
noise, minibatches and replay samples, and each env has its own generator for its
resets. Pods that share a process (a Dask worker's threads) therefore repeat exactly
what each would do alone.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from elegantpod.agents import get_algo
from elegantpod.agents.base import Learner
from elegantpod.agents.fusion import strip
from elegantpod.budget import Budget
from elegantpod.checkpoint import (
    BEST_FILE,
    CHECKPOINT_FILE,
    CheckpointError,
    check_devices,
    checked_rng_state,
    checkpoint_bytes,
    resolve_checkpoint,
    resolve_env_kwargs,
    save_checkpoint,
    without_replay,
    write_checkpoint_bytes,
)
from elegantpod.checks import replace_checked
from elegantpod.collector import Collector
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.envs import make_env
from elegantpod.evaluator import Evaluator
from elegantpod.hooks import PodHooks, continues
from elegantpod.memory import check_memory
from elegantpod.pod_build import (
    build_learner,
    check_learner_rng,
    device_types,
    each_learner,
    env_dims,
    iteration_graphs,
    iterations_left,
    learner_seeds,
)
from elegantpod.saved_pod import SavedPod
from elegantpod.threads import torch_threads
from elegantpod.types import EvalResult, Progress, TrainResult

Tensor = torch.Tensor
_WRITER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="elegantpod-checkpoint")
"""Writes snapshots in the background of the evaluation that follows them."""


class Pod:
    """Collector + learner + evaluator for one :class:`PodSpec`.

    Run it with :meth:`run` (a :class:`~elegantpod.budget.Budget` and
    :class:`~elegantpod.hooks.PodHooks`: the only ways to bound, watch and stop a run),
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
    """

    def __init__(self, spec: PodSpec, out_dir: str | Path | None = None, resume: bool = False):
        algo = get_algo(spec.algo)
        hparams = spec.hparams if spec.hparams is not None else algo.config_cls()
        spec = spec if spec.hparams is not None else dataclasses.replace(spec, hparams=hparams)
        spec.validate()  # with the hyperparameters in force (defaults filled in)
        # "auto" is decided here, where the pod runs; a device this machine lacks fails
        # now, before any env or network exists.
        self.spec = spec = dataclasses.replace(
            spec,
            device=resolve_device(spec.device),
            learner_devices=tuple(resolve_device(d) for d in spec.learner_devices),
        )
        check_memory(spec)  # a lower bound, before the envs allocate anything
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.env = make_env(
            spec.env_id,
            num_envs=hparams.num_envs,
            device=spec.device,
            seed=spec.seed,
            **spec.env_kwargs,
        )
        # now with the env's dimensions, before buffers and networks are allocated
        check_memory(spec, *env_dims(self.env))
        self.learner: Learner = build_learner(algo, self.env, hparams, spec)
        horizon = hparams.horizon
        self.collector = Collector(self.env, self.learner, horizon, spec.seed)
        self.graphs = iteration_graphs(self.collector, self.learner, spec)
        """The pod's :class:`~elegantpod.capture.IterationGraphs`, or ``None``: eager."""
        self.evaluator = Evaluator(
            spec.env_id,
            spec.eval_episodes,
            spec.device,
            spec.seed + 1_000_003,
            {**spec.env_kwargs, **spec.eval_env_kwargs},
        )
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
        stop the run.

        Parameters
        ----------
        budget
            Steps, seconds and when to evaluate; ``None``: what the spec asks for
            (:meth:`Budget.of <elegantpod.budget.Budget.of>`).
        hooks
            Called after each update and each evaluation, and polled between gradient
            steps (see :class:`~elegantpod.hooks.PodHooks`); a stop then ends even a long
            update within one gradient step, and the run ends (checkpointed) with the
            weights learned so far.
        threads
            Torch's intra-op thread count during the run (restored after it): ``None``
            is :func:`~elegantpod.threads.default_threads` of the pod's device (one on a
            CPU), ``0`` leaves torch's own setting alone.

        ``wall_seconds`` counts from here (envs and networks already built) to the end of
        the evaluation that first met the target, or to the end of training.
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
        spec, learner = self.spec, self.learner
        every = budget.evaluate_every
        next_eval = None if every is None else (self.env_steps // every + 1) * every
        start = time.perf_counter()
        solved, stats = False, {}
        per_rollout = self.env.num_envs * self.collector.horizon
        self._hooks = hooks
        try:
            while True:
                if self.graphs is not None and self.graphs.capture:
                    left = iterations_left(budget.steps, self.env_steps, per_rollout)
                    stats = self.graphs.run(iterations_left=left) or stats
                else:
                    stats = learner.update(self.collector.rollout()) or stats
                self.env_steps += per_rollout
                if hooks.should_stop() or not continues(hooks.on_update(self, stats)):
                    break
                elapsed = time.perf_counter() - start
                out_of_steps = budget.steps is not None and self.env_steps >= budget.steps
                out_of_time = budget.seconds is not None and elapsed >= budget.seconds
                due = next_eval is not None and self.env_steps >= next_eval
                if due or ((out_of_steps or out_of_time) and budget.evaluate_at_end):
                    if next_eval is not None:
                        next_eval += every
                    progress = self._evaluate(start, stats)
                    score = progress.eval_return_mean if progress.score is None else progress.score
                    solved = spec.target_reward is not None and score >= spec.target_reward
                    if self.out_dir is not None:
                        self._save_evaluated(score)
                    if not continues(hooks.on_evaluation(self, progress)):
                        break
                if solved or out_of_steps or out_of_time:
                    break
        finally:
            self._hooks = None
        wall = time.perf_counter() - start
        ckpt = None
        if self.out_dir is not None:
            # an evaluation that ended the run has just saved this very state
            ckpt = self.checkpoint_path if self._saved_at == self.env_steps else self.save()
        ev = self.last_eval
        return TrainResult(
            env=spec.env_id,
            algo=spec.algo,
            seed=spec.seed,
            solved=solved,
            eval_return_mean=ev.mean if ev else math.nan,
            eval_return_std=ev.std if ev else math.nan,
            env_steps=self.env_steps,
            wall_seconds=wall,
            checkpoint=str(ckpt) if ckpt else None,
            curve=tuple(self.curve),
            fitness=spec.fitness,
            score=self.curve[-1].score if self.curve else None,
        )

    def _save_evaluated(self, score: float) -> None:
        """After an evaluation: ``checkpoint.pt`` (a killed run loses at most one
        evaluation interval) and, when the score is the best yet, ``best.pt`` too, so
        that a later, worse stretch of training never overwrites the agent worth keeping.
        """
        payload = self.checkpoint_payload()
        is_best = math.isfinite(score) and (self.best_score is None or score > self.best_score)
        if is_best:
            self.best_score = float(score)
            payload["best_score"] = self.best_score
        if is_best:
            # first: checkpoint.pt records best_score, so a kill between the two writes
            # must not leave it claiming a best that best.pt does not hold. best.pt is the
            # agent to use, not a run to resume: no replay (checkpoint.pt keeps it)
            write_checkpoint_bytes(self.best_path, checkpoint_bytes(without_replay(payload)))
        write_checkpoint_bytes(self.checkpoint_path, checkpoint_bytes(payload))
        self._saved_at = self.env_steps

    def _evaluate(self, start: float, stats: dict) -> Progress:
        ev = self.evaluator.evaluate(self.learner)
        self.last_eval = ev
        p = Progress(
            env_steps=self.env_steps,
            wall_seconds=time.perf_counter() - start,
            eval_return_mean=ev.mean,
            eval_return_std=ev.std,
            train_return_mean=self.collector.pop_train_return(),
            stats=dict(stats),
            score=None if self.spec.fitness == "return" else ev.score(self.spec.fitness)[0],
        )
        self.curve.append(p)
        return p

    def evaluate(self, episode_index: int | None = None) -> EvalResult:
        """A deterministic evaluation of the current policy: the next one, or with
        ``episode_index`` a repeat of an earlier one's episodes (see
        :meth:`Evaluator.evaluate <elegantpod.evaluator.Evaluator.evaluate>`)."""
        return self.evaluator.evaluate(self.learner, episode_index)

    @property
    def evaluations(self) -> int:
        """Evaluations run so far, counted across saves and loads (the last one's
        ``episode_index``)."""
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
        path, and the snapshot counts the evaluation that follows it (so a pod loaded
        from it evaluates next what this pod would). ``origin`` is recorded in the
        snapshot (see :func:`~elegantpod.checkpoint.origin_of`). An error of either is
        raised, once both have ended.
        """
        payload = self.checkpoint_payload(evaluations_ahead=1)
        if origin is not None:
            payload["origin"] = dict(origin)
        written = _WRITER.submit(write, checkpoint_bytes(payload))
        try:
            ev = self.evaluate()
        finally:
            written.result()
        return ev

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
        Weights, optimizer moments, step clocks, replay, the learners' and the env's
        random generators, ``env_steps`` and the evaluator's episode counter stay as
        they are.
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

        Only hyperparameters that leave network and buffer shapes alone may change (see
        the learner's ``structural_hparams``); they take effect as
        ``learner.set_hparams`` makes them (learning rates reach the optimizers), and
        ``spec.hparams`` becomes ``hparams``.

        Raises
        ------
        ValueError
            Naming a structural hyperparameter that differs, a config of another
            algorithm or a bad value; the pod is unchanged then.
        """
        current = self.learner.config
        hparams = hparams if hparams is not None else get_algo(self.spec.algo).config_cls()
        if type(hparams) is not type(current):
            raise ValueError(
                f"hparams must be a {type(current).__name__} for this {self.spec.algo} pod, "
                f"got {type(hparams).__name__}"
            )
        hparams.validate()
        changes = {
            f.name: getattr(hparams, f.name)
            for f in dataclasses.fields(hparams)
            if getattr(hparams, f.name) != getattr(current, f.name)
        }
        structural = get_algo(self.spec.algo).structural_hparams
        fixed = [
            f"{k}: {getattr(current, k)!r} -> {v!r}" for k, v in changes.items() if k in structural
        ]
        if fixed:
            raise ValueError(
                f"{', '.join(fixed)}: these fix network or buffer shapes, so this pod "
                "cannot take them; build a new pod"
            )
        if changes:
            # Graphs stay unless they must go: their fingerprint sees a changed constant
            # (a clipping range, say) before the next replay; a new learning rate is
            # written into the tensor a captured Adam reads.
            self.learner.set_hparams(**changes)
        self.spec = dataclasses.replace(self.spec, hparams=hparams)

    def set_hparams(self, **changes: Any) -> None:
        """Change hyperparameters by name, live (``pod.set_hparams(lr=3e-4)``).

        Checked like :meth:`apply_hparams` (structural ones refused, bad values named,
        the pod unchanged then); ``spec.hparams`` follows, so a checkpoint saved after
        it records the settings in force.
        """
        self.apply_hparams(replace_checked(self.learner.config, changes))

    def _invalidate_graphs(self) -> None:
        """Capture again before the next replay: a load replaced tensors and generator
        states the graphs hold (a fingerprint would see most of it; this is certain)."""
        if self.graphs is not None:
            self.graphs.invalidate()

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
        given, since ``Path`` would mangle a URL's ``//``.

        Saved: the spec, the env-step count, the learner's state (networks, optimizer
        moments, step clocks, an off-policy learner's replay and exploration noise
        process, its random generator; for fused learners each learner's), the training
        env's random generator (torch
        envs) and the evaluator's episode counter, which seeds its next evaluation.
        Not saved: the training env's internal state (episodes in progress), the
        training-return statistics, the learning curve and the last evaluation. See
        :meth:`load` for what that changes.
        """
        path = path if path is not None else self.checkpoint_path
        if path is None:
            raise ValueError("no checkpoint path: give one or construct the pod with out_dir")
        return save_checkpoint(path, self.checkpoint_payload())

    def checkpoint_payload(self, evaluations_ahead: int = 0) -> dict[str, Any]:
        """What :meth:`save` writes, as a dict (serialize it with
        :func:`~elegantpod.checkpoint.checkpoint_bytes` to snapshot the pod now).

        ``evaluations_ahead``: evaluations the caller will run before anything else
        changes the pod (a tournament segment snapshots, then evaluates while the
        snapshot is written); they only advance the evaluator's episode counter, which
        is saved as it will be after them.
        """
        return {
            "spec": self.spec.to_json(),
            "env_steps": self.env_steps,
            "best_score": self.best_score,
            "learner": self.learner.state_dict(),
            "env_rng": self.env.generator.get_state() if hasattr(self.env, "generator") else None,
            "eval_count": self.evaluator.count + int(evaluations_ahead),
        }

    def load(
        self,
        path: str | Path | SavedPod,
        *,
        restore_rng: bool = True,
        expect: dict[str, Any] | None = None,
    ) -> None:
        """Restore learner, step count and RNG state from a checkpoint of the same architecture.

        After ``load`` (or ``Pod(spec, out_dir, resume=True)``) the weights, optimizer
        moments, step clocks, replay and random generators are those of the saved pod,
        and :meth:`evaluate` gives what the saved pod's next evaluation would have given
        (same weights, same episode seeds). The training env, however, is not resumed:
        episodes in progress at the save are dropped, and training continues from the
        fresh episodes this pod's env started at construction (reset with
        ``spec.seed``), while later resets draw from the restored env generator. So the
        first rollouts after a resume, and what the learner learns from them, differ
        from those of an uninterrupted run; training returns restart their count and the
        learning curve (``curve``, ``last_eval``) starts empty. With the episodes, a
        correlated exploration noise (OU, colored) restarts at the first rollout, drawn
        from the restored generator, so a resumed pod's noise is still reproducible.

        A checkpoint without a replay (:func:`elegantpod.checkpoint.strip_replay_from_file`
        makes one) loads with an empty replay. Its step clock is restored, so the learner does not
        redo its uniform-random warm-up (nor wait ``learning_starts`` env steps again):
        it keeps exploring with its policy and takes its next gradient step once its
        replay holds ``min(learning_starts, 4 * batch_size, buffer_size)`` transitions
        again (a fused learner: its share of ``learning_starts``).

        A checkpoint from other device types (a GPU pod's, loaded on a CPU) or another
        number of fused learners restores all of this except the random generators
        (a state fits only its device type, and each learner needs its own stream):
        this pod keeps its own seeded streams.

        ``restore_rng=False`` keeps this pod's own random streams: a child pod copies its
        parent's networks, optimizer state, step clocks and replay but explores on its
        own seed (its learners' generators are reseeded from its spec; its env generator
        and its evaluator's episode counter stay as they are).

        ``expect``: keywords of :func:`~elegantpod.checkpoint.check_origin` (``tournament``,
        ``env_id``, ``algo``, ``pod``): a store's checkpoint must say it is what its record
        says before anything of it is used.

        ``path`` may be a :class:`~elegantpod.saved_pod.SavedPod` already read (a caller
        that inspected the file first reads it once).

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
        where = f"checkpoint {saved.path!r}"
        if saved.spec.algo != self.spec.algo or saved.spec.env_id != self.spec.env_id:
            raise CheckpointError(
                f"{where} holds a {saved.spec.algo!r} agent for {saved.spec.env_id!r}, "
                f"not {self.spec.algo!r} for {self.spec.env_id!r}"
            )
        learner_state = saved.learner
        # A generator's state only fits generators of its device type: after a move (a
        # GPU pod's checkpoint loaded on a CPU), or into another number of fused
        # learners, this pod keeps its own seeded streams.
        is_same_kind = device_types(saved.spec) == device_types(self.spec)
        if not (restore_rng and is_same_kind):
            # nor the exploration noise drawn from them: a fresh stream starts fresh noise
            learner_state = strip(learner_state, "generator", "noise")
        # Check every RNG state before changing anything: a bad one leaves the pod as it was.
        check_learner_rng(learner_state, self.learner, where)
        env_gen = getattr(self.env, "generator", None)
        env_rng = saved.env_rng if restore_rng and is_same_kind else None
        if env_rng is not None and env_gen is not None:
            env_rng = checked_rng_state(env_rng, env_gen, where, "env_rng")
        try:
            self.learner.load_state_dict(learner_state)
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(
                f"{where}: field 'learner' does not fit this {self.spec.algo} network "
                f"(hidden={self.learner.config.hidden}): {first}"
            ) from exc
        self.env_steps = saved.env_steps
        self._saved_at = None  # a loaded state is not the file in out_dir
        self.best_score = saved.best_score
        self._invalidate_graphs()
        if not restore_rng:
            for learner, seed in zip(
                each_learner(self.learner), learner_seeds(self.spec), strict=True
            ):
                learner.generator.manual_seed(seed)
            return
        if saved.eval_count is not None:  # older checkpoints: none saved
            self.evaluator.count = saved.eval_count
        if env_rng is not None and env_gen is not None:
            env_gen.set_state(env_rng)

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
        env (a trading env's ``data``: see
        :func:`~elegantpod.envs.registry.external_sources`) is read only if you name it
        yourself in ``env_kwargs``, or say ``allow_remote=True``.

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
        path = resolve_checkpoint(path)
        saved = SavedPod.read(path)
        spec = saved.spec
        if device is not None:
            spec = dataclasses.replace(spec, device=device, learner_devices=())
        else:
            check_devices(spec, path)
        pod = cls(resolve_env_kwargs(spec, env_kwargs, path, allow_remote))
        pod._restore(saved)
        return pod
