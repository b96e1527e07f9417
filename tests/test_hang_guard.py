"""A hung test costs minutes, never CI's 90: a throwaway copy of the suite's setup
(Makefile, pyproject's pytest settings, conftest) with one test file that deadlocks,
run the way ``make test`` and ``.ci/run`` run the real suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HANGS = """
import threading


def wait_forever_on_a_lock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # a deadlock, as a finalizer inside LoopRunner.start made one


def test_that_hangs():
    wait_forever_on_a_lock()


def test_after_it():
    pass
"""

FINE = """
import pytest


@pytest.mark.parametrize("i", range(20))
def test_fine(i):
    assert i >= 0
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """The copy: the real Makefile, pyproject.toml and conftest, two test files."""
    root = tmp_path_factory.mktemp("suite")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "requirements", root / "requirements")
    shutil.copytree(ROOT / ".ci", root / ".ci")
    (root / "tests").mkdir()
    for name in ("__init__.py", "conftest.py", "helpers.py"):
        shutil.copy(ROOT / "tests" / name, root / "tests" / name)
    (root / "tests" / "test_hangs.py").write_text(HANGS)
    (root / "tests" / "test_fine.py").write_text(FINE)
    return root


def _make_test(suite: Path, timeout: int, wrapper: list[str] = ()):
    """``make test`` in the copy, on this interpreter's venv (already set up)."""
    venv = Path(sys.prefix)
    stamp = venv / ".installed-test"
    env = {k: v for k, v in os.environ.items() if k != "ELEGANTPOD_TEST_WATCH"}
    # the suite's settings at a smaller scale: stacks at 2/3 of the timeout, then the end
    dump = f"-o faulthandler_timeout={timeout * 2 // 3}" if timeout else ""
    env["PYTEST_ADDOPTS"] = f"-o timeout={timeout} {dump} -p no:cacheprovider"
    cmd = [*wrapper, "make", "-C", str(suite), "test", f"VENV={venv}", "-o", str(stamp)]
    cmd.append("TEST_WORKERS=1")  # one test process is enough to hang (and cheaper)
    try:
        return subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the hung suite was not stopped: {exc.stdout}\n{exc.stderr}")


def test_a_hung_test_fails_the_run_with_its_stack_and_name(suite):
    if not (Path(sys.prefix) / ".installed-test").exists():
        pytest.skip("runs the Makefile on this venv, which make setup made")
    out = _make_test(suite, timeout=6)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-4000:]
    assert "Timeout" in text and "wait_forever_on_a_lock" in text, text[-4000:]  # the stack
    assert "crashed while running 'tests/test_hangs.py::test_that_hangs'" in text, text[-4000:]
    assert "1 failed" in text, text[-4000:]  # and the run ended: no stand-in worker waits


def test_a_hang_no_test_timeout_catches_ends_at_the_outer_limit(suite):
    if not (Path(sys.prefix) / ".installed-test").exists():
        pytest.skip("runs the Makefile on this venv, which make setup made")
    limit = str(suite / ".ci" / "with_time_limit")
    out = _make_test(suite, timeout=0, wrapper=["bash", limit, "10"])
    text = out.stdout + out.stderr
    assert out.returncode == 124, text[-4000:]
    assert "ran past 10 s" in text
    # what each test process was running, and the hung one's stack
    assert "tests/test_hangs.py::test_that_hangs" in text, text[-4000:]
    assert "wait_forever_on_a_lock" in text, text[-4000:]
