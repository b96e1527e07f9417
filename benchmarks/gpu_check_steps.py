"""The steps of ``benchmarks/gpu_check.sh``: one GPU check per call, one JSON file each.

``python benchmarks/gpu_check_steps.py STEP --out PATH --budget SECONDS [--dry-run]``
runs one step in this process (the pod and MJX steps start children of their own) and
writes ``PATH`` when it starts (``status: "running"``) and when it ends, failed or not:
``step``, ``status`` (``ok``, ``failed``, ``partial``, ``skipped: <why>``), ``error``,
``seconds``, ``dry_run``, ``device`` and the step's own figures. ``--dry-run`` runs the
same code at toy sizes on the CPU in seconds; a figure that needs CUDA or NVML is then
``None`` and the status says ``skipped: no CUDA`` (the code path still ran).

Steps (their figures): ``versions`` (packages, GPU, compute mode, MPS), ``gpu_tests``
(``pytest -m gpu``, fallback warnings as errors), ``probe`` (one pod: eager vs replay ms
per iteration by CUDA events, capture seconds, host syncs per replay, peak memory,
horizon 1, two hparam changes recapture), ``pods`` (four pods of different sizes in
four processes at once vs one alone), ``frontier`` (``gpu_frontier.py``), ``tournament``
(8 CartPole pods on one GPU vs a lone pod, NVML utilisation, captures vs replays), ``mjx``
(MJX Ant at 4,096 worlds). ``fallback`` writes the JSON of a step that was killed.
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
        ["nvidia-smi", "--query-gpu=name,driver_version,compute_mode", "--format=csv,noheader"]
    )
    out["nvidia_smi"] = smi
    try:
        from elegantpod.clusters.gpu import mps_running

        out["mps"] = bool(mps_running())
    except ImportError:
        out["mps"] = None
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
    if args.dry_run:
        files = ["tests/test_device.py"]  # the lightest file with GPU tests
    else:
        found = subprocess.run(
            ["grep", "-rl", "mark.gpu", "tests"], capture_output=True, text=True, cwd=ROOT
        )
        files = sorted(f for f in found.stdout.split() if f.endswith(".py"))
    report = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "junit.xml"
    cmd = [
        sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
        "-o", FALLBACKS_AS_ERRORS,
        f"--junitxml={report}", *files,
    ]  # fmt: skip
    import importlib.util

    if importlib.util.find_spec("pytest_timeout") is not None:
        cmd[3:3] = ["--timeout", str(int(max(args.budget - 10, 10)))]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, timeout=max(args.budget - 5, 5)
        )
        code, tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        code, tail = None, f"timed out: {str(exc.stdout or '')[-2000:]}"
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "failures": []}
    if report.exists():
        import xml.etree.ElementTree as ET

        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            kinds = {child.tag for child in case}
            if "skipped" in kinds:
                counts["skipped"] += 1
            elif kinds & {"failure", "error"}:
                counts["failed" if "failure" in kinds else "errors"] += 1
                counts["failures"].append(name)
            else:
                counts["passed"] += 1
    out = {"files": files, "exit_code": code, "output_tail": tail, **counts}
    # 0: all passed; 5: nothing selected (no GPU tests collected)
    if code not in (0, 5):
        out["status"] = "failed"
        out["error"] = f"pytest exit code {code}"
    elif args.dry_run or not cuda():
        out["status"] = "skipped: no CUDA"
    return out


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
    """Host synchronisations over ``count`` calls, as ``set_sync_debug_mode`` warns them."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(count):
                fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def step_pods(args, record) -> dict[str, Any]:
    on_gpu = not args.dry_run and cuda()
    if not on_gpu:  # what building a pod imports, done once before a dry run forks
        ppo_pod(4, 2, "cpu", capture=False).close()
    sizes = [1024, 4096, 16384, 65536] if on_gpu else [8, 16, 32, 64]
    lone_size = sizes[1]
    seconds = 10.0 if on_gpu else 0.3
    horizon = 16 if on_gpu else 4
    device = "cuda" if on_gpu else "cpu"
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-pods-"))
    # the four first: the lone pod then finds its size's compiled step in Inductor's cache
    crowd = _pods_at_once(folder / "four", sizes, seconds, horizon, device, args)
    record["pods"] = crowd
    write(args.out, nonfinite_to_none(record))
    lone = _pods_at_once(folder / "lone", [lone_size], seconds, horizon, device, args)
    rates = [p.get("steps_per_second") for p in crowd]
    aggregate = sum(r for r in rates if r) if any(rates) else None
    out = {
        "sizes": sizes,
        "horizon": horizon,
        "seconds": seconds,
        "pods": crowd,
        "fell_back_to_eager": sum(bool(p.get("fell_back_to_eager")) for p in crowd),
        "failed_compiles": sum(p.get("compile_failures", 0) for p in crowd),
        "errors": [p["error"] for p in crowd if p.get("error")],
        "aggregate_steps_per_second": aggregate,
        "lone_size": lone_size,
        "lone_steps_per_second": lone[0].get("steps_per_second"),
    }
    out["ratio"] = ratio(aggregate, out["lone_steps_per_second"])
    if out["errors"] or (on_gpu and out["fell_back_to_eager"]) or out["failed_compiles"]:
        out["status"] = "failed"
        out["error"] = f"{out['fell_back_to_eager']} fell back, {len(out['errors'])} errors"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


def _pods_at_once(folder: Path, sizes, seconds, horizon, device, args) -> list[dict[str, Any]]:
    """One child process per pod; all warm up, then run their timed windows together."""
    folder.mkdir(parents=True)
    children = []
    for i, n in enumerate(sizes):
        argv = [
            "pod-child", "--out", str(folder / f"{i}.json"),
            "--budget", str(args.budget), "--size", str(n), "--horizon", str(horizon),
            "--seconds", str(seconds), "--device", device, "--ready", str(folder),
        ]  # fmt: skip
        log = open(folder / f"{i}.log", "w")  # noqa: SIM115 - closed below
        children.append((_Child(argv, log, fork=args.dry_run), log))
    deadline = time.monotonic() + max(args.budget * 0.6, 5)
    while time.monotonic() < deadline:
        ready = len(list(folder.glob("ready-*")))
        if ready == len(sizes) or any(p.poll() is not None for p, _ in children):
            break
        time.sleep(0.1)
    (folder / "go").touch()  # the ready ones start now; a late one starts when ready
    results = []
    for i, (proc, log) in enumerate(children):
        proc.wait(timeout=max(deadline - time.monotonic(), 0) + seconds + 30)
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
    """One pod in this process: warm up, say ready, wait for go, run ``--seconds``."""
    import torch

    out: dict[str, Any] = {"size": args.size, "device": args.device}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pod = ppo_pod(args.size, args.horizon, args.device, capture=None)
            for _ in range(3 if args.device == "cuda" else 1):  # warm-up, capture, replay
                iterate(pod)
            (Path(args.ready) / f"ready-{os.getpid()}").touch()
            go, give_up = Path(args.ready) / "go", time.monotonic() + args.budget
            while not go.exists() and time.monotonic() < give_up:  # the parent may be gone
                time.sleep(0.02)
            per = pod.env.num_envs * pod.collector.horizon
            steps, t = 0, time.perf_counter()
            while time.perf_counter() - t < args.seconds:
                iterate(pod)
                steps += per
            if args.device == "cuda":
                torch.cuda.synchronize()
                out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
            out["steps_per_second"] = steps / (time.perf_counter() - t)
            out.update(pod_counts(pod))
            out["fell_back_to_eager"] = args.device == "cuda" and not captured(pod)
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    out.update(warning_counts(caught))
    write(Path(args.out), nonfinite_to_none(out))
    return 0


def step_frontier(args, record) -> dict[str, Any]:
    on_gpu = not args.dry_run and cuda()
    path = args.out.with_name("gpu_frontier.json")  # its own JSON, kept whole
    if on_gpu:
        sizes, extra = ["4096", "65536"], ["--seconds", "5"]
    else:
        sizes, extra = ["4"], ["--quick", "--skip-peer", "--device", "cpu", "--seconds", "0.3"]
    cmd = [
        sys.executable, str(HERE / "gpu_frontier.py"), "--measures", "env", "ppo",
        "--sizes", *sizes, "--ppo-sizes", *sizes, "--budget", str(max(args.budget - 20, 5)),
        "--out", str(path), *extra,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, timeout=max(args.budget - 5, 5)
        )
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
    if code != 0 or not raw:
        out["status"], out["error"] = "failed", f"gpu_frontier.py exit code {code}"
    elif not raw.get("complete"):
        out["status"] = "partial"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


def lone_pod(hparams: dict[str, Any], device: str, seconds: float) -> float:
    """Env steps per second of one pod trained alone in this process with a tournament
    pod's settings (evaluations included), after a warm-up that compiles and captures."""
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
    start, t = pod.env_steps, time.perf_counter()
    pod.run(budget, PodHooks(should_stop=lambda: time.perf_counter() - t >= seconds))
    rate = (pod.env_steps - start) / (time.perf_counter() - t)
    pod.close()
    return rate


class Utilisation:
    """GPU utilisation every half second from NVML (pynvml), else from ``nvidia-smi``."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.source: str | None = None
        self._stop = threading.Event()
        if not cuda():
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.source = "nvml"
            read = lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)  # noqa: E731
        except Exception:
            self.source = "nvidia-smi"
            query = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
            read = lambda: float(_run(query).splitlines()[0])  # noqa: E731
        threading.Thread(target=self._loop, args=(read,), daemon=True).start()

    def _loop(self, read) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                self.samples.append(read())

    def stats(self, since: int) -> dict[str, Any] | None:
        s = self.samples[since:]
        return {"mean": sum(s) / len(s), "max": max(s), "samples": len(s)} if s else None

    def close(self) -> None:
        self._stop.set()


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


def step_tournament(args, record) -> dict[str, Any]:
    import elegantpod
    from elegantpod.tournament import GeneratorConfig

    on_gpu = not args.dry_run and cuda()
    if on_gpu:
        pods, n, horizon, lone_s, warmup, window = 8, 16384, 16, 25.0, 25.0, 50.0
    else:
        pods, n, horizon, lone_s, warmup, window = 2, 16, 4, 0.3, 1.0, 1.5
    hparams = {"num_envs": n, "horizon": horizon}
    # 8 iterations per segment: PPO's default segment (32,768 steps) is less than one
    # iteration at this size, and a segment of one iteration is never captured
    segment = 8 * n * horizon
    out: dict[str, Any] = {"pods": pods, "num_envs": n, "horizon": horizon}
    out["segment_steps"] = segment
    out["lone_steps_per_second"] = lone_pod(hparams, "cuda" if on_gpu else "cpu", lone_s)
    record.update(out)
    write(args.out, nonfinite_to_none(record))
    if on_gpu:
        client = elegantpod.cluster(dashboard_address=None)
    else:  # a dry run's worker is a thread of this process: no interpreter to start
        from distributed import Client, LocalCluster

        local = LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        )
        client = Client(local)
    gpu = Utilisation()
    try:
        client.run(_log_warnings)
        t = elegantpod.Tournament(
            "CartPole-v1", ["ppo"], pods,
            store=tempfile.mkdtemp(prefix="gpu-check-tournament-"), client=client,
            max_seconds=warmup + window + 60, hparams={"ppo": hparams},
            generator=GeneratorConfig(ready_segments=10**6), eval_episodes=2,
            segment_steps=segment,
        )  # fmt: skip
        t.start()
        time.sleep(warmup)
        s0, w0, g0 = t.summary()["env_steps_total"], time.perf_counter(), len(gpu.samples)
        time.sleep(window)
        summary = t.summary()
        s1, w1 = summary["env_steps_total"], time.perf_counter()
        out["gpu_utilisation"] = gpu.stats(g0)
        out["utilisation_source"] = gpu.source
        info = t.cluster_info()
        t.stop()
        end = t.wait(120 if on_gpu else 30)
        texts = [w for ws in client.run(_worker_warnings).values() for w in ws]
    finally:
        gpu.close()
        cluster = client.cluster
        client.close()
        cluster.close()
    out["tournament_steps_per_second"] = (s1 - s0) / (w1 - w0)
    out["ratio"] = ratio(out["tournament_steps_per_second"], out["lone_steps_per_second"])
    out["captures"] = end.get("captures", summary.get("captures"))
    out["replays"] = end.get("replays", summary.get("replays"))
    out["cluster_info"] = {
        k: info.get(k) for k in ("pods_per_gpu", "slots", "gpu_processes", "mps")
    }
    out["end"] = {k: end.get(k) for k in ("status", "pods_failed", "failures", "eval_share")}
    out["worker_capture_fallbacks"] = sum(bool(CAPTURE_FALLBACK.search(w)) for w in texts)
    out["worker_compile_failures"] = sum(bool(COMPILE_FAILURE.search(w)) for w in texts)
    out["worker_warnings"] = sorted(set(texts))[:20]
    util = (out["gpu_utilisation"] or {}).get("mean")
    out["targets"] = {
        "ratio >= 1.5": None if out["ratio"] is None else out["ratio"] >= 1.5,
        "gpu utilisation mean >= 70%": None if util is None else util >= 70,
    }
    if end.get("pods_failed"):
        out["status"], out["error"] = "failed", f"pods failed: {end.get('failures')}"
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
    window = min(20.0, max(args.budget - (time.time() - record["_t0"]) - 20, 3))
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
    ap.add_argument("step", choices=[*STEPS, "pod-child", "fallback"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--rc", type=int, default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--status", default=None, help="fallback: the status to record")
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--horizon", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ready", default=None)
    args = ap.parse_args(argv)
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
