"""A new tournament's store (issue 59, item 6): a store that holds a tournament is
refused, or replaced with ``overwrite=True`` only once every argument is checked and
never while a running tournament holds its lease."""

from __future__ import annotations

import pytest

from elegantpod import Tournament
from elegantpod.tournament.store.lease import Lease, LeaseError
from elegantpod.tournament.store.store import Store
from tests.tournament.store.test_hostile_store import entry, make_store


def _old_store(path):
    s = make_store(path, leaderboard=[entry()])
    s.write_bytes("pods/p000/seg-00001.pt", b"an old checkpoint")
    (path / "notes.txt").write_text("mine")  # not the store's: never touched
    return s


def test_a_store_with_a_tournament_is_refused_or_replaced_on_request(tmp_path):
    path = tmp_path / "s"
    _old_store(path)
    with pytest.raises(ValueError, match=r"already holds a tournament.*overwrite=True"):
        Tournament("CartPole-v1", store=path, max_steps=1000)
    # a bad argument fails first, with the old tournament kept
    with pytest.raises(ValueError, match="pods"):
        Tournament("CartPole-v1", store=path, max_steps=1000, pods=0, overwrite=True)
    assert (path / "pods/p000/seg-00001.pt").exists()
    t = Tournament("CartPole-v1", store=path, max_steps=1000, seed=7, overwrite=True)
    assert t.spec.seed == 7 and "p000" not in set(t.leaderboard["pod"])
    assert not (path / "pods/p000/seg-00001.pt").exists()
    assert not (path / "lease.json").exists()  # the clearing's lease is released
    assert (path / "notes.txt").read_text() == "mine"


def test_a_store_that_a_running_tournament_writes_is_never_cleared(tmp_path):
    path = tmp_path / "s"
    s = _old_store(path)
    live = Lease(Store(path)).acquire()  # a live writer: this very process
    with live, pytest.raises(LeaseError, match="lease"):
        Tournament("CartPole-v1", store=path, max_steps=1000, overwrite=True)
    assert (path / "pods/p000/seg-00001.pt").read_bytes() == b"an old checkpoint"
    assert s.read_json("tournament.json") is not None
