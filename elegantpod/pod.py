"""A pod: worker (rollouts), learner (updates) and evaluator (deterministic episodes).

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

import contextlib
import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.base import Learner
from elegantpod.buffers import RolloutBuffer
from elegantpod.checkpoint import (
    BEST_FILE,
    CHECKPOINT_FILE,
    CheckpointError,
    check_devices,
    check_origin,
    checked_rng_state,
    checkpoint_bytes,
    load_checkpoint,
    resolve_checkpoint,
    resolve_env_kwargs,
    save_checkpoint,
    spec_of,
    without_replay,
    write_checkpoint_bytes,
)
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.envs import make_env
from elegantpod.envs.base import VecEnv
from elegantpod.memory import check_memory
from elegantpod.types import EvalResult, Progress, TrainResult

Tensor = torch.Tensor


class Worker:
    """Steps a batched env with a learner's exploration policy into a rollout buffer."""

    def __init__(self, env: VecEnv, learner: Learner, horizon: int, seed: int):
        self.env, self.learner, self.horizon = env, learner, int(horizon)
        self.buffer = RolloutBuffer(
            horizon,
            env.num_envs,
            learner.obs_shape,
            learner.action_shape,
            learner.action_dtype,
            env.device,
        )
        self.seed = int(seed)
        self.obs = env.reset(seed=self.seed)
        self.is_fresh = True
        """Every episode is fresh (after a reset): the next rollout tells the learner."""
        # Finished-episode statistics stay on the device: no host sync per step.
        self.return_sum = torch.zeros((), device=env.device, dtype=torch.float64)
        self.episodes = torch.zeros((), device=env.device, dtype=torch.int64)

    def restart(self) -> None:
        """Start fresh episodes as at construction (the env reset with the worker's seed)
        and forget the finished-episode statistics; the learner's exploration noise
        restarts at the next rollout."""
        self.obs = self.env.reset(seed=self.seed)
        self.is_fresh = True
        self.return_sum.zero_()
        self.episodes.zero_()

    @torch.inference_mode()
    def rollout(self):
        """Collect ``horizon`` vector steps; returns the time-major :class:`Batch`.

        After each step the learner hears which episodes ended
        (``learner.episodes_ended``), so that its exploration noise restarts with them.
        """
        if self.is_fresh:
            # At the rollout, not in restart(): a pod rebuilt from a checkpoint (fresh
            # episodes, the saved noise) then restarts its noise exactly as a pod that
            # restarted its episodes after saving the same state.
            self.learner.episodes_ended(None)
            self.is_fresh = False
        obs = self.obs
        for t in range(self.horizon):
            stored, env_action = self.learner.explore(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(env_action)
            self.buffer.write(t, obs, stored, reward, info["final_obs"], terminated, truncated)
            done = terminated | truncated
            self.learner.episodes_ended(done)
            self.return_sum += (info["episode_return"] * done).sum()
            self.episodes += done.sum()
            obs = next_obs
        self.obs = obs
        return self.buffer.batch()

    def pop_train_return(self) -> float:
        """Mean return of training episodes finished since the last call (NaN if none)."""
        n = int(self.episodes)
        mean = float(self.return_sum) / n if n else math.nan
        self.return_sum.zero_()
        self.episodes.zero_()
        return mean


class Evaluator:
    """Runs ``episodes`` deterministic episodes in parallel on a separate env.

    ``env_kwargs`` configure that env (a trading env's validation dates, say); an env
    that reports ``episode_metrics()`` (Sharpe, Calmar...) has them collected too.
    """

    def __init__(self, env_id: str, episodes: int, device, seed: int, env_kwargs=None):
        self.env = make_env(
            env_id, num_envs=episodes, device=device, seed=seed, **(env_kwargs or {})
        )
        self.episodes, self.seed, self.count = int(episodes), int(seed), 0
        self.seconds = 0.0
        """Wall seconds spent evaluating so far (a tournament reports its share)."""

    @torch.inference_mode()
    def evaluate(self, learner: Learner) -> EvalResult:
        """One episode per sub-env; fresh, reproducible start states on each call."""
        start = time.perf_counter()
        try:
            return self._evaluate(learner)
        finally:
            self.seconds += time.perf_counter() - start

    def _evaluate(self, learner: Learner) -> EvalResult:
        self.count += 1
        obs = self.env.reset(seed=self.seed + 7919 * self.count)
        n = self.episodes
        finished = torch.zeros(n, dtype=torch.bool, device=self.env.device)
        returns = torch.zeros(n, dtype=torch.float64, device=self.env.device)
        lengths = torch.zeros(n, dtype=torch.int64, device=self.env.device)
        limit = self.env.max_episode_steps or 100_000
        for step in range(limit + 1):
            obs, _, terminated, truncated, info = self.env.step(
                learner.act(obs, deterministic=True)
            )
            done = (terminated | truncated) & ~finished
            returns = torch.where(done, info["episode_return"].double(), returns)
            lengths = torch.where(done, info["episode_length"], lengths)
            finished |= done
            if step % 16 == 15 and bool(finished.all()):
                break
        if not bool(finished.all()):
            raise RuntimeError(f"evaluation did not finish {n} episodes within {limit} steps")
        # envs that record whole episodes (a full-range trading env) report more metrics
        measured = self.env.episode_metrics() if getattr(self.env, "record", False) else {}
        extra = {k: tuple(v) for k, v in measured.items()}
        return EvalResult(tuple(returns.tolist()), tuple(int(x) for x in lengths.tolist()), extra)


class Pod:
    """Worker + learner + evaluator for one :class:`PodSpec`.

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
        check_memory(spec, *_dims(self.env))
        self.learner: Learner = _build_learner(algo, self.env, hparams, spec)
        horizon = hparams.horizon
        self.worker = Worker(self.env, self.learner, horizon, spec.seed)
        self.graphs = _iteration_graphs(self.worker, self.learner, spec)
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
        self.stop_event = threading.Event()
        """Set by :meth:`request_stop`; the run in progress (or the next) polls it."""
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
        callback: Callable[[Progress], bool | None] | None = None,
        on_iteration: Callable[[Pod, dict[str, float]], bool | None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        threads: int | None = None,
        final_eval: bool = True,
    ) -> TrainResult:
        """Train until the target, the step budget or the time budget is reached.

        ``callback(progress)`` is called after each evaluation and
        ``on_iteration(pod, stats)`` after each learner update (this is where a
        tournament polls its controls and publishes progress); either returning
        ``False`` stops the run. ``should_stop()`` is polled inside each update too,
        between gradient steps, as is :meth:`request_stop`: a stop then ends even a long
        update within one gradient step, and the run ends (checkpointed) with the
        weights learned so far. It must be cheap (read a remote control at most every
        few tenths of a second). ``final_eval=False`` skips the evaluation that a spent
        budget triggers (a tournament segment evaluates itself, while its checkpoint is
        written).
        ``wall_seconds`` counts from here (envs and networks already built) to the end of
        the evaluation that first met the target, or to the end of training.

        ``threads`` is torch's intra-op thread count during the run (restored after it):
        ``None`` is :func:`default_threads` of the pod's device (one on a CPU), ``0``
        leaves torch's own setting alone.
        """
        with torch_threads(threads, self.spec.device):
            return self._run(callback, on_iteration, should_stop, final_eval)

    def _run(self, callback, on_iteration, should_stop, final_eval) -> TrainResult:
        spec, learner = self.spec, self.learner
        max_steps = spec.max_steps or (None if spec.max_seconds else learner.default_max_steps)
        eval_every = spec.eval_every_steps or learner.default_eval_every()
        next_eval = (self.env_steps // eval_every + 1) * eval_every
        start = time.perf_counter()
        solved, stats = False, {}
        per_rollout = self.env.num_envs * self.worker.horizon

        def is_stopping() -> bool:
            return self.stop_event.is_set() or (should_stop is not None and bool(should_stop()))

        # a learner that does not poll (a user's own, say) stops between updates only
        outside = getattr(learner, "should_stop", None) or (lambda: False)
        learner.should_stop = is_stopping
        try:
            while True:
                if self.graphs is not None and self.graphs.capture:
                    left = _iterations_left(max_steps, self.env_steps, per_rollout)
                    stats = self.graphs.run(iterations_left=left) or stats
                else:
                    batch = self.worker.rollout()
                    stats = learner.update(batch) or stats
                self.env_steps += per_rollout
                if is_stopping():
                    break
                if on_iteration is not None and on_iteration(self, stats) is False:
                    break
                elapsed = time.perf_counter() - start
                out_of_steps = max_steps is not None and self.env_steps >= max_steps
                out_of_time = spec.max_seconds is not None and elapsed >= spec.max_seconds
                budget_spent = (out_of_steps or out_of_time) and final_eval
                if self.env_steps >= next_eval or budget_spent:
                    next_eval += eval_every
                    progress = self._evaluate(start, stats)
                    score = progress.eval_return_mean if progress.score is None else progress.score
                    solved = spec.target_reward is not None and score >= spec.target_reward
                    if self.out_dir is not None:
                        self._save_evaluated(score)
                    if callback is not None and callback(progress) is False:
                        break
                if solved or out_of_steps or out_of_time:
                    break
        finally:
            learner.should_stop = outside
            self.stop_event.clear()  # the request is answered
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
            train_return_mean=self.worker.pop_train_return(),
            stats=dict(stats),
            score=None if self.spec.fitness == "return" else ev.score(self.spec.fitness)[0],
        )
        self.curve.append(p)
        return p

    def evaluate(self) -> EvalResult:
        """A fresh deterministic evaluation of the current policy."""
        return self.evaluator.evaluate(self.learner)

    # -- a pod that stays built between runs ---------------------------------------------
    def restart_episodes(self) -> None:
        """Put the training env and worker where ``Pod(spec).load(checkpoint)`` puts them.

        Why: a tournament can keep a pod built on its worker between segments instead of
        rebuilding it from its checkpoint. After its own :meth:`save`, this call makes the
        pod indistinguishable from a pod freshly built from the same spec that loaded
        that checkpoint (``restore_rng=True``): the same next rollouts, updates and
        evaluations, bit for bit on a CPU.

        What it does: the training env starts fresh episodes, reset with ``spec.seed`` as
        at construction, while its random generator keeps its state (as a load restores
        it); the training-return statistics, ``curve`` and ``last_eval`` are cleared, and
        a pending :meth:`request_stop` is dropped. Weights, optimizer moments, step
        clocks, replay, the learners' and the env's random generators, ``env_steps``
        and the evaluator's episode counter stay as they are.
        """
        generator = getattr(self.env, "generator", None)
        kept = generator.get_state() if generator is not None else None
        self.worker.restart()
        if kept is not None:
            generator.set_state(kept)
        # Graphs stay: the env's and worker's new tensors are copied into the graphs'
        # own before the next replay, the episode counters were zeroed in place.
        self.curve = []
        self.last_eval = None
        self.stop_event.clear()

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

    def _invalidate_graphs(self) -> None:
        """Capture again before the next replay: a load replaced tensors and generator
        states the graphs hold (a fingerprint would see most of it; this is certain)."""
        if self.graphs is not None:
            self.graphs.invalidate()

    def request_stop(self) -> None:
        """Ask the run in progress (or else the next) to end within one gradient step.

        Safe to call from any thread: a control thread, a widget, a signal handler.
        """
        self.stop_event.set()

    def close(self) -> None:
        """Release the envs (an async gymnasium env's worker processes, say)."""
        self.env.close()
        self.evaluator.env.close()

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
        self, path: str | Path, *, restore_rng: bool = True, expect: dict[str, Any] | None = None
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

        A checkpoint without a replay (see :func:`~elegantpod.checkpoint.strip_replay`)
        loads with an empty replay. Its step clock is restored, so the learner does not
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

        Raises
        ------
        CheckpointError
            Naming the file and the field that is missing, malformed or does not fit.
        """
        data = load_checkpoint(path, map_location=self.spec.device)
        if expect is not None:
            check_origin(data, path, **expect)
        self._restore(data, path, restore_rng)

    def _restore(self, data: dict[str, Any], path, restore_rng: bool = True) -> None:
        where = f"checkpoint {str(path)!r}"
        saved = spec_of(data, path)
        if saved.algo != self.spec.algo or saved.env_id != self.spec.env_id:
            raise CheckpointError(
                f"{where} holds a {saved.algo!r} agent for {saved.env_id!r}, "
                f"not {self.spec.algo!r} for {self.spec.env_id!r}"
            )
        env_steps = data.get("env_steps")
        if isinstance(env_steps, bool) or not isinstance(env_steps, int) or env_steps < 0:
            raise CheckpointError(
                f"{where}: field 'env_steps' must be an integer >= 0, got {env_steps!r}"
            )
        learner_state = data.get("learner")
        if not isinstance(learner_state, dict):
            raise CheckpointError(f"{where}: field 'learner' is missing or not a dict")
        # A generator's state only fits generators of its device type: after a move (a
        # GPU pod's checkpoint loaded on a CPU), or into another number of fused
        # learners, this pod keeps its own seeded streams.
        is_same_kind = _device_types(saved) == _device_types(self.spec)
        if not (restore_rng and is_same_kind):
            learner_state = _without_generators(learner_state)
        # Check every RNG state before changing anything: a bad one leaves the pod as it was.
        _check_learner_rng(learner_state, self.learner, where)
        env_gen = getattr(self.env, "generator", None)
        env_rng = data.get("env_rng") if restore_rng and is_same_kind else None
        if env_rng is not None and env_gen is not None:
            env_rng = checked_rng_state(env_rng, env_gen, where, "env_rng")
        best_score = data.get("best_score")  # older checkpoints: none saved
        if best_score is not None and (
            isinstance(best_score, bool)
            or not isinstance(best_score, int | float)
            or not math.isfinite(best_score)
        ):
            raise CheckpointError(
                f"{where}: field 'best_score' must be a finite number or None, got {best_score!r}"
            )
        eval_count = data.get("eval_count", self.evaluator.count)  # older: none saved
        if isinstance(eval_count, bool) or not isinstance(eval_count, int) or eval_count < 0:
            raise CheckpointError(
                f"{where}: field 'eval_count' must be an integer >= 0, got {eval_count!r}"
            )
        try:
            self.learner.load_state_dict(learner_state)
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(
                f"{where}: field 'learner' does not fit this {self.spec.algo} network "
                f"(hidden={self.learner.config.hidden}): {first}"
            ) from exc
        self.env_steps = env_steps
        self._saved_at = None  # a loaded state is not the file in out_dir
        self.best_score = None if best_score is None else float(best_score)
        self._invalidate_graphs()
        if not restore_rng:
            for learner, seed in zip(_learners(self.learner), _seeds(self.spec), strict=True):
                learner.generator.manual_seed(seed)
            return
        self.evaluator.count = eval_count
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
        data = load_checkpoint(path)
        spec = spec_of(data, path)
        if device is not None:
            spec = dataclasses.replace(spec, device=device, learner_devices=())
        else:
            check_devices(spec, path)
        pod = cls(resolve_env_kwargs(spec, env_kwargs, path, allow_remote))
        pod._restore(data, path)
        return pod


def default_threads(device: str) -> int | None:
    """Torch threads a run on ``device`` uses when the caller names none.

    On a CPU: ``OMP_NUM_THREADS`` where the environment sets it, else one. Why: the
    batched envs and small networks of a pod gain little from intra-op threads, and on a
    busy machine (two cores shared with other processes) torch's default of one thread
    per core stalls each op on a descheduled thread: CartPole PPO to 475 took 51 s
    instead of 4 s (``benchmarks/threads.py``, medians of 3, load average 4). Elsewhere
    (a GPU): ``None``, torch's own setting.
    """
    if torch.device(resolve_device(device)).type != "cpu":
        return None
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else 1


def check_threads(threads: Any) -> None:
    """Raise ``ValueError`` unless ``threads`` is ``None`` or an integer >= 0."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(
            f"threads must be an integer >= 1 (0: torch's own setting), got {threads!r}"
        )


@contextlib.contextmanager
def torch_threads(threads: int | None, device: str) -> Iterator[int]:
    """Run the block with ``threads`` torch intra-op threads, then restore the count.

    ``None``: :func:`default_threads` of ``device``; ``0``: leave torch's setting alone.
    Yields the count in effect. The count is process-wide: pods running in threads of one
    process (a Dask worker's) should all ask for the same.
    """
    check_threads(threads)
    want = default_threads(device) if threads is None else threads or None
    before = torch.get_num_threads()
    if want is None or want == before:
        yield before
        return
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(before)


def _dims(env: VecEnv) -> tuple[int, int]:
    """Observation and action dimensions (discrete: choices) of ``env``, for memory checks."""
    obs = env.observation_space
    act = env.action_space
    obs_dim = math.prod(obs.shape) if obs.shape else 1
    if isinstance(act, gymnasium.spaces.Discrete):
        return obs_dim, int(act.n)
    return obs_dim, math.prod(act.shape) if act.shape else 1


def _seeds(spec: PodSpec) -> list[int]:
    """The seed of each learner's generator: ``spec.seed``, then one apart per fused one."""
    return [spec.seed + 7919 * i for i in range(spec.learners)]


def _learners(learner) -> list[Learner]:
    """The learners behind ``learner``: itself, or each of fused learners."""
    return list(getattr(learner, "learners", [learner]))


def _device_types(spec: PodSpec) -> list[str]:
    """Device types of the env and of each learner: what the saved generator states fit."""
    learners = spec.learner_devices or (spec.device,) * spec.learners
    return [torch.device(d).type for d in (spec.device, *learners)]


def _without_generators(state: dict[str, Any]) -> dict[str, Any]:
    """A learner state (fused or not) without its random generator states, nor the
    exploration noise drawn from them (a fresh stream starts fresh noise)."""
    drop = ("generator", "noise")
    out = {k: v for k, v in state.items() if k not in drop}
    if isinstance(out.get("fused"), list):
        out["fused"] = [
            {k: v for k, v in x.items() if k not in drop} if isinstance(x, dict) else x
            for x in out["fused"]
        ]
    return out


def _check_learner_rng(state: dict[str, Any], learner, where: str) -> None:
    """Raise :class:`CheckpointError` naming a learner generator state that does not fit
    the learner it would be loaded into (fused learner ``i`` takes ``fused[i - 1]``'s
    state when there is one, else the first learner's)."""
    fused = state.get("fused")
    extras = fused if isinstance(fused, list) else []
    for i, target in enumerate(_learners(learner)):
        holder, field = state, "learner.generator"
        if 1 <= i <= len(extras) and isinstance(extras[i - 1], dict):
            holder, field = extras[i - 1], f"learner.fused[{i - 1}].generator"
        if holder.get("generator") is not None:
            checked_rng_state(holder["generator"], target.generator, where, field)


def _iterations_left(max_steps: int | None, env_steps: int, per_rollout: int) -> int | None:
    """Iterations a run has left (this one included) before its step budget; ``None``:
    no step budget (a time budget)."""
    return None if max_steps is None else -(-(max_steps - env_steps) // per_rollout)


def _iteration_graphs(worker: Worker, learner: Learner, spec: PodSpec):
    """The pod's iteration graphs where ``spec.capture`` asks for them and they fit."""
    if spec.capture is False:
        return None
    from elegantpod.capture import IterationGraphs, unsupported

    reason = unsupported(worker, learner)
    if reason is None:
        return IterationGraphs(worker, learner)
    if spec.capture:
        raise ValueError(f"capture=True, but this pod's iterations cannot be captured: {reason}")
    return None


def _build_learner(algo, env: VecEnv, hparams, spec: PodSpec):
    """One learner, or ``spec.learners`` fused ones (on ``spec.learner_devices``)."""
    if spec.learners == 1:
        return algo(env.observation_space, env.action_space, hparams, spec.device, spec.seed)
    from elegantpod.agents.fusion import FusedLearners

    devices = spec.learner_devices or (spec.device,) * spec.learners
    return FusedLearners(
        [
            algo(env.observation_space, env.action_space, hparams, dev, seed)
            for dev, seed in zip(devices, _seeds(spec), strict=True)
        ]
    )
