"""One folder per example, emptied by its next run, never a folder someone else wrote."""

import os
import stat
import sys
import tempfile

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


OTHER_UID = 12345  # another user, as root (the tests' user here) can make one
needs_unix = pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() != 0, reason="makes files of another uid (root only)"
)


def _default_root(tmp_path, monkeypatch, mode=0o1777):
    """The default root <tmp>/elegantpod-<uid>, in a temporary folder like /tmp."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(mode)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    root = workdir_root()
    assert root == tmp / f"elegantpod-{os.getuid()}"
    return root


def test_the_default_root_is_made_private(tmp_path, monkeypatch):
    root = _default_root(tmp_path, monkeypatch)
    assert workdir("demo") == root / "demo"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700 and root.stat().st_uid == os.getuid()


@needs_unix
def test_a_root_another_user_made_is_refused(tmp_path, monkeypatch):
    root = _default_root(tmp_path, monkeypatch)
    root.mkdir(mode=0o777)
    root.chmod(0o777)  # pre-created by someone for everyone: they would read the results
    with pytest.raises(
        ValueError, match=r"workdir root .*other users can write to it \(mode 0777"
    ) as e:
        workdir("demo")
    assert str(root) in str(e.value) and f"set {ENV_VAR} to a folder you own" in str(e.value)
    assert list(root.iterdir()) == []
    root.chmod(0o700)
    os.chown(root, OTHER_UID, -1)
    with pytest.raises(ValueError, match=f"owned by uid {OTHER_UID}, not by you"):
        workdir("demo")
    with pytest.raises(ValueError, match="workdir root"):
        clear_workdir()
    assert list(root.iterdir()) == []


@needs_unix
def test_a_symlinked_root_is_refused(tmp_path, monkeypatch):
    root = _default_root(tmp_path, monkeypatch)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    root.symlink_to(theirs)
    with pytest.raises(ValueError, match="it is a symbolic link"):
        workdir("demo")
    assert list(theirs.iterdir()) == []  # nothing was written where the link leads


@needs_unix
def test_a_root_under_a_folder_others_can_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone could swap our root for a symlink later
    monkeypatch.setenv(ENV_VAR, str(shared / "mine"))
    with pytest.raises(
        ValueError, match=r"other users can write to .*shared' \(mode 0777, no sticky"
    ):
        workdir("demo")
    assert not (shared / "mine").exists()
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot rename or remove our folder
    assert workdir("demo") == shared / "mine" / "demo"
    # a link on the way that another user owns (and could point anywhere) is refused
    link = tmp_path / "link"
    link.symlink_to(shared)
    os.chown(link, OTHER_UID, -1, follow_symlinks=False)
    monkeypatch.setenv(ENV_VAR, str(link / "mine"))
    with pytest.raises(
        ValueError, match=f"passes through .*link', a symbolic link of uid {OTHER_UID}"
    ):
        workdir("demo")
    os.chown(link, os.getuid(), -1, follow_symlinks=False)  # our own link is fine
    assert workdir("demo", fresh=False) == shared / "mine" / "demo"
