"""A local store reaches nothing outside itself: links and special files below its root
are refused for every read, write, listing and deletion; every read is bounded before it
starts; snapshot numbers cannot overflow their names; files respect the umask.

Each case reproduces a hole of issue 29 (items 1, 4, 6 and the umask): before the fix a
symlinked ``pods/p011`` or ``state/`` made resume write into another store, a FIFO hung
resume, a link to ``/dev/zero`` exhausted memory, ``state/99999999.json`` hid every later
save, and every file was 0644 under umask 077. All fast, no cluster.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest
import torch

from elegantpod import Tournament
from elegantpod.pod.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from elegantpod.safe_files import RootedPath, UnsafeFileError, atomic_write_bytes
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store import store as store_module
from elegantpod.tournament.store.files import StoreError, StoreFileTooLarge
from elegantpod.tournament.store.lease import NAME, Lease
from elegantpod.tournament.store.snapshots import MAX_VERSION, VERSION_HEADROOM
from elegantpod.tournament.store.store import Store

LINK = "is a symbolic link; a store must hold only regular files and folders"


def make_store(path: Path, pod_id: str = "p011", segments: int = 2) -> Store:
    """A resumable store: spec, one snapshot and ``segments`` checkpoints of ``pod_id``."""
    s = Store(path)
    s.ensure()
    s.write_json("tournament.json", TournamentSpec(env_id="CartPole-v1").to_dict())
    record = {
        "pod_id": pod_id,
        "algo": "ppo",
        "hparams": {},
        "seed": 1,
        "status": "queued",
        "segment": segments,
        "latest_checkpoint": f"pods/{pod_id}/seg-{segments:05d}.pt",
    }
    s.save_state(
        {
            "pods": [record],
            "leaderboard": [],
            "state": {"total_steps": 0, "elapsed_seconds": 1.0},
        }
    )
    for seg in range(1, segments + 1):
        save_checkpoint(s.checkpoint(pod_id, seg), {"w": torch.full((2,), float(seg))})
    return s


def snapshot_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: what must stay untouched."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def two_stores(tmp_path):
    victim = make_store(tmp_path / "victim")
    hostile = make_store(tmp_path / "hostile", pod_id="p003")
    return hostile, victim, tmp_path


@pytest.fixture
def no_cluster(monkeypatch):
    """Any attempt to start a cluster fails the test."""
    import importlib

    module = importlib.import_module("elegantpod.clusters.cluster")

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(module, "cluster", refuse)


# ---------------------------------------------------------------------- item 1: links
def test_a_symlinked_pod_folder_is_refused_everywhere_and_the_other_store_untouched(two_stores):
    hostile, victim, tmp_path = two_stores
    (tmp_path / "hostile/pods/p011").symlink_to(tmp_path / "victim/pods/p011")
    before = snapshot_of(tmp_path / "victim")
    for action in (
        hostile.checkpoints,
        hostile.pod_ids,
        lambda: hostile.prune(set(), {"p011": 99, "p003": 99}),
        lambda: hostile.checkpoint("p011", 3),
        lambda: hostile.resolve("pods/p011/seg-00001.pt"),
        hostile.clean_orphans,
        lambda: hostile.exists("pods", "p011"),
        lambda: hostile.read_bytes("pods/p011/seg-00001.pt"),
        lambda: hostile.write_bytes("pods/p011/seg-00003.pt", b"x"),
        lambda: hostile.remove("pods/p011/seg-00001.pt"),
    ):
        with pytest.raises(StoreError, match=f"'{tmp_path / 'hostile'}': pods/p011 {LINK}"):
            action()
    assert snapshot_of(tmp_path / "victim") == before


def test_a_worker_writing_a_checkpoint_path_rechecks_it(two_stores):
    """The path a store hands to a worker carries its root: a link that appears after
    the segment was submitted is refused at the write (and at the load)."""
    hostile, victim, tmp_path = two_stores
    path = hostile.checkpoint("p011", 3)  # checked now: pods/p011 does not exist yet
    old = hostile.checkpoint("p003", 1)
    assert isinstance(path, RootedPath)
    moved = pickle.loads(pickle.dumps(path))  # as a SegmentTask travels to a worker
    assert moved == path and moved.no_links_below == hostile.url
    (tmp_path / "hostile/pods/p011").symlink_to(tmp_path / "victim/pods/p011")
    before = snapshot_of(tmp_path / "victim")
    with pytest.raises(UnsafeFileError, match="pods/p011.* is a symbolic link"):
        save_checkpoint(moved, {"w": torch.zeros(2)})
    assert snapshot_of(tmp_path / "victim") == before
    (tmp_path / "hostile/pods/p003").rename(tmp_path / "moved")
    (tmp_path / "hostile/pods/p003").symlink_to(tmp_path / "moved")
    with pytest.raises(CheckpointError, match="pods/p003 is a symbolic link"):
        load_checkpoint(old)


def test_a_symlinked_state_folder_is_refused_and_the_other_store_untouched(two_stores):
    hostile, victim, tmp_path = two_stores
    victim.save_state({"leaderboard": [], "pods": [], "state": {}})  # a second snapshot
    os.rename(tmp_path / "hostile/state", tmp_path / "old-state")
    (tmp_path / "hostile/state").symlink_to(tmp_path / "victim/state")
    before = snapshot_of(tmp_path / "victim")
    fresh = Store(tmp_path / "hostile")
    for action in (
        fresh.load_state,
        lambda: fresh.save_state({"leaderboard": [], "pods": [], "state": {}}),
        lambda: fresh.exists("state"),
        fresh.clean_orphans,
    ):
        with pytest.raises(StoreError, match=f"state {LINK}"):
            action()
    assert snapshot_of(tmp_path / "victim") == before


def test_resume_refuses_linked_state_or_pods_before_any_cluster(two_stores, no_cluster):
    hostile, victim, tmp_path = two_stores
    os.rename(tmp_path / "hostile/state", tmp_path / "old-state")
    (tmp_path / "hostile/state").symlink_to(tmp_path / "victim/state")
    with pytest.raises(StoreError, match=f"state {LINK}"):
        Tournament.resume(tmp_path / "hostile")
    (tmp_path / "hostile/state").unlink()
    os.rename(tmp_path / "old-state", tmp_path / "hostile/state")
    Tournament.resume(tmp_path / "hostile")  # the clean store resumes
    (tmp_path / "hostile/pods/p011").symlink_to(tmp_path / "victim/pods/p011")
    before = snapshot_of(tmp_path / "victim")
    with pytest.raises(StoreError, match=f"pods/p011 {LINK}"):
        Tournament.resume(tmp_path / "hostile")
    assert snapshot_of(tmp_path / "victim") == before


@pytest.mark.parametrize("name", ["tournament.json", "state/LATEST", "state/00000001.json"])
def test_a_symlinked_file_is_refused(two_stores, name):
    hostile, victim, tmp_path = two_stores
    (tmp_path / "hostile" / name).unlink()
    (tmp_path / "hostile" / name).symlink_to(tmp_path / "victim" / name)
    with pytest.raises(StoreError, match=f"{name} {LINK}"):
        hostile.read_bytes(name)
    with pytest.raises(StoreError, match=f"{name} {LINK}"):
        hostile.write_bytes(name, b"{}")
    assert (tmp_path / "hostile" / name).is_symlink()  # not replaced either


def test_pruning_never_deletes_through_a_link(two_stores):
    hostile, victim, tmp_path = two_stores
    link = tmp_path / "hostile/pods/p003/seg-00003.pt"
    link.symlink_to(tmp_path / "victim/pods/p011/seg-00001.pt")
    with pytest.raises(StoreError, match=f"pods/p003/seg-00003.pt {LINK}"):
        hostile.prune(set(), {"p003": 99})
    assert (tmp_path / "victim/pods/p011/seg-00001.pt").is_file() and link.is_symlink()


def test_a_root_the_user_reaches_through_a_link_works(tmp_path):
    make_store(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    s = Store(tmp_path / "link")
    assert s.url == str(tmp_path / "real")  # resolved once
    assert s.load_state()["pods"][0]["pod_id"] == "p011"
    assert s.checkpoints() == {
        f"pods/p011/seg-0000{i}.pt": (tmp_path / f"real/pods/p011/seg-0000{i}.pt").stat().st_size
        for i in (1, 2)
    }
    assert torch.equal(load_checkpoint(s.checkpoint("p011", 2))["w"], torch.full((2,), 2.0))


# ------------------------------------------------------------- item 6: special files
@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", ["lease.json", "tournament.json", "state/LATEST"])
def test_a_fifo_is_refused_without_hanging(tmp_path, name, no_cluster):
    s = make_store(tmp_path / "s")
    (tmp_path / "s" / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / "s" / name)
    with pytest.raises(StoreError, match=f"{name} is a FIFO"):
        s.read_bytes(name)
    with pytest.raises(StoreError, match=f"{name} is a FIFO"):
        if name == NAME:
            Lease(s, settle_seconds=0).acquire(force=True)
        else:
            Tournament.resume(tmp_path / "s")


@pytest.mark.timeout(20)
def test_a_link_to_dev_zero_is_refused_before_reading(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    s = make_store(tmp_path / "s")
    (tmp_path / "s" / NAME).symlink_to("/dev/zero")
    with pytest.raises(StoreError, match=f"{NAME} {LINK}"):
        Lease(s, settle_seconds=0).acquire(force=True)
    # a checkpoint the user names may be their own link, but must lead to a regular file
    (tmp_path / "zero.pt").symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="is a character device"):
        load_checkpoint(tmp_path / "zero.pt")
    os.mkfifo(tmp_path / "fifo.pt")
    with pytest.raises(CheckpointError, match=r"is a FIFO \(named pipe\)"):
        load_checkpoint(tmp_path / "fifo.pt")


def test_oversized_files_are_refused_naming_the_limit(tmp_path, monkeypatch):
    s = make_store(tmp_path / "s")
    s.write_bytes("state/LATEST", b" " * 5000)
    with pytest.raises(
        StoreFileTooLarge, match=r"state/LATEST is 5000 bytes, over its limit of 4096"
    ):
        s.load_state()
    s.save_state({"leaderboard": [], "pods": [], "state": {}})
    monkeypatch.setattr(store_module, "MAX_SNAPSHOT_BYTES", 100)
    s.write_bytes("state/00000002.json", b"[" * 101)
    with pytest.raises(
        StoreFileTooLarge, match=r"state/00000002.json is 101 bytes, over its limit"
    ):
        s.load_state()
    # a lease over its limit is unread and counts as malformed: force replaces it
    s.write_bytes(NAME, b" " * 5000)
    lease = Lease(s, settle_seconds=0).acquire(force=True)
    assert s.read_json(NAME)["token"] == lease.token
    monkeypatch.setattr("elegantpod.pod.checkpoint.MAX_CHECKPOINT_BYTES", 10)
    with pytest.raises(CheckpointError, match=r"over the limit of 10 bytes"):
        load_checkpoint(s.checkpoint("p011", 1))


# ------------------------------------------------------- item 4: snapshot numbering
def _plant(s: Store, root: Path, version: int, point: bool) -> None:
    data = json.dumps({"leaderboard": [], "pods": [], "state": {}}).encode()
    (root / f"state/{version:08d}.json").write_bytes(data)
    if point:
        import hashlib

        pointer = {"name": f"state/{version:08d}.json", "sha256": hashlib.sha256(data).hexdigest()}
        (root / "state/LATEST").write_bytes(json.dumps(pointer).encode())


@pytest.mark.parametrize("point", [True, False], ids=["pointed", "unpointed"])
def test_a_snapshot_number_near_the_limit_is_refused_on_load(tmp_path, point):
    s = make_store(tmp_path / "s")
    _plant(s, tmp_path / "s", MAX_VERSION, point)
    with pytest.raises(StoreError, match=f"snapshot number {MAX_VERSION} is within"):
        Store(tmp_path / "s").load_state()
    with pytest.raises(StoreError, match="snapshot number 99999999"):
        Tournament.resume(tmp_path / "s")


def test_save_never_writes_a_name_the_pointer_rejects(tmp_path):
    s = make_store(tmp_path / "s")
    _plant(s, tmp_path / "s", MAX_VERSION, point=False)
    with pytest.raises(StoreError, match="no snapshot number is left"):
        Store(tmp_path / "s").save_state({"leaderboard": [], "pods": [], "state": {}})
    assert sorted(p.name for p in (tmp_path / "s/state").iterdir()) == [
        "00000001.json",
        "99999999.json",
        "LATEST",
    ]


def test_a_number_below_the_headroom_still_loads_and_saves(tmp_path):
    s = make_store(tmp_path / "s")
    limit = MAX_VERSION - VERSION_HEADROOM
    _plant(s, tmp_path / "s", limit - 1, point=True)
    fresh = Store(tmp_path / "s")
    assert fresh.load_state() == {"leaderboard": [], "pods": [], "state": {}}
    assert fresh.save_state({"leaderboard": [], "pods": [], "state": {"n": 1}}) == limit
    assert Store(tmp_path / "s").load_state()["state"] == {"n": 1}


# ------------------------------------------------------------------ minor: umask
@pytest.mark.parametrize("mask, mode", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_files_respect_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        s = make_store(tmp_path / "s")
        Lease(s, settle_seconds=0).acquire()
        atomic_write_bytes(tmp_path / "report.html", b"<p>")
    finally:
        os.umask(old)
    files = [
        "s/tournament.json",
        "s/state/00000001.json",
        "s/state/LATEST",
        "s/leaderboard.json",
        "s/lease.json",
        "s/pods/p011/seg-00001.pt",
        "report.html",
    ]
    assert {f: oct(stat.S_IMODE((tmp_path / f).stat().st_mode)) for f in files} == {
        f: oct(mode) for f in files
    }
