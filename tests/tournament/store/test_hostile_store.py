"""A store written by someone else is untrusted input: each field is checked on resume.

Each case here reproduces a hole an adversarial review found (path traversal through a pod
id, absolute checkpoint paths, a URL as a checkpoint, hostile budgets, malformed state):
before the checks, ``Tournament.resume`` accepted it.
"""

import json
import os
import time

import pytest

from elegantpod import Tournament
from elegantpod.tournament.core.field_checks import StateError
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store.files import StoreError
from elegantpod.tournament.store.store import Store


def record(pod_id="p000", **kw):
    d = {"pod_id": pod_id, "algo": "ppo", "hparams": {}, "seed": 1, "status": "idle"}
    d.update(kw)
    return d


def entry(pod_id="p000", **kw):
    d = {
        "pod_id": pod_id,
        "algo": "ppo",
        "hparams": {},
        "score_mean": 100.0,
        "score_std": 1.0,
        "env_steps": 2048,
        "wall_seconds": 1.0,
        "checkpoint": f"pods/{pod_id}/seg-00001.pt",
        "segment": 1,
    }
    d.update(kw)
    return d


def make_store(path, pods=None, leaderboard=None, state=None, spec=None):
    s = Store(path)
    s.ensure()
    s.write_json("tournament.json", spec or TournamentSpec(env_id="CartPole-v1").to_dict())
    s.save_state(
        {
            "pods": [record()] if pods is None else pods,
            "leaderboard": [] if leaderboard is None else leaderboard,
            "state": {"total_steps": 0, "elapsed_seconds": 1.0} if state is None else state,
        }
    )
    return s


def test_a_clean_store_resumes(tmp_path):
    make_store(tmp_path / "s", leaderboard=[entry()])
    t = Tournament.resume(tmp_path / "s")
    assert list(t.pods["pod_id"]) == ["p000"]
    assert t.summary()["best_checkpoint"] == str(tmp_path / "s" / "pods/p000/seg-00001.pt")


@pytest.mark.parametrize(
    "pod_id", ["../../ESCAPED", "p000/../../x", "/etc", "", "p1", "P000", 7, None]
)
def test_pod_ids_must_match_the_strict_pattern(tmp_path, pod_id):
    make_store(tmp_path / "s", pods=[record(pod_id)])
    with pytest.raises(StateError, match=r"pods\[0\].pod_id: pod id must match"):
        Tournament.resume(tmp_path / "s")
    assert not (tmp_path / "ESCAPED").exists()


@pytest.mark.parametrize(
    "checkpoint",
    [
        "../../outside/seg-00001.pt",
        "pods/p000/../../../x.pt",
        "http://127.0.0.1:9/evil.pt",
        "s3://someone-else/pods/p000/x.pt",
        "pods/p000/seg-1.pt",
        ["pods/p000/seg-00001.pt"],
    ],
)
def test_checkpoints_cannot_point_outside_the_store(tmp_path, checkpoint):
    make_store(tmp_path / "s", leaderboard=[entry(checkpoint=checkpoint)])
    with pytest.raises(StateError, match=r"leaderboard\[0\] \(p000\).checkpoint"):
        Tournament.resume(tmp_path / "s")
    make_store(tmp_path / "r", pods=[record(latest_checkpoint=checkpoint, segment=1)])
    with pytest.raises(StateError, match=r"latest_checkpoint"):
        Tournament.resume(tmp_path / "r")


def test_a_moved_store_reads_its_own_checkpoints(tmp_path):
    # An older version wrote absolute paths: after a move they name the old place.
    old = tmp_path / "old"
    make_store(
        old,
        pods=[record(latest_checkpoint=str(old / "pods/p000/seg-00002.pt"), segment=2)],
        leaderboard=[entry(checkpoint=str(old / "pods/p000/seg-00002.pt"))],
    )
    os.rename(old, tmp_path / "new")
    t = Tournament.resume(tmp_path / "new")
    assert t.summary()["best_checkpoint"] == str(tmp_path / "new/pods/p000/seg-00002.pt")
    assert t.leaderboard["checkpoint"][0] == str(tmp_path / "new/pods/p000/seg-00002.pt")
    assert t.pod("p000")["latest_checkpoint"] == "pods/p000/seg-00002.pt"


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"elapsed_seconds": -1e9}, r"elapsed_seconds must be in \[0"),
        ({"elapsed_seconds": "1"}, "elapsed_seconds must be a finite number"),
        ({"total_steps": -5}, r"total_steps must be in \[0"),
        ({"total_steps": 1.5}, "total_steps must be an integer"),
        ({"next_index": 10**12}, r"next_index must be in \[0"),
        ({"solved": "yes"}, "solved must be true or false"),
        ([1, 2], "state must be an object"),
    ],
)
def test_hostile_counters_are_refused(tmp_path, state, match):
    make_store(tmp_path / "s", state=state)
    with pytest.raises(StateError, match=match):
        Tournament.resume(tmp_path / "s")


@pytest.mark.parametrize(
    ("pods", "leaderboard", "match"),
    [
        ([{"algo": "ppo"}], [], r"pods\[0\] has no pod_id"),
        ("p000", [], "pods must be a list"),
        ([record(), record()], [], "appears twice"),
        ([record(status="hacked")], [], "status must be one of"),
        ([record(algo="evil")], [], "unknown algorithm"),
        ([record(hparams={"epochs": 10**9})], [], r"hparams"),
        ([record(hparams={"lr": 1e308})], [], r"hparams"),
        ([record(hparams=[1])], [], "hparams must be a dict"),
        ([record(mutation={"<img src=x onerror=alert(1)>": [1, 2]})], [], "not a hyperparameter"),
        ([record(mutation={"lr": "x"})], [], r"must be \[old, new\]"),
        ([record(parent="../p001")], [], "parent: pod id must match"),
        ([record(segment=-1)], [], r"segment must be in \[0"),
        ([], [{"pod_id": "p000", "algo": "ppo"}], "has no checkpoint"),
        ([], [entry(score_mean="1e9")], "score_mean must be a finite number"),
        ([], [entry(score_mean=None)], "score_mean must be a finite number"),
        ([], "x", "leaderboard must be a list"),
    ],
)
def test_malformed_records_and_entries_are_one_clear_error(tmp_path, pods, leaderboard, match):
    make_store(tmp_path / "s", pods=pods, leaderboard=leaderboard)
    with pytest.raises(StateError, match=match) as info:
        Tournament.resume(tmp_path / "s")
    assert "state/00000001.json" in str(info.value)  # names the file


def test_a_broken_spec_names_the_file(tmp_path):
    make_store(tmp_path / "s", spec={"env_id": "CartPole-v1", "evil": 1})
    with pytest.raises(StoreError, match="tournament.json.*not a tournament spec"):
        Tournament.resume(tmp_path / "s")
    make_store(tmp_path / "r", spec=["CartPole-v1"])
    with pytest.raises(StoreError, match="tournament.json.*must be an object"):
        Tournament.resume(tmp_path / "r")


def test_a_pointer_cannot_name_a_file_outside_the_state_folder(tmp_path):
    s = make_store(tmp_path / "s")
    (tmp_path / "outside.json").write_text(json.dumps({"leaderboard": [], "pods": []}))
    s.write_bytes("state/LATEST", json.dumps({"name": "../../outside.json", "sha256": ""}).encode())
    s.load_state()
    assert s.loaded_from == s.path("state", "00000001.json")  # fell back to its own snapshot


def test_orphan_temporary_files_are_cleaned_and_fresh_ones_kept(tmp_path):
    s = make_store(tmp_path / "s")
    old = [
        tmp_path / "s/pods/p000/.seg-00002.pt.abc.tmp",
        tmp_path / "s/state/.00000002.json.def.tmp",
    ]
    fresh = tmp_path / "s/pods/p001/.seg-00001.pt.ghi.tmp"
    for p in [*old, fresh]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a checkpoint")
    past = time.time() - 3600
    for p in old:
        os.utime(p, (past, past))
    assert sorted(s.clean_orphans()) == sorted(str(p) for p in old)
    assert not any(p.exists() for p in old) and fresh.exists()
    keep = tmp_path / "s/pods/p000/seg-00001.pt"
    keep.write_bytes(b"x")
    os.utime(keep, (past, past))
    s.clean_orphans()
    assert keep.exists()  # only temporary files go


def test_pod_folders_that_are_not_pod_ids_are_ignored(tmp_path):
    s = make_store(tmp_path / "s")
    for name in ("p000", "p012", "..evil", "notes"):
        (tmp_path / "s/pods" / name).mkdir(parents=True, exist_ok=True)
    assert s.pod_ids() == ["p000", "p012"]


def test_data_a_store_names_is_not_read_unless_the_user_gives_it(tmp_path):
    spec = TournamentSpec(
        env_id="StockTrading-v0",
        env_kwargs={"data": "http://127.0.0.1:9/prices.csv", "tickers": ["AAPL"]},
    ).to_dict()
    make_store(tmp_path / "s", spec=spec)
    with pytest.raises(StoreError, match=r"names data to read in env_kwargs.*http://127.0.0.1:9"):
        Tournament.resume(tmp_path / "s")


def orphan_child_store(path, **spec):
    """A store whose one live pod is the child of a parent whose checkpoint was never
    written (``spec``: TournamentSpec fields, e.g. ``pods``, ``failed_replacements``)."""
    return make_store(
        path,
        pods=[
            record(
                "p001", status="queued", parent="p000", parent_checkpoint="pods/p000/seg-00001.pt"
            )
        ],
        leaderboard=[entry("p000")],
        state={"next_index": 2},
        spec=TournamentSpec(env_id="CartPole-v1", **spec).to_dict(),
    )


@pytest.mark.parametrize("device", ["meta", "cuda:99", "cuda:300", "xla", "cpu:999"])
def test_a_store_naming_a_device_no_pod_runs_on_is_refused_on_the_client(tmp_path, device):
    spec = TournamentSpec(env_id="CartPole-v1").to_dict()
    make_store(tmp_path / "s", spec={**spec, "device": device})
    with pytest.raises(ValueError, match=f"unknown device '{device}'"):
        Tournament.resume(tmp_path / "s")


@pytest.mark.parametrize(
    ("spec", "pods", "leaderboard", "match"),
    [
        (  # a batch larger than the replay it is drawn from
            {"env_id": "Pendulum-v1", "algos": ["sac"]},
            [record(algo="sac", hparams={"buffer_size": 100})],
            [],
            r"pods\[0\] \(p000\)\.hparams: batch_size=256 must be at most buffer_size=100",
        ),
        (  # four fused learners, two sub-envs
            {"env_id": "CartPole-v1", "learners": 4},
            [record(hparams={"num_envs": 2})],
            [],
            r"pod p000: 4 fused learners need num_envs >= 4 .* num_envs=2",
        ),
        (  # a parent a child would copy
            {"env_id": "CartPole-v1", "learners": 4},
            [],
            [entry(hparams={"num_envs": 2})],
            r"leaderboard entry p000: 4 fused learners need num_envs >= 4",
        ),
        (  # 64 layers of 65,536 units: each size in range, petabytes together
            {"env_id": "CartPole-v1", "device": "cpu"},
            [record(hparams={"hidden": [65_536] * 64})],
            [],
            r"pod p000: this ppo pod would need about [\d,.]+ GiB of memory",
        ),
    ],
)
def test_a_stored_pod_whose_sizes_cannot_go_together_is_refused_on_resume(
    tmp_path, spec, pods, leaderboard, match
):
    """Issue 56: a store's hyperparameters, each in range, that no worker could run
    together (with the tournament's fused learners and device) fail the resume, naming
    the file, the pod and the values, before any cluster work; they passed before and
    failed on the workers."""
    full = TournamentSpec(**{**spec, "algos": tuple(spec.get("algos", ("ppo",)))}).to_dict()
    make_store(tmp_path / "s", pods=pods, leaderboard=leaderboard, spec=full)
    with pytest.raises(ValueError, match=match) as info:
        Tournament.resume(tmp_path / "s")
    assert "state/00000001.json" in str(info.value)  # names the file
    assert not (tmp_path / "s" / "lease.json").exists()  # nothing taken over
