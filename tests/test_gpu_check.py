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
        "fell_back_to_eager",
        "failed_compiles",
        "errors",
        "aggregate_steps_per_second",
        "lone_steps_per_second",
        "ratio",
    },
    "5_frontier": {"frontier", "targets", "peer", "complete"},
    "6_tournament": {
        "lone_steps_per_second",
        "tournament_steps_per_second",
        "ratio",
        "gpu_utilisation",
        "captures",
        "replays",
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
    assert all(p["steps_per_second"] > 0 for p in pods["pods"])
    frontier = json.loads((tmp_path / "5_frontier.json").read_text())
    assert frontier["complete"] and frontier["frontier"]["env_step"]
    tournament = json.loads((tmp_path / "6_tournament.json").read_text())
    assert tournament["lone_steps_per_second"] > 0 and tournament["end"]["pods_failed"] == 0


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
