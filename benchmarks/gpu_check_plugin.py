"""A pytest plugin for ``gpu_check.sh``'s step 2: each test's outcome, one JSON line as it
finishes, in ``$ELEGANTPOD_TEST_RESULTS``.

Why not junit: pytest writes its XML only when the whole run ends, so a run that its time
limit kills (the one lease a session gets) reported nothing of the tests that had passed.
A line per test, flushed at once, survives the kill.
"""

from __future__ import annotations

import json
import os


def pytest_runtest_logreport(report) -> None:
    """Append ``{"nodeid", "when", "outcome", "seconds"}``: a call's outcome, and a setup's
    or teardown's when it is not ``passed`` (a skip or an error there)."""
    path = os.environ.get("ELEGANTPOD_TEST_RESULTS")
    if not path or (report.when != "call" and report.outcome == "passed"):
        return
    line = {
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "seconds": round(report.duration, 3),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
