"""One folder per example, emptied by its next run, never a folder someone else wrote."""

import pytest

import elegantpod
from elegantpod.workspace import ENV_VAR, MARKER, clear_workdir, workdir, workdir_root


def test_a_rerun_empties_its_own_folder_only(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "root"))
    assert workdir_root() == tmp_path / "root"
    first = elegantpod.workdir("demo")
    (first / "store").mkdir()
    (first / "store" / "big.pt").write_bytes(b"x" * 100)
    other = workdir("quickstart")
    (other / "keep.txt").write_text("kept")
    again = workdir("demo")
    assert again == first and sorted(p.name for p in again.iterdir()) == [MARKER]
    assert (other / "keep.txt").read_text() == "kept"  # another example's folder is untouched
    assert (workdir("quickstart", fresh=False) / "keep.txt").is_file()  # resume keeps files
    assert clear_workdir() == [first, other]
    assert not first.exists() and not other.exists()


def test_folders_it_did_not_make_are_never_emptied(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    precious = tmp_path / "demo"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(ValueError, match="holds files elegantpod did not write"):
        workdir("demo")
    assert (precious / "thesis.tex").read_text() == "years of work"
    (tmp_path / "loose").mkdir()
    assert clear_workdir() == []


@pytest.mark.parametrize("name", ["", "..", "../etc", "a/b", "/abs", ".hidden", 3])
def test_names_stay_inside_the_root(name, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(ValueError, match="plain folder name"):
        workdir(name)
