"""The items of ``benchmarks/gpu_check.sh``: a GPU check in two parts, one device call each.

Part 1 brings the headline figures back in about three minutes (versions, the capture
tests, captured PPO against PureJaxRL at 4,096 and 65,536 envs, then the tournament
against a lone pod, last because it is the riskiest); part 2 the rest (probe, pods, the
other GPU tests, env steps against gymnax, MJX, time to solve). :data:`PARTS` says what
each part runs, under which limit, into which file; ``tests/test_gpu_check.py`` adds the
parts up against the device tool's 15 minutes before a lease is spent on them.

``python benchmarks/gpu_check_steps.py part --part N --out-dir DIR [--dry-run]`` runs a
part: each item in its own process under ``timeout -k 5 LIMIT`` (the lesser of its limit
and what the part's cap leaves; skipped when under 60% of its limit is left), one after
the other, its output appended to ``DIR/log.txt``; after each item its JSON is completed
(``status``, ``error``, ``rc``, the seconds it took) and its figures printed as ``FIGURE
name value`` lines, and a closing ``FIGURES`` block repeats them all, so that the device
tool's output tail carries the numbers even when no file comes back.

``python benchmarks/gpu_check_steps.py STEP --out PATH --budget SECONDS [--dry-run]``
runs one step in this process (the pod step starts children of its own) and writes
``PATH`` when it starts (``status: "running"``) and when it ends, failed or not:
``step``, ``status`` (``ok``, ``failed``, ``partial``, ``skipped: <why>``), ``error``,
``seconds``, ``dry_run``, ``device`` and the step's own figures. ``--dry-run`` runs the
same code at toy sizes on the CPU in seconds; a figure that needs CUDA or NVML is then
``None`` and the status says ``skipped: no CUDA`` (the code path still ran).

Steps (their figures): ``versions`` (packages, GPU, compute mode, whether CUDA MPS already
runs), ``gpu_tests`` (``pytest -m "gpu and not slow"`` on the given files, fallback
warnings as errors, results as they come), ``probe`` (one pod: eager vs replay ms per
iteration by CUDA events, capture seconds, host syncs per replay, peak memory, horizon 1,
two hparam changes recapture), ``pods`` (four pods of different sizes in four processes,
each alone in turn and then together), ``tournament`` (8 identical CartPole pods on one
GPU vs a lone pod on the same evaluation schedule, GPU activity per process and per SM),
``mjx`` (MJX Ant at 4,096 worlds). ``gpu_frontier.py`` runs as items of its own.

Nothing here may outlive the command or change the GPU: no process leaves the command's
session, nothing starts the MPS control daemon (``versions`` only reports whether it
runs), every ``nvidia-smi`` is killed and reaped within a bounded wait, every NVML call
runs in a thread with a time limit, and CUDA processes end through the cluster's close or
the item's ``timeout``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
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
    """One item's time on the GPU: every fixed wait and subprocess limit inside it, by
    name, and an estimate of the rest (process start, imports, compiles, cluster start
    and stop) from the earlier probes of this kind of lease
    (``../shared/reviews/gpu-review-2.md`` section 2, ``gpu-review-3.md`` section 2).

    The step's code reads its waits from here, so ``tests/test_gpu_check.py`` sums what
    the GPU run will really wait: an item whose waits and estimate exceed its limit, or a
    part whose items exceed its cap, fails there, not in the one lease a session gets.
    For a ``gpu_frontier.py`` item the wait ``rows_start_by`` is its ``--budget`` (no
    measure starts after it) and the estimate covers the last measure begun before then.
    """

    waits: dict[str, float]
    estimate: float
    """Seconds of work besides the waits, at the GPU sizes (an estimate, said where from)."""
    dry: dict[str, float] = dataclasses.field(default_factory=dict)
    """The waits a dry run uses instead (toy sizes on the CPU: tenths of a second for a
    timed window, a deadline for what must become ready), each times the load scale."""

    def need(self) -> float:
        """What the item takes at most, by the plan."""
        return sum(self.waits.values()) + self.estimate


KILL_GRACE = 5
"""``timeout -k``: seconds an item that ignores its TERM has before KILL."""
STEP_MARGIN = 5
"""A step is told its limit less this as ``--budget``: it writes its JSON before the TERM."""
SWEEP_SECONDS = 5
"""After an item: how long what it left in its process group has to go after a TERM."""
CLOSING_SECONDS = 5
"""The closing ``FIGURES`` block and the shell's log trim, within the call's limit."""
SKIP_BELOW = 0.6
"""An item is skipped when less than this share of its limit is left of the part's cap:
cut shorter, it would spend the time and bring back no figure."""
LOG = "log.txt"
MAX_FILES = 6
"""Files a part may leave in ``$OUT`` (the device tool returns at most 8): one log and the
items' JSON."""
DEVICE_SECONDS = 900
"""A session's device time, all calls, the machine's start and idle time included."""
MACHINE_START_SECONDS = 140
"""A fresh machine's start and the first transfer of the tree and the carried wheels
(1.5 to 2 minutes seen, ``gpu-review-3.md`` section 2.5)."""
TRANSFER_SECONDS = 20
"""A later call's transfer to the warm machine."""
GAP_SECONDS = 30
"""Between the calls and for the give-back: the second call must come while the machine
is still warm (30 s)."""
CARRY = (".whl", "benchmarks/peer")
"""What each call carries: the wheels (``gpu_wheels.sh --peer``) and PureJaxRL's folder."""
RESCUE = {"cap": 260, "timeout_s": 280, "needs_left_s": 420}
"""If call 1 loses the machine (nothing comes back, and a fresh start costs
:data:`MACHINE_START_SECONDS` again): part 2 alone, ``--cap 260`` within a 280 s call, and
only with 7 minutes of device time left (no machine starts with under 4)."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One item of a part: which program, under which limit, into which file.

    ``step`` names a step of this file; ``None`` runs ``gpu_frontier.py`` with ``args``
    (``dry_args`` in a dry run: toy sizes on the CPU, the same measures and budget). An
    item with ``into`` keeps its JSON under its name inside that item's file, so that a
    part stays within :data:`MAX_FILES`.
    """

    number: int
    name: str
    limit: float
    """Seconds the item may run (``timeout -k 5 LIMIT``) at the GPU sizes."""
    plan: Plan
    step: str | None = None
    args: tuple[str, ...] = ()
    dry_args: tuple[str, ...] = ()
    dry_limit: float = 60.0
    """Its limit in a dry run, before the load scale: a deadline, not a wait."""
    into: str | None = None

    @property
    def label(self) -> str:
        return f"{self.number}_{self.name}"

    @property
    def file(self) -> str:
        """The file in ``$OUT`` its figures end up in."""
        return f"{self.into or self.label}.json"

    def frontier_budget(self, seconds: float, dry: bool) -> float:
        """``gpu_frontier.py --budget``: the plan's, less what the part's cap took off."""
        cut = 0.0 if dry else max(self.limit - seconds, 0.0)
        return max(self.plan.waits["rows_start_by"] - cut, 5.0)

    def argv(self, out: Path, seconds: float, dry: bool, scale: float = 1.0) -> list[str]:
        """The command after the interpreter, given ``seconds`` to run."""
        if self.step is None:
            args = self.dry_args if dry else self.args
            budget = f"{self.frontier_budget(seconds, dry):.0f}"
            return ["benchmarks/gpu_frontier.py", *args, "--budget", budget, "--out", str(out)]
        budget = f"{max(seconds - STEP_MARGIN, 1):.0f}"
        cmd = ["benchmarks/gpu_check_steps.py", self.step, "--out", str(out), "--budget", budget]
        cmd += self.args
        if dry:
            cmd += ["--dry-run", "--scale", f"{scale:.3g}", *self.dry_args]
        return cmd


@dataclasses.dataclass(frozen=True)
class Part:
    """One device call: its items, its internal cap (setup included) and the ``timeout_s``
    the device tool is given for it."""

    number: int
    cap: float
    timeout_s: int
    setup: float
    """Seconds the shell spends before the first item (wheels, the import and CUDA check):
    the first call installs the wheels, a second on the warm machine skips them."""
    items: tuple[Item, ...]

    def files(self) -> set[str]:
        return {item.file for item in self.items} | {LOG}

    def command(self) -> str:
        """The device tool's command for this call."""
        return f"OUT=$OUT bash benchmarks/gpu_check.sh --part {self.number}"


SIZES = ("4096", "65536")
CPU_FRONTIER = ("--device", "cpu", "--quick", "--skip-peer", "--seconds", "0.3")
FIRST_TESTS = ("tests/pod/test_capture.py", "tests/test_device.py")
"""Captured iterations equal eager ones, hparams, restarts and loads recapture, horizon 1
captures, the default pod trains on the GPU: what every other figure relies on."""
OTHER_TESTS = (
    "tests/envs/test_classic.py",
    "tests/envs/test_isaac.py",
    "tests/clusters/test_gpu.py",
)
"""Native envs on CUDA, the Isaac adapter, then pinning by UUID (a 2-process cluster)."""
RESIDENT_TEST = "tests/tournament/worker/test_resident.py"
"""The 8-process GPU tournament test: never run by the check (pytest does not apply
``--ignore`` to a file named on its command line, so it is left out of the list)."""

PARTS = {
    1: Part(
        1,
        cap=260,
        timeout_s=280,
        setup=40,  # pip of ~35 wheels (tfp, mujoco) 15 s, torch + CUDA, jax, mujoco imports
        items=(
            Item(1, "versions", 20, Plan({"nvidia_smi": 5}, estimate=8), step="versions",
                 dry_limit=40),
            Item(2, "tests", 45, Plan({"pytest": 35}, estimate=3), step="gpu_tests",
                 args=("--files", *FIRST_TESTS), dry_limit=90),
            # startup and the peer's load about 18 s, a 4,096 row about 25 s: the 65,536
            # row starts before 50 s, and takes up to 30 s (compile, capture, 3 s; the
            # peer's compile, one untimed run, 3 s)
            Item(3, "ppo", 85, Plan({"rows_start_by": 50}, estimate=30),
                 args=("--measures", "ppo", "--ppo-sizes", *SIZES, "--seconds", "3",
                       "--no-eager"),
                 dry_args=("--measures", "ppo", "--ppo-sizes", "4", "8", "--no-eager",
                           *CPU_FRONTIER), dry_limit=90),
            Item(4, "tournament", 100,
                 Plan({"lone_window": 5, "ready_deadline": 30, "window": 8,
                       "wait_after_stop": 5},
                      # the lone pod's warm-up (compile, capture) 20 s; cluster start (8
                      # processes importing torch) about 12 s, its close about 8 s
                      estimate=20 + 12 + 8,
                      dry={"lone_window": 0.3, "ready_deadline": 30, "window": 1.5,
                           "wait_after_stop": 30}),
                 step="tournament", dry_limit=90),
        ),
    ),
    2: Part(
        2,
        cap=330,
        timeout_s=350,
        setup=20,  # the wheels are in already (warm machine): the checks alone
        items=(
            # 4,096 envs: eager, capture, 20+20 iterations
            Item(5, "probe", 50, Plan({}, estimate=35), step="probe", dry_limit=60),
            Item(6, "pods", 80,
                 Plan({"ready_deadline": 35, "lone_windows": 4 * 5, "crowd_window": 5,
                       "join": 5}, estimate=5,
                      dry={"ready_deadline": 30, "lone_windows": 4 * 0.3,
                           "crowd_window": 0.3, "join": 30}),
                 step="pods", dry_limit=90),
            Item(7, "tests", 60, Plan({"pytest": 50}, estimate=3), step="gpu_tests",
                 args=("--files", *OTHER_TESTS), dry_limit=90),
            # startup and the peer's load about 18 s; each row about 20 s
            Item(8, "env", 60, Plan({"rows_start_by": 35}, estimate=20),
                 args=("--measures", "env", "--sizes", *SIZES, "--seconds", "3"),
                 dry_args=("--measures", "env", "--sizes", "4", *CPU_FRONTIER),
                 dry_limit=90),
            # Ant at 4,096 worlds: 20-40 s to compile
            Item(9, "mjx", 55, Plan({"window": 8}, estimate=35), step="mjx", dry_limit=60),
            # a cold process: ours to 475 (at most 10 s left of the budget), the peer's
            # compile and run about 13 s
            Item(10, "solve", 55, Plan({"rows_start_by": 25}, estimate=23),
                 args=("--measures", "solve", "--solve-seconds", "30"),
                 dry_args=("--measures", "solve", "--solve-seconds", "3", *CPU_FRONTIER),
                 into="8_env", dry_limit=60),
        ),
    ),
}  # fmt: skip
"""Both calls' items, in the order they run."""

ITEMS = {item.label: item for part in PARTS.values() for item in part.items}


def waits(step: str, dry_run: bool, scale: float = 1.0) -> dict[str, float]:
    """The waits of the item that runs ``step`` (the first such: both test items share
    the pytest wait's rule): the plan's on the GPU, its ``dry`` ones times ``scale`` in a
    dry run (the same code paths in seconds, the figures meaningless)."""
    plan = next(item.plan for item in ITEMS.values() if item.step == step)
    if not dry_run:
        return dict(plan.waits)
    return {k: v * scale for k, v in {**plan.waits, **plan.dry}.items()}


def load_scale() -> float:
    """How much longer a dry run's deadlines are on a busy machine: the load per core,
    between 1 and 4 (at load 8 on 2 cores a niced child got 1 s of CPU in 38)."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0
    return min(max(load, 1.0), 4.0)


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


def run_bounded(cmd: list[str], timeout: float, **kwargs) -> tuple[int | None, str]:
    """``cmd``'s exit code and output; at ``timeout`` it is asked to stop (TERM: a pytest
    holding the GPU ends its CUDA work itself), killed 5 s later, and waited for at most
    5 s more: ``subprocess.run(timeout=)`` waits without a limit after its kill, and a
    process blocked in the GPU driver (a wedged ``nvidia-smi``) never exits. ``None``
    as the code: it was stopped."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        **kwargs,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired as exc:
        out = exc.output if isinstance(exc.output, str) else ""
    for stop in (proc.terminate, proc.kill):
        stop()
        try:
            more, _ = proc.communicate(timeout=5)
            out = (out or "") + (more or "")
            break
        except subprocess.TimeoutExpired:  # not reaped: left to the item's timeout
            continue
    return None, f"stopped after {timeout:.0f} s: {out or ''}"


NVML_SECONDS = 5.0
"""At most this long for one NVML call; a wedged driver would block it for ever."""


def bounded(fn, seconds: float, what: str):
    """``fn()`` in a daemon thread, waited for at most ``seconds``: a call that blocks
    in the driver holds only that thread, and the step goes on (``TimeoutError``)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=f"bounded {what}")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"{what} did not answer in {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


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

    names = "torch numpy dask distributed pynvml nvidia-ml-py jax jaxlib mujoco mujoco-mjx"
    out: dict[str, Any] = {"python": sys.version.split()[0], "torch_version": torch.__version__}
    out["packages"] = {n: version(n) for n in (*names.split(), "gymnax", "gymnasium")}
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
    out["device_name"] = out["gpus"][0]["name"] if out["gpus"] else None
    out["nvidia_smi"] = _run(
        ["nvidia-smi", "--query-gpu=name,driver_version,compute_mode", "--format=csv,noheader"],
        timeout=waits("versions", args.dry_run)["nvidia_smi"],
    )
    out["mps"] = _mps_state()  # reported, never started: the card is measured as found
    out["mps_pipe_directory"] = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    out["env"] = {
        k: os.environ.get(k)
        for k in (
            "CUDA_VISIBLE_DEVICES", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE",
            "TORCHINDUCTOR_COMPILE_THREADS", "OMP_NUM_THREADS",
        )
    }  # fmt: skip
    if not out["cuda_available"]:
        out["status"] = "skipped: no CUDA"
    return out


def _run(cmd: list[str], timeout: float = 10) -> str | None:
    try:
        code, text = run_bounded(cmd, timeout)
    except OSError as exc:
        return f"unavailable: {exc}"
    text = text.strip()[:2000]
    return text if code is not None else f"unavailable: {text}"


FALLBACKS_AS_ERRORS = (
    "filterwarnings=error:.*captur.*fail:RuntimeWarning\n"
    "error:.*torch.compile failed:RuntimeWarning"
)
"""pytest's ini option (whose messages are regular expressions, where ``-W`` takes
literal prefixes): a capture that falls back to eager or a failed compile fails its test."""


def pytest_command(files: list[str], limit: float, has_timeout_plugin: bool) -> list[str]:
    """The test item's pytest: the GPU tests of ``files`` (never :data:`RESIDENT_TEST`)
    in the order given, each result streamed by ``gpu_check_plugin``.

    ``timeout_method=signal``: pyproject's ``thread`` method ends the whole pytest run at
    the first test that overruns, losing the ones after it; ``signal`` fails that test
    and goes on."""
    files = [f for f in files if Path(f).as_posix() != RESIDENT_TEST]
    cmd = [
        sys.executable, "-m", "pytest", "-m", "gpu and not slow", "-q",
        "-p", "no:cacheprovider", "-p", "gpu_check_plugin", "-o", FALLBACKS_AS_ERRORS,
        "-o", "timeout_method=signal", *files,
    ]  # fmt: skip
    if has_timeout_plugin:
        cmd[3:3] = ["--timeout", str(int(max(limit - 10, 10)))]
    return cmd


def step_gpu_tests(args, record) -> dict[str, Any]:
    """``pytest -m "gpu and not slow"`` on ``--files``, each result written to a
    JSON-lines file as it comes (``gpu_check_plugin``): a run that its limit ends still
    reports every test that finished. pytest is given the budget less 5 s."""
    import importlib.util

    limit = max(args.budget - 5, 5)
    files = list(args.files or FIRST_TESTS)
    results = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "results.jsonl"
    has_plugin = importlib.util.find_spec("pytest_timeout") is not None
    cmd = pytest_command(files, limit, has_plugin)
    env = {
        **os.environ,
        "ELEGANTPOD_TEST_RESULTS": str(results),
        "ELEGANTPOD_LIGHT_FIRST": "1",  # tests/conftest.py: the lightest files first
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    code, text = run_bounded(cmd, limit, cwd=ROOT, env=env)
    tail = text[-3000:]
    counts = test_counts(results)
    shutil.rmtree(results.parent, ignore_errors=True)
    out = {"files": [f for f in files if Path(f).as_posix() != RESIDENT_TEST], "exit_code": code}
    out.update(output_tail=tail, **counts)
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
    or fill each other's idle gaps. (The ratio of the crowd's total to the 4,096 pod
    alone, reported before, grew with the 65,536 pod whatever packing did.)"""
    on_gpu = not args.dry_run and cuda()
    if not on_gpu:  # what building a pod imports, done once before a dry run forks
        ppo_pod(4, 2, "cpu", capture=False).close()
    sizes = [1024, 4096, 16384, 65536] if on_gpu else [8, 16, 32, 64]
    horizon = 16 if on_gpu else 4
    device = "cuda" if on_gpu else "cpu"
    plan = waits("pods", args.dry_run, args.scale)
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-pods-"))
    pods = _pods_alone_then_together(folder, sizes, horizon, device, plan, args)
    shutil.rmtree(folder, ignore_errors=True)
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
    """A pod's own process, ``poll()`` and ``wait(timeout)`` (killed at the timeout, then
    waited for at most 5 s): a fresh interpreter on the GPU (as a Dask worker process is;
    CUDA cannot be forked), a fork of this one in a dry run (whose imports would cost
    seconds of CPU again). Either stays in this process's group and session."""

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
        """Wait ``timeout`` s; then TERM (the pod ends its CUDA work itself), KILL 5 s
        later, and wait 5 s more at most."""
        if self.forked is not None:
            self.forked.join(timeout)
            for stop in (self.forked.terminate, self.forked.kill):
                if self.forked.exitcode is not None:
                    return
                stop()
                self.forked.join(5)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout)
            return
        for stop in (self.popen.terminate, self.popen.kill):
            stop()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)
                return

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


class GpuActivity:
    """What the GPU did during a window, from NVML (pynvml), for a lone pod and a
    tournament alike.

    - ``device_util``: NVML's utilisation, the share of time *any* kernel ran. One pod
      replaying tiny serial kernels reads about 100%, so it says little alone.
    - ``processes``: per process, ``kernel_time_pct``, NVML's per-process "SM" figure
      (``nvmlDeviceGetProcessUtilization``): like ``device_util``, a share of *time*
      (with a kernel of that process running), not a share of the SMs. It shows how the
      time was shared.
    - ``gpm``: where the GPU has GPM metrics (Hopper and later), the share of SMs busy
      (``SM_UTIL``) and their occupancy (``SM_OCCUPANCY``) over the window: the figures
      that say whether small pods fill a large GPU.

    The handle is the NVML device of CUDA device 0 of this process (by UUID), not NVML's
    index 0, which differs when ``CUDA_VISIBLE_DEVICES`` picks a subset. Every NVML call
    runs under :func:`bounded`. Anything NVML cannot give is ``None`` with the reason
    under ``errors``; without CUDA, all is None.
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

            bounded(pynvml.nvmlInit, NVML_SECONDS, "nvmlInit")
            uuid = str(torch.cuda.get_device_properties(0).uuid)
            uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            handle = bounded(lambda: pynvml.nvmlDeviceGetHandleByUUID(uuid), NVML_SECONDS, "handle")
            self.nvml, self.handle = pynvml, handle
        except Exception as exc:
            self.errors["nvml"] = f"{type(exc).__name__}: {exc}"[:300]

    def _call(self, what: str, fn, *args):
        return bounded(lambda: fn(*args), NVML_SECONDS, what)

    def start(self) -> None:
        """Begin the window: a GPM sample, the time stamp, a sampler of device_util."""
        self._t0_us = int(time.time() * 1e6)
        self._samples, self._stop = [], threading.Event()
        self._gpm0 = self._gpm_sample()
        if self.handle is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        # a daemon thread of its own: a call that blocks here holds only this thread
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
                self._samples.append(float(rates.gpu))

    def _gpm_sample(self):
        if self.handle is None:
            return None
        nvml = self.nvml
        try:
            support = self._call("GPM support", nvml.nvmlGpmQueryDeviceSupport, self.handle)
            if not support.isSupportedDevice:
                self.errors["gpm"] = "this GPU has no GPM metrics"
                return None
            sample = self._call("GPM sample", nvml.nvmlGpmSampleAlloc)
            self._call("GPM sample", nvml.nvmlGpmSampleGet, self.handle, sample)
            return sample
        except Exception as exc:
            self.errors["gpm"] = f"{type(exc).__name__}: {exc}"[:300]
            return None

    def stop(self) -> dict[str, Any]:
        """End the window: what the GPU did during it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        s = list(self._samples)
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
            rows = self._call(
                "process utilisation",
                self.nvml.nvmlDeviceGetProcessUtilization,
                self.handle,
                self._t0_us,
            )
        except Exception as exc:
            self.errors["processes"] = f"{type(exc).__name__}: {exc}"[:300]
            return None
        by_pid: dict[int, list[float]] = {}
        for r in rows:
            by_pid.setdefault(int(r.pid), []).append(float(r.smUtil))
        return [
            {"pid": pid, "kernel_time_pct": sum(v) / len(v), "samples": len(v)}
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
            self._call("GPM metrics", nvml.nvmlGpmMetricsGet, get)
            return {"sm_util": get.metrics[0].value, "sm_occupancy": get.metrics[1].value}
        except Exception as exc:
            self.errors["gpm"] = f"{type(exc).__name__}: {exc}"[:300]
            return None
        finally:
            for sample in (first, second):
                with contextlib.suppress(Exception):
                    self._call("GPM free", nvml.nvmlGpmSampleFree, sample)


def lone_pod(hparams: dict[str, Any], device: str, seconds: float, segment: int) -> dict[str, Any]:
    """Env steps per second of one pod trained alone in this process with a tournament
    pod's settings, after a warm-up that compiles and captures, and what the GPU did
    meanwhile (:class:`GpuActivity`).

    It evaluates every ``segment`` env steps, as a tournament pod does once per segment:
    on PPO's own schedule (every 2 iterations here, 4 times as often) the lone pod, the
    ratio's denominator, spent much of its window evaluating, which inflated the ratio by
    itself. Its evaluation seconds in the window are reported beside the tournament's."""
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
    budget = dataclasses.replace(
        Budget.of(pod.spec, pod.learner), evaluate_every=segment, evaluate_at_end=False
    )
    pod.run(budget, PodHooks(on_update=lambda p, stats: done.append(1) or len(done) < 3))
    activity = GpuActivity()
    activity.start()
    start, evals, eval_s = pod.env_steps, pod.evaluations, pod.eval_seconds
    t = time.perf_counter()
    pod.run(budget, PodHooks(should_stop=lambda: time.perf_counter() - t >= seconds))
    wall = time.perf_counter() - t
    rate = (pod.env_steps - start) / wall
    gpu = activity.stop()
    out = {
        "steps_per_second": rate,
        "env_steps": pod.env_steps - start,
        "window_seconds": wall,
        "evaluate_every": budget.evaluate_every,
        "evaluations": pod.evaluations - evals,
        "eval_seconds": pod.eval_seconds - eval_s,
        "gpu": gpu,
    }
    out["eval_share"] = out["eval_seconds"] / wall if wall else None
    pod.close()
    return out


_WARNINGS_KEPT = 200
"""Distinct warning texts a worker keeps (each with its count)."""


def _log_warnings(dask_worker) -> None:
    """On each worker: count every warning's text (capture fallbacks, failed compiles),
    without printing it: printed, each one came back once per worker and per repeat."""
    kept = dask_worker.__dict__.setdefault("_gpu_check_warnings", Counter())

    def show(message, category, filename, lineno, file=None, line=None):
        text = f"{category.__name__}: {message}"[:300]
        if text in kept or len(kept) < _WARNINGS_KEPT:
            kept[text] += 1

    warnings.showwarning = show
    warnings.simplefilter("always")


def _worker_warnings(dask_worker) -> dict[str, int]:
    return dict(dask_worker.__dict__.get("_gpu_check_warnings", {}))


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


def _eval_seconds(t) -> tuple[float, float]:
    """The tournament's evaluation and segment seconds so far (finished segments)."""
    population = t.population
    return float(population.eval_seconds), float(population.segment_seconds)


TOURNAMENT_PODS = 8


def tournament_window(hparams, pods: int, segment: int, plan, on_gpu: bool):
    """One tournament of ``pods`` identical pods on a fresh cluster: its env steps per
    second over a window that starts once every pod has replayed, what the GPU did, and
    what the cluster reported. Returns ``(result, finish)``: ``finish()`` stops the
    tournament and closes the cluster (the caller writes its JSON first)."""
    import elegantpod
    from elegantpod.tournament import GeneratorConfig

    ready_s, window = plan["ready_deadline"], plan["window"]
    if on_gpu:  # never CPU workers; 8 single-thread processes on the one GPU
        client = elegantpod.cluster(gpu=True, pods_per_gpu=pods, dashboard_address=None)
    else:  # a dry run's worker is a thread of this process: no interpreter to start
        from distributed import Client, LocalCluster

        local = LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        )
        client = Client(local)
    result: dict[str, Any] = {}
    t = None
    store = tempfile.mkdtemp(prefix="gpu-check-tournament-")

    def finish() -> dict[str, Any]:
        """Stop, wait at most the plan's ``wait_after_stop``, close; the end's figures."""
        end: dict[str, Any] = {}
        try:
            if t is not None:
                t.stop()
                with contextlib.suppress(Exception):
                    end = t.wait(plan["wait_after_stop"])
            counts: Counter = Counter()
            for found in client.run(_worker_warnings).values():
                counts.update(found)
            end["worker_capture_fallbacks"] = sum(
                n for w, n in counts.items() if CAPTURE_FALLBACK.search(w)
            )
            end["worker_compile_failures"] = sum(
                n for w, n in counts.items() if COMPILE_FAILURE.search(w)
            )
            end["worker_warnings"] = [f"{n}x {w}" for w, n in counts.most_common(20)]
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()  # the workers end through the cluster's own close
            shutil.rmtree(store, ignore_errors=True)
        return end

    try:
        client.run(_log_warnings)
        t = elegantpod.Tournament(
            "CartPole-v1", ["ppo"], pods,
            store=store, client=client,
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
        eval0, seg0 = _eval_seconds(t)
        activity = GpuActivity()
        activity.start()
        w0 = time.perf_counter()
        time.sleep(window)
        last, w1 = _pod_steps(t), time.perf_counter()
        result["gpu"] = activity.stop()
        moved = sum(steps - first.get(pod, steps) for pod, steps in last.items())
        result["steps_per_second"] = moved / (w1 - w0)
        result["window_seconds"] = w1 - w0
        eval1, seg1 = _eval_seconds(t)
        # of the segments that ended in the window: the seconds their pods evaluated
        result["eval_seconds"] = eval1 - eval0
        result["eval_share"] = ratio(eval1 - eval0, seg1 - seg0)
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


def step_tournament(args, record) -> dict[str, Any]:
    """8 identical CartPole pods on one GPU, each in its own process, against the lone pod
    of the same settings and the same evaluation schedule (once per segment). GPU-sized
    pods (4 minibatches per epoch, not PPO's CPU default of 512 samples), no mutation, no
    restart: every pod does the same work per env step as the lone pod. Whether CUDA MPS
    runs is reported, never changed. The JSON is written after the lone pod and after the
    window, before anything is stopped."""
    on_gpu = not args.dry_run and cuda()
    plan = waits("tournament", args.dry_run, args.scale)
    pods, n, horizon = (TOURNAMENT_PODS, 16384, 16) if on_gpu else (2, 16, 4)
    hparams = {"num_envs": n, "horizon": horizon, "minibatch_size": n * horizon // 4}
    # 8 iterations per segment: PPO's default segment (32,768 steps) is less than one
    # iteration at this size, and a segment of one iteration is never captured
    segment = 8 * n * horizon
    out: dict[str, Any] = {"pods": pods, "num_envs": n, "horizon": horizon, "hparams": hparams}
    out["segment_steps"] = segment
    out["mps"] = _mps_state()
    lone = lone_pod(hparams, "cuda" if on_gpu else "cpu", plan["lone_window"], segment)
    out["lone"] = lone
    out["lone_steps_per_second"], out["lone_gpu"] = lone["steps_per_second"], lone["gpu"]
    record.update(out)
    write(args.out, nonfinite_to_none(record))
    result, finish = tournament_window(hparams, pods, segment, plan, on_gpu)
    result["ratio"] = ratio(result["steps_per_second"], out["lone_steps_per_second"])
    out["tournament"] = result
    out["tournament_steps_per_second"] = result["steps_per_second"]
    out["ratio"] = result["ratio"]
    gpm = (result.get("gpu") or {}).get("gpm") or {}
    out["targets"] = {
        "ratio >= 1.5": None if out["ratio"] is None else out["ratio"] >= 1.5,
        "SM utilisation (GPM) >= 70%": None if gpm.get("sm_util") is None else gpm["sm_util"] >= 70,
    }
    record.update(out)
    write(args.out, nonfinite_to_none(record))  # before anything is stopped
    result["end"] = end = finish()
    if end.get("pods_failed"):
        out["status"], out["error"] = "failed", f"pods failed: {end.get('failures')}"
    elif not on_gpu:
        out["status"] = "skipped: no CUDA"
    return out


MJX_WHEELS = "mujoco, mujoco-core, mujoco-mjx and trimesh (benchmarks/gpu_wheels.txt)"


def step_mjx(args, record) -> dict[str, Any]:
    import importlib

    try:
        importlib.import_module("mujoco.mjx")
    except Exception as exc:
        return {"status": f"skipped: mujoco.mjx does not import ({exc}); carry {MJX_WHEELS}"}
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
    "tournament": step_tournament,
    "mjx": step_mjx,
}


# ------------------------------------------------------------------------------ checks
REQUIRED = ("torch", "numpy", "gymnasium", "dask", "distributed", "pandas", "pytest", "elegantpod")
"""What every item imports: missing one, the run would be wasted."""
OPTIONAL = {
    "mujoco.mjx": "item 9 (MJX) is skipped",
    "pynvml": "no GPU activity figures",
    "psutil": "an item's leftover processes are not counted",
}


def no_cuda() -> str | None:
    """Why this Python's torch cannot run the check's GPU work, or ``None`` where it can:
    a CPU build of torch (a carried wheel can shadow the machine's CUDA build), or a
    build that sees no GPU."""
    import torch

    if torch.version.cuda is None:
        return f"no CUDA: torch {torch.__version__} is a CPU build (torch.version.cuda is None)"
    if not torch.cuda.is_available():
        return (
            f"no CUDA: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: "
            "torch.cuda.is_available() is False"
        )
    return None


def check_imports(need_cuda: bool) -> int:
    """Before any item: with ``need_cuda``, that torch sees a GPU, first (exit 3 at once,
    naming CUDA: on a machine without one every item would only say so, and the lease
    would be spent); then every module the items need (exit 3 when a required one is
    missing, naming it; the optional ones missing are named)."""
    import importlib

    if need_cuda:
        why = no_cuda()
        if why is not None:
            print(f"gpu_check: {why}: stopped before any item (exit 3)", flush=True)
            return 3
        import torch

        print(f"gpu_check: CUDA {torch.version.cuda}: {torch.cuda.get_device_name(0)}")
    missing = []
    for name in (*REQUIRED, *OPTIONAL):
        try:
            importlib.import_module(name)
        except Exception as exc:
            missing.append(name)
            why = OPTIONAL.get(name, "required: carry its wheel in .whl/")
            print(f"gpu_check: cannot import {name} ({type(exc).__name__}: {exc}): {why}")
    return 3 if set(missing) & set(REQUIRED) else 0


# ------------------------------------------------------------------------------ a part
def run_parts(args) -> int:
    """Run the items of ``args.part`` one after the other (see the module's docstring),
    then print the closing ``FIGURES`` block. ``args.cap`` lowers a part's cap (a call
    with less device time left: the items past it are skipped). A dry run has no cap and
    its limits are times :func:`load_scale`."""
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dry = args.dry_run
    scale = load_scale() if dry else 1.0
    started = time.monotonic() - args.elapsed  # the shell's setup counts against the cap
    figures: list[str] = []
    with open(out_dir / LOG, "a", encoding="utf-8", errors="replace") as log:

        def say(line: str) -> None:
            print(line, flush=True)
            log.write(line + "\n")
            log.flush()

        if dry:
            say(f"gpu_check: dry run, limits and deadlines x{scale:.2g} for the load")
        for number in args.part:
            part = PARTS[number]
            cap = math.inf if dry else min(part.cap, args.cap or part.cap)
            for item in part.items:
                # an item ends, its group swept, within the cap
                left = cap - (time.monotonic() - started) - KILL_GRACE - SWEEP_SECONDS
                try:
                    figures += run_item(item, out_dir, log, say, left, dry, scale)
                except Exception as exc:  # the next items still run
                    line = f"FIGURE {item.label}.status driver error: {type(exc).__name__}: {exc}"
                    say(line[:300])
                    figures.append(line[:300])
            started = time.monotonic()  # a second part in the same run: its own cap
        say("FIGURES")
        for line in figures:
            say(line)
        say("END FIGURES")
    return 0


def run_item(item: Item, out_dir: Path, log, say, left: float, dry: bool, scale: float):
    """One item under ``timeout -k``, in this session: its JSON completed, what it left
    running ended, its ``FIGURE`` lines printed and returned."""
    limit = item.dry_limit * scale if dry else item.limit
    seconds = min(limit, left)
    final = out_dir / item.file
    if seconds < SKIP_BELOW * limit:
        status = f"skipped: {max(left, 0):.0f} s left of the cap, its limit {limit:.0f} s"
        record = {"item": item.label, "status": status, "error": None, "dry_run": dry}
        _keep(item, final, record)
        lines = [f"FIGURE {item.label}.status {status}"]
        for line in lines:
            say(line)
        return lines
    path = final if item.into is None else Path(tempfile.mkdtemp(prefix="gpu-check-")) / "item.json"
    argv = item.argv(path, seconds, dry, scale)
    say(f"== {item.label}, limit {seconds:.0f} s: {shlex.join(argv)}")
    position = log.tell()
    t0 = time.monotonic()
    cmd = ["timeout", "-k", str(KILL_GRACE), f"{seconds:.0f}", sys.executable, *argv]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        rc: int | None = proc.wait(timeout=seconds + KILL_GRACE + 10)
    except subprocess.TimeoutExpired:  # timeout itself did not end: its whole group goes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        rc = None
    left_behind = sweep(proc.pid)  # timeout's process group: the item and its children
    took = time.monotonic() - t0
    with open(out_dir / LOG, encoding="utf-8", errors="replace") as f:
        f.seek(position)
        tail = f.read()[-3000:]
    record = finalize(item, path, rc, took, seconds, left_behind, tail, dry)
    _keep(item, final, record)
    if path != final:  # its own folder, outside $OUT
        shutil.rmtree(path.parent, ignore_errors=True)
    for stray in out_dir.glob("*.tmp"):  # a JSON write its kill cut short: not a 7th file
        stray.unlink(missing_ok=True)
    lines = figure_lines(item, record)
    say(f"{item.label}: {record['status']} in {took:.0f} s")
    for line in lines:
        say(line)
    return lines


def _keep(item: Item, final: Path, record: dict[str, Any]) -> None:
    """Write ``record`` where the item's figures are kept: its own file, or under its name
    inside the file of the item it goes ``into``."""
    if item.into is None:
        write(final, nonfinite_to_none(record))
        return
    host = json.loads(final.read_text()) if final.exists() else {"item": item.into}
    host[item.name] = record
    write(final, nonfinite_to_none(host))


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    try:
        import psutil
    except ImportError:  # without psutil: whether the group has any member at all
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
    return found


def sweep(pgid: int) -> int:
    """End what an item left running in its process group (``timeout``'s: the item and
    every child it started), TERM first and KILL after :data:`SWEEP_SECONDS`; how many
    were left. A finished item should leave none: each one is reported, and the next
    item gets the GPU and the cores to itself."""
    members = _group(pgid)
    if not members:
        return 0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + SWEEP_SECONDS
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _group(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(members)


PEER_HINT = (
    "not evaluated: PureJaxRL did not run ({why}); carry its folder as "
    "benchmarks/peer/purejaxrl (or shared/gpu-peer/purejaxrl) and the wheels of "
    "`bash benchmarks/gpu_wheels.sh --peer`"
)


def finalize(
    item: Item, path: Path, rc: int | None, took: float, seconds: float, left_behind: int,
    tail: str, dry: bool,
) -> dict[str, Any]:  # fmt: skip
    """The item's JSON completed after it ended, whether it finished, failed or was
    killed: what it had written is kept, and ``status``, ``error``, ``rc``, ``seconds``,
    ``limit_s`` and ``left_processes`` are added (with the log's tail where it did not
    finish). A ``gpu_frontier.py`` item's own JSON has no status: it is derived here."""
    try:
        record = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, json.JSONDecodeError):  # cut short mid-write: nothing kept
        record = {}
    wrote = bool(record)
    killed = rc in (124, 137) or rc is None
    error = f"exit code {rc}" + (" (killed at its limit)" if killed else "")
    if item.step is None:  # gpu_frontier.py
        record.setdefault("step", "gpu_frontier")
        if record.get("complete") and rc == 0:
            status = "skipped: no CUDA" if dry or record.get("device") == "cpu" else "ok"
            record.update(status=status, error=None)
        else:
            status = "timeout" if killed else "partial" if wrote else "failed"
            record.update(status=status, error=error)
        peer = str((record.get("peer") or {}).get("status", "unavailable: it did not start"))
        if peer.startswith("unavailable"):
            record["peer_target"] = PEER_HINT.format(why=peer[:300])
    elif record.get("status") in (None, "running"):
        record.update(status="timeout" if killed else "failed", error=error)
    record.update(
        item=item.label, rc=rc, seconds=round(took, 1), limit_s=round(seconds),
        left_processes=left_behind, dry_run=dry,
    )  # fmt: skip
    record.setdefault("device", None)
    record.setdefault("error", None)
    if record["status"] not in ("ok", "skipped: no CUDA"):
        record["output_tail"] = tail
    record.pop("_t0", None)
    return record


def _pick(record: Any, path: str) -> Any:
    for key in path.split("."):
        if isinstance(record, dict):
            record = record.get(key)
        elif isinstance(record, list) and key.isdigit() and int(key) < len(record):
            record = record[int(key)]
        else:
            return None
    return record


FIGURES: dict[str, tuple[str, ...]] = {
    "versions": (
        "device_name", "nvidia_smi", "torch_version", "torch.cuda", "packages.jax",
        "packages.gymnax", "packages.mujoco", "cuda_available", "mps",
    ),
    "gpu_tests": ("passed", "failed", "skipped", "errors", "failures"),
    "tournament": (
        "lone_steps_per_second", "tournament_steps_per_second", "ratio",
        "tournament.pods_ready", "lone.eval_share", "tournament.eval_share",
        "lone_gpu.gpm.sm_util", "lone_gpu.gpm.sm_occupancy",
        "tournament.gpu.gpm.sm_util", "tournament.gpu.gpm.sm_occupancy",
        "lone_gpu.device_util.mean", "tournament.gpu.device_util.mean",
        "tournament.captures", "tournament.replays", "tournament.end.pods_failed",
        "tournament.end.worker_capture_fallbacks", "mps",
    ),
    "probe": (
        "eager_ms_per_iteration", "replay_ms_per_iteration", "replay_over_eager",
        "host_syncs_per_replay", "capture_seconds", "hparam_recapture.recaptured",
        "horizon_1.fell_back_to_eager", "peak_memory_bytes",
    ),
    "pods": ("crowd_over_lone", "packing", "fell_back_to_eager", "failed_compiles"),
    "mjx": ("compile_seconds", "steps_per_second", "used_bytes", "estimate_bytes"),
}  # fmt: skip
"""The figures each step's ``FIGURE`` lines carry (dotted paths into its JSON)."""


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value) or "[]"
    if value is None:
        return "none"
    return " ".join(str(value).split())[:160]


def _frontier_figures(record: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("device_name", record.get("device_name"))]
    measures = record.get("measures") or {}
    rows = [r for kind in ("env_step", "ppo_train") for r in measures.get(kind) or []]
    kinds = [k for k in ("env_step", "ppo_train") for _ in measures.get(k) or []]
    if measures.get("solve"):
        rows.append(measures["solve"])
        kinds.append("solve")
    for kind, row in zip(kinds, rows, strict=True):
        name = kind if row.get("num_envs") is None else f"{kind}@{row['num_envs']}"
        key = "seconds" if kind == "solve" else "steps_per_s"
        for side in ("ours", "peer"):
            value = row.get(side)
            if isinstance(value, dict):
                out.append((f"{name}.{side}", value.get(key) if value.get("status") == "ok"
                            else value.get("error")))  # fmt: skip
                if value.get("compile_s") is not None:
                    out.append((f"{name}.{side}_compile_s", value["compile_s"]))
            else:
                out.append((f"{name}.{side}", value))
        out.append((f"{name}.ratio", row.get("ratio")))
        if kind == "ppo_train" and isinstance(row.get("ours"), dict):
            out.append((f"{name}.cuda_graphs", row["ours"].get("cuda_graphs")))
    for target in record.get("targets") or []:
        if target["measure"] not in kinds:  # a measure this item does not run
            continue
        where = "" if target.get("num_envs") is None else f"@{target['num_envs']}"
        out.append((f"target.{target['measure']}{where}", target.get("met")))
    return out


def figure_lines(item: Item, record: dict[str, Any]) -> list[str]:
    """``FIGURE <item>.<name> <value>`` lines: the item's status (and error), then its
    figures, one short line each, for the device tool's output tail."""
    pairs: list[tuple[str, Any]] = [("status", record.get("status"))]
    if record.get("error"):
        pairs.append(("error", record["error"]))
    if record.get("left_processes"):
        pairs.append(("left_processes", record["left_processes"]))
    if item.step is None:
        pairs += _frontier_figures(record)
    else:
        pairs += [(p, _pick(record, p)) for p in FIGURES.get(item.step, ())]
    return [f"FIGURE {item.label}.{name} {_text(value)}" for name, value in pairs]


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=[*STEPS, "pod-child", "part", "check-imports"])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0, help="a dry run's deadlines x this")
    ap.add_argument("--files", nargs="+", default=None, help="gpu_tests: the test files")
    ap.add_argument("--part", type=int, nargs="+", choices=sorted(PARTS), default=None)
    ap.add_argument("--out-dir", default=None, help="part: where the JSON and log go")
    ap.add_argument("--elapsed", type=float, default=0.0, help="part: seconds of setup spent")
    ap.add_argument("--cap", type=float, default=None, help="part: a cap below the part's")
    ap.add_argument("--cuda", action="store_true", help="check-imports: torch must see a GPU")
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--horizon", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--lone-seconds", type=float, default=1.0)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ready", default=None)
    args = ap.parse_args(argv)
    if args.step == "check-imports":
        return check_imports(args.cuda)
    if args.step == "part":
        if not args.part or not args.out_dir:
            ap.error("part needs --part and --out-dir")
        return run_parts(args)
    if args.out is None:
        ap.error("--out is required")
    if args.step == "pod-child":
        return pod_child(args)
    sys.path.insert(0, str(HERE))  # gpu_check_plugin, gpu_frontier's siblings
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
