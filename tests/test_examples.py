"""Every Examples section in the package's docstrings runs as written (doctest): they
are what a reader copies, so one that no longer runs is a bug. Examples that need a
GPU, a gateway or a long training run are marked ``# doctest: +SKIP`` where they stand,
and say where the same call is tested for real."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "elegantpod"


def modules_with_examples() -> list[str]:
    """Modules whose source holds a ``>>>`` example."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text():
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found.append(".".join(parts))
    return found


def test_the_examples_are_found():
    found = modules_with_examples()
    assert "elegantpod.clusters.cluster" in found and "elegantpod.finance.stats.metrics" in found


@pytest.mark.parametrize("name", modules_with_examples())
def test_the_examples_run_as_written(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    monkeypatch.setenv("ELEGANTPOD_WORKDIR", str(tmp_path / "workdir"))
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (output above)"
