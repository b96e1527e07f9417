"""MJX locomotion: env throughput against gymnasium's MuJoCo, PPO speed, and the paper's
Ant experiment (tournament vs single pod vs sweep) scaled to one GPU.

Three parts, side by side in one run, each written to the JSON:

* **throughput**: Ant-v5 env steps/s of ``make_env(..., backend="mjx")`` at each
  ``--sizes`` (exact and fast physics: a jitted step with random actions, compile time
  reported apart), and of gymnasium's own MuJoCo env (``gymnasium.make_vec``, sync, the
  CPU baseline: one core) at the sizes where it runs. On a GPU: 4k to 64k worlds
  (target for fast: >= 1 M env steps/s on one H200); on a CPU: small sizes, where MJX is
  expected to lose.
* **ppo**: env steps/s of one PPO pod on MJX Ant (``elegantpod.train``, evaluations
  included) for ``--ppo-seconds``.
* **ant**: the paper's experiment on one device: for ``--ant-seconds`` of wall time each,
  one PPO pod alone; a tournament of ``--pods`` PPO pods (mutation and replacement on);
  and the same pods as a sweep (a tournament that never replaces a pod). Reported: the
  best evaluation return each reached.

Without a GPU everything runs on the CPU as a dry run (``--quick`` shrinks it further)
and the JSON says so: those figures are not the GPU result.

Usage::

    python benchmarks/mjx_locomotion.py --quick              # a CPU dry run, minutes
    python benchmarks/mjx_locomotion.py --parts throughput   # CPU: MJX vs gymnasium
    bash benchmarks/gpu_run.sh mjx_locomotion.py             # on the GPU machine
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from _common import default_out, log, machine_info, now_iso, safe_ratio, write_json_atomic

import elegantpod
from elegantpod.envs import make_env
from elegantpod.tournament import GeneratorConfig

NAME = "mjx_locomotion"


def measure_env(make, steps: int) -> dict:
    """Env steps/s of one env over ``steps`` steps after a first (compiling) step."""
    t0 = time.perf_counter()
    env = make()
    env.reset(seed=0)
    n = env.num_envs
    high = torch.as_tensor(env.action_space.high, device=env.device)
    action = lambda: (torch.rand(n, *high.shape, device=env.device) * 2 - 1) * high  # noqa: E731
    env.step(action())
    if env.device.type == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        obs, *_ = env.step(action())
    float(obs.sum())  # waits for the last step
    seconds = time.perf_counter() - t0
    env.close()
    return {"env_steps_per_second": n * steps / seconds, "first_step_seconds": compile_s}


def throughput(device: str, sizes: list[int], steps: int, gym_sizes: list[int]) -> dict:
    rows = []
    for n in sizes:
        for physics in ("exact", "fast"):
            log(f"MJX Ant-v5 {physics} x {n} on {device}")
            r = measure_env(
                lambda n=n, p=physics: make_env(
                    "Ant-v5", num_envs=n, device=device, backend="mjx", physics=p
                ),
                steps,
            )
            rows.append({"simulator": f"mjx-{physics}", "num_envs": n, **r})
            log(f"  {r['env_steps_per_second']:,.0f} env steps/s")
    for n in gym_sizes:
        log(f"gymnasium Ant-v5 x {n} (sync, CPU)")
        r = measure_env(lambda n=n: make_env("Ant-v5", num_envs=n, device="cpu"), steps)
        rows.append({"simulator": "gymnasium-mujoco", "num_envs": n, **r})
        log(f"  {r['env_steps_per_second']:,.0f} env steps/s")
    gym_best = max(
        (r["env_steps_per_second"] for r in rows if r["simulator"] == "gymnasium-mujoco"),
        default=None,
    )
    for r in rows:
        if gym_best:
            r["over_gymnasium_best"] = safe_ratio(r["env_steps_per_second"], gym_best)
    return {"rows": rows, "gymnasium_best_steps_per_second": gym_best}


def ppo_settings(on_gpu: bool, quick: bool) -> dict:
    """One pod's settings: big batches on a GPU, a handful of worlds on a CPU."""
    if on_gpu and not quick:
        hparams = {"num_envs": 4096, "horizon": 32, "minibatch_size": 32768, "epochs": 4}
        episodes = 256
    else:
        hparams = {"num_envs": 16, "horizon": 64, "minibatch_size": 256, "epochs": 4}
        episodes = 16
    hparams.update(normalize_obs=True, lr=3e-4, hidden=(256, 256), init_log_std=-0.5)
    return {
        "env": "Ant-v5",
        "env_kwargs": {"backend": "mjx", "physics": "fast"},
        "hparams": hparams,
        "eval_episodes": episodes,
    }


def ppo_speed(settings: dict, seconds: float, device: str) -> dict:
    result = elegantpod.train(
        settings["env"],
        "ppo",
        max_seconds=seconds,
        device=device,
        env_kwargs=settings["env_kwargs"],
        eval_episodes=settings["eval_episodes"],
        **settings["hparams"],
    )
    return {
        "env_steps": result.env_steps,
        "wall_seconds": result.wall_seconds,
        "env_steps_per_second": result.env_steps / result.wall_seconds,
        "best_score": max((p.eval_return_mean for p in result.curve), default=None),
        "final_eval_return": result.eval_return_mean,
    }


def ant_experiment(settings: dict, pods: int, seconds: float, device: str) -> dict:
    """Best evaluation return in a fixed wall time: lone pod, tournament, sweep."""
    out = {}
    log(f"Ant: one pod for {seconds:.0f} s")
    out["single_pod"] = ppo_speed(settings, seconds, device)
    client = elegantpod.cluster(dashboard_address=None)
    try:
        for mode, generator in (
            ("tournament", GeneratorConfig()),
            ("sweep", GeneratorConfig(ready_segments=10**6)),  # never replaces a pod
        ):
            log(f"Ant: {mode} of {pods} pods for {seconds:.0f} s")
            t = elegantpod.Tournament(
                settings["env"],
                ["ppo"],
                pods,
                store=tempfile.mkdtemp(prefix=f"elegantpod-mjx-{mode}-"),
                client=client,
                max_seconds=seconds,
                hparams={"ppo": settings["hparams"]},
                env_kwargs=settings["env_kwargs"],
                eval_episodes=settings["eval_episodes"],
                generator=generator,
            )
            t.start()
            end = t.wait(seconds + 600)
            out[mode] = {
                "best_score": end["best_score"],
                "env_steps_total": t.summary()["env_steps_total"],
                "status": end["status"],
            }
            log(f"  best {end['best_score']}")
    finally:
        elegantpod.shutdown(client)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["throughput", "ppo", "ant"])
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--steps", type=int, default=None, help="timed steps per size")
    ap.add_argument("--ppo-seconds", type=float, default=None)
    ap.add_argument("--ant-seconds", type=float, default=None)
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="small and short: a dry run")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    if a.sizes is None:
        a.sizes = [4096, 16384, 65536] if on_gpu and not a.quick else [1, 8, 32]
    gym_sizes = [1, 8] if a.quick else [1, 8, 32]
    steps = a.steps or (20 if a.quick else 100)
    ppo_seconds = a.ppo_seconds or (30 if a.quick else 120)
    ant_seconds = a.ant_seconds or (40 if a.quick else 180)
    torch.set_num_threads(1)  # the gymnasium baseline and the CPU pods: one core each
    out = Path(a.out) if a.out else default_out(NAME, a.quick or not on_gpu)
    settings = ppo_settings(on_gpu, a.quick)
    results: dict = {}
    if "throughput" in a.parts:
        results["throughput"] = throughput(device, a.sizes, steps, gym_sizes)
    if "ppo" in a.parts:
        log(f"PPO on MJX Ant for {ppo_seconds:.0f} s")
        results["ppo"] = ppo_speed(settings, ppo_seconds, device)
        log(f"  {results['ppo']['env_steps_per_second']:,.0f} env steps/s")
    if "ant" in a.parts:
        results["ant"] = ant_experiment(settings, a.pods, ant_seconds, device)
    data = {
        "benchmark": NAME,
        "date": now_iso(),
        "machine": machine_info(),
        "gpu": torch.cuda.get_device_name(0) if on_gpu else None,
        "dry_run_on_cpu": not on_gpu,
        "quick": a.quick,
        "ppo_settings": settings,
        "results": results,
    }
    write_json_atomic(out, data)
    for row in results.get("throughput", {}).get("rows", []):
        ratio = row.get("over_gymnasium_best")
        print(
            f"{row['simulator']:>17} x {row['num_envs']:>6}: "
            f"{row['env_steps_per_second']:>12,.0f} env steps/s"
            + (f" ({ratio:.2f}x gymnasium's best)" if ratio else "")
        )
    print(f"wrote {out}" + ("" if on_gpu else " (no GPU: a CPU run, not the GPU figures)"))


if __name__ == "__main__":
    main()
