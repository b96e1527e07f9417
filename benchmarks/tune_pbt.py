"""Ray Tune's PBT and PB2 as methods of the pre-registered study: same pods, same clock.

Why: the fair rival of the tournament is not a sweep but another population-based
trainer, and Ray Tune's ``PopulationBasedTraining`` (and its bandit variant ``PB2``,
Parker-Holder et al. 2020) are the ones users know. An outside audit
(``../shared/reviews/thesis-audit.md``) found that the earlier Tune rows measured
overhead, not orchestration: Tune's clock started before ``fit()``, the rows ran on
another CPU and commit, and Tune had no confirmation of a crossing. So here Tune is one
more method of :mod:`pays_study`'s plan, run by the same runner, on the same machine,
commit, seeds and log, and

- **Tune trains exactly the tournament's pods**: the same algorithm code, the
  tournament's own starting pods (made by the same generator from the same seed,
  ``init="base"``), the same search space (each ``Bound`` a ``tune.uniform`` /
  ``loguniform`` / ``randint``; for PB2, which models hyperparameters in a box, the
  bounds, with log-scale ones in log space), perturbation (x0.8 / x1.2 clipped to the
  bounds, resample with the generator's probability), ready criterion
  (``perturbation_interval`` = the task's ``ready_segments``), truncation
  (``quantile_fraction``), segment size, evaluation episodes and confirmation of a
  crossing on fresh episodes, 4 trials with 2 running at once on the same 2 cores.
- **One Tune iteration is one segment**: train ``segment_steps``, evaluate once, report
  with a checkpoint (PBT's exploit copies a checkpoint, replay buffer included); a
  score at the target is confirmed by a second evaluation on fresh episodes, as the
  tournament does, and the run ends at the first confirmed crossing.
- **One clock**: the run's time starts when its first segment starts, as the
  tournament's starts at its first segment submitted, and ends at the plan's budget.
  What Tune spends before that (``ray.init``, building the experiment, starting the
  first actors) is **start-up overhead**, and what its checkpoints cost inside the
  budget (writing each segment's checkpoint and handing it to Tune, restoring a paused
  or exploited trial) is **checkpoint overhead**: both are measured and logged apart
  from the time to target, which includes the latter because a user's run pays it.

Ray pins its own dependencies and PB2 needs ``GPy``, so it runs in its own virtualenv:
:func:`ensure_venv` creates ``.venv-tune`` (torch 2.13.0 CPU first, then Ray Tune, GPy,
scikit-learn and this package) and re-runs the calling script there. ``pays_study.py``
calls it for a plan that names a Tune method, so every method of such a plan runs in
the same virtualenv.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-tune"
RAY = "ray[tune]==2.60.0"
PB2_NEEDS = ("GPy==1.15.0", "scikit-learn")
SCHEDULERS = ("pbt", "pb2")
"""What a plan's method may name as ``"tune"``."""
GUARD_SECONDS = 120.0
"""Tune's own time budget is the plan's plus this: a guard against a hang, never the
budget (the run stops itself when the budget on its own clock is spent)."""


def ensure_venv() -> None:
    """Create ``.venv-tune`` once and re-run this process's script inside it."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    ready = VENV / ".elegantpod-ready"
    wanted = f"{RAY} {' '.join(PB2_NEEDS)} elegantpod\n"
    if not ready.exists() or ready.read_text() != wanted:  # a venv of other pins: top it up
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)  # the CPU wheel, first
        subprocess.run([*pip, RAY, *PB2_NEEDS, "-e", str(ROOT)], check=True)
        ready.write_text(wanted)
    os.execv(str(python), [str(python), *sys.argv])


def pb2_bounds(space: dict[str, Any]) -> tuple[dict[str, list[float]], set[str]]:
    """PB2's box of ``space`` and the names it models in log space.

    PB2 fits a Gaussian process over a box of numbers: a categorical hyperparameter
    (a ``Choice``) has no place in it and stays at its pod's start (an exploit copies it
    with the donor's config); a log-scale ``Bound`` (a learning rate over three decades)
    goes in as its logarithm, so the GP's length scales mean the same across it.
    """
    from elegantpod.search.space import Choice

    bounds, logs = {}, set()
    for k, b in space.items():
        if isinstance(b, Choice):
            continue
        if b.log:
            bounds[k] = [math.log(b.low), math.log(b.high)]
            logs.add(k)
        else:
            bounds[k] = [float(b.low), float(b.high)]
    return bounds, logs


def trial_hparams(
    config: dict[str, Any], start: dict[str, Any], space: dict[str, Any], logs: set[str]
) -> dict[str, Any]:
    """A trial's hyperparameters: its pod's start, with Tune's values of the search space
    over it (from log space where ``logs`` says, clipped to the bound and rounded to its
    grid)."""
    from elegantpod.search.space import Choice

    hp = dict(start)
    for k, b in space.items():
        if k not in config:
            continue
        v = config[k]
        if isinstance(b, Choice):
            hp[k] = v
            continue
        hp[k] = b.clip(math.exp(v) if k in logs else float(v))
    return hp


def read_stats(path: Path) -> list[dict[str, Any]]:
    """The lines the trials appended to ``path`` (a missing file: none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(
    stats: list[dict[str, Any]], *, budget: float, target: float, fit_at: float, init_s: float
) -> dict[str, Any]:
    """The run's line for the study's log from the trials' stats: the curve on the run's
    own clock (from the first segment's start), the lesser of a crossing's two
    evaluations, and the overheads apart.

    ``stats`` holds one ``start`` line per trial (re)start (when, how long building the
    pod and restoring its checkpoint took) and one ``segment`` line per segment (when it
    ended, its score and confirmation, its evaluation and checkpoint seconds).
    """
    starts = [s for s in stats if s["kind"] == "start"]
    segments = sorted((s for s in stats if s["kind"] == "segment"), key=lambda s: s["wall"])
    first = min((s["first_segment"] for s in starts), default=None)
    if first is None:
        raise RuntimeError("no trial started a segment")
    times, scores, solved_at = [], [], None
    for s in segments:
        t = s["wall"] - first
        score = s["score"]
        if not math.isfinite(score):
            continue
        if score >= target and s.get("confirm") is not None:
            score = min(score, s["confirm"])
        times.append(round(t, 3))
        scores.append(score)
        if solved_at is None and score >= target and t <= budget:
            solved_at = round(t, 3)
    within = [s for s in segments if s["wall"] - first <= budget]
    per_trial: dict[str, int] = {}  # segments each trial (pod) ran within the budget
    for s in within:
        per_trial[s["trial"]] = per_trial.get(s["trial"], 0) + 1
    restores = [s for s in starts if s["restored"]]
    checkpoint_s = sum(s["save_s"] for s in within) + sum(
        s["restore_s"] for s in restores if s["first_segment"] - first <= budget
    )
    eval_s = sum(s["eval_s"] for s in within)
    return {
        "time": times,
        "score": scores,
        "budget": budget,
        "target": target,
        "solved_at": solved_at,
        "unconfirmed": sum(
            1
            for s in within
            if s["score"] >= target and s.get("confirm") is not None and s["confirm"] < target
        ),
        "best": max((sc for t, sc in zip(times, scores, strict=True) if t <= budget), default=None),
        "pods_total": len({s["trial"] for s in starts}),
        "restarts": 0,
        "replaced_on_evidence": len(
            [s for s in restores if s.get("donor") and s["donor"] != s["trial"]]
        ),
        "kept_in_noise": 0,
        "segments_per_pod": sorted(per_trial.values()),
        "env_steps": sum(
            max((s["env_steps"] for s in within if s["trial"] == tr), default=0) for tr in per_trial
        ),
        "wall_seconds": max((s["wall"] for s in segments), default=first) - first,
        "eval_share": eval_s / max(1e-9, 2 * budget),
        "overhead": {
            "ray_init_s": round(init_s, 3),
            "startup_s": round(first - fit_at, 3),
            "checkpoint_s": round(checkpoint_s, 3),
            "checkpoint_share": round(checkpoint_s / max(1e-9, 2 * budget), 4),
            "trial_starts": len(starts),
            "restores": len(restores),
        },
    }


def run_tune(
    scheduler: str,
    task: dict[str, Any],
    seed: int,
    *,
    pods: int = 4,
    workers: int = 2,
    generator: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of Tune's ``scheduler`` (``"pbt"`` or ``"pb2"``) on a plan's ``task`` and
    ``seed``: the line :mod:`pays_study` logs (see :func:`summarize`)."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"tune must be one of {SCHEDULERS}, got {scheduler!r}")
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.schedulers.pb2 import PB2

    from elegantpod.search.space import Choice
    from elegantpod.tournament import GeneratorConfig
    from elegantpod.tournament.core.generator import search_space
    from elegantpod.tournament.core.population import Population
    from elegantpod.tournament.core.spec import make_spec

    algo, target, budget = task["algo"], float(task["target"]), float(task["budget"])
    gen = GeneratorConfig(**(generator or {}))
    spec = make_spec(
        env_id=task["env"],
        algos=[algo],
        pods=pods,
        seed=seed,
        hparams={algo: dict(task.get("hparams", {}))},
        segment_steps=task.get("segment_steps"),
        eval_episodes=int(task.get("eval_episodes", 10)),
        target_reward=target,
        confirm_target=True,
        init="base",
        generator=gen,
    )
    pop = Population(spec)
    pop.fill()  # the tournament's own starting pods (init="base")
    starts = [(r.seed, dict(r.hparams)) for r in pop.records.values()]
    space = search_space(algo)
    if scheduler == "pb2":
        bounds, logs = pb2_bounds(space)
    else:
        bounds, logs = {}, set()
    work = Path(tempfile.mkdtemp(prefix="elegantpod-tune-"))
    stats_path, clock_path = work / "stats.jsonl", work / "first_segment"

    def first_segment() -> float | None:
        try:
            return float(clock_path.read_text())
        except (OSError, ValueError):
            return None

    def trainable(config):
        import torch

        from elegantpod.agents import get_algo
        from elegantpod.pod.budget import Budget
        from elegantpod.pod.pod import Pod
        from elegantpod.tournament.core.hparam_checks import learner_config

        torch.set_num_threads(1)  # one torch thread per worker, as the tournament's
        trial = tune.get_context().get_trial_id()
        t_start = time.time()
        pod_seed, start = starts[config["start"]]
        hp = learner_config(algo, trial_hparams(config, start, space, logs))
        pod = Pod(spec.pod_spec(algo, hp, seed=pod_seed))
        ckpt = tune.get_checkpoint()
        donor, restore_s = None, 0.0
        if ckpt is not None:  # resumed after a pause, or exploited from a donor
            t0 = time.time()
            with ckpt.as_directory() as d:
                pod.load(Path(d) / "pod.pt")
                donor = (Path(d) / "trial").read_text()
            pod.apply_hparams(hp)
            restore_s = time.time() - t0
        now = time.time()
        try:  # the first segment of the run starts the run's clock
            fd = os.open(clock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.write(fd, repr(now).encode())
            os.close(fd)
        except FileExistsError:
            pass

        def note(line):
            with open(stats_path, "a") as f:
                f.write(json.dumps(line) + "\n")

        note(
            {
                "kind": "start",
                "trial": trial,
                "first_segment": now,
                "build_s": now - t_start - restore_s,
                "restore_s": restore_s,
                "restored": ckpt is not None,
                "donor": donor,
            }
        )
        steps = spec.segment_steps or get_algo(algo).default_segment_steps
        handover_s = 0.0
        while True:
            t0 = first_segment()
            if t0 is not None and time.time() - t0 >= budget:
                return  # the budget on the run's own clock is spent
            pod.run(Budget(steps=pod.env_steps + steps, evaluate_at_end=False))
            e0 = time.time()
            score = float(pod.evaluate().score(spec.fitness)[0])
            confirm = None
            if math.isfinite(score) and score >= target:  # fresh episodes, as a tournament
                confirm = float(pod.evaluate().score(spec.fitness)[0])
            eval_s = time.time() - e0
            wall = time.time()
            with tempfile.TemporaryDirectory() as d:
                s0 = time.time()
                pod.save(Path(d) / "pod.pt")
                (Path(d) / "trial").write_text(trial)
                # noted before the report: a trial that Tune stops or pauses on this
                # result never returns from it
                note(
                    {
                        "kind": "segment",
                        "trial": trial,
                        "wall": wall,
                        "score": score,
                        "confirm": confirm,
                        "eval_s": eval_s,
                        "save_s": time.time() - s0 + handover_s,
                        "env_steps": pod.env_steps,
                    }
                )
                h0 = time.time()
                tune.report(
                    {
                        "score": score if math.isfinite(score) else -1e9,
                        "solved": confirm is not None and confirm >= target,
                        "env_steps": pod.env_steps,
                    },
                    checkpoint=tune.Checkpoint.from_directory(d),
                )
                # Tune copies the checkpoint to its storage inside the report: counted
                # with the next segment's line
                handover_s = time.time() - h0

    class Stop(tune.Stopper):
        """The whole experiment ends at a confirmed crossing, or when the budget on the
        run's own clock is spent."""

        def __init__(self):
            self.done = False

        def __call__(self, trial_id, result):
            if result.get("solved"):
                self.done = True
            return self.done

        def stop_all(self):
            t0 = first_segment()
            return self.done or (t0 is not None and time.time() - t0 >= budget)

    common = dict(
        time_attr="training_iteration",
        perturbation_interval=gen.ready_segments,
        quantile_fraction=gen.truncation,
        metric="score",
        mode="max",
    )
    if scheduler == "pbt":
        sched = PopulationBasedTraining(
            **common,
            resample_probability=gen.resample_prob,
            perturbation_factors=tuple(sorted(gen.perturb_factors, reverse=True)),
            hyperparam_mutations={k: _domain(tune, b) for k, b in space.items()},
            # Tune's x0.8 / x1.2 ignores bounds (gamma 1.18); ours clips to them
            custom_explore_fn=lambda cfg: {
                **cfg,
                **{
                    k: b.clip(cfg[k])
                    for k, b in space.items()
                    if k in cfg and not isinstance(b, Choice)  # Tune draws a choice
                },
            },
        )
    else:
        sched = PB2(**common, hyperparam_bounds=bounds)
    keys = list(bounds) if scheduler == "pb2" else list(space)
    param_space: dict[str, Any] = {"start": tune.grid_search(list(range(len(starts))))}
    for k in keys:  # each trial starts from its own pod's hyperparameters
        param_space[k] = tune.sample_from(
            lambda config, k=k: (math.log if k in logs else _same)(starts[config["start"]][1][k])
        )
    random.seed(seed)  # PBT draws its perturbations from Python's random
    import numpy as np

    np.random.seed(seed)  # noqa: NPY002 (PB2 draws from numpy's global generator)
    t_init = time.time()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    init_s = time.time() - t_init
    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}),
            param_space=param_space,
            tune_config=tune.TuneConfig(
                scheduler=sched, num_samples=1, time_budget_s=budget + GUARD_SECONDS
            ),
            run_config=tune.RunConfig(
                stop=Stop(),
                verbose=int(os.environ.get("TUNE_PBT_VERBOSE", "0")),
                storage_path=str(work / "storage"),  # Tune's default: every checkpoint kept
            ),
        )
        fit_at = time.time()
        grid = tuner.fit()
        if grid.errors:  # a trial that raised is the machine's or the code's failure
            raise RuntimeError(f"{len(grid.errors)} Tune trial(s) failed: {grid.errors[0]!r}")
        out = summarize(
            read_stats(stats_path), budget=budget, target=target, fit_at=fit_at, init_s=init_s
        )
        out["overhead"]["exploits_tune"] = int(getattr(sched, "_num_perturbations", -1))
        out["versions"] = {"ray": ray.__version__}
        return out
    finally:
        ray.shutdown()
        subprocess.run(["rm", "-rf", str(work)], check=False)


def _same(x):
    return x


def _domain(tune, b):
    """A search-space domain as Tune's: what PBT resamples from."""
    from elegantpod.search.space import Choice

    if isinstance(b, Choice):  # categorical (the noise kind): a list, which Tune's
        return list(b.options)  # PBT shifts to a neighbour or redraws (not x0.8/x1.2)
    if b.integer:
        return tune.randint(int(b.low), int(b.high) + 1)
    return tune.loguniform(b.low, b.high) if b.log else tune.uniform(b.low, b.high)
