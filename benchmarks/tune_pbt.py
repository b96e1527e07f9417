"""Ray Tune's PBT on the tasks of ``tournament_pays.py``: same learner, same search space.

Why: the fair rival of the tournament is not a sweep but another PBT. Ray Tune's
``PopulationBasedTraining`` is the one users know. To compare the *orchestration* and
nothing else, Tune trains exactly our pods: the same algorithm code, starting
configurations (the tournament's own four starting pods, made by the same generator from
the same seed), search space (each ``Bound`` becomes ``tune.uniform``/``loguniform``/
``randint``), perturbation (x0.8 / x1.2, resample with probability 0.25), ready
criterion (``perturbation_interval`` = 2 segments), truncation (``quantile_fraction``
0.5), segment size, evaluation and wall budget, 4 trials with 2 running at once on the
same 2 cores. Each Tune iteration is one segment: train ``segment_steps``, evaluate,
checkpoint (PBT's exploit copies the checkpoint, replay buffer included). The starting
configurations are those of ``init="base"`` (the base and three variations of it), the
start Tune users give PBT by hand.

Ray pins its own gymnasium, so it lives in its own virtualenv: run this script with any
Python and it creates ``.venv-tune`` (torch 2.13.0 CPU first, then ``ray[tune]`` and this
package) and re-runs itself there. Each seed appends its run (method ``tune_pbt``: every
trial's evaluation on the experiment's clock) to the run log of ``tournament_pays.py``
(:mod:`pays_runs`), and seeds logged already are skipped; ``tournament_pays.py --report``
puts it in the table.

Usage::

    python benchmarks/tune_pbt.py --task trap [--seeds 10] [--budget 90]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-tune"
RAY = "ray[tune]==2.60.0"
EXTRAS = "box2d"  # the lander task's env


def ensure_venv() -> None:
    """Create ``.venv-tune`` once and re-run this script inside it."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    ready = VENV / ".elegantpod-ready"
    wanted = f"{RAY} elegantpod[{EXTRAS}]\n"
    if not ready.exists() or ready.read_text() != wanted:  # a venv of other pins: top it up
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)  # the CPU wheel, first
        subprocess.run([*pip, RAY, "-e", f"{ROOT}[{EXTRAS}]"], check=True)
        ready.write_text(wanted)
    os.execv(str(python), [str(python), *sys.argv])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=100)
    p.add_argument("--budget", type=float, default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--log", default=None, help="the run log (default: pays_runs.LOG)")
    a = p.parse_args()
    ensure_venv()

    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    sys.path.insert(0, str(Path(__file__).parent))
    import pays_runs
    from _common import loadavg, log, machine_info, now_iso
    from tournament_pays import get_task

    from elegantpod.search.space import Choice
    from elegantpod.tournament import GeneratorConfig
    from elegantpod.tournament.core.generator import search_space
    from elegantpod.tournament.core.population import Population
    from elegantpod.tournament.core.spec import make_spec

    task = get_task(a.task)
    budget = 20.0 if a.quick else (a.budget or task.budget)
    seeds = range(a.first_seed, a.first_seed + (1 if a.quick else a.seeds))
    log_path = Path(a.log) if a.log else pays_runs.LOG
    if a.quick:
        log_path = log_path.with_name(log_path.stem + "_quick.jsonl")
    already = pays_runs.done(log_path, {a.task: task.segment_steps})
    seeds = [seed for seed in seeds if (a.task, "tune_pbt", seed) not in already]
    info = machine_info()
    info["ray"] = ray.__version__
    options = {k: v for k, v in task.options.items() if not k.startswith("_")}
    gen = GeneratorConfig()
    space = search_space(task.algo)

    def dist(b):
        if isinstance(b, Choice):  # categorical (the noise kind): a list, which Tune's
            return list(b.options)  # PBT shifts to a neighbour or redraws (not x0.8/x1.2)
        if b.integer:
            return tune.randint(int(b.low), int(b.high) + 1)
        return tune.loguniform(b.low, b.high) if b.log else tune.uniform(b.low, b.high)

    class Timeline(tune.Callback):
        """Every trial's score with the experiment's wall time (from ``fit``)."""

        def __init__(self):
            self.t0, self.curve = time.monotonic(), []

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if result.get("score") is not None:
                self.curve.append([time.monotonic() - self.t0, float(result["score"])])

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for seed in seeds:
            spec = make_spec(
                env_id=task.env,
                algos=[task.algo],
                pods=4,
                seed=seed,
                hparams={task.algo: dict(task.hparams)},
                segment_steps=task.segment_steps,
                init="base",
                **options,
            )
            pop = Population(spec)
            pop.fill()  # the tournament's own starting pods (init="base")
            starts = [(r.seed, dict(r.hparams)) for r in pop.records.values()]
            timeline = Timeline()

            def trainable(config, task=task, spec=spec, starts=starts, options=options):
                import dataclasses
                import tempfile

                import torch

                from elegantpod.agents import get_algo
                from elegantpod.config import PodSpec
                from elegantpod.pod.budget import Budget
                from elegantpod.pod.pod import Pod

                torch.set_num_threads(1)
                pod_seed, start = starts[config["start"]]
                cls = get_algo(task.algo).config_cls
                hp = {**start, **{k: config[k] for k in space}}
                names = {f.name for f in dataclasses.fields(cls)}
                hp = cls(
                    **{
                        k: tuple(v) if isinstance(v, list) else v
                        for k, v in hp.items()
                        if k in names
                    }
                )
                pspec = PodSpec(
                    env_id=task.env,
                    algo=task.algo,
                    hparams=hp,
                    seed=pod_seed,
                    device="cpu",
                    eval_episodes=spec.eval_episodes,
                    env_kwargs=spec.env_kwargs,
                    eval_env_kwargs=spec.eval_env_kwargs,
                    fitness=spec.fitness,
                )
                pod = Pod(pspec)
                ckpt = tune.get_checkpoint()
                if ckpt is not None:
                    with ckpt.as_directory() as d:
                        pod.load(Path(d) / "pod.pt")
                    pod.apply_hparams(hp)
                steps = task.segment_steps or get_algo(task.algo).default_segment_steps
                while True:
                    budget = Budget(steps=pod.env_steps + steps, evaluate_at_end=False)
                    pod.run(budget, threads=1)
                    score = pod.evaluate().score(pspec.fitness)[0]
                    with tempfile.TemporaryDirectory() as d:
                        pod.save(Path(d) / "pod.pt")
                        tune.report(
                            {
                                "score": score if math.isfinite(score) else -1e9,
                                "env_steps": pod.env_steps,
                            },
                            checkpoint=tune.Checkpoint.from_directory(d),
                        )

            pbt = PopulationBasedTraining(
                time_attr="training_iteration",
                perturbation_interval=gen.ready_segments,
                quantile_fraction=gen.truncation,
                resample_probability=gen.resample_prob,
                perturbation_factors=tuple(sorted(gen.perturb_factors, reverse=True)),
                hyperparam_mutations={k: dist(b) for k, b in space.items()},
                # Tune's x0.8 / x1.2 ignores bounds (gamma 1.18); ours clips to them
                custom_explore_fn=lambda cfg: {
                    **cfg,
                    **{
                        k: b.clip(cfg[k])
                        for k, b in space.items()
                        if k in cfg and not isinstance(b, Choice)  # Tune draws a choice
                    },
                },
                metric="score",
                mode="max",
            )
            random.seed(seed)  # PBT draws its perturbations from Python's random
            param_space = {"start": tune.grid_search(list(range(4)))}

            # each trial starts from its own pod's hyperparameters
            param_space.update(
                {
                    k: tune.sample_from(lambda s, k=k, st=starts: st[s.config["start"]][1][k])
                    for k in space
                }
            )
            tuner = tune.Tuner(
                tune.with_resources(trainable, {"cpu": 1}),
                param_space=param_space,
                tune_config=tune.TuneConfig(
                    scheduler=pbt, num_samples=1, time_budget_s=budget, reuse_actors=False
                ),
                run_config=tune.RunConfig(
                    callbacks=[timeline],
                    verbose=0,
                    storage_path=str(Path("/tmp") / "elegantpod-tune"),
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                ),
            )
            timeline.t0 = time.monotonic()
            tuner.fit()
            curve = sorted(timeline.curve)
            hits = [t for t, s in curve if s >= task.target]
            solved_at = min(hits) if hits else math.nan
            best = max((s for t, s in curve if t <= budget), default=math.nan)
            pays_runs.append(
                {
                    "task": a.task,
                    "method": "tune_pbt",
                    "seed": seed,
                    "time": [round(t, 3) for t, _ in curve],
                    "score": [s for _, s in curve],
                    "budget": budget,
                    "target": task.target,
                    "segment_steps": task.segment_steps,
                    "date": now_iso(),
                    "machine": info,
                    "loadavg": loadavg(),
                },
                log_path,
            )
            log(
                f"  tune_pbt   seed {seed}: {pays_runs.outcome(solved_at, budget)}, best {best:.3g}"
            )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
