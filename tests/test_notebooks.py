"""The notebooks: committed without outputs, each run whole somewhere in the suite (the
docs build, or tutorial 03 in a real JupyterLab), and ``make tutorials`` at full budget."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("tutorials/*.ipynb"))
RUN_ELSEWHERE = {
    "03_tournament.ipynb": "tests/test_jupyterhub.py",
}
"""Notebooks another test executes whole, at the same small budget, as a user would: the
hub test runs tutorial 03 with Run All Cells in a real JupyterLab and fails on any
traceback. The docs build leaves it out for the same reason (25 s of the suite's time)."""
RUN_HERE = [p for p in NOTEBOOKS if p.parent.name == "notebooks"]
"""The ready-made dashboards: run here with nbclient, each its own test, and rendered
without running by the docs build, whose one test holds the tutorials' runs."""


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


def test_every_notebook_runs_whole_in_exactly_one_test():
    """The tutorials run top to bottom in the docs build (tests/test_docs.py), which
    renders their outputs as pages, at the small budget, with a private temporary folder;
    a cell that raises fails that build. The notebooks it leaves out run elsewhere:
    tutorial 03 in JupyterLab, the dashboards here."""
    from tests import test_docs

    elsewhere = {n.removesuffix(".ipynb") for n in RUN_ELSEWHERE} | {p.stem for p in RUN_HERE}
    assert set(test_docs.NOT_EXECUTED_HERE) == elsewhere
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert "nb_execution_raise_on_error = True" in conf
    assert "nb_execution_excludepatterns = [" in conf
    assert "ELEGANTPOD_DOCS_SKIP_EXECUTION" not in (ROOT / "Makefile").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN_HERE, ids=lambda p: p.name)
def test_dashboard_notebook_executes(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    monkeypatch.setenv("ELEGANTPOD_SMALL_BUDGET", "1")
    monkeypatch.setenv("ELEGANTPOD_WORKDIR", str(tmp_path / "workdir"))
    # the kernel (and the workers it starts) get a temp folder of their own: the check
    # below sees only this notebook's files, never another test process's
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    # what it wrote went under elegantpod.workdir(), not into fresh temporary folders
    assert not [p.name for p in private_tmp.glob("elegantpod*")]


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
