import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
import torch

from elegantpod.pod.checkpoint import load_checkpoint, save_checkpoint
from elegantpod.tournament.store.files import StoreError
from elegantpod.tournament.store.snapshots import KEEP_SNAPSHOTS
from elegantpod.tournament.store.store import Store


def test_local_store_atomic_json_and_paths(tmp_path):
    s = Store(tmp_path / "t")
    s.ensure()
    s.write_json("leaderboard.json", [{"pod_id": "p000", "score": 1.5}])
    assert s.read_json("leaderboard.json") == [{"pod_id": "p000", "score": 1.5}]
    assert s.read_json("missing.json", default=[]) == []
    assert s.checkpoint("p001", 3).endswith("pods/p001/seg-00003.pt")
    with pytest.raises(ValueError):
        s.write_json("bad.json", {"x": float("nan")})  # never writes invalid JSON
    assert not (tmp_path / "t" / "bad.json").exists()
    leftovers = [p.name for p in (tmp_path / "t").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_unwritable_store_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="not writable"):
        Store(blocker / "sub").ensure()


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(ValueError, match="nosuchfs://x"):
        Store("nosuchfs://x/y")


def test_fsspec_url_store_and_checkpoints():
    s = Store("memory://elegantpod-test/store")
    s.ensure()
    s.write_json("tournament.json", {"env_id": "CartPole-v1"})
    assert json.loads(s.read_bytes("tournament.json"))["env_id"] == "CartPole-v1"
    url = s.checkpoint("p000", 1)
    assert url.startswith("memory://")
    save_checkpoint(url, {"w": torch.ones(2)})
    assert torch.equal(load_checkpoint(url)["w"], torch.ones(2))


def _state(n: int) -> dict:
    """A state whose parts agree with each other: a torn mix would be detectable."""
    return {
        "leaderboard": [{"pod_id": f"p{i:03d}", "n": n} for i in range(n % 7 + 1)],
        "pods": [{"pod_id": f"p{i:03d}", "n": n} for i in range(n % 5 + 1)],
        "state": {"n": n},
    }


def _consistent(state: dict) -> int:
    n = state["state"]["n"]
    assert state == _state(n)
    return n


@pytest.fixture(params=["local", "memory", "s3"])
def store_url(request, tmp_path):
    """The same store semantics on a local disk, fsspec memory and a real S3 server."""
    if request.param == "local":
        return str(tmp_path / "store")
    if request.param == "memory":
        return f"memory://elegantpod-test/{uuid.uuid4().hex}"
    request.getfixturevalue("s3")
    return f"s3://elegantpod-test/{uuid.uuid4().hex}"


def test_snapshots_pointer_and_pruning(store_url):
    s = Store(store_url)
    s.ensure()
    assert s.load_state() is None
    for n in range(1, 8):
        assert s.save_state(_state(n)) == n
    fresh = Store(store_url)  # a restarted client
    assert _consistent(fresh.load_state()) == 7
    assert fresh.read_json("leaderboard.json") == _state(7)["leaderboard"]
    kept = sorted(os.path.basename(p) for p in s.fs.ls(s._fs_path("state"), detail=False))
    assert kept == [f"{v:08d}.json" for v in range(7 - KEEP_SNAPSHOTS, 8)] + ["LATEST"]
    assert fresh.save_state(_state(8)) == 8  # continues the numbering


def test_torn_or_wrong_pointer_falls_back_to_newest_good_snapshot(store_url):
    s = Store(store_url)
    s.ensure()
    for n in range(1, 4):
        s.save_state(_state(n))
    s.write_bytes("state/LATEST", b'{"version": 3, "na')  # a pointer cut mid-write
    assert _consistent(Store(store_url).load_state()) == 3
    s.write_bytes("state/00000003.json", b'{"leaderboard": [{"pod_id": "p0')  # torn snapshot
    s.write_bytes("state/LATEST", b'{"version": 3, "name": "state/00000003.json", "sha256": "0"}')
    assert _consistent(Store(store_url).load_state()) == 2
    s.fs.rm(s._fs_path("state/00000002.json"))
    s.write_bytes("state/LATEST", b'{"version": 2, "name": "state/00000002.json", "sha256": "0"}')
    assert _consistent(Store(store_url).load_state()) == 1


def test_unpointed_partial_snapshot_is_ignored_and_never_overwritten(store_url):
    s = Store(store_url)
    s.ensure()
    for n in range(1, 4):
        s.save_state(_state(n))
    # a writer died after putting part of snapshot 4 and before moving the pointer
    s.write_bytes("state/00000004.json", b'{"leaderboard": [')
    resumed = Store(store_url)
    assert _consistent(resumed.load_state()) == 3
    assert resumed.save_state(_state(9)) == 5
    assert s.read_bytes("state/00000004.json") == b'{"leaderboard": ['
    assert _consistent(Store(store_url).load_state()) == 9


def test_bad_state_is_rejected_before_anything_is_written(store_url):
    s = Store(store_url)
    s.ensure()
    s.save_state(_state(1))
    with pytest.raises(ValueError):
        s.save_state({**_state(2), "state": {"n": float("nan")}})
    assert _consistent(Store(store_url).load_state()) == 1
    assert s.save_state(_state(2)) == 2


def test_no_readable_snapshot_is_a_clear_error(tmp_path):
    s = Store(tmp_path)
    s.ensure()
    s.write_bytes("state/00000001.json", b"garbage")
    with pytest.raises(StoreError, match="no readable snapshot"):
        s.load_state()


WRITER = textwrap.dedent(
    """
    import sys
    from tests.tournament.store.test_store import _state
    from elegantpod.tournament.store.store import Store

    s = Store(sys.argv[1])
    n = s.load_state()["state"]["n"] if s.load_state() else 0
    print("ready", flush=True)
    while True:
        n += 1
        big = _state(n)
        big["pods"] = big["pods"] * 400  # a few hundred kB per snapshot
        s.save_state(big)
    """
)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_writer_killed_mid_save_never_leaves_a_corrupt_state(kind, tmp_path, request):
    """SIGKILL a process that saves snapshots back to back, at random moments, 6 times."""
    if kind == "s3":
        request.getfixturevalue("s3")
        url = f"s3://elegantpod-test/{uuid.uuid4().hex}"
    else:
        url = str(tmp_path / "store")
    Store(url).ensure()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    rng = __import__("random").Random(0)
    last = 0
    for _ in range(6):
        p = subprocess.Popen(
            [sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, env=env, text=True
        )
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 1.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
        state = Store(url).load_state()
        n = state["state"]["n"]
        big = _state(n)
        big["pods"] = big["pods"] * 400
        assert state == big  # whole and self-consistent
        assert n >= last  # never goes back past what was already pointed to
        last = n
    assert last > 6
