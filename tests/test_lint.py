"""Style is part of the build: ruff lint and format must be clean."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff():
    exe = Path(sys.executable).parent / "ruff"
    return str(exe) if exe.exists() else shutil.which("ruff")


@pytest.mark.skipif(_ruff() is None, reason="ruff not installed (pip install .[test])")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]])
def test_ruff(args):
    p = subprocess.run(
        [_ruff(), *args, "elegantpod", "tests", "benchmarks", "docs/conf.py", "docs/_ext"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr
