import json

import pytest
import torch

from elegantpod.checkpoint import load_checkpoint, save_checkpoint
from elegantpod.tournament.store import Store


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


def test_fsspec_url_store_and_checkpoints():
    s = Store("memory://elegantpod-test/store")
    s.ensure()
    s.write_json("tournament.json", {"env_id": "CartPole-v1"})
    assert json.loads(s.read_bytes("tournament.json"))["env_id"] == "CartPole-v1"
    url = s.checkpoint("p000", 1)
    assert url.startswith("memory://")
    save_checkpoint(url, {"w": torch.ones(2)})
    assert torch.equal(load_checkpoint(url)["w"], torch.ones(2))
