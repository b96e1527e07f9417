"""A pod: worker (rollouts), learner (updates) and evaluator (deterministic episodes).

The pod is the unit a tournament schedules. It trains for a budget of env steps and/or
seconds, or until an evaluation reaches a target return, reporting :class:`Progress`
after each evaluation, and it checkpoints so that a resumed pod continues from its step
count with identical weights, optimizer moments and RNG streams.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.base import Learner
from elegantpod.buffers import RolloutBuffer
from elegantpod.checkpoint import (
    CheckpointError,
    check_devices,
    checked_rng_state,
    load_checkpoint,
    resolve_env_kwargs,
    save_checkpoint,
    spec_of,
)
from elegantpod.config import PodSpec, check_memory
from elegantpod.envs import make_env
from elegantpod.envs.base import VecEnv
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
        self.obs = env.reset(seed=seed)
        # Finished-episode statistics stay on the device: no host sync per step.
        self.return_sum = torch.zeros((), device=env.device, dtype=torch.float64)
        self.episodes = torch.zeros((), device=env.device, dtype=torch.int64)

    @torch.inference_mode()
    def rollout(self):
        """Collect ``horizon`` vector steps; returns the time-major :class:`Batch`."""
        obs = self.obs
        for t in range(self.horizon):
            stored, env_action = self.learner.explore(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(env_action)
            self.buffer.write(t, obs, stored, reward, info["final_obs"], terminated, truncated)
            done = terminated | truncated
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

    @torch.inference_mode()
    def evaluate(self, learner: Learner) -> EvalResult:
        """One episode per sub-env; fresh, reproducible start states on each call."""
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
        What to train and for how long.
    out_dir
        Where ``checkpoint.pt`` goes (``None``: no checkpoints).
    resume
        Load ``out_dir/checkpoint.pt`` first and continue from its step count.
    """

    def __init__(self, spec: PodSpec, out_dir: str | Path | None = None, resume: bool = False):
        algo = get_algo(spec.algo)
        hparams = spec.hparams if spec.hparams is not None else algo.config_cls()
        self.spec = spec if spec.hparams is not None else dataclasses.replace(spec, hparams=hparams)
        self.spec.validate()  # with the hyperparameters in force (defaults filled in)
        check_memory(self.spec)  # a lower bound, before the envs allocate anything
        self.out_dir = Path(out_dir) if out_dir is not None else None
        torch.manual_seed(spec.seed)
        self.env = make_env(
            spec.env_id,
            num_envs=hparams.num_envs,
            device=spec.device,
            seed=spec.seed,
            **spec.env_kwargs,
        )
        # now with the env's dimensions, before buffers and networks are allocated
        check_memory(self.spec, *_dims(self.env))
        self.learner: Learner = _build_learner(algo, self.env, hparams, spec)
        horizon = hparams.horizon
        self.worker = Worker(self.env, self.learner, horizon, spec.seed)
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
        self.stop_event = threading.Event()
        """Set by :meth:`request_stop`; the run in progress (or the next) polls it."""
        if resume:
            if self.out_dir is None:
                raise ValueError("resume=True needs out_dir")
            self.load(self.checkpoint_path)

    @property
    def checkpoint_path(self) -> Path | None:
        """``out_dir/checkpoint.pt`` when the pod has an output folder, else ``None``."""
        return None if self.out_dir is None else self.out_dir / "checkpoint.pt"

    # -- training ---------------------------------------------------------------------
    def run(
        self,
        callback: Callable[[Progress], bool | None] | None = None,
        on_iteration: Callable[[Pod, dict[str, float]], bool | None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> TrainResult:
        """Train until the target, the step budget or the time budget is reached.

        ``callback(progress)`` is called after each evaluation and
        ``on_iteration(pod, stats)`` after each learner update (this is where a
        tournament polls its controls and publishes progress); either returning
        ``False`` stops the run. ``should_stop()`` is polled inside each update too,
        between gradient steps, as is :meth:`request_stop`: a stop then ends even a long
        update within one gradient step, and the run ends (checkpointed) with the
        weights learned so far. It must be cheap (read a remote control at most every
        few tenths of a second).
        ``wall_seconds`` counts from here (envs and networks already built) to the end of
        the evaluation that first met the target, or to the end of training.
        """
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
                if self.env_steps >= next_eval or out_of_steps or out_of_time:
                    next_eval += eval_every
                    progress = self._evaluate(start, stats)
                    score = progress.eval_return_mean if progress.score is None else progress.score
                    solved = spec.target_reward is not None and score >= spec.target_reward
                    if callback is not None and callback(progress) is False:
                        break
                if solved or out_of_steps or out_of_time:
                    break
        finally:
            learner.should_stop = outside
            self.stop_event.clear()  # the request is answered
        wall = time.perf_counter() - start
        ckpt = self.save() if self.out_dir is not None else None
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
        """
        path = path if path is not None else self.checkpoint_path
        if path is None:
            raise ValueError("no checkpoint path: give one or construct the pod with out_dir")
        return save_checkpoint(
            path,
            {
                "spec": self.spec.to_json(),
                "env_steps": self.env_steps,
                "learner": self.learner.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "env_rng": self.env.generator.get_state()
                if hasattr(self.env, "generator")
                else None,
            },
        )

    def load(self, path: str | Path, *, restore_rng: bool = True) -> None:
        """Restore learner, step count and RNG state from a checkpoint of the same architecture.

        ``restore_rng=False`` keeps this pod's own random streams: a child pod copies its
        parent's networks and optimizer state but explores on its own seed.

        Raises
        ------
        CheckpointError
            Naming the file and the field that is missing, malformed or does not fit.
        """
        self._restore(load_checkpoint(path, map_location=self.spec.device), path, restore_rng)

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
        # Check every RNG state before changing anything: a bad one leaves the pod as it was.
        env_gen = getattr(self.env, "generator", None)
        if restore_rng:
            torch_rng = checked_rng_state(
                data.get("torch_rng"), torch.default_generator, where, "torch_rng"
            )
            env_rng = data.get("env_rng")
            if env_rng is not None and env_gen is not None:
                env_rng = checked_rng_state(env_rng, env_gen, where, "env_rng")
        if not isinstance(data.get("learner"), dict):
            raise CheckpointError(f"{where}: field 'learner' is missing or not a dict")
        try:
            self.learner.load_state_dict(data["learner"])
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(
                f"{where}: field 'learner' does not fit this {self.spec.algo} network "
                f"(hidden={self.learner.config.hidden}): {first}"
            ) from exc
        self.env_steps = env_steps
        if not restore_rng:
            self.learner.generator.manual_seed(self.spec.seed)
            return
        torch.set_rng_state(torch_rng)
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
            Local path or fsspec URL of the checkpoint.
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
        data = load_checkpoint(path)
        spec = spec_of(data, path)
        if device is not None:
            spec = dataclasses.replace(spec, device=device, learner_devices=())
        else:
            check_devices(spec, path)
        pod = cls(resolve_env_kwargs(spec, env_kwargs, path, allow_remote))
        pod._restore(data, path)
        return pod


def _dims(env: VecEnv) -> tuple[int, int]:
    """Observation and action dimensions (discrete: choices) of ``env``, for memory checks."""
    obs = env.observation_space
    act = env.action_space
    obs_dim = math.prod(obs.shape) if obs.shape else 1
    if isinstance(act, gymnasium.spaces.Discrete):
        return obs_dim, int(act.n)
    return obs_dim, math.prod(act.shape) if act.shape else 1


def _build_learner(algo, env: VecEnv, hparams, spec: PodSpec):
    """One learner, or ``spec.learners`` fused ones (on ``spec.learner_devices``)."""
    if spec.learners == 1:
        return algo(env.observation_space, env.action_space, hparams, spec.device, spec.seed)
    from elegantpod.agents.fusion import FusedLearners

    devices = spec.learner_devices or (spec.device,) * spec.learners
    return FusedLearners(
        [
            algo(env.observation_space, env.action_space, hparams, dev, spec.seed + 7919 * i)
            for i, dev in enumerate(devices)
        ]
    )
