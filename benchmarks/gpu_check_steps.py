"""The steps of ``benchmarks/gpu_check.sh``: one GPU check per call, one JSON file each.

``python benchmarks/gpu_check_steps.py STEP --out PATH --budget SECONDS [--dry-run]``
runs one step in this process (the pod and MJX steps start children of their own) and
writes ``PATH`` when it starts (``status: "running"``) and when it ends, failed or not:
``step``, ``status`` (``ok``, ``failed``, ``partial``, ``skipped: <why>``), ``error``,
``seconds``, ``dry_run``, ``device`` and the step's own figures. ``--dry-run`` runs the
same code at toy sizes on the CPU in seconds; a figure that needs CUDA or NVML is then
``None`` and the status says ``skipped: no CUDA`` (the code path still ran).

Steps (their figures): ``versions`` (packages, GPU, compute mode, MPS), ``gpu_tests``
(``pytest -m "gpu and not slow"``, lightest first, fallback warnings as errors, results
as they come), ``probe`` (one pod: eager vs replay ms per iteration by CUDA events,
capture seconds, host syncs per replay, peak memory, horizon 1, two hparam changes
recapture), ``pods`` (four pods of different sizes in four processes, each alone in turn
and then together: each pod's crowd rate over its lone rate, and their sum),
``frontier`` (``gpu_frontier.py``), ``tournament`` (8 identical CartPole pods on one GPU
vs a lone pod, without and with CUDA MPS, GPU activity per process and per SM, captures
vs replays), ``mjx`` (MJX Ant at 4,096 worlds). ``fallback`` writes the JSON of a step
that was killed; ``budgets`` prints the shell's budgets from :data:`PLAN`;
``check-imports`` says what the steps need that is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from _common import nonfinite_to_none  # NaN/inf -> None: the benchmarks' one strict-JSON rule

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CAPTURE_FALLBACK = re.compile(r"captur\w* .*fail", re.I)
COMPILE_FAILURE = re.compile(r"torch\.compile failed", re.I)


# ------------------------------------------------------------------------------ the plan
@dataclasses.dataclass(frozen=True)
class Plan:
    """One step's time on the GPU: its budget (the shell's ``timeout``), every fixed wait
    and subprocess limit inside it, by name, and an estimate of the rest (process start,
    imports, compiles, cluster start and stop) from the earlier probe of this kind of
    lease (``../shared/reviews/gpu-review-2.md``, section 2).

    The step's code reads its waits from here, so ``tests/test_gpu_check.py`` sums what
    the GPU run will really wait: a step whose waits and estimate exceed its budget, or a
    plan over :data:`TOTAL_SECONDS`, fails there, not in the one lease a session gets.
    """

    budget: float
    waits: dict[str, float]
    estimate: float
    """Seconds of work besides the waits, at the GPU sizes (an estimate, said where from)."""
    dry: dict[str, float] = dataclasses.field(default_factory=dict)
    """The waits a dry run uses instead (toy sizes on the CPU: tenths of a second for a
    timed window, the dry budget for a subprocess)."""

    def need(self) -> float:
        """What the step takes at most, by the plan."""
        return sum(self.waits.values()) + self.estimate


TOTAL_SECONDS = 520
"""The whole script's limit (8 min 40 s), checks and installs included: a 15-minute lease
also pays for the machine's start and the transfers."""
SETUP_SECONDS = 15
"""The shell's own work before step 1: the import check and installing the carried wheels
the machine lacks (a handful, ``--no-deps``)."""
KILL_GRACE = 10
"""``timeout -k``: seconds a step that ignores its TERM has before KILL."""

PLAN = {
    "versions": Plan(15, {"nvidia_smi": 5}, estimate=6),  # torch import + CUDA init: 6-10 s
    "gpu_tests": Plan(50, {"pytest": 45}, estimate=2, dry={"pytest": 45}),
    "probe": Plan(45, {}, estimate=35),  # 4,096 envs: eager, capture, 20+20 iterations
    "pods": Plan(
        75,
        {"ready_deadline": 35, "lone_windows": 4 * 5, "crowd_window": 5, "join": 5},
        estimate=5,
        dry={"ready_deadline": 30, "lone_windows": 4 * 0.3, "crowd_window": 0.3, "join": 30},
    ),
    "frontier": Plan(55, {"frontier": 50}, estimate=2, dry={"frontier": 45}),
    "tournament": Plan(
        200,
        {
            "lone_window": 10,
            # one tournament without MPS, and one with it where this script can start it
            "ready_deadline": 35,
            "window": 12,
            "wait_after_stop": 8,
            "mps_ready_deadline": 35,
            "mps_window": 12,
            "mps_wait_after_stop": 8,
        },
        # the lone pod's warm-up (compile, capture) 20 s; per tournament, cluster start
        # (8 processes importing torch) about 12 s and its close about 8 s; MPS start/stop 2 s
        estimate=20 + 2 * (12 + 8) + 2,
        dry={"lone_window": 0.3, "ready_deadline": 30, "window": 1.5, "wait_after_stop": 30},
        # (a dry run never starts MPS: its mps_* waits are not used)
    ),
    "mjx": Plan(50, {"window": 8}, estimate=35),  # Ant at 4,096 worlds: 20-40 s to compile
}
"""Every step's plan at the GPU sizes, in the order the shell runs them."""

DRY_BUDGET = 50
"""A dry run's budget per step (toy sizes on the CPU, the steps overlapping)."""


def waits(step: str, dry_run: bool) -> dict[str, float]:
    """``step``'s waits: the plan's on the GPU, its ``dry`` ones in a dry run (the same
    code paths in seconds, the figures meaningless)."""
    plan = PLAN[step]
    return {**plan.waits, **plan.dry} if dry_run else dict(plan.waits)


# ------------------------------------------------------------------------------ common
def write(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str, allow_nan=False) + "\n")
    os.replace(tmp, path)


def cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def warning_counts(caught: list) -> dict[str, Any]:
    texts = [str(w.message) for w in caught]
    return {
        "capture_fallbacks": sum(bool(CAPTURE_FALLBACK.search(t)) for t in texts),
        "compile_failures": sum(bool(COMPILE_FAILURE.search(t)) for t in texts),
        "warnings": sorted({t[:300] for t in texts})[:20],
    }


def ppo_pod(n: int, horizon: int, device: str, capture: bool | None, epochs: int = 2):
    """A CartPole PPO pod of ``n`` sub-envs (no evaluations in the timed loops)."""
    from elegantpod.agents import PPOConfig
    from elegantpod.config import PodSpec
    from elegantpod.pod.pod import Pod

    hp = PPOConfig(
        num_envs=n, horizon=horizon, epochs=epochs, minibatch_size=max(n * horizon // 4, 2)
    )
    spec = PodSpec(
        env_id="CartPole-v1", algo="ppo", hparams=hp, device=device, capture=capture,
        eval_episodes=2, max_steps=10**12,
    )  # fmt: skip
    return Pod(spec)


def captured(pod) -> bool:
    return pod.graphs is not None and pod.graphs.capture


def iterate(pod) -> None:
    """One PPO iteration as ``Pod.run`` makes it (replayed where the pod captures)."""
    if captured(pod):
        pod.graphs.run()
    else:
        pod.learner.update(pod.collector.rollout())


class Timer:
    """Milliseconds per iteration: CUDA events on a GPU, the wall clock on a CPU."""

    def __init__(self, device) -> None:
        import torch

        self.torch, self.cuda = torch, torch.device(device).type == "cuda"

    def __call__(self, fn, count: int) -> float:
        torch = self.torch
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(count):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / count
        t = time.perf_counter()
        for _ in range(count):
            fn()
        return (time.perf_counter() - t) * 1e3 / count


def pod_counts(pod) -> dict[str, Any]:
    graphs = pod.graphs
    return {
        "captured": captured(pod),
        "captures": getattr(graphs, "captures", None),
        "replays": getattr(graphs, "replays", None),
    }


# ----------------------------------------------------------------------------- steps
def step_versions(args, record) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    def version(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    names = "torch numpy dask distributed dask-cuda pynvml nvidia-ml-py jax jaxlib mujoco"
    out: dict[str, Any] = {"python": sys.version.split()[0], "torch_version": torch.__version__}
    out["packages"] = {n: version(n) for n in (*names.split(), "mujoco-mjx", "gymnasium")}
    out["torch"] = {
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "register_generator_state": hasattr(torch.cuda.CUDAGraph, "register_generator_state"),
    }
    out["cuda_available"] = torch.cuda.is_available()
    out["gpus"] = [
        {"name": torch.cuda.get_device_name(i), "memory_bytes": torch.cuda.mem_get_info(i)[1]}
        for i in range(torch.cuda.device_count())
    ]
    smi = _run(
        ["nvidia-smi", "--query-gpu=name,driver_version,compute_mode", "--format=csv,noheader"],
        timeout=waits("versions", args.dry_run)["nvidia_smi"],
    )
    out["nvidia_smi"] = smi
    out["mps"] = _mps_state()
    out["mps_pipe_directory"] = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    out["env"] = {
        k: os.environ.get(k)
        for k in ("CUDA_VISIBLE_DEVICES", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE")
    }
    if not out["cuda_available"]:
        out["status"] = "skipped: no CUDA"
    return out


def _run(cmd: list[str], timeout: float = 10) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    return (done.stdout or done.stderr).strip()[:2000]


FALLBACKS_AS_ERRORS = (
    "filterwarnings=error:.*captur.*fail:RuntimeWarning\n"
    "error:.*torch.compile failed:RuntimeWarning"
)
"""pytest's ini option (whose messages are regular expressions, where ``-W`` takes
literal prefixes): a capture that falls back to eager or a failed compile fails its test."""


def step_gpu_tests(args, record) -> dict[str, Any]:
    """``pytest -m "gpu and not slow"``, the lightest files first, each result written to
    a JSON-lines file as it comes (``gpu_check_plugin``): a run that its time limit ends
    still reports every test that finished. The 8-process tournament test
    (``test_resident``) is left to step 6, which runs that layout for its figures."""
    limit = waits("gpu_tests", args.dry_run)["pytest"]
    if args.dry_run:
        files = ["tests/test_device.py"]  # the lightest file with GPU tests
    else:
        found = subprocess.run(
            ["grep", "-rl", "mark.gpu", "tests"], capture_output=True, text=True, cwd=ROOT
        )
        files = sorted(f for f in found.stdout.split() if f.endswith(".py"))
    results = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "results.jsonl"
    cmd = [
        sys.executable, "-m", "pytest", "-m", "gpu and not slow", "-q",
        "-p", "no:cacheprovider", "-p", "gpu_check_plugin", "-o", FALLBACKS_AS_ERRORS,
        "--ignore", "tests/tournament/worker/test_resident.py", *files,
    ]  # fmt: skip
    import importlib.util

    if importlib.util.find_spec("pytest_timeout") is not None:
        cmd[3:3] = ["--timeout", str(int(max(limit - 10, 10)))]
    env = {
        **os.environ,
        "ELEGANTPOD_TEST_RESULTS": str(results),
        "ELEGANTPOD_LIGHT_FIRST": "1",  # tests/conftest.py: the lightest files first
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=limit, env=env)
        code, tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or b""  # bytes, whatever text= says (subprocess's docs)
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        code, tail = None, f"timed out after {limit:.0f} s: {text[-2000:]}"
    counts = test_counts(results)
    out = {"files": files, "exit_code": code, "output_tail": tail, **counts}
    # 0: all passed; 5: nothing selected (no GPU tests collected)
    if code not in (0, 5):
        out["status"] = "failed" if code is not None else "partial"
        out["error"] = f"pytest exit code {code}" if code is not None else tail[:300]
    elif args.dry_run or not cuda():
        out["status"] = "skipped: no CUDA"
    return out


def test_counts(results: Path) -> dict[str, Any]:
    """Passed, failed, skipped and errors from ``gpu_check_plugin``'s JSON lines (a line
    cut short by a kill is ignored), with the names of those that did not pass."""
    counts: dict[str, Any] = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "failures": []}
    lines = results.read_text().splitlines() if results.exists() else []
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if r["when"] != "call" and r["outcome"] == "passed":
            continue  # a setup or teardown that passed: its call says the outcome
        if r["outcome"] == "skipped":
            counts["skipped"] += 1
        elif r["outcome"] == "failed":
            counts["failed" if r["when"] == "call" else "errors"] += 1
            counts["failures"].append(r["nodeid"])
        else:
            counts["passed"] += 1
    return counts


def step_probe(args, record) -> dict[str, Any]:
    import torch

    on_gpu = not args.dry_run and cuda()
    device = "cuda" if on_gpu else "cpu"
    n, count = (4096, 20) if on_gpu else (16, 3)
    horizon = 16 if on_gpu else 4
    timer = Timer(device)
    out: dict[str, Any] = {"num_envs": n, "horizon": horizon, "iterations_timed": count}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eager = ppo_pod(n, horizon, device, capture=False)
        for _ in range(2):
            iterate(eager)
        out["eager_ms_per_iteration"] = timer(lambda: iterate(eager), count)
        eager.close()
        eager = None
        if on_gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        pod = ppo_pod(n, horizon, device, capture=None if on_gpu else False)
        if not on_gpu:  # the static path that graphs record, run eagerly
            from elegantpod.pod.capture import IterationGraphs

            pod.graphs = IterationGraphs(pod.collector, pod.learner, capture=False)
        t = time.perf_counter()
        pod.graphs.run() if pod.graphs is not None else iterate(pod)  # warm-up + capture
        if on_gpu:
            torch.cuda.synchronize()
        out["capture_seconds"] = time.perf_counter() - t if on_gpu else None
        pod.graphs.run() if pod.graphs is not None else iterate(pod)
        run = pod.graphs.run if pod.graphs is not None else lambda: iterate(pod)
        out["replay_ms_per_iteration"] = replay_ms = timer(run, count)
        out["replay_over_eager"] = ratio(out["eager_ms_per_iteration"], replay_ms)
        syncs = _count_syncs(run, 5) if on_gpu else None
        out["host_syncs_per_replay"] = None if syncs is None else syncs / 5
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated() if on_gpu else None
        out["pod"] = pod_counts(pod)
        # two hparam changes between iterations: the graphs must be captured again
        before = getattr(pod.graphs, "captures", None)
        cfg = pod.learner.config
        pod.learner.set_hparams(clip_coef=cfg.clip_coef / 2)
        pod.learner.set_hparams(clip_coef=cfg.clip_coef * 1.5, ent_coef=0.01)
        run()
        after = getattr(pod.graphs, "captures", None)
        out["hparam_recapture"] = {
            "captures_before": before,
            "captures_after": after,
            "recaptured": None if not on_gpu or before is None else after == before + 1,
            "still_captured": captured(pod),
        }
        pod.close()
        pod = None
        short = ppo_pod(n, 1, device, capture=None if on_gpu else False)
        for _ in range(3):
            iterate(short)
        out["horizon_1"] = {
            "ms_per_iteration": timer(lambda: iterate(short), count),
            **pod_counts(short),
            "fell_back_to_eager": on_gpu and not captured(short),
        }
        short.close()
    out.update(warning_counts(caught))
    problems = []
    if on_gpu:
        if not out["pod"]["captured"] or out["horizon_1"]["fell_back_to_eager"]:
            problems.append("a pod fell back to eager")
        if not out["hparam_recapture"]["recaptured"]:
            problems.append("two hparam changes did not recapture")
    if problems:
        out["status"], out["error"] = "failed", "; ".join(problems)
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


def _count_syncs(fn, count: int) -> int:
    """Host synchronisations over ``count`` calls, as ``set_sync_debug_mode`` warns them.

    The mode is set before the warnings are recorded, and torch's one-time notice that
    the mode "is a prototype feature" is not counted: it had read 6 syncs for 5 replays."""
    import torch

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(count):
                fn()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return sum(is_sync_warning(str(w.message)) for w in caught)


def is_sync_warning(text: str) -> bool:
    """A warning of a host synchronisation, not torch's notice about the debug mode."""
    text = text.lower()
    return "synchroniz" in text and "prototype" not in text


def step_pods(args, record) -> dict[str, Any]:
    """Four pods of different sizes, each in its own process: each alone in turn, then
    all four at once, so that every pod's crowd rate is read against its own lone rate.

    ``packing`` is the sum of those shares: 1.0 when the four time-slice the GPU
    perfectly (each gets a quarter of its lone speed), above 1 when their kernels overlap
    (CUDA MPS) or fill each other's idle gaps. (The ratio of the crowd's total to the
    4,096 pod alone, reported before, grew with the 65,536 pod whatever packing did.)"""
    on_gpu = not args.dry_run and cuda()
    if not on_gpu:  # what building a pod imports, done once before a dry run forks
        ppo_pod(4, 2, "cpu", capture=False).close()
    sizes = [1024, 4096, 16384, 65536] if on_gpu else [8, 16, 32, 64]
    horizon = 16 if on_gpu else 4
    device = "cuda" if on_gpu else "cpu"
    plan = waits("pods", args.dry_run)
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-pods-"))
    pods = _pods_alone_then_together(folder, sizes, horizon, device, plan, args)
    shares = [ratio(p.get("crowd_steps_per_second"), p.get("lone_steps_per_second")) for p in pods]
    out = {
        "sizes": sizes,
        "horizon": horizon,
        "window_seconds": plan["crowd_window"],
        "pods": pods,
        "crowd_over_lone": shares,
        "packing": sum(shares) if all(s is not None for s in shares) else None,
        "fell_back_to_eager": sum(bool(p.get("fell_back_to_eager")) for p in pods),
        "failed_compiles": sum(p.get("compile_failures", 0) for p in pods),
        "errors": [p["error"] for p in pods if p.get("error")],
        "mps": _mps_state(),
    }
    if out["errors"] or (on_gpu and out["fell_back_to_eager"]) or out["failed_compiles"]:
        out["status"] = "failed"
        out["error"] = f"{out['fell_back_to_eager']} fell back, {len(out['errors'])} errors"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


def _pods_alone_then_together(folder: Path, sizes, horizon, device, plan, args):
    """One child process per pod. All warm up (compile, capture); then each runs its
    window alone while the others wait (``alone-<i>``), then all run one window together
    (``go``). A pod not ready by the deadline is left out of the lone turns and joins the
    crowd when it is."""
    folder.mkdir(parents=True, exist_ok=True)
    lone = plan["lone_windows"] / len(sizes)
    children = []
    for i, n in enumerate(sizes):
        argv = [
            "pod-child", "--out", str(folder / f"{i}.json"), "--index", str(i),
            "--budget", str(args.budget), "--size", str(n), "--horizon", str(horizon),
            "--seconds", str(plan["crowd_window"]), "--lone-seconds", str(lone),
            "--device", device, "--ready", str(folder),
        ]  # fmt: skip
        log = open(folder / f"{i}.log", "w")  # noqa: SIM115 - closed below
        children.append((_Child(argv, log, fork=args.dry_run), log))
    deadline = time.monotonic() + plan["ready_deadline"]
    while time.monotonic() < deadline:
        ready = len(list(folder.glob("ready-*")))
        if ready == len(sizes) or any(p.poll() is not None for p, _ in children):
            break
        time.sleep(0.1)
    for i in range(len(sizes)):  # one at a time: the GPU holds only this pod's work
        if not (folder / f"ready-{i}").exists():
            continue
        (folder / f"alone-{i}").touch()
        turn_ends = time.monotonic() + lone + 5
        while not (folder / f"alone-done-{i}").exists() and time.monotonic() < turn_ends:
            time.sleep(0.02)
    (folder / "go").touch()  # together now; a late pod starts when it is ready
    results = []
    ends = time.monotonic() + plan["crowd_window"] + plan["join"]
    for i, (proc, log) in enumerate(children):
        proc.wait(timeout=max(ends - time.monotonic(), 0.1))
        log.close()
        path = folder / f"{i}.json"
        result = json.loads(path.read_text()) if path.exists() else {}
        if proc.returncode != 0 and not result.get("error"):
            tail = (folder / f"{i}.log").read_text()[-1500:]
            result["error"] = f"exit code {proc.returncode}: {tail}"
        result["size"] = sizes[i]
        results.append(result)
    return results


class _Child:
    """A pod's own process, ``poll()`` and ``wait(timeout)`` (killed at the timeout): a
    fresh interpreter on the GPU (as a Dask worker process is; CUDA cannot be forked),
    a fork of this one in a dry run (whose imports would cost seconds of CPU again)."""

    def __init__(self, argv: list[str], log, fork: bool) -> None:
        self.forked = None
        self.popen = None
        if fork:
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            self.forked = ctx.Process(target=_forked_main, args=(argv, log.fileno()))
            self.forked.start()
        else:
            cmd = [sys.executable, str(Path(__file__)), *argv]
            self.popen = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def poll(self) -> int | None:
        return self.forked.exitcode if self.forked is not None else self.popen.poll()

    def wait(self, timeout: float) -> None:
        if self.forked is not None:
            self.forked.join(timeout)
            if self.forked.exitcode is None:
                self.forked.kill()
                self.forked.join()
            return
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    @property
    def returncode(self) -> int | None:
        return self.forked.exitcode if self.forked is not None else self.popen.returncode


def _forked_main(argv: list[str], fd: int) -> None:
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    raise SystemExit(main(argv))


def pod_child(args) -> int:
    """One pod in this process: warm up, say ready, run alone when told, then together."""
    import torch

    out: dict[str, Any] = {"size": args.size, "device": args.device}
    folder = Path(args.ready)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pod = ppo_pod(args.size, args.horizon, args.device, capture=None)
            for _ in range(3 if args.device == "cuda" else 1):  # warm-up, capture, replay
                iterate(pod)
            (folder / f"ready-{args.index}").touch()
            give_up = time.monotonic() + args.budget  # the parent may be gone
            alone, go = folder / f"alone-{args.index}", folder / "go"
            while not alone.exists() and not go.exists() and time.monotonic() < give_up:
                time.sleep(0.02)
            if alone.exists() and not go.exists():
                out["lone_steps_per_second"] = _window(pod, args.lone_seconds, args.device)
                (folder / f"alone-done-{args.index}").touch()
            while not go.exists() and time.monotonic() < give_up:
                time.sleep(0.02)
            out["crowd_steps_per_second"] = _window(pod, args.seconds, args.device)
            if args.device == "cuda":
                out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
            out.update(pod_counts(pod))
            out["fell_back_to_eager"] = args.device == "cuda" and not captured(pod)
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    out.update(warning_counts(caught))
    write(Path(args.out), nonfinite_to_none(out))
    return 0


def _window(pod, seconds: float, device: str) -> float:
    """Env steps per second over ``seconds`` of iterations (the GPU's queue drained)."""
    import torch

    per = pod.env.num_envs * pod.collector.horizon
    steps, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        iterate(pod)
        steps += per
    if device == "cuda":
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - t)


def step_frontier(args, record) -> dict[str, Any]:
    on_gpu = not args.dry_run and cuda()
    path = args.out.with_name("gpu_frontier.json")  # its own JSON, kept whole
    if on_gpu:
        sizes, extra = ["4096", "65536"], ["--seconds", "5"]
    else:
        sizes, extra = ["4"], ["--quick", "--skip-peer", "--device", "cpu", "--seconds", "0.3"]
    limit = waits("frontier", args.dry_run)["frontier"]
    cmd = [
        sys.executable, str(HERE / "gpu_frontier.py"), "--measures", "env", "ppo",
        "--sizes", *sizes, "--ppo-sizes", *sizes, "--budget", str(max(limit - 15, 5)),
        "--out", str(path), *extra,
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=limit)
        code, tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        code, tail = None, "timed out"
    raw = json.loads(path.read_text()) if path.exists() else {}
    out = {
        "sizes": [int(s) for s in sizes],
        "exit_code": code,
        "output_tail": tail,
        "frontier": raw.get("measures"),
        "peer": raw.get("peer"),
        "targets": raw.get("targets"),
        "complete": raw.get("complete"),
    }
    peer_status = str((raw.get("peer") or {}).get("status", "unavailable"))
    if peer_status.startswith("unavailable"):
        out["peer_target"] = (
            "not evaluated: PureJaxRL was not carried (shared/gpu-peer/purejaxrl and its "
            "wheels), so 'captured PPO >= 0.5x PureJaxRL at 4,096 envs' has no figure"
        )
    if code != 0 or not raw:
        out["status"], out["error"] = "failed", f"gpu_frontier.py exit code {code}"
    elif not raw.get("complete"):
        out["status"] = "partial"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


class GpuActivity:
    """What the GPU did during a window, from NVML (pynvml), for a lone pod and a
    tournament alike.

    - ``device_util``: NVML's utilisation, the share of time *any* kernel ran. One pod
      replaying tiny serial kernels reads about 100%, so it says little alone.
    - ``processes``: each process's SM utilisation (``nvmlDeviceGetProcessUtilization``),
      which shows how the time was shared.
    - ``gpm``: where the GPU has GPM metrics (Hopper and later), the share of SMs busy
      (``SM_UTIL``) and their occupancy (``SM_OCCUPANCY``) over the window: the figures
      that say whether small pods fill a large GPU.

    The handle is the NVML device of CUDA device 0 of this process (by UUID), not NVML's
    index 0, which differs when ``CUDA_VISIBLE_DEVICES`` picks a subset. Anything NVML
    cannot give is ``None`` with the reason under ``errors``; without CUDA, all is None.
    """

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.nvml = self.handle = None
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not cuda():
            return
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(0).uuid)
            uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception as exc:
            self.errors["nvml"] = f"{type(exc).__name__}: {exc}"[:300]

    def start(self) -> None:
        """Begin the window: a GPM sample, the time stamp, a sampler of device_util."""
        self._t0_us = int(time.time() * 1e6)
        self._samples, self._stop = [], threading.Event()
        self._gpm0 = self._gpm_sample()
        if self.handle is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
                self._samples.append(float(rates.gpu))

    def _gpm_sample(self):
        if self.handle is None:
            return None
        try:
            support = self.nvml.nvmlGpmQueryDeviceSupport(self.handle)
            if not support.isSupportedDevice:
                self.errors["gpm"] = "this GPU has no GPM metrics"
                return None
            sample = self.nvml.nvmlGpmSampleAlloc()
            self.nvml.nvmlGpmSampleGet(self.handle, sample)
            return sample
        except Exception as exc:
            self.errors["gpm"] = f"{type(exc).__name__}: {exc}"[:300]
            return None

    def stop(self) -> dict[str, Any]:
        """End the window: what the GPU did during it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        s = self._samples
        out: dict[str, Any] = {
            "device_util": {"mean": sum(s) / len(s), "max": max(s), "samples": len(s)}
            if s
            else None,
            "processes": self._processes(),
            "gpm": self._gpm(self._gpm0, self._gpm_sample()),
        }
        out["errors"] = dict(self.errors)
        return out

    def _processes(self) -> list[dict[str, Any]] | None:
        if self.handle is None:
            return None
        try:
            rows = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, self._t0_us)
        except Exception as exc:
            self.errors["processes"] = f"{type(exc).__name__}: {exc}"[:300]
            return None
        by_pid: dict[int, list[float]] = {}
        for r in rows:
            by_pid.setdefault(int(r.pid), []).append(float(r.smUtil))
        return [
            {"pid": pid, "sm_util_mean": sum(v) / len(v), "samples": len(v)}
            for pid, v in sorted(by_pid.items())
        ]

    def _gpm(self, first, second) -> dict[str, float] | None:
        if first is None or second is None:
            return None
        nvml = self.nvml
        try:
            get = nvml.c_nvmlGpmMetricsGet_t()
            get.version = nvml.NVML_GPM_METRICS_GET_VERSION
            get.numMetrics = 2
            get.sample1, get.sample2 = first, second
            get.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
            get.metrics[1].metricId = nvml.NVML_GPM_METRIC_SM_OCCUPANCY
            nvml.nvmlGpmMetricsGet(get)
            return {"sm_util": get.metrics[0].value, "sm_occupancy": get.metrics[1].value}
        except Exception as exc:
            self.errors["gpm"] = f"{type(exc).__name__}: {exc}"[:300]
            return None
        finally:
            for sample in (first, second):
                with contextlib.suppress(Exception):
                    nvml.nvmlGpmSampleFree(sample)


def lone_pod(hparams: dict[str, Any], device: str, seconds: float) -> dict[str, Any]:
    """Env steps per second of one pod trained alone in this process with a tournament
    pod's settings (evaluations included), after a warm-up that compiles and captures,
    and what the GPU did meanwhile (:class:`GpuActivity`)."""
    from elegantpod.agents import PPOConfig
    from elegantpod.config import PodSpec
    from elegantpod.pod.budget import Budget
    from elegantpod.pod.hooks import PodHooks
    from elegantpod.pod.pod import Pod

    spec = PodSpec(
        env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(**hparams), device=device,
        eval_episodes=2, max_steps=10**12,
    )  # fmt: skip
    pod = Pod(spec)
    done = []
    budget = dataclasses.replace(Budget.of(pod.spec, pod.learner), evaluate_at_end=False)
    pod.run(budget, PodHooks(on_update=lambda p, stats: done.append(1) or len(done) < 3))
    activity = GpuActivity()
    activity.start()
    start, t = pod.env_steps, time.perf_counter()
    pod.run(budget, PodHooks(should_stop=lambda: time.perf_counter() - t >= seconds))
    rate = (pod.env_steps - start) / (time.perf_counter() - t)
    gpu = activity.stop()
    pod.close()
    return {"steps_per_second": rate, "gpu": gpu}


def _log_warnings(dask_worker) -> None:
    """On each worker: keep every warning's text (capture fallbacks, failed compiles)."""
    kept = dask_worker.__dict__.setdefault("_gpu_check_warnings", [])
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        kept.append(f"{category.__name__}: {message}"[:300])
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.simplefilter("always")


def _worker_warnings(dask_worker) -> list[str]:
    return list(dask_worker.__dict__.get("_gpu_check_warnings", []))


READY_ITERATIONS = 3
"""Iterations a tournament pod has run before the window may start: its warm-up, the one
that captures, and at least one replay."""


def _same_hparams(hparams, space, rng, cfg):
    """A mutation policy that changes nothing: every pod keeps the lone pod's settings."""
    return dict(hparams), {}


def _pod_steps(t) -> dict[str, int]:
    """Each pod's latest env steps, from its progress and segment-end events (a pod
    sends progress at most every half second; a short segment only its end)."""
    steps: dict[str, int] = {}
    for event in t.curves():
        if event.get("type") in ("progress", "segment_end") and event.get("env_steps"):
            steps[event["pod"]] = max(steps.get(event["pod"], 0), int(event["env_steps"]))
    return steps


def tournament_window(hparams, pods: int, segment: int, plan, prefix: str, on_gpu: bool):
    """One tournament of ``pods`` identical pods on a fresh cluster: its env steps per
    second over a window that starts once every pod has replayed, what the GPU did, and
    what the cluster reported. Returns ``(result, finish)``: ``finish()`` stops the
    tournament and closes the cluster (the caller writes its JSON first)."""
    import elegantpod
    from elegantpod.tournament import GeneratorConfig

    ready_s, window = plan[prefix + "ready_deadline"], plan[prefix + "window"]
    if on_gpu:
        client = elegantpod.cluster(gpu=True, dashboard_address=None)  # never CPU workers
    else:  # a dry run's worker is a thread of this process: no interpreter to start
        from distributed import Client, LocalCluster

        local = LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        )
        client = Client(local)
    result: dict[str, Any] = {}
    t = None

    def finish() -> dict[str, Any]:
        """Stop, wait at most the plan's ``wait_after_stop``, close; the end's figures."""
        end: dict[str, Any] = {}
        try:
            if t is not None:
                t.stop()
                with contextlib.suppress(Exception):
                    end = t.wait(plan[prefix + "wait_after_stop"])
            texts = [w for ws in client.run(_worker_warnings).values() for w in ws]
            end["worker_capture_fallbacks"] = sum(bool(CAPTURE_FALLBACK.search(w)) for w in texts)
            end["worker_compile_failures"] = sum(bool(COMPILE_FAILURE.search(w)) for w in texts)
            end["worker_warnings"] = sorted(set(texts))[:20]
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()
        return end

    try:
        client.run(_log_warnings)
        t = elegantpod.Tournament(
            "CartPole-v1", ["ppo"], pods,
            store=tempfile.mkdtemp(prefix="gpu-check-tournament-"), client=client,
            max_seconds=ready_s + window + 60, hparams={"ppo": hparams},
            generator=GeneratorConfig(ready_segments=10**6, restart_after=0),
            mutation_policy=_same_hparams, eval_episodes=2, segment_steps=segment,
        )  # fmt: skip
        t.start()
        ready = READY_ITERATIONS * hparams["num_envs"] * hparams["horizon"]  # env steps
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if sum(s >= ready for s in _pod_steps(t).values()) >= pods:
                break
            time.sleep(0.25)
        first = _pod_steps(t)
        result["pods_ready"] = sum(s >= ready for s in first.values())
        activity = GpuActivity()
        activity.start()
        w0 = time.perf_counter()
        time.sleep(window)
        last, w1 = _pod_steps(t), time.perf_counter()
        result["gpu"] = activity.stop()
        moved = sum(steps - first.get(pod, steps) for pod, steps in last.items())
        result["steps_per_second"] = moved / (w1 - w0)
        result["window_seconds"] = w1 - w0
        summary = t.summary()
        result["captures"], result["replays"] = summary.get("captures"), summary.get("replays")
        info = t.cluster_info()
        result["cluster_info"] = {
            k: info.get(k) for k in ("pods_per_gpu", "slots", "gpu_processes", "mps", "gpus")
        }
    except BaseException:
        with contextlib.suppress(Exception):
            finish()
        raise
    return result, finish


def _mps_state() -> bool | None:
    try:
        from elegantpod.clusters.gpu import mps_running

        return bool(mps_running())
    except ImportError:
        return None


def mps_control() -> tuple[bool, str]:
    """Whether this script may start CUDA MPS itself, and why not: it needs the control
    binary, root (the daemon serves every user's processes on the GPU) and no daemon of
    someone else's already running."""
    import shutil

    if shutil.which("nvidia-cuda-mps-control") is None:
        return False, "nvidia-cuda-mps-control is not installed"
    if os.geteuid() != 0:
        return False, "not root: the MPS daemon is started by the GPU's owner"
    if _mps_state():
        return False, "MPS already runs (someone else's daemon): not restarted"
    return True, "started by this step and stopped after it"


def start_mps() -> None:
    """Start the MPS control daemon; processes started from now on share the GPU through it."""
    subprocess.run(["nvidia-cuda-mps-control", "-d"], check=True, timeout=10)
    for _ in range(20):
        if _mps_state():
            return
        time.sleep(0.1)


def stop_mps() -> None:
    """Stop the daemon this step started."""
    subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, timeout=10)


def step_tournament(args, record) -> dict[str, Any]:
    """8 identical CartPole pods on one GPU, each in its own process, against the lone pod
    of the same settings: the tournament without CUDA MPS, then with it where this script
    can start it. GPU-sized pods (4 minibatches per epoch, not PPO's CPU default of 512
    samples), no mutation, no restart: every pod does the same work per env step as the
    lone pod. The JSON is written after each window, before anything is stopped."""
    on_gpu = not args.dry_run and cuda()
    plan = waits("tournament", args.dry_run)
    pods, n, horizon = (8, 16384, 16) if on_gpu else (2, 16, 4)
    hparams = {"num_envs": n, "horizon": horizon, "minibatch_size": n * horizon // 4}
    # 8 iterations per segment: PPO's default segment (32,768 steps) is less than one
    # iteration at this size, and a segment of one iteration is never captured
    segment = 8 * n * horizon
    out: dict[str, Any] = {"pods": pods, "num_envs": n, "horizon": horizon, "hparams": hparams}
    out["segment_steps"] = segment
    lone = lone_pod(hparams, "cuda" if on_gpu else "cpu", plan["lone_window"])
    out["lone_steps_per_second"], out["lone_gpu"] = lone["steps_per_second"], lone["gpu"]
    record.update(out)
    write(args.out, nonfinite_to_none(record))
    can_mps, why = mps_control() if on_gpu else (False, "no GPU")
    out["mps_measured"], out["mps_note"] = can_mps, why
    runs = [("without_mps", "")] + ([("with_mps", "mps_")] if can_mps else [])
    for name, prefix in runs:
        if prefix:
            start_mps()
        try:
            result, finish = tournament_window(hparams, pods, segment, plan, prefix, on_gpu)
            result["ratio"] = ratio(result["steps_per_second"], out["lone_steps_per_second"])
            out[name] = result
            record.update(out)
            write(args.out, nonfinite_to_none(record))  # before anything is stopped
            result["end"] = finish()
        finally:
            if prefix:
                stop_mps()
        record.update(out)
        write(args.out, nonfinite_to_none(record))
    best = max((out[name] for name, _ in runs), key=lambda r: r["steps_per_second"])
    out["tournament_steps_per_second"] = out["without_mps"]["steps_per_second"]
    out["ratio"] = out["without_mps"]["ratio"]
    gpm = (best.get("gpu") or {}).get("gpm") or {}
    out["targets"] = {
        "ratio >= 1.5 (best run)": None if best["ratio"] is None else best["ratio"] >= 1.5,
        "SM utilisation (GPM) >= 70% (best run)": None
        if gpm.get("sm_util") is None
        else gpm["sm_util"] >= 70,
    }
    ends = [out[name].get("end", {}) for name, _ in runs]
    failed = [e for e in ends if e.get("pods_failed")]
    if failed:
        out["status"], out["error"] = "failed", f"pods failed: {failed[0].get('failures')}"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


def step_mjx(args, record) -> dict[str, Any]:
    from elegantpod.agents import PPOConfig
    from elegantpod.config import PodSpec
    from elegantpod.envs.mjx.memory import bytes_per_world
    from elegantpod.pod.memory import estimate_pod_bytes

    n = 4096
    spec = PodSpec(
        env_id="Ant-v5", algo="ppo", hparams=PPOConfig(num_envs=n, horizon=16),
        env_kwargs={"backend": "mjx", "physics": "fast"},
    )  # fmt: skip
    out: dict[str, Any] = {
        "num_envs": n,
        "world_bytes": bytes_per_world("Ant-v5", "fast"),
        "estimate_bytes": estimate_pod_bytes(spec, obs_dim=105, act_dim=8),
    }
    if args.dry_run or not cuda():
        out["status"] = "skipped: no CUDA"
        return out
    import torch

    from elegantpod.envs import make_env

    free0 = torch.cuda.mem_get_info()[0]
    t = time.perf_counter()
    env = make_env("Ant-v5", num_envs=n, device="cuda", seed=0, backend="mjx")
    env.reset()
    action = torch.zeros(n, 8, device="cuda")
    env.step(action)
    torch.cuda.synchronize()
    out["compile_seconds"] = time.perf_counter() - t
    out["settings"] = {k: os.environ.get(k) for k in ("XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    held = env.qpos
    copy = held.clone()
    env.step(action)
    torch.cuda.synchronize()
    out["view_across_step_ok"] = bool(torch.equal(held, copy))
    actions = [torch.rand(n, 8, device="cuda") * 2 - 1 for _ in range(8)]
    steps, t = 0, time.perf_counter()
    window = waits("mjx", args.dry_run)["window"]
    while time.perf_counter() - t < window:
        for a in actions:
            env.step(a)
        steps += n * len(actions)
    torch.cuda.synchronize()
    out["steps_per_second"] = steps / (time.perf_counter() - t)
    out["used_bytes"] = free0 - torch.cuda.mem_get_info()[0]
    return out


STEPS = {
    "versions": step_versions,
    "gpu_tests": step_gpu_tests,
    "probe": step_probe,
    "pods": step_pods,
    "frontier": step_frontier,
    "tournament": step_tournament,
    "mjx": step_mjx,
}


REQUIRED = ("torch", "numpy", "gymnasium", "dask", "distributed", "pandas", "pytest", "elegantpod")
"""What every step after the first imports: missing one, the run would be wasted."""
OPTIONAL = {"mujoco.mjx": "step 7 (MJX) is skipped", "pynvml": "no GPU activity figures"}


def check_imports() -> int:
    """Import what the steps need before any runs, and say what is missing: exit 3 when a
    required module is (the shell then stops: a lease is not spent on steps that would
    all fail on ``import elegantpod``), 0 otherwise, naming the optional ones missing."""
    import importlib

    missing = []
    for name in (*REQUIRED, *OPTIONAL):
        try:
            importlib.import_module(name)
        except Exception as exc:
            missing.append(name)
            why = OPTIONAL.get(name, "required: carry its wheel in .whl/")
            print(f"gpu_check: cannot import {name} ({type(exc).__name__}: {exc}): {why}")
    return 3 if set(missing) & set(REQUIRED) else 0


def fallback(args) -> int:
    """The JSON of a step that ended without writing its own (killed, crashed)."""
    record = json.loads(args.out.read_text()) if args.out.exists() else {}
    if record.get("status") not in (None, "running"):
        return 0
    tail = Path(args.log).read_text(errors="replace")[-3000:] if args.log else ""
    killed = args.rc in (124, 137)
    error = f"exit code {args.rc}" + (" (its time budget ran out)" if killed else "")
    record.update(
        step=args.out.stem.split("_", 1)[-1],
        status=args.status or ("timeout" if killed else "failed"),
        error=None if args.status else error,
        output_tail=tail,
        dry_run=args.dry_run,
        seconds=record.get("seconds"),
        device=record.get("device"),
    )
    write(args.out, nonfinite_to_none(record))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=[*STEPS, "pod-child", "fallback", "budgets", "check-imports"])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--rc", type=int, default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--status", default=None, help="fallback: the status to record")
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--horizon", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--lone-seconds", type=float, default=1.0)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ready", default=None)
    args = ap.parse_args(argv)
    if args.step == "budgets":  # what the shell gives each step, from the one plan
        print(" ".join(str(int(DRY_BUDGET if args.dry_run else PLAN[s].budget)) for s in STEPS))
        return 0
    if args.step == "check-imports":
        return check_imports()
    if args.out is None:
        ap.error("--out is required")
    if args.step == "pod-child":
        return pod_child(args)
    if args.step == "fallback":
        return fallback(args)
    sys.path.insert(0, str(HERE))  # gpu_frontier's siblings
    t0 = time.time()
    record: dict[str, Any] = {
        "step": args.step, "status": "running", "error": None, "dry_run": args.dry_run,
        "budget_s": args.budget, "device": None, "seconds": None, "_t0": t0,
    }  # fmt: skip
    write(args.out, record)
    try:
        record["device"] = "cuda" if not args.dry_run and cuda() else "cpu"
        record.update(STEPS[args.step](args, record))
        if record["status"] == "running":
            record["status"] = "ok"
    except Exception as exc:
        record["status"] = "failed"
        record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        record["traceback"] = traceback.format_exc()[-4000:]
    record["seconds"] = time.time() - t0
    record.pop("_t0", None)
    write(args.out, nonfinite_to_none(record))
    print(f"{args.step}: {record['status']} in {record['seconds']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
