"""benchmarks/gpu_check.sh: two parts that fit the device tool's 15 minutes, a dry run that
runs every item one at a time and leaves nothing running, and a real run that stops at
once where torch sees no GPU. (The last lease died inside a step that started the CUDA MPS
daemon and about 160 processes; the dry run then overlapped seven steps on two cores.)"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check_steps.py"
COMMON = {"step", "status", "error", "seconds", "dry_run", "device", "item", "rc", "limit_s"}
KEYS = {
    "1_versions": {"torch_version", "packages", "cuda_available", "gpus", "mps"},
    "2_tests": {"exit_code", "passed", "failed", "skipped", "files"},
    "3_ppo": {"measures", "targets", "peer", "complete"},
    "4_tournament": {
        "hparams", "segment_steps", "lone", "lone_steps_per_second", "lone_gpu", "mps",
        "tournament", "tournament_steps_per_second", "ratio", "targets",
    },
    "5_probe": {
        "eager_ms_per_iteration", "replay_ms_per_iteration", "capture_seconds",
        "host_syncs_per_replay", "peak_memory_bytes", "horizon_1", "hparam_recapture",
    },
    "6_pods": {"pods", "crowd_over_lone", "packing", "fell_back_to_eager", "errors", "mps"},
    "7_tests": {"exit_code", "passed", "failed", "skipped", "files"},
    "8_env": {"measures", "targets", "peer", "complete", "solve"},
    "9_mjx": {"num_envs", "world_bytes", "estimate_bytes"},
}  # fmt: skip
MAX_PROCESSES = 12
"""Processes of a dry run alive at once, the shell included: the shell, the part's driver,
``timeout`` and one item, whose most are the pod item's four forked pods."""
FORBIDDEN = ("nvidia-cuda-mps-control", "setsid", "start_new_session")
"""What would start a daemon or a process outside the command's session."""
CHECK_PATH = [
    ROOT / "benchmarks" / name
    for name in (
        "gpu_check.sh",
        "gpu_check_steps.py",
        "gpu_check_plugin.py",
        "gpu_frontier.py",
        "_common.py",
    )
]


def _steps_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("gpu_check_steps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check_steps"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Watcher(threading.Thread):
    """Samples a process tree every 0.1 s: the most processes alive at once, and every
    process seen (with its start time and session)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.seen: dict[int, tuple[float, int, str]] = {}
        self.most = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                tree = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            alive = 0
            for proc in tree:
                try:
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                    key = (proc.create_time(), os.getsid(proc.pid), " ".join(proc.cmdline())[:200])
                    self.seen.setdefault(proc.pid, key)
                    alive += 1
                except (psutil.Error, ProcessLookupError):
                    continue
            self.most = max(self.most, alive)
            self.done.wait(0.1)


def _still_running(seen: dict[int, tuple[float, int, str]], tag: str) -> list[str]:
    """What a finished run left: processes it was seen to start that still run, and any
    process carrying its tag in its environment (one that left the tree, a daemon)."""
    left = []
    for pid, (created, _, cmd) in seen.items():
        with _quiet():
            proc = psutil.Process(pid)
            if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid}: {cmd}")
    for proc in psutil.process_iter():
        with _quiet():
            if proc.pid != os.getpid() and proc.environ().get("GPU_CHECK_TEST_TAG") == tag:
                left.append(f"{proc.pid} (tagged): {' '.join(proc.cmdline())[:200]}")
    return sorted(set(left))


class _quiet:
    """Ignore a process that went away or is not ours to read."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        return kind is not None and issubclass(kind, (psutil.Error, ProcessLookupError))


@pytest.mark.slow
def test_the_dry_run_runs_every_item_one_at_a_time_and_leaves_nothing_running(tmp_path):
    """Both parts at toy sizes on the CPU: every item's JSON and FIGURE lines, no more
    files than the device tool returns, items one after the other (a bounded number of
    processes at once), all in the command's session, none left when it ends."""
    steps = _steps_module()
    tag = uuid.uuid4().hex
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env["GPU_CHECK_TEST_TAG"] = tag
    # a session of its own, so that every process of the check must be in the one it makes
    proc = subprocess.Popen(
        ["bash", "benchmarks/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    watcher = _Watcher(proc.pid)
    watcher.start()
    try:
        output, _ = proc.communicate(timeout=280)
    finally:
        watcher.done.set()
        watcher.join(5)
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 0, output[-4000:]
    time.sleep(1)  # a process that is still exiting
    assert not _still_running(watcher.seen, tag), _still_running(watcher.seen, tag)
    sessions = {sid for _, sid, _ in watcher.seen.values()}
    assert sessions == {proc.pid}, [v for v in watcher.seen.values() if v[1] != proc.pid]
    assert watcher.most <= MAX_PROCESSES, (watcher.most, sorted(watcher.seen.values()))

    # every file the parts leave, and no other (the tool returns at most 8 a call)
    files = {p.name for p in tmp_path.iterdir()}
    assert files == steps.PARTS[1].files() | steps.PARTS[2].files(), files
    for name, keys in KEYS.items():
        record = json.loads((tmp_path / f"{name}.json").read_text())
        assert COMMON | keys <= set(record), f"{name} lacks {(COMMON | keys) - set(record)}"
        assert record["status"] in ("ok", "skipped: no CUDA"), f"{name}: {record}"
        assert record["dry_run"] is True and record["left_processes"] == 0, name
        assert f"FIGURE {name}.status {record['status']}" in output
    figures = output[output.rindex("\nFIGURES\n") :]
    assert "END FIGURES" in figures and "FIGURE 10_solve.status" in figures

    # the PPO item reached its rows at both toy sizes within the GPU run's budget
    ppo = json.loads((tmp_path / "3_ppo.json").read_text())
    rows = {r["num_envs"]: r for r in ppo["measures"]["ppo_train"]}
    assert sorted(rows) == [4, 8] and all(r["ours"]["status"] == "ok" for r in rows.values())
    assert ppo["settings"]["budget_s"] == steps.ITEMS["3_ppo"].plan.waits["rows_start_by"]
    assert re.search(r"FIGURE 3_ppo\.ppo_train@8\.ours [0-9.e+]+\n", output)
    # the lone pod evaluates once a segment, as the tournament's pods do
    tournament = json.loads((tmp_path / "4_tournament.json").read_text())
    lone, segment = tournament["lone"], tournament["segment_steps"]
    assert lone["evaluate_every"] == segment and lone["env_steps"] > 0
    assert lone["evaluations"] <= lone["env_steps"] // segment + 1
    assert tournament["lone_steps_per_second"] > 0 and tournament["ratio"] > 0
    run = tournament["tournament"]
    assert run["pods_ready"] == 2 and run["end"]["pods_failed"] == 0
    assert {"eval_seconds", "eval_share"} <= set(run) and "eval_share" in lone
    hp = tournament["hparams"]  # GPU-sized pods: four minibatches per epoch
    assert hp["minibatch_size"] == hp["num_envs"] * hp["horizon"] // 4
    # the toy sizes really ran: timings and rates, not placeholders
    probe = json.loads((tmp_path / "5_probe.json").read_text())
    assert probe["eager_ms_per_iteration"] > 0 and probe["replay_ms_per_iteration"] > 0
    pods = json.loads((tmp_path / "6_pods.json").read_text())
    assert len(pods["pods"]) == 4 and not pods["errors"]
    assert all(p["lone_steps_per_second"] > 0 for p in pods["pods"])
    assert pods["packing"] == pytest.approx(sum(pods["crowd_over_lone"]))
    env_rows = json.loads((tmp_path / "8_env.json").read_text())
    assert env_rows["measures"]["env_step"][0]["ours"]["status"] == "ok"
    assert env_rows["solve"]["measures"]["solve"]["ours"]["status"] == "ok"  # item 10, kept in


def test_the_real_run_stops_at_once_without_cuda_naming_it(tmp_path):
    """On a machine whose torch sees no GPU (here a CPU build), the real run (not the dry
    one) exits 3 before any item, saying CUDA: it had run every step, each 'skipped: no
    CUDA', and exited 0, as a lease with a shadowed CUDA build would have."""
    if _steps_module().no_cuda() is None:
        pytest.skip("this machine's torch sees a GPU")
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env["GPU_CHECK_WHEELS"] = str(tmp_path / "no-wheels")  # never an install from a test
    t0 = time.monotonic()
    done = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "--part", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no CUDA" in done.stdout and "stopped before any item" in done.stdout
    assert time.monotonic() - t0 < 60  # a torch import, not a part
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".json"] == []
    bad = subprocess.run(["bash", "benchmarks/gpu_check.sh"], cwd=ROOT, capture_output=True)
    assert bad.returncode == 2 and b"--part 1|2" in bad.stderr  # a real run names its part


def test_no_item_can_start_a_daemon_or_leave_the_session():
    """The check's own files start no MPS daemon and no process of a session of its own
    (a daemon escapes ``timeout`` and the device tool's clean-up alike); the package
    starts none either; the shell caps Inductor's compile workers and JAX's memory."""
    for path in CHECK_PATH:
        text = path.read_text()
        found = [word for word in FORBIDDEN if word in text]
        assert not found, f"{path.name}: {found}"
    for path in (ROOT / "elegantpod").rglob("*.py"):
        text = path.read_text()
        assert "start_new_session" not in text and "setsid" not in text, path
    shell = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    for setting in (
        "TORCHINDUCTOR_COMPILE_THREADS=1",
        "OMP_NUM_THREADS=1",
        "XLA_PYTHON_CLIENT_PREALLOCATE=false",
        "PYTHONUNBUFFERED=1",
    ):
        assert setting in shell, setting
    steps = _steps_module()
    # the 8-process tournament test is in no list, and dropped if named (pytest's
    # --ignore does not drop a file named on its command line)
    files = [f for item in steps.ITEMS.values() for f in item.args if f.endswith(".py")]
    assert files and steps.RESIDENT_TEST not in files
    cmd = steps.pytest_command([steps.RESIDENT_TEST, "tests/test_device.py"], 40, True)
    assert steps.RESIDENT_TEST not in cmd and "tests/test_device.py" in cmd
    assert "timeout_method=signal" in cmd  # one slow test fails alone, not the run


def test_each_part_fits_its_call_and_both_calls_fit_the_device_time():
    """Each item's waits and estimate within its limit; each part's setup and items within
    its cap, and the cap within its call; both calls, the machine's start, the second
    transfer and the gaps within the session's 900 s; at most 6 files a call; and the
    README gives the calls as the plan has them."""
    steps = _steps_module()
    numbers = []
    for part in steps.PARTS.values():
        for item in part.items:
            numbers.append(item.number)
            margin = steps.STEP_MARGIN if item.step else steps.KILL_GRACE
            assert item.plan.need() <= item.limit - margin, (item.label, item.plan.need())
            assert set(item.plan.dry) <= set(item.plan.waits), item.label
            assert item.step is None or item.step in steps.STEPS, item.label
        need = part.setup + sum(item.plan.need() for item in part.items)
        assert need <= part.cap, f"part {part.number}: {need} s of {part.cap}"
        assert part.cap + steps.CLOSING_SECONDS <= part.timeout_s - 10, part.number
        assert len(part.files()) <= steps.MAX_FILES, part.files()
    assert numbers == list(range(1, len(numbers) + 1))
    calls = [part.timeout_s for part in steps.PARTS.values()]
    device = (
        steps.MACHINE_START_SECONDS
        + sum(calls)
        + steps.TRANSFER_SECONDS * (len(calls) - 1)
        + steps.GAP_SECONDS
    )
    assert device <= steps.DEVICE_SECONDS == 900, device
    # part 1's headline: captured PPO against the peer at both sizes, no eager copy, and
    # the dry run gives gpu_frontier.py the same measures and budget at toy sizes
    ppo = steps.ITEMS["3_ppo"]
    real = ppo.argv(Path("x.json"), ppo.limit, dry=False)
    dry = ppo.argv(Path("x.json"), ppo.dry_limit, dry=True)
    assert "--no-eager" in real and "--no-eager" in dry
    for flag in ("--measures", "--budget"):
        assert real[real.index(flag) + 1] == dry[dry.index(flag) + 1] != ""
    assert real[real.index("--ppo-sizes") + 1 : real.index("--ppo-sizes") + 3] == ["4096", "65536"]
    assert [i.name for i in steps.PARTS[1].items][-1] == "tournament"  # the riskiest last
    # a lost call 1: part 2 alone on a fresh machine, its first items within the lower cap
    rescue = steps.RESCUE
    assert rescue["cap"] + steps.CLOSING_SECONDS <= rescue["timeout_s"] - 10
    assert steps.MACHINE_START_SECONDS + rescue["timeout_s"] <= rescue["needs_left_s"]
    first = steps.PARTS[2].items[:4]
    assert steps.PARTS[1].setup + sum(i.plan.need() for i in first) <= rescue["cap"]
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    for part in steps.PARTS.values():
        assert f"command: {part.command()}" in readme, part.command()
        assert f"timeout_s: {part.timeout_s}" in readme, part.timeout_s
    assert "carry: " + json.dumps(list(steps.CARRY)) in readme
    assert f"command: {steps.PARTS[2].command()} --cap {rescue['cap']}" in readme
    assert f"timeout_s: {rescue['timeout_s']}" in readme


def test_the_ppo_item_reaches_its_ppo_rows_within_its_budget(tmp_path):
    """gpu_frontier.py with part 1's PPO item's measures and budget, at toy sizes, the
    peer looked for where a lease finds it: every PPO row is measured. (With the peer
    carried, its load and the env rows used the whole budget and no PPO row ran.)"""
    steps = _steps_module()
    item = steps.ITEMS["3_ppo"]
    out = tmp_path / "ppo.json"
    argv = [a for a in item.argv(out, item.dry_limit, dry=True) if a != "--skip-peer"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = result["measures"]["ppo_train"]
    sizes = argv[argv.index("--ppo-sizes") + 1 : argv.index("--ppo-sizes") + 3]
    assert [r["num_envs"] for r in rows] == [int(s) for s in sizes]
    assert all(r["ours"]["status"] == "ok" and r["ours"]["eager"] is None for r in rows)
    assert result["settings"]["budget_s"] == item.plan.waits["rows_start_by"]


def test_a_killed_item_keeps_its_json_and_its_figures(tmp_path):
    """What the part's driver does after ``timeout`` killed an item (exit code 124): what
    it had measured is kept, its status says so, and its figures are printed."""
    steps = _steps_module()
    item = steps.ITEMS["5_probe"]
    path = tmp_path / item.file
    path.write_text(
        json.dumps({"step": "probe", "status": "running", "replay_ms_per_iteration": 2.5})
    )
    record = steps.finalize(item, path, 124, 50.2, 50, 3, "warming up\n", dry=False)
    assert record["status"] == "timeout" and "killed at its limit" in record["error"]
    assert record["replay_ms_per_iteration"] == 2.5 and record["left_processes"] == 3
    assert "warming up" in record["output_tail"]
    lines = steps.figure_lines(item, record)
    assert "FIGURE 5_probe.status timeout" in lines
    assert "FIGURE 5_probe.replay_ms_per_iteration 2.5" in lines
    # a step that finished keeps its status; a frontier item that never wrote is failed
    path.write_text(json.dumps({"step": "probe", "status": "ok"}))
    assert steps.finalize(item, path, 0, 9, 50, 0, "", dry=False)["status"] == "ok"
    frontier = steps.ITEMS["8_env"]
    record = steps.finalize(frontier, tmp_path / "none.json", 1, 3, 60, 0, "boom", dry=False)
    assert record["status"] == "failed" and record["peer_target"].startswith("not evaluated")
    assert "benchmarks/peer/purejaxrl" in record["peer_target"]


def test_a_hung_nvidia_smi_or_nvml_call_costs_its_limit_not_the_item():
    """``nvidia-smi`` is killed and reaped, an NVML call left in its thread: a wedged
    driver blocks neither past its limit."""
    steps = _steps_module()
    t0 = time.monotonic()
    code, text = steps.run_bounded(["sleep", "30"], 0.5)
    assert code is None and "stopped after" in text
    with pytest.raises(TimeoutError, match="nvml test did not answer"):
        steps.bounded(lambda: time.sleep(30), 0.5, "nvml test")
    assert steps.bounded(lambda: 7, 5, "quick") == 7
    assert time.monotonic() - t0 < 30


def test_the_peers_first_compiled_run_is_not_timed():
    """Its first call still loads what the compile left: timed, it was half the median
    of two runs."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_frontier import time_runs

    calls = []

    def run(i):
        calls.append(i)
        time.sleep(0.3 if i == 0 else 0.01)

    first, timed = time_runs(run, 0.0, 2)
    assert calls == [0, 1, 2] and first >= 0.3 and len(timed) == 2 and max(timed) < 0.25


def test_the_wheels_carry_what_the_items_import_and_nothing_else():
    """No dask-cuda, RAPIDS or cuda-* wheels (they enabled the 8-process tournament test
    and NVML affinity pinning on the lease); MuJoCo for MJX, which the machine lacks."""
    names = []
    for name in ("gpu_wheels.txt", "gpu_wheels_peer.txt"):
        for line in (ROOT / "benchmarks" / name).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                names.append(re.split(r"[=<>]", line)[0].strip().lower().replace("-", "_"))
    assert not [n for n in names if n.startswith(("dask_cuda", "rapids", "cuda_"))], names
    assert {"mujoco", "mujoco_core", "mujoco_mjx", "trimesh", "gymnax", "distrax"} <= set(names)
    assert len(names) == len(set(names))  # one version of each
    assert "gpu_wheels_peer.txt" in (ROOT / "benchmarks" / "gpu_wheels.sh").read_text()


def test_the_sync_count_ignores_torchs_notice_about_the_debug_mode():
    steps = _steps_module()
    notice = "Synchronization debug mode is a prototype feature and does not yet detect all"
    assert not steps.is_sync_warning(notice)
    assert steps.is_sync_warning("called a synchronizing CUDA operation")


def test_test_results_survive_a_run_that_is_killed(tmp_path):
    """The test items' plugin writes each outcome as it comes; the counts read what is
    there, a line cut short by the kill included."""
    tests = tmp_path / "test_some.py"
    tests.write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert False\n"
        "@pytest.mark.skip(reason='no')\n"
        "def test_skip(): pass\n"
    )
    results = tmp_path / "results.jsonl"
    env = {
        **os.environ,
        "ELEGANTPOD_TEST_RESULTS": str(results),
        "PYTHONPATH": str(ROOT / "benchmarks"),
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "gpu_check_plugin", "-p", "no:cacheprovider",
         str(tests)],
        cwd=tmp_path, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    with results.open("a") as f:
        f.write('{"nodeid": "test_some.py::test_cut", "wh')  # killed mid-line
    counts = _steps_module().test_counts(results)
    assert (counts["passed"], counts["failed"], counts["skipped"]) == (1, 1, 1)
    assert counts["failures"] == ["test_some.py::test_bad"]


def test_a_missing_module_stops_the_check_before_any_item(tmp_path):
    """Without gymnasium (its wheel not carried), every item would fail on import: the
    check says so and the script stops (exit 3) instead of spending the lease."""
    (tmp_path / "gymnasium.py").write_text("raise ImportError('not carried')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check-imports"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "cannot import gymnasium" in done.stdout and "carry its wheel" in done.stdout
