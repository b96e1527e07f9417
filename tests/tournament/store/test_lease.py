"""One writer per store: the lease on a local directory and on a real S3 server (moto)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from elegantpod.tournament.store.lease import MALFORMED, NAME, Lease, LeaseError, LeaseLost, parse
from elegantpod.tournament.store.store import Store

ROOT = Path(__file__).resolve().parents[3]
SETTLE = 0.05  # enough on a local disk and a loopback S3; the race test uses the default


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return Store(tmp_path / "store")
    request.getfixturevalue("s3")
    return Store(f"s3://elegantpod-test/lease-{uuid.uuid4().hex}")


def _lease(store: Store, owner: str) -> Lease:
    return Lease(store, owner=owner, settle_seconds=SETTLE)


def _foreign(store: Store, *, owner="bob@other pid 7", age=0.0, token="ab" * 16) -> None:
    """Another writer's lease, written as that writer would."""
    now = time.time() - age
    store.write_json(NAME, {"owner": owner, "token": token, "heartbeat": now, "acquired": now})


def test_second_writer_is_refused_with_owner_and_age(store):
    first = _lease(store, "alice@box pid 123").acquire()
    assert first.is_held and store.read_json(NAME)["owner"] == "alice@box pid 123"
    second = _lease(store, "carol@box pid 456")
    with pytest.raises(LeaseError, match=r"held by alice@box pid 123, heartbeat \d+ s ago") as e:
        second.acquire()
    assert isinstance(e.value, ValueError)
    assert "force=True" in str(e.value) and "--force" in str(e.value)
    assert "looks alive" in str(e.value)
    assert not second.is_held
    first.check()  # the refused writer wrote nothing
    first.heartbeat()


def test_force_takes_over_and_the_first_writer_loses(store):
    first = _lease(store, "alice@box pid 123").acquire()
    second = _lease(store, "carol@box pid 456").acquire(force=True)
    with pytest.raises(LeaseLost, match="carol@box pid 456.*stop writing"):
        first.heartbeat()
    assert store.read_json(NAME)["token"] == second.token  # the loser's heartbeat wrote nothing
    with pytest.raises(LeaseError, match="not acquired"):
        first.check()
    assert first.release() is False  # never deletes the new owner's lease
    assert store.read_json(NAME)["token"] == second.token
    second.check()
    assert second.release() is True
    assert store.read_json(NAME) is None


def test_check_raises_lease_lost_before_a_save(store):
    first = _lease(store, "alice@box pid 123").acquire()
    _foreign(store)
    with pytest.raises(LeaseLost, match="bob@other pid 7"):
        first.check()


def test_stale_lease_is_refused_without_force_and_taken_with_it(store):
    _foreign(store, age=3600)
    with pytest.raises(LeaseError, match=r"held by bob@other pid 7, heartbeat 3600 s ago") as e:
        _lease(store, "alice@box pid 123").acquire()
    assert "stale" in str(e.value) and "force=True" in str(e.value)
    taker = _lease(store, "alice@box pid 123").acquire(force=True)
    assert store.read_json(NAME)["token"] == taker.token
    # a custom threshold changes only the wording, never whether it is taken
    _foreign(store, age=5)
    with pytest.raises(LeaseError, match="stale"):
        Lease(store, stale_seconds=1, settle_seconds=SETTLE).acquire()


def test_release_deletes_only_our_own(store):
    with _lease(store, "alice@box pid 123") as lease:
        assert lease.is_held and store.read_json(NAME)["token"] == lease.token
    assert store.read_json(NAME) is None
    lease = _lease(store, "alice@box pid 123").acquire()
    _foreign(store)  # taken over behind our back
    assert lease.release() is False
    assert store.read_json(NAME)["owner"] == "bob@other pid 7"


def test_heartbeat_moves_forward_and_keeps_acquired(store):
    lease = _lease(store, "alice@box pid 123").acquire()
    before = store.read_json(NAME)
    time.sleep(0.02)
    lease.heartbeat()
    after = store.read_json(NAME)
    assert after["heartbeat"] > before["heartbeat"]
    assert after["acquired"] == before["acquired"]
    lease.renew()  # just heartbeated: a check, no write
    assert store.read_json(NAME) == after
    assert lease.acquire() is lease  # our own lease: re-acquired without force


def test_a_write_landing_during_the_settle_interval_wins(store):
    lease = Lease(store, owner="alice@box pid 123", settle_seconds=1.0)

    def competitor():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with_ours = store.read_json(NAME)
            if with_ours and with_ours["token"] == lease.token:
                _foreign(store)  # last writer wins
                return
            time.sleep(0.01)

    thread = threading.Thread(target=competitor)
    thread.start()
    with pytest.raises(LeaseError, match=r"\(bob@other pid 7 when this one looked\)"):
        lease.acquire()
    thread.join()
    assert not lease.is_held
    assert store.read_json(NAME)["owner"] == "bob@other pid 7"


MALFORMED_LEASES = {
    "not json": b"{not json",
    "a list": b"[1, 2]",
    "no token": json.dumps({"owner": "x", "heartbeat": 1.0, "acquired": 1.0}).encode(),
    "token not hex": json.dumps(
        {"owner": "x", "token": "../../etc/passwd", "heartbeat": 1.0, "acquired": 1.0}
    ).encode(),
    "owner too long": json.dumps(
        {"owner": "x" * 201, "token": "ab" * 16, "heartbeat": 1.0, "acquired": 1.0}
    ).encode(),
    "owner with a newline": json.dumps(
        {"owner": "x\nLeaseError: fake", "token": "ab" * 16, "heartbeat": 1.0, "acquired": 1.0}
    ).encode(),
    "heartbeat NaN": b'{"owner": "x", "token": "abababababababab", "heartbeat": NaN, '
    b'"acquired": 1.0}',
    "heartbeat huge int": b'{"owner": "x", "token": "abababababababab", "heartbeat": 1'
    + b"0" * 400
    + b', "acquired": 1.0}',
    "heartbeat a string": json.dumps(
        {"owner": "x", "token": "ab" * 16, "heartbeat": "now", "acquired": 1.0}
    ).encode(),
    "too large": json.dumps(
        {"owner": "x", "token": "ab" * 16, "heartbeat": 1.0, "acquired": 1.0, "pad": "y" * 5000}
    ).encode(),
}


@pytest.mark.parametrize("data", MALFORMED_LEASES.values(), ids=MALFORMED_LEASES.keys())
def test_malformed_lease_parses_as_unknown(data):
    assert parse(data) == {"owner": MALFORMED, "token": None, "heartbeat": None, "acquired": None}


def test_valid_lease_parses():
    now = time.time()
    record = {"owner": "alice@box pid 1", "token": "0f" * 16, "heartbeat": now, "acquired": 3}
    assert parse(json.dumps(record).encode()) == record


def test_malformed_lease_is_refused_without_force_and_replaced_with_it(store):
    store.write_bytes(NAME, MALFORMED_LEASES["token not hex"])
    refused = r"held by unknown \(malformed lease.json\), heartbeat age unknown"
    with pytest.raises(LeaseError, match=refused):
        _lease(store, "alice@box pid 123").acquire()
    lease = _lease(store, "alice@box pid 123").acquire(force=True)
    assert store.read_json(NAME)["token"] == lease.token
    store.write_bytes(NAME, b"garbage")
    with pytest.raises(LeaseLost, match="malformed"):
        lease.check()


def test_owner_is_validated():
    with pytest.raises(ValueError, match="printable"):
        Lease(Store("memory://elegantpod-test/x"), owner="a\nb")
    lease = Lease(Store("memory://elegantpod-test/x"))
    assert " pid " in lease.owner and "@" in lease.owner


CONTENDER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from elegantpod.tournament.store.lease import Lease, LeaseError
    from elegantpod.tournament.store.store import Store

    store, go = Store(sys.argv[1]), Path(sys.argv[2])
    lease = Lease(store)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    try:
        lease.acquire()
        print("won", lease.owner, flush=True)
    except LeaseError as exc:
        print("lost", exc, flush=True)
    """
)


def test_processes_racing_to_acquire_have_exactly_one_winner(tmp_path):
    store, go = tmp_path / "store", tmp_path / "go"
    Store(store).ensure()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, str(store), str(go)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        go.touch()  # all three acquire at the same moment
        outputs = [p.communicate(timeout=30)[0].strip() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    winners = [o for o in outputs if o.startswith("won")]
    assert len(winners) == 1, outputs
    owner = winners[0].removeprefix("won ")
    assert Store(store).read_json(NAME)["owner"] == owner
    # a loser names a contender it saw holding the lease: the winner, or (on a loaded
    # machine, where a late writer can overwrite an earlier one) another loser
    contenders = [f"pid {p.pid}" for p in procs]
    for loser in (o for o in outputs if not o.startswith("won")):
        assert loser.startswith("lost") and any(c in loser for c in contenders), outputs


def test_a_lease_whose_local_writer_is_gone_is_taken_without_force(tmp_path):
    """After a double Ctrl-C (or a kill) the printed resume command must work: a lease
    held by a process of this machine that no longer runs is taken; one held by a live
    process, or by another machine, is still refused."""
    import socket

    store = Store(tmp_path / "s")
    store.ensure()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    _foreign(store, owner=f"alice@{host} pid {gone.pid}")
    lease = _lease(store, "bob")
    assert lease.acquire() is lease and lease.is_held
    lease.release()
    for owner in (f"alice@{host} pid {os.getpid()}", f"alice@elsewhere pid {gone.pid}"):
        _foreign(store, owner=owner)
        with pytest.raises(LeaseError, match="is held by alice@"):
            _lease(store, "bob").acquire()
