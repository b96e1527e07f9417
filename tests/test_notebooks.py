"""The notebooks: committed without outputs, each run whole somewhere in the suite (the
docs build, or tutorial 03 in a real JupyterLab), and ``make tutorials`` at full budget."""

import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("tutorials/*.ipynb"))
RUN_ELSEWHERE = {
    "03_tournament.ipynb": "tests/test_jupyterhub.py",
}
"""Notebooks another test executes whole, at the same small budget, as a user would: the
hub test runs tutorial 03 with Run All Cells in a real JupyterLab and fails on any
traceback. The docs build leaves it out for the same reason (25 s of the suite's time)."""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_committed_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name} has committed outputs: strip them"
    )


def test_a_notebook_run_elsewhere_is_run_there_whole():
    for name, test_file in RUN_ELSEWHERE.items():
        source = (ROOT / test_file).read_text()
        assert f'"tutorials" / "{name}"' in source and name in source, (name, test_file)
        assert '"ELEGANTPOD_SMALL_BUDGET": "1"' in source and "Run All Cells" in source


def test_the_docs_build_executes_every_other_notebook():
    """Every notebook runs top to bottom in the docs build (tests/test_docs.py), which
    renders its outputs as a page: once there, at the small budget, with a private
    temporary folder; a cell that raises fails that build. Running them here too would
    only repeat it. The one notebook it leaves out is the one run elsewhere."""
    from tests import test_docs

    assert [n.removesuffix(".ipynb") for n in RUN_ELSEWHERE] == [test_docs.NOT_EXECUTED_HERE]
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert "nb_execution_raise_on_error = True" in conf
    assert "nb_execution_excludepatterns = [" in conf
    assert "ELEGANTPOD_DOCS_SKIP_EXECUTION" not in (ROOT / "Makefile").read_text()


def test_there_are_notebooks():
    assert NOTEBOOKS
    assert os.path.exists(ROOT / "notebooks" / "tournament_dashboard.ipynb")


def test_the_full_budget_runner_selects_by_prefix_and_names_a_bad_one():
    """``make tutorials`` (tutorials/run_all.py) runs every tutorial at the full budget,
    where their claims are asserted; a prefix picks some, a wrong one says what exists."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_all", ROOT / "tutorials" / "run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    assert run_all.notebooks([]) == NOTEBOOKS[2:] + NOTEBOOKS[:2]  # tutorials first
    assert [p.name for p in run_all.notebooks(["03"])] == ["03_tournament.ipynb"]
    with pytest.raises(SystemExit, match=r"no notebook starts with \['99'\].*01_quickstart"):
        run_all.notebooks(["99"])
