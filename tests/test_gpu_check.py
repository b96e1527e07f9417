"""benchmarks/gpu_check.sh: its dry run passes on a CPU machine and leaves every step's JSON
with the figures a GPU run fills in; a step killed at its budget still leaves its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMON = {"step", "status", "error", "seconds", "dry_run", "device"}
STEPS = {
    "1_versions": {"torch_version", "packages", "cuda_available", "gpus", "mps"},
    "2_gpu_tests": {"exit_code", "passed", "failed", "skipped", "files"},
    "3_probe": {
        "eager_ms_per_iteration",
        "replay_ms_per_iteration",
        "capture_seconds",
        "host_syncs_per_replay",
        "peak_memory_bytes",
        "horizon_1",
        "hparam_recapture",
    },
    "4_pods": {
        "pods",
        "crowd_over_lone",
        "packing",
        "fell_back_to_eager",
        "failed_compiles",
        "errors",
        "mps",
    },
    "5_frontier": {"frontier", "targets", "peer", "complete"},
    "6_tournament": {
        "hparams",
        "lone_steps_per_second",
        "lone_gpu",
        "without_mps",
        "mps_measured",
        "mps_note",
        "tournament_steps_per_second",
        "ratio",
        "targets",
    },
    "7_mjx": {"num_envs", "world_bytes", "estimate_bytes"},
}


@pytest.mark.slow
def test_the_dry_run_runs_every_step_at_toy_sizes_and_writes_its_json(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name, keys in STEPS.items():
        path = tmp_path / f"{name}.json"
        assert path.exists(), f"{name}: no JSON\n{done.stdout[-2000:]}"
        record = json.loads(path.read_text())
        assert COMMON | keys <= set(record), f"{name} lacks {(COMMON | keys) - set(record)}"
        log = (tmp_path / f"{name}.log").read_text()[-2000:]
        assert record["status"] in ("ok", "skipped: no CUDA"), f"{name}: {record}\n{log}"
        assert record["dry_run"] is True and record["device"] == "cpu"
    # the toy sizes really ran: timings and rates, not placeholders
    probe = json.loads((tmp_path / "3_probe.json").read_text())
    assert probe["eager_ms_per_iteration"] > 0 and probe["replay_ms_per_iteration"] > 0
    pods = json.loads((tmp_path / "4_pods.json").read_text())
    assert len(pods["pods"]) == 4 and not pods["errors"]
    # each pod ran alone in its turn, then in the crowd: its share is its own
    assert all(p["lone_steps_per_second"] > 0 for p in pods["pods"])
    assert all(p["crowd_steps_per_second"] > 0 for p in pods["pods"])
    assert pods["packing"] == pytest.approx(sum(pods["crowd_over_lone"]))
    frontier = json.loads((tmp_path / "5_frontier.json").read_text())
    assert frontier["complete"] and frontier["frontier"]["env_step"]
    tournament = json.loads((tmp_path / "6_tournament.json").read_text())
    run = tournament["without_mps"]
    assert tournament["lone_steps_per_second"] > 0 and run["end"]["pods_failed"] == 0
    assert run["pods_ready"] == 2 and run["steps_per_second"] > 0  # from progress events
    # GPU-sized pods: four minibatches per epoch, the same settings as the lone pod
    hp = tournament["hparams"]
    assert hp["minibatch_size"] == hp["num_envs"] * hp["horizon"] // 4
    assert tournament["mps_measured"] is False and tournament["mps_note"] == "no GPU"


def test_a_step_killed_at_its_budget_still_leaves_its_json(tmp_path):
    """What the shell does after ``timeout`` killed a step mid-way (exit code 124)."""
    out = tmp_path / "3_probe.json"
    out.write_text(json.dumps({"step": "probe", "status": "running", "eager_ms_per_iteration": 2}))
    log = tmp_path / "3_probe.log"
    log.write_text("warming up\n")
    script = ROOT / "benchmarks" / "gpu_check_steps.py"
    args = ["fallback", "--out", str(out), "--rc", "124", "--log", str(log)]
    subprocess.run([sys.executable, str(script), *args], check=True, timeout=60)
    record = json.loads(out.read_text())
    assert record["status"] == "timeout" and "budget ran out" in record["error"]
    assert record["eager_ms_per_iteration"] == 2  # what it had measured is kept
    assert "warming up" in record["output_tail"]
    # a step that finished is left alone
    out.write_text(json.dumps({"step": "probe", "status": "ok"}))
    subprocess.run([sys.executable, str(script), *args], check=True, timeout=60)
    assert json.loads(out.read_text()) == {"step": "probe", "status": "ok"}
    # a step that never ran (no time left) says so
    missing = tmp_path / "7_mjx.json"
    skip = ["fallback", "--out", str(missing), "--rc", "124", "--status", "skipped: no time left"]
    subprocess.run([sys.executable, str(script), *skip], check=True, timeout=60)
    assert json.loads(missing.read_text())["status"] == "skipped: no time left"


# -- the plan: what the one lease will wait, summed before it is spent ----------------------
def _steps_module():
    import importlib.util

    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("gpu_check_steps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check_steps"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


SCRIPT = ROOT / "benchmarks" / "gpu_check_steps.py"


def test_every_step_fits_its_budget_and_the_script_fits_its_limit_at_gpu_sizes():
    """Each step's fixed waits and subprocess limits at the GPU sizes, plus its estimated
    work, within its budget; setup, every budget and one kill's grace within 8 min 40 s.
    (The tournament step had 100 s of fixed waits in 130 s and lost every figure.)"""
    steps = _steps_module()
    for name, plan in steps.PLAN.items():
        assert plan.need() <= plan.budget, f"{name}: needs {plan.need()} s of {plan.budget}"
        assert set(plan.dry) <= set(plan.waits), name  # a dry run replaces, never adds
    total = steps.SETUP_SECONDS + sum(p.budget for p in steps.PLAN.values()) + steps.KILL_GRACE
    assert total <= steps.TOTAL_SECONDS == 8 * 60 + 40
    shell = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    assert f"total={steps.TOTAL_SECONDS} " in shell and "gpu_check_steps.py budgets" in shell
    assert f"timeout -k {steps.KILL_GRACE} " in shell
    assert list(steps.PLAN) == list(steps.STEPS)  # the shell runs them in this order
    printed = subprocess.run(
        [sys.executable, str(SCRIPT), "budgets"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [int(b) for b in printed] == [int(p.budget) for p in steps.PLAN.values()]
    # the tournament measures with and without MPS within its plan
    waits = steps.PLAN["tournament"].waits
    assert {"ready_deadline", "window", "mps_ready_deadline", "mps_window"} <= set(waits)


def test_the_sync_count_ignores_torchs_notice_about_the_debug_mode():
    steps = _steps_module()
    notice = "Synchronization debug mode is a prototype feature and does not yet detect all"
    assert not steps.is_sync_warning(notice)
    assert steps.is_sync_warning("called a synchronizing CUDA operation")


def test_test_results_survive_a_run_that_is_killed(tmp_path):
    """Step 2's plugin writes each outcome as it comes; the counts read what is there,
    a line cut short by the kill included."""
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


def test_a_missing_module_stops_the_check_before_any_step(tmp_path):
    """Without gymnasium (its wheel not carried), every step would fail on import: the
    check says so and the script stops (exit 3) instead of spending the lease."""
    (tmp_path / "gymnasium.py").write_text("raise ImportError('not carried')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check-imports"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "cannot import gymnasium" in done.stdout and "carry its wheel" in done.stdout
