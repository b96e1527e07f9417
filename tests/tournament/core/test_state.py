"""A store's state is untrusted input (issue 29, minor items): numbers of any size,
values of any length or depth, long histories and clocks that disagree with them each
give one clear StateError, fast, and never a raw OverflowError or RecursionError."""

import hashlib
import json

import pytest

from elegantpod.agents.ppo import PPOConfig
from elegantpod.tournament.core import field_checks
from elegantpod.tournament.core.field_checks import MAX_HISTORY, StateError
from elegantpod.tournament.core.hparam_checks import _checked_hparams
from elegantpod.tournament.store import state as stored_state
from elegantpod.tournament.store.files import StoreError
from elegantpod.tournament.store.store import Store

WHERE = "state/00000007.json"
HUGE = 10**400  # json.loads reads it; float() and math.isfinite() overflow
HUGER = 10**5000  # past Python's 4,300-digit limit of int -> str


def record(**kw):
    d = {"pod_id": "p000", "algo": "ppo", "hparams": {}, "seed": 1, "status": "idle"}
    d.update(kw)
    return d


def entry(**kw):
    d = {
        "pod_id": "p000",
        "algo": "ppo",
        "hparams": {},
        "score_mean": 1.0,
        "checkpoint": "pods/p000/seg-00001.pt",
    }
    d.update(kw)
    return d


def row(i, **kw):
    d = {"segment": i + 1, "env_steps": 1000 * (i + 1), "score": 1.0, "time": float(i)}
    d.update(kw)
    return d


def snapshot(pods=(), leaderboard=(), **counters):
    return {"pods": list(pods), "leaderboard": list(leaderboard), "state": counters}


def refused(raw, match):
    with pytest.raises(StateError, match=match) as info:
        stored_state.load(raw, WHERE)
    message = str(info.value)
    assert message.startswith(WHERE) and len(message) < 600, message
    return message


NUMBER_FIELDS = [
    (lambda v: snapshot([record(segment=v)]), r"pods\[0\] \(p000\)\.segment"),
    (lambda v: snapshot([record(env_steps=v)]), r"\.env_steps"),
    (lambda v: snapshot([record(wall_seconds=v)]), r"\.wall_seconds"),
    (lambda v: snapshot([record(score_mean=v)]), r"\.score_mean"),
    (lambda v: snapshot([record(steps_per_second=v)]), r"\.steps_per_second"),
    (lambda v: snapshot([record(retries=v)]), r"\.retries"),
    (lambda v: snapshot([record(seed=v)]), r"\.seed"),
    (lambda v: snapshot([record(recent_scores=[1.0, v])]), r"recent_scores\[1\]"),
    (lambda v: snapshot([record(history=[row(0, score=v)])]), r"history\[0\]\.score"),
    (lambda v: snapshot([record(history=[row(0, time=v)])]), r"history\[0\]\.time"),
    (lambda v: snapshot([record(hparams={"lr": v})]), r"hparams: lr"),
    (lambda v: snapshot([record(hparams={"epochs": v})]), r"hparams: epochs"),
    (lambda v: snapshot([record(hparams={"hidden": [64, v]})]), r"hparams: hidden"),
    (lambda v: snapshot([record(mutation={"lr": [0.1, v]})]), r"mutation\['lr'\]"),
    (lambda v: snapshot([], [entry(score_mean=v)]), r"leaderboard\[0\] \(p000\)\.score_mean"),
    (lambda v: snapshot([], [entry(score_std=v)]), r"\.score_std"),
    (lambda v: snapshot([], [entry(segment=v)]), r"leaderboard\[0\] \(p000\)\.segment"),
    (lambda v: snapshot(total_steps=v), r"state\.total_steps"),
    (lambda v: snapshot(elapsed_seconds=v), r"state\.elapsed_seconds"),
    (lambda v: snapshot(next_index=v), r"state\.next_index"),
]


@pytest.mark.parametrize("value", [HUGE, -HUGE, HUGER], ids=["e400", "-e400", "e5000"])
@pytest.mark.parametrize(("build", "field"), NUMBER_FIELDS, ids=[f for _, f in NUMBER_FIELDS])
def test_integers_of_hundreds_of_digits_are_a_state_error_naming_the_field(build, field, value):
    message = refused(build(value), field)
    assert "an integer of about" in message  # said, not printed (str() of it raises)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda v: snapshot([record(pod_id=v)]), r"pods\[0\]\.pod_id"),
        (lambda v: snapshot([record(algo=v)]), r"\.algo: unknown algorithm"),
        (lambda v: snapshot([record(status=v)]), r"\.status must be one of"),
        (lambda v: snapshot([record(parent=v)]), r"\.parent: pod id must match"),
        (lambda v: snapshot([record(latest_checkpoint=v)]), r"\.latest_checkpoint"),
        (lambda v: snapshot([record(hparams={"lr": v})]), r"hparams: lr must be a number"),
        (lambda v: snapshot([record(hparams={"hidden": [v]})]), r"hparams: hidden"),
        (lambda v: snapshot([record(mutation={v: [1, 2]})]), "is not a hyperparameter"),
        (lambda v: snapshot([record(mutation={"lr": [1, v]})]), r"mutation\['lr'\]"),
        (lambda v: snapshot([], [entry(checkpoint=v)]), r"\.checkpoint: checkpoint must be"),
        (lambda v: snapshot([], [entry(usable=v)]), r"\.usable must be true or false"),
        (lambda v: snapshot(solved=v), r"state\.solved must be true or false"),
    ],
)
def test_errors_repeat_at_most_a_few_hundred_characters_of_a_hostile_value(build, field):
    hostile = "<script>" + "A" * 100_000
    message = refused(build(hostile), field)
    assert "<script>" in message or "'<scr" in message  # the value is named...
    assert message.count("A") < 300  # ...not repeated whole


def test_mutation_values_are_scalars_or_flat_lists():
    deep = json.loads("[" * 600 + "]" * 600)  # what a store's JSON can hold
    refused(snapshot([record(mutation={"lr": [0.1, deep]})]), r"mutation\['lr'\].*flat list")
    refused(snapshot([record(mutation={"hidden": [[64], [[64]]]})]), "flat list")
    ok = snapshot([record(mutation={"hidden": [[64, 64], [128]], "lr": [0.1, 0.2]})])
    records, _, _ = stored_state.load(ok, WHERE)
    assert records["p000"].mutation == {"hidden": [[64, 64], [128]], "lr": [0.1, 0.2]}


def test_check_depth_walks_without_recursion():
    deep = json.loads("[" * 900 + "]" * 900)
    with pytest.raises(StateError, match="deeper than 32 levels"):
        field_checks.check_depth({"env_kwargs": {"x": deep}}, "tournament.json")
    assert field_checks.check_depth({"a": [[1, 2], {"b": [3]}]}, "x") == {"a": [[1, 2], {"b": [3]}]}


def write_pointed(s: Store, version: int, data: bytes) -> None:
    name = f"state/{version:08d}.json"
    s.write_bytes(name, data)
    pointer = {"version": version, "name": name, "sha256": hashlib.sha256(data).hexdigest()}
    s.write_bytes("state/LATEST", json.dumps(pointer).encode())


def test_a_verified_snapshot_too_deep_to_parse_is_an_error_not_an_older_one(tmp_path):
    s = Store(tmp_path / "s")
    s.ensure()
    s.save_state(snapshot(total_steps=5))  # an older, good snapshot
    deep = b'{"leaderboard": [], "pods": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    write_pointed(s, 99, deep)
    with pytest.raises(StoreError, match=r"00000099\.json.*checksum.*not readable JSON"):
        s.load_state()
    # a torn snapshot (checksum wrong) still falls back to the newest good one
    s.write_bytes("state/LATEST", b'{"version": 99, "name": "state/00000099.json", "sha256": "0"}')
    assert s.load_state()["state"]["total_steps"] == 5


def test_a_long_history_loads_fast_and_keeps_the_newest_rows():
    hp = [dict(vars(PPOConfig()), lr=lr, hidden=[64, 64]) for lr in (1e-3, 2e-3, 3e-3)]
    rows = [row(i, hparams=hp[i % 3]) for i in range(MAX_HISTORY + 500)]
    raw = snapshot([record(history=rows)], elapsed_seconds=float(len(rows)))
    assert len(json.dumps(raw)) > 3_500_000  # 3.8 MB: half a minute before the fix
    _checked_hparams.cache_clear()
    records, _, _ = stored_state.load(raw, WHERE)
    checks = _checked_hparams.cache_info()  # each distinct hparams dict checked once
    assert checks.misses <= 4 and checks.hits >= MAX_HISTORY - 4, checks
    history = records["p000"].history
    assert len(history) == MAX_HISTORY and history[0]["segment"] == 501
    assert history[-1]["hparams"]["lr"] == hp[(MAX_HISTORY + 499) % 3]["lr"]
    history[-1]["hparams"]["lr"] = 9.0  # a copy: the next load is not changed by an edit
    again, _, _ = stored_state.load(raw, WHERE)
    assert again["p000"].history[-1]["hparams"]["lr"] != 9.0


def test_a_clock_behind_the_history_is_refused():
    rows = [row(0, time=10.0), row(1, time=250.5)]
    refused(
        snapshot([record(history=rows)], elapsed_seconds=100.0),
        r"elapsed_seconds \(100\) is behind the history it saved \(a segment at 250.5 s\)",
    )
    _, _, counters = stored_state.load(
        snapshot([record(history=rows)], elapsed_seconds=250.5), WHERE
    )
    assert counters["elapsed_seconds"] == 250.5
