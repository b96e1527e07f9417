"""Our native envs and PPO against PureJaxRL (end-to-end-compiled JAX PPO), CartPole-v1.

Why: on one accelerator the fastest known way to train small RL agents is to compile the
whole loop, env included, into one XLA program (PureJaxRL on gymnax). Our pods stay
Python between iterations, which is what lets a pod be paused, steered and checkpointed
between updates, and replay each iteration as CUDA graphs (``elegantpod.pod.capture``) over
an env whose whole step is one compiled kernel; this script says in one number per
measure what that costs, side by side with the peer, in one process on one device. The
PPO rows also time the same pod with ``capture=False`` (``eager`` in the JSON), so the
gain of the graphs is measured in the same run (``--no-eager`` leaves it out: the GPU
check's PPO item wants both sizes' rows against the peer within its budget).

Three measures, ours and the peer's in turn, each in its own ``try`` (a failure records
its error string and the run goes on), the JSON rewritten after each side (ours is
saved before the peer starts, so a run killed during the peer keeps our figure):

1. **time to solve** (runs first, in a cold process, so that one-time setup and
   compilation count on both sides): ours is the wall time of building
   ``Pod(PodSpec("CartPole-v1", "ppo", target_reward=475))`` with default
   hyperparameters plus ``run()`` until the first deterministic 10-episode evaluation
   reaching 475. The peer's is PureJaxRL's ``make_train`` with the file's own CartPole
   config (``DEBUG`` off): its build and compile, plus the share of the one compiled run
   up to the first update whose finished training episodes average >= 475 (read from
   the returned metrics after the run, so the end of that update is interpolated in the
   run's wall time; the criteria differ: stochastic training episodes there,
   deterministic evaluation episodes here).
2. **env steps/s** with uniform random actions at ``--sizes`` sub-envs: ours is
   ``make_env("CartPole-v1", num_envs=N, device, seed=0)`` stepped under
   ``torch.inference_mode()`` with int64 actions drawn on the device beforehand (a ring
   of batches), synchronized between chunks of steps; its first step (where
   ``torch.compile`` compiles the step) is reported as ``compile_s``. The peer's is
   gymnax's CartPole-v1 (``jax.vmap(env.step)`` over N envs) inside a
   ``jax.lax.scan`` of ``--scan-steps`` steps drawing its random actions, compiled once
   ahead of time (``compile_s``), then called until ``--seconds`` pass.
3. **PPO training env steps/s** (rollout and update) at ``--ppo-sizes``: horizon 128,
   4 epochs, 4 minibatches, hidden (64, 64) tanh on both sides. Ours is a PPO pod run
   through ``PodHooks(on_update=...)``, the public hook called after each update
   (whose host statistics synchronize the device), without evaluations; the first
   iterations are the warm-up (reported), then iterations are timed until
   ``--seconds`` pass. The peer's is ``make_train`` with ``NUM_ENVS=N`` and
   ``TOTAL_TIMESTEPS = --peer-updates * 128 * N``, compiled once
   (``jax.jit(train).lower(key).compile()``, timed), run once untimed (its first call
   still loads and initialises what the compile left: timed, it weighed half in the
   median of two runs), then run at least twice and until ``--seconds`` pass; steps/s is the
   median over the timed runs of TOTAL_TIMESTEPS / run seconds.

The peer is imported, never copied, from ``--peer-dir`` (default
``../shared/gpu-peer/purejaxrl`` beside the repo, then ``shared/gpu-peer/purejaxrl`` and
``benchmarks/peer/purejaxrl`` inside it): ``ppo.py`` and ``wrappers.py`` of PureJaxRL at
commit 31756b1 (Apache-2.0). ``wrappers.py`` imports brax and navix, which CartPole never
uses: empty stand-ins go into ``sys.modules`` where they are missing. gymnax must be
0.0.x (1.x returns six values from ``step``; PureJaxRL unpacks five). JAX is told not to
preallocate GPU memory (torch shares the device), and to stay on the CPU when
``--device cpu``; with a CUDA device and a JAX that sees no GPU the peer counts as
unavailable. Where JAX or the peer cannot be imported (or with ``--skip-peer``) ours
still runs and each peer entry reads ``"unavailable: <reason>"``.

Ratios are ours / peer (for time to solve, lower is better); the issue-17 targets are
evaluated where both sides ran: PPO training steps/s >= 0.5x the peer's at 4,096 envs
and >= 1.0x at 65,536; env steps/s >= 0.5x at 65,536; time to solve <= 0.5x. A markdown
table (measure | ours | PureJaxRL | ours/peer) ends the output.

Usage (on a GPU machine without network, ``bash benchmarks/gpu_run.sh gpu_frontier.py``)::

    python benchmarks/gpu_frontier.py [--device cuda] [--sizes N ...] [--ppo-sizes N ...]
        [--seconds 3] [--budget 600] [--peer-dir DIR] [--skip-peer] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import importlib.metadata
import importlib.util
import math
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch
from _common import (
    BENCH_DIR,
    default_out,
    loadavg,
    log,
    machine_info,
    now_iso,
    safe_ratio,
    summarize,
    write_json_atomic,
)

from elegantpod import Pod, PodSpec
from elegantpod.agents import PPOConfig
from elegantpod.envs import make_env
from elegantpod.pod.budget import Budget
from elegantpod.pod.hooks import PodHooks

NAME = "gpu_frontier"
ENV_ID = "CartPole-v1"
REPO_DIR = BENCH_DIR.parent
PEER_DIRS = (
    REPO_DIR.parent / "shared" / "gpu-peer" / "purejaxrl",
    REPO_DIR / "shared" / "gpu-peer" / "purejaxrl",  # where a device run carries shared/
    BENCH_DIR / "peer" / "purejaxrl",
)
PEER_COMMIT = "31756b197773a52db763fdbe6d635e4b46522a73"
SIZES, QUICK_SIZES = (4096, 65536, 262144), (256, 1024)
PPO_SIZES, QUICK_PPO_SIZES = (4096, 65536), (256, 1024)
SECONDS, QUICK_SECONDS = 3.0, 0.5
SCAN_STEPS, QUICK_SCAN_STEPS = 1000, 16
PEER_UPDATES, QUICK_PEER_UPDATES = 8, 2
BUDGET, QUICK_BUDGET = 600.0, 600.0
SOLVE_SECONDS = 300.0
HORIZON, EPOCHS, MINIBATCHES, HIDDEN = 128, 4, 4, (64, 64)
TARGET_RETURN = 475.0
RING = 16  # action batches drawn on the device beforehand and cycled through
WARMUP_FRACTION = 0.25  # untimed env stepping after the first step, as a share of --seconds
MIN_PEER_RUNS = 2
TARGETS = (  # issue 17: (measure, num_envs, comparison, bound on ours / peer)
    ("ppo_train", 4096, ">=", 0.5),
    ("ppo_train", 65536, ">=", 1.0),
    ("env_step", 65536, ">=", 0.5),
    ("solve", None, "<=", 0.5),
)


class PeerUnavailable(Exception):
    """The peer cannot run here; the message says why."""


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


# -- the peer: PureJaxRL, imported from its folder ---------------------------------------
def install_stubs() -> list[str]:
    """Empty ``brax`` and ``navix`` modules where missing (``wrappers.py`` imports them).

    CartPole never touches them; a stand-in class raises if anything ever does.
    """

    class _Missing:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("brax/navix stand-in: not installed here")

    installed = []
    layout = {
        "brax": ["brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"],
        "navix": ["navix"],
    }
    for top, names in layout.items():
        if top in sys.modules or importlib.util.find_spec(top) is not None:
            continue
        for name in names:
            module = types.ModuleType(name, f"empty stand-in for {name} (gpu_frontier.py)")
            module.__path__ = []  # a package, so that its submodules import
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
            installed.append(name)
        training = sys.modules.get("brax.envs.wrappers.training")
        if top == "brax" and training is not None:
            training.EpisodeWrapper = training.AutoResetWrapper = _Missing
    return installed


def peer_config(ppo_path: Path) -> dict[str, Any]:
    """The CartPole config of ``ppo.py``'s ``__main__`` block, read (not run) with ``ast``."""
    tree = ast.parse(ppo_path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "config" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            config = ast.literal_eval(node.value)
            if config.get("ENV_NAME") == ENV_ID:
                return config
    raise PeerUnavailable(f"no {ENV_ID} `config = {{...}}` found in {ppo_path}")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def find_peer_dir(given: Path | None) -> Path:
    candidates = [given] if given is not None else list(PEER_DIRS)
    for folder in candidates:
        if (folder / "ppo.py").is_file() and (folder / "wrappers.py").is_file():
            return folder.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise PeerUnavailable(f"PureJaxRL's ppo.py and wrappers.py not found (tried {tried})")


def load_peer(given_dir: Path | None, device: torch.device) -> types.SimpleNamespace:
    """Import JAX, gymnax and PureJaxRL's ``ppo.py``; raise :class:`PeerUnavailable`."""
    folder = find_peer_dir(given_dir)
    # before jax is imported: torch shares the GPU, and a CPU run keeps both on the CPU
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if device.type == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
    except Exception as exc:
        raise PeerUnavailable(f"jax does not import ({error_text(exc)})") from None
    gymnax_version = _version("gymnax")
    if gymnax_version is None:
        raise PeerUnavailable("gymnax is not installed (PureJaxRL needs gymnax 0.0.9)")
    if not gymnax_version.startswith("0.0."):
        raise PeerUnavailable(
            f"gymnax {gymnax_version}: 1.x returns six values from step, PureJaxRL unpacks "
            "five; install gymnax 0.0.9"
        )
    backend = jax.default_backend()
    if device.type == "cuda" and backend != "gpu":
        raise PeerUnavailable(
            f"jax {jax.__version__} runs on {backend!r}, not on the GPU (its CUDA plugin "
            "is missing or sees no device)"
        )
    stubs = install_stubs()
    sys.path.insert(0, str(folder))  # ppo.py does `from wrappers import ...`
    ppo_path = folder / "ppo.py"
    try:
        import gymnax

        spec = importlib.util.spec_from_file_location("purejaxrl_ppo", ppo_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:
        raise PeerUnavailable(f"PureJaxRL does not import ({error_text(exc)})") from None
    header = ppo_path.read_text(encoding="utf-8")[:2000]
    commit = re.search(r"\b[0-9a-f]{40}\b", header)
    config = peer_config(ppo_path)
    return types.SimpleNamespace(
        jax=jax,
        jnp=jnp,
        gymnax=gymnax,
        ppo=module,
        config=config,
        info={
            "status": "ok",
            "dir": str(folder),
            "commit": commit.group(0) if commit else None,
            "expected_commit": PEER_COMMIT,
            "stand_in_modules": stubs,
            "config": config,
            "jax_backend": backend,
            "jax_devices": [str(d) for d in jax.devices()],
            "versions": {
                d: _version(d)
                for d in ("jax", "jaxlib", "gymnax", "flax", "optax", "distrax", "chex")
            },
        },
    )


def peer_env_step(peer, n: int, seconds: float, scan_steps: int) -> dict[str, Any]:
    """gymnax CartPole stepped ``scan_steps`` times per compiled call, random actions."""
    jax, jnp = peer.jax, peer.jnp
    env, params = peer.gymnax.make(ENV_ID)
    n_actions = int(env.action_space(params).n)
    vstep = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def init(key):
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, n), params)
        return state

    def run(key, state, total):
        def body(carry, _):
            key, state, total = carry
            key, k_act, k_step = jax.random.split(key, 3)
            action = jax.random.randint(k_act, (n,), 0, n_actions)
            _, state, reward, _, _ = vstep(jax.random.split(k_step, n), state, action, params)
            return (key, state, total + reward.sum()), None

        carry, _ = jax.lax.scan(body, (key, state, total), None, length=scan_steps)
        return carry

    key = jax.random.PRNGKey(0)
    state = jax.block_until_ready(jax.jit(init)(key))
    total = jnp.zeros((), jnp.float32)
    t0 = time.perf_counter()
    compiled = jax.jit(run).lower(key, state, total).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    carry = jax.block_until_ready(compiled(key, state, total))  # untimed warm call
    first_call_s = time.perf_counter() - t0
    calls, start = 0, time.perf_counter()
    while True:
        carry = compiled(*carry)
        calls += 1
        jax.block_until_ready(carry)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {
        "steps_per_s": n * scan_steps * calls / elapsed,
        "compile_s": compile_s,
        "first_call_s": first_call_s,
        "scan_steps": scan_steps,
        "timed_calls": calls,
        "timed_seconds": elapsed,
    }


def _peer_cfg(peer, **changes) -> dict[str, Any]:
    cfg = dict(peer.config)
    cfg.update(changes, DEBUG=False)
    return cfg


def time_runs(run, seconds: float, min_runs: int) -> tuple[float, list[float]]:
    """``run(i)`` once untimed (its seconds returned apart), then timed at least
    ``min_runs`` times and until ``seconds`` of timed runs have passed.

    Why the untimed run: a compiled program's first call still pays one-time work (the
    executable loaded on the device, buffers allocated); with two timed runs, the
    median is their mean, so that first call counted for half the peer's figure."""
    t0 = time.perf_counter()
    run(0)
    first_s = time.perf_counter() - t0
    run_s: list[float] = []
    while len(run_s) < min_runs or sum(run_s) < seconds:
        t0 = time.perf_counter()
        run(len(run_s) + 1)
        run_s.append(time.perf_counter() - t0)
    return first_s, run_s


def peer_ppo(peer, n: int, seconds: float, updates: int) -> dict[str, Any]:
    """PureJaxRL ``make_train`` at ``n`` envs: compile once, then time whole runs."""
    jax = peer.jax
    cfg = _peer_cfg(peer, NUM_ENVS=n, TOTAL_TIMESTEPS=updates * int(peer.config["NUM_STEPS"]) * n)
    total = cfg["TOTAL_TIMESTEPS"]
    t0 = time.perf_counter()
    train = jax.jit(peer.ppo.make_train(cfg))  # make_train adds NUM_UPDATES, MINIBATCH_SIZE
    compiled = train.lower(jax.random.PRNGKey(30)).compile()
    compile_s = time.perf_counter() - t0
    first_s, run_s = time_runs(
        lambda i: jax.block_until_ready(compiled(jax.random.PRNGKey(30 + i))),
        seconds,
        MIN_PEER_RUNS,
    )
    per_run = summarize([total / s for s in run_s])
    return {
        "steps_per_s": per_run["median"],
        "steps_per_s_per_run": per_run,
        "compile_s": compile_s,
        "first_run_s": first_s,
        "run_seconds": run_s,
        "total_timesteps": total,
        "num_updates": cfg["NUM_UPDATES"],
        "minibatch_size": cfg["MINIBATCH_SIZE"],
    }


def peer_solve(peer) -> dict[str, Any]:
    """The file's own CartPole run: setup + compile, then the time its training episodes'
    mean return first reaches the target (interpolated within the one compiled run)."""
    import numpy as np

    jax = peer.jax
    cfg = _peer_cfg(peer, TOTAL_TIMESTEPS=int(peer.config["TOTAL_TIMESTEPS"]))
    key = jax.random.PRNGKey(30)
    t0 = time.perf_counter()
    train = jax.jit(peer.ppo.make_train(cfg))
    compiled = train.lower(key).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - t0
    metrics = out["metrics"]
    returns = np.asarray(metrics["returned_episode_returns"], dtype=np.float64)
    finished = np.asarray(metrics["returned_episode"]).astype(bool)
    axes = tuple(range(1, returns.ndim))  # (updates, steps, envs): per update
    count = finished.sum(axis=axes)
    total = np.where(finished, returns, 0.0).sum(axis=axes)
    mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    reached = np.flatnonzero(mean >= TARGET_RETURN)
    updates = int(cfg["NUM_UPDATES"])
    first = int(reached[0]) if reached.size else None
    solved_s = compile_s + run_s * (first + 1) / updates if first is not None else None
    return {
        "solved": first is not None,
        "seconds": solved_s,
        "setup_compile_s": compile_s,
        "run_s": run_s,
        "wall_s": compile_s + run_s,
        "first_update_at_target": first,
        "env_steps_at_target": (
            (first + 1) * cfg["NUM_STEPS"] * cfg["NUM_ENVS"] if first is not None else None
        ),
        "num_updates": updates,
        "total_timesteps": cfg["TOTAL_TIMESTEPS"],
        "final_mean_return": float(mean[np.isfinite(mean)][-1])
        if np.isfinite(mean).any()
        else None,
        "criterion": "mean return of the training episodes finished within one update",
    }


# -- ours --------------------------------------------------------------------------------
def _step_window(env, actions: list[torch.Tensor], seconds: float) -> tuple[int, float]:
    """Vector steps until ``seconds`` pass; the device is synced only between chunks."""
    steps, chunk = 0, 8
    sync(env.device)
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            env.step(actions[steps % len(actions)])
            steps += 1
        sync(env.device)
        now = time.perf_counter()
        if now - start >= seconds:
            return steps, now - start
        if now - t0 < seconds / 20 and chunk < 1024:
            chunk *= 2


def ours_env_step(n: int, device: torch.device, seconds: float) -> dict[str, Any]:
    env = make_env(ENV_ID, num_envs=n, device=device, seed=0)
    gen = torch.Generator(device=device).manual_seed(0)
    n_actions = int(env.action_space.n)
    actions = [
        torch.randint(0, n_actions, (n,), generator=gen, device=device, dtype=torch.int64)
        for _ in range(RING)
    ]
    with torch.inference_mode():
        env.reset(seed=0)
        sync(device)
        t0 = time.perf_counter()
        env.step(actions[0])  # the step compiles here where it is compiled
        sync(device)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        _step_window(env, actions, WARMUP_FRACTION * seconds)
        warmup_s = time.perf_counter() - t0
        steps, elapsed = _step_window(env, actions, seconds)
    return {
        "steps_per_s": n * steps / elapsed,
        "compile_s": compile_s,
        "warmup_s": warmup_s,
        "timed_vector_steps": steps,
        "timed_seconds": elapsed,
        "env": repr(env),
    }


def ours_ppo(
    n: int,
    device: torch.device,
    seconds: float,
    warmup_iters: int,
    capture: bool | None = None,
    eager: bool = True,
) -> dict[str, Any]:
    """A PPO pod's rollout + update iterations, timed through its ``on_update`` hook.

    ``capture=None`` is the pod's default (CUDA graphs where supported); with ``eager``
    the eager run (``capture=False``) is measured beside it, so the table shows what
    capture buys."""
    hparams = PPOConfig(
        num_envs=n,
        horizon=HORIZON,
        epochs=EPOCHS,
        minibatch_size=n * HORIZON // MINIBATCHES,
        hidden=HIDDEN,
    )
    spec = PodSpec(
        env_id=ENV_ID,
        algo="ppo",
        hparams=hparams,
        device=str(device),
        seed=0,
        max_seconds=max(120.0, 20 * seconds),  # a safety net: on_update stops the run
        eval_every_steps=2**62,  # no evaluation: training throughput only
        capture=capture,
    )
    t0 = time.perf_counter()
    pod = Pod(spec)
    build_s = time.perf_counter() - t0
    stamps: list[float] = []

    def on_iteration(_pod, _stats) -> bool | None:
        sync(device)  # the update's host statistics have synchronized already
        stamps.append(time.perf_counter())
        timed = len(stamps) - warmup_iters
        if timed >= 1 and stamps[-1] - stamps[warmup_iters - 1] >= seconds:
            return False
        return None

    run_start = time.perf_counter()
    budget = Budget(seconds=spec.max_seconds, evaluate_at_end=False)  # no evaluation
    pod.run(budget, PodHooks(on_update=on_iteration))
    pod.close()
    captured = pod.graphs is not None and pod.graphs.capture
    eager_row = None
    if eager and capture is None and captured:
        eager_row = ours_ppo(n, device, seconds, warmup_iters, capture=False)
    timed = len(stamps) - warmup_iters
    if timed < 1:
        raise RuntimeError(f"the pod stopped after {len(stamps)} iterations, before timing")
    elapsed = stamps[-1] - stamps[warmup_iters - 1]
    per_iter = elapsed / timed
    warmup_s = stamps[warmup_iters - 1] - run_start
    return {
        "steps_per_s": n * HORIZON * timed / elapsed,
        "build_s": build_s,
        "warmup_s": warmup_s,
        "warmup_iterations": warmup_iters,
        # what the warm-up cost beyond steady iterations: compilation, allocation
        "compile_s": max(warmup_s - warmup_iters * per_iter, 0.0),
        "timed_iterations": timed,
        "timed_seconds": elapsed,
        "seconds_per_iteration": per_iter,
        "cuda_graphs": captured,
        "captures": pod.graphs.captures if pod.graphs is not None else 0,
        "eager": eager_row,
        "ppo_config": {
            "num_envs": n,
            "horizon": HORIZON,
            "epochs": EPOCHS,
            "minibatch_size": hparams.minibatch_size,
            "hidden": list(HIDDEN),
        },
    }


def ours_solve(device: torch.device, max_seconds: float) -> dict[str, Any]:
    """A default PPO pod to 475: Pod construction + run until the target."""
    t0 = time.perf_counter()
    pod = Pod(
        PodSpec(
            env_id=ENV_ID,
            algo="ppo",
            device=str(device),
            seed=0,
            target_reward=TARGET_RETURN,
            max_seconds=max_seconds,
        )
    )
    build_s = time.perf_counter() - t0
    result = pod.run()
    wall = time.perf_counter() - t0
    pod.close()
    return {
        "cuda_graphs": pod.graphs is not None and pod.graphs.capture,
        "solved": bool(result.solved),
        "seconds": wall if result.solved else None,
        "build_s": build_s,
        "run_s": float(result.wall_seconds),
        "wall_s": wall,
        "env_steps": int(result.env_steps),
        "evaluations": len(result.curve),
        "eval_return_mean": float(result.eval_return_mean),
        "hparams": "PPOConfig() defaults",
        "criterion": "mean return of 10 deterministic evaluation episodes",
    }


# -- the run -----------------------------------------------------------------------------
def _side(fn, device: torch.device) -> dict[str, Any]:
    """``fn()``'s dict, or the error it raised; frees the device's cached memory after."""
    try:
        return {"status": "ok", **fn()}
    except Exception as exc:  # record and go on: one failure must not lose the rest
        log(f"  error: {error_text(exc)}")
        return {"status": "error", "error": error_text(exc)}
    finally:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _value(side: Any) -> float:
    if isinstance(side, dict):
        v = side.get("seconds") if "solved" in side else side.get("steps_per_s")
        if v is not None:
            return float(v)
    return math.nan


def measure(result, kind: str, n: int | None, ours_fn, peer_fn, peer, device) -> None:
    """One row: ours, then the peer (or why not), their ratio; then the JSON is saved."""
    what = kind if n is None else f"{kind} N={n:,}"
    row: dict[str, Any] = {"num_envs": n}
    if result["_budget_left"]() < 0:
        row.update(ours="skipped: budget spent", peer="skipped: budget spent")
        log(f"{what}: skipped (budget)")
    else:
        log(f"{what}: ours")
        row["ours"] = _side(ours_fn, device)
        _save_row(result, kind, row)  # ours is kept if the peer's side never ends
        if peer is None:
            row["peer"] = result["peer"]["status"]
        elif result["_budget_left"]() < 0:
            row["peer"] = "skipped: budget spent"
        else:
            log(f"{what}: PureJaxRL")
            row["peer"] = _side(lambda: peer_fn(peer), device)
    row["ratio"] = safe_ratio(_value(row.get("ours")), _value(row.get("peer")))
    log(f"{what}: ours {_value(row['ours']):.4g}, peer {_value(row['peer']):.4g}")
    _save_row(result, kind, row)


def _save_row(result, kind: str, row: dict[str, Any]) -> None:
    """Put ``row`` in the result (once: a second call for the same row replaces it in
    place) and save the JSON."""
    if kind == "solve":
        result["measures"]["solve"] = row
    elif not any(r is row for r in result["measures"][kind]):
        result["measures"][kind].append(row)
    save(result)


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for kind, n, op, bound in TARGETS:
        if kind == "solve":
            row = result["measures"].get("solve")
        else:
            row = next((r for r in result["measures"][kind] if r["num_envs"] == n), None)
        ratio = row["ratio"] if row is not None else math.nan
        rule = f"ours/peer {op} {bound:g}"
        met = (
            None
            if ratio is None or math.isnan(ratio)
            else (ratio >= bound if op == ">=" else ratio <= bound)
        )
        where = "" if n is None else f" at {n:,} envs"
        out.append(
            {
                "measure": kind,
                "num_envs": n,
                "rule": rule,
                "ratio": ratio,
                "met": met,
                "text": f"{kind}{where}: {rule}: "
                + ("not evaluated (a side did not run)" if met is None else f"{ratio:.3g}, ")
                + ("" if met is None else "met" if met else "NOT met"),
            }
        )
    return out


def save(result: dict[str, Any]) -> None:
    data = {k: v for k, v in result.items() if not k.startswith("_")}
    data["wall_seconds"] = time.time() - result["_start"]
    write_json_atomic(result["_out"], data)


def _si(x: float, unit: str = "") -> str:
    if x is None or math.isnan(x):
        return "-"
    for scale, prefix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{prefix}{unit}"
    return f"{x:.3g}{unit}"


def _cell(side: Any, key: str, fmt) -> str:
    if not isinstance(side, dict):
        return str(side)
    if side.get("status") == "error":
        return "error: " + side["error"][:60]
    value = side.get(key)
    if key == "seconds" and side.get("solved") is False:
        return f"not solved ({fmt(side.get('wall_s'))})"
    return "-" if value is None else fmt(value)


def markdown_table(result: dict[str, Any]) -> str:
    lines = ["| measure | ours | PureJaxRL | ours/peer |", "| --- | --- | --- | --- |"]

    def secs(x):
        return "-" if x is None else f"{x:.2f} s"

    def add(label, row, key, fmt, ratio=True):
        r = safe_ratio(_value(row.get("ours")), _value(row.get("peer"))) if ratio else math.nan
        ours, peer = _cell(row.get("ours"), key, fmt), _cell(row.get("peer"), key, fmt)
        lines.append(f"| {label} | {ours} | {peer} | {'-' if math.isnan(r) else f'{r:.2f}x'} |")

    solve = result["measures"].get("solve")
    if solve is not None:
        add(
            "seconds to solve CartPole-v1 (>= 475, setup and compile included)",
            solve,
            "seconds",
            secs,
        )
    for row in result["measures"]["env_step"]:
        add(f"env steps/s, {row['num_envs']:,} envs", row, "steps_per_s", _si)
    for row in result["measures"]["ppo_train"]:
        add(f"PPO training env steps/s, {row['num_envs']:,} envs", row, "steps_per_s", _si)
        eager = row.get("ours", {}).get("eager") if isinstance(row.get("ours"), dict) else None
        if isinstance(eager, dict):  # the same pod without CUDA graphs, for the gain
            rate, graphs = eager.get("steps_per_s"), row["ours"].get("steps_per_s")
            gain = f"{graphs / rate:.2f}x from CUDA graphs" if rate and graphs else "-"
            label = f"same, {row['num_envs']:,} envs, capture=False"
            lines.append(f"| {label} | {_si(rate) if rate else '-'} | - | {gain} |")
    for kind, label in (("env_step", "env step"), ("ppo_train", "PPO")):
        for row in result["measures"][kind]:
            add(f"{label} compile s, {row['num_envs']:,} envs", row, "compile_s", secs, False)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    ap.add_argument("--device", default=default_device, help=f"default {default_device}")
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="env-step num_envs")
    ap.add_argument("--ppo-sizes", type=int, nargs="+", default=None, help="PPO num_envs")
    ap.add_argument("--seconds", type=float, default=None, help="timed window per measure")
    ap.add_argument("--budget", type=float, default=None, help="skip measures past this, s")
    ap.add_argument("--scan-steps", type=int, default=None, help="peer env steps per call")
    ap.add_argument("--peer-updates", type=int, default=None, help="PPO updates per peer run")
    ap.add_argument(
        "--solve-seconds", type=float, default=SOLVE_SECONDS, help="our time-to-solve limit"
    )
    ap.add_argument(
        "--measures",
        nargs="+",
        choices=("solve", "env", "ppo"),
        default=["solve", "env", "ppo"],
        help="which measures, run in this order: solve, env, ppo",
    )
    ap.add_argument("--peer-dir", type=Path, default=None, help="PureJaxRL's folder")
    ap.add_argument("--skip-peer", action="store_true", help="run ours only")
    ap.add_argument(
        "--no-eager",
        action="store_true",
        help="PPO rows without the capture=False copy of our pod (half the time)",
    )
    ap.add_argument("--quick", action="store_true", help="small sizes, short windows (CPU)")
    ap.add_argument("--out", type=Path, default=None, help="JSON path")
    args = ap.parse_args(argv)
    q = args.quick
    args.sizes = args.sizes or list(QUICK_SIZES if q else SIZES)
    args.ppo_sizes = args.ppo_sizes or list(QUICK_PPO_SIZES if q else PPO_SIZES)
    args.seconds = args.seconds or (QUICK_SECONDS if q else SECONDS)
    args.budget = args.budget or (QUICK_BUDGET if q else BUDGET)
    args.scan_steps = args.scan_steps or (QUICK_SCAN_STEPS if q else SCAN_STEPS)
    args.peer_updates = args.peer_updates or (QUICK_PEER_UPDATES if q else PEER_UPDATES)
    args.warmup_iters = 1 if q else 2
    if min(args.sizes + args.ppo_sizes) < MINIBATCHES or args.seconds <= 0:
        ap.error(f"sizes must be >= {MINIBATCHES} and --seconds positive")
    args.out = args.out or default_out(NAME, q)
    return args


def main(argv: list[str] | None = None) -> int:
    start = time.time()
    args = parse_args(argv)
    device = torch.device(args.device)
    is_cuda = device.type == "cuda"
    if is_cuda:  # the CUDA context, like JAX's backend, is set up before any timing
        torch.zeros(1, device=device).sum().item()
    machine = machine_info()
    peer = None
    if args.skip_peer:
        peer_info: dict[str, Any] = {"status": "unavailable: --skip-peer"}
    else:
        try:
            peer = load_peer(args.peer_dir, device)
            peer_info = peer.info
            if peer.jax.default_backend() != "cpu":  # the backend is up before any timing
                peer.jax.block_until_ready(peer.jax.numpy.zeros(1) + 1)
        except PeerUnavailable as exc:
            peer_info = {"status": f"unavailable: {exc}"}
        except Exception as exc:
            peer_info = {"status": f"unavailable: {error_text(exc)}"}
    log(f"peer: {peer_info['status']}")
    result: dict[str, Any] = {
        "benchmark": NAME,
        "date": now_iso(),
        "quick": args.quick,
        "complete": False,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if is_cuda else machine["cpu_model"],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "machine": machine,
        "peer": peer_info,
        "settings": {
            "env_id": ENV_ID,
            "order": args.measures,
            "sizes": args.sizes,
            "ppo_sizes": args.ppo_sizes,
            "seconds": args.seconds,
            "budget_s": args.budget,
            "scan_steps": args.scan_steps,
            "peer_updates": args.peer_updates,
            "ppo": {
                "horizon": HORIZON,
                "epochs": EPOCHS,
                "minibatches": MINIBATCHES,
                "hidden": list(HIDDEN),
                "activation": "tanh",
            },
            "ours_ppo_warmup_iterations": args.warmup_iters,
            "ours_ppo_eager_row": not args.no_eager,
            "target_return": TARGET_RETURN,
            "unit": "sub-env steps per second; time to solve in wall seconds",
        },
        "measures": {"solve": None, "env_step": [], "ppo_train": []},
        "targets": [],
        "_start": start,
        "_out": args.out,
        "_budget_left": lambda: args.budget - (time.time() - start),
    }
    if peer is not None:
        cfg = peer.config
        mismatch = {
            k: (cfg.get(k), v)
            for k, v in (
                ("NUM_STEPS", HORIZON),
                ("UPDATE_EPOCHS", EPOCHS),
                ("NUM_MINIBATCHES", MINIBATCHES),
                ("ACTIVATION", "tanh"),
            )
            if cfg.get(k) != v
        }
        if mismatch:
            result["settings"]["peer_config_mismatch"] = mismatch
    save(result)

    if "solve" in args.measures:
        measure(
            result,
            "solve",
            None,
            lambda: ours_solve(device, min(args.solve_seconds, max(result["_budget_left"](), 10))),
            peer_solve,
            peer,
            device,
        )
    if "env" in args.measures:
        for n in args.sizes:
            measure(
                result,
                "env_step",
                n,
                lambda n=n: ours_env_step(n, device, args.seconds),
                lambda p, n=n: peer_env_step(p, n, args.seconds, args.scan_steps),
                peer,
                device,
            )
    if "ppo" in args.measures:
        for n in args.ppo_sizes:
            measure(
                result,
                "ppo_train",
                n,
                lambda n=n: ours_ppo(
                    n, device, args.seconds, args.warmup_iters, eager=not args.no_eager
                ),
                lambda p, n=n: peer_ppo(p, n, args.seconds, args.peer_updates),
                peer,
                device,
            )
    result["targets"] = evaluate_targets(result)
    machine["loadavg_at_end"] = loadavg()
    result["complete"] = True
    save(result)
    device_name = result["device_name"]
    print(f"\n{NAME}: {device_name}, torch {torch.__version__}, peer {peer_info['status']}")
    print(markdown_table(result))
    print("\nissue-17 targets:")
    for t in result["targets"]:
        print(f"- {t['text']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
