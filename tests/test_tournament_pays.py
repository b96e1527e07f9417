"""benchmarks/tournament_pays.py --report and its run log (benchmarks/pays_runs.py): a
hostile log is one line naming the line and the field, never a string that drives the
terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
HOSTILE = "\x1b]8;;https://example.invalid\x07sweep\x1b]8;;\x07\x1b[2J"
"""A method name that, printed raw, writes a link and clears the screen."""


def _pays_runs():
    sys.path.insert(0, str(BENCH))
    import pays_runs

    return pays_runs


def _line(method: str, seed: int, changes: dict | None = None) -> str:
    run = {
        "task": "trap",
        "method": method,
        "seed": seed,
        "time": [1.0, 5.0 + seed],
        "score": [0.0, 95.0],
        "budget": 90.0,
        "target": 90.0,
        "segment_steps": 8_000,
        "queue": "lineage_seconds",
    }
    return json.dumps({**run, **(changes or {})}) + "\n"


def test_the_report_refuses_a_method_name_that_drives_the_terminal(tmp_path):
    log = tmp_path / "runs.jsonl"
    lines = [_line(m, seed) for seed in range(3) for m in ("tournament_base", HOSTILE)]
    log.write_text("".join(lines))
    script = BENCH / "tournament_pays.py"
    done = subprocess.run(
        [sys.executable, str(script), "--report", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = done.stdout + done.stderr
    assert "\x1b" not in shown and "\x07" not in shown
    assert done.returncode != 0
    assert shown.strip().splitlines() == [
        f"error: {log}:2: method {HOSTILE!r} holds a control or invisible character"
    ]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("task", ["trap"], "task must be a string, got ['trap']"),
        ("method", "\u202eKO", r"method '\u202eKO' holds a control or invisible character"),
        ("method", "m" * 100, "method 'mmm"),
        ("seed", "7", "seed must be an integer, got '7'"),
        ("seed", True, "seed must be an integer, got True"),
        ("budget", "90", "budget must be a finite number, got '90'"),
        ("budget", None, "budget must be a finite number, got None"),
    ],
)
def test_a_hostile_line_of_the_log_is_refused_naming_it(tmp_path, field, value, message):
    pays_runs = _pays_runs()
    log = tmp_path / "runs.jsonl"
    log.write_text(_line("sweep", 1) + _line("sweep", 2, {field: value}))
    with pytest.raises(ValueError) as err:
        pays_runs.read_log(log)
    assert str(err.value).startswith(f"{log}:2: {message}")


def test_the_logged_runs_read_as_they_are():
    """Every line the benchmarks logged passes the checks (nothing measured is lost)."""
    pays_runs = _pays_runs()
    for log in sorted((BENCH / "results").glob("tournament_pays*.jsonl")):
        runs = pays_runs.read_log(log)
        assert runs and all(isinstance(r["method"], str) for r in runs)
