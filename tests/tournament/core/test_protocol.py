"""The tournament's protocol (issue 33): statuses, control messages, events and outcome
kinds are typed values that equal the plain strings stores and DataFrames hold, and
refuse what they do not know."""

from __future__ import annotations

import json
import pickle
from collections import Counter

import pytest

from elegantpod.tournament.client.runner import Outcome, control_message
from elegantpod.tournament.core import views
from elegantpod.tournament.core.population import Population
from elegantpod.tournament.core.protocol import (
    ACTIVE,
    RESUMABLE,
    SCHEDULED,
    ControlMessage,
    EventKind,
    OutcomeKind,
    PodStatus,
    SegmentEnd,
    TournamentStatus,
    event,
)
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store import state as stored_state
from elegantpod.tournament.store.store import needed_checkpoints


def test_pod_statuses_are_the_strings_a_store_holds():
    assert [s.value for s in PodStatus] == [
        "queued",
        "running",
        "paused",
        "idle",
        "stopped",
        "replaced",
        "failed",
    ]
    assert tuple(s.value for s in PodStatus) == stored_state.STATUSES
    for s in PodStatus:
        plain = s.value
        assert s == plain and hash(s) == hash(plain)
        assert str(s) == plain and f"{s}" == plain and f"{s:>10}" == f"{plain:>10}"
        assert json.dumps({"status": s}) == json.dumps({"status": plain})
        assert {plain: 1}[s] == 1 and PodStatus(plain) is s
        assert pickle.loads(pickle.dumps(s)) is s  # a SegmentFailure's kind crosses processes
    assert Counter(["failed", PodStatus.FAILED])[PodStatus.FAILED] == 2


def test_the_live_sets():
    assert {"queued", "running"} == SCHEDULED
    assert {"queued", "running", "paused"} == ACTIVE
    assert {"queued", "running", "paused", "idle", "stopped"} == RESUMABLE
    assert all(s in PodStatus for s in RESUMABLE)


def test_tournament_statuses_and_kinds_are_their_strings():
    assert {s.value for s in TournamentStatus} == {
        "created",
        "running",
        "finished",
        "stopped",
        "failed",
    }
    assert {k.value for k in EventKind} == {"progress", "status", "segment_end"}
    assert {k.value for k in SegmentEnd} == {"finished", "stopped"}
    assert {k.value for k in OutcomeKind} == {
        "result",
        "killed",
        "error",
        "unsubmitted",
        "lost",
        "store",
        "fenced",
    }


def test_a_record_saves_plain_strings_and_reads_back_members():
    rec = PodRecord(pod_id="p000", algo="ppo", hparams={}, seed=0, status=PodStatus.PAUSED)
    d = rec.to_dict()
    assert type(d["status"]) is str and d["status"] == "paused"
    back = stored_state.record(json.loads(json.dumps(d)), "state")
    assert back.status is PodStatus.PAUSED
    assert back.status == "paused"  # what a user compares with


def test_views_hold_plain_strings_equal_to_the_members():
    p = Population(TournamentSpec(env_id="CartPole-v1", pods=2))
    p.fill()
    p.pause("p001")
    frame = views.pods_frame(p)
    assert list(frame["status"]) == [PodStatus.QUEUED, PodStatus.PAUSED]
    assert all(type(s) is str for s in frame["status"])
    assert [e["status"] for e in views.lineage(p)] == ["queued", "paused"]
    assert views.summary(p, str)["pods_alive"] == 2
    snapshot = p.to_state()
    assert [d["status"] for d in snapshot["pods"]] == ["queued", "paused"]
    assert needed_checkpoints(snapshot) == (set(), {"p000": 0, "p001": 0})


def test_a_control_message_round_trips_through_plain_data():
    msg = ControlMessage(state="paused", hparams={"lr": 1e-3}, tournament="running", version=4)
    assert msg.state is PodStatus.PAUSED and msg.tournament is TournamentStatus.RUNNING
    d = msg.to_dict()
    assert d == {"state": "paused", "hparams": {"lr": 1e-3}, "tournament": "running", "version": 4}
    assert all(type(d[k]) is str for k in ("state", "tournament"))
    assert type(d["version"]) is int and type(d["hparams"]) is dict
    assert ControlMessage.from_dict(json.loads(json.dumps(d))) == msg
    assert ControlMessage.from_dict(pickle.loads(pickle.dumps(d))) == msg
    assert msg.is_paused and not msg.stops


def test_a_control_message_from_a_partial_dict_takes_the_defaults():
    msg = ControlMessage.from_dict({"state": "stopped", "version": 2})
    assert msg == ControlMessage(state=PodStatus.STOPPED, version=2)
    assert msg.stops and msg.hparams == {} and msg.tournament is TournamentStatus.RUNNING
    assert ControlMessage.from_dict({"tournament": "stopped"}).stops
    assert not ControlMessage.from_dict({}).stops
    assert ControlMessage.from_dict({}).version == -1


def test_the_runner_builds_the_message_a_segment_reads():
    rec = PodRecord(pod_id="p000", algo="ppo", hparams={"lr": 1e-3, "hidden": [8]}, seed=0)
    msg = control_message(rec, tournament_stopping=False)
    assert msg == ControlMessage(state="running", hparams={"lr": 1e-3}, tournament="running")
    rec.status = PodStatus.PAUSED
    assert control_message(rec, False).state is PodStatus.PAUSED
    rec.stop_requested = True
    assert control_message(rec, False).state is PodStatus.STOPPED
    assert control_message(rec, True).tournament is TournamentStatus.STOPPED


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"state": "dance"}, r"state must be one of 'running', 'paused', 'stopped', got 'dance'"),
        ({"state": "idle"}, r"state must be one of 'running', 'paused', 'stopped', got 'idle'"),
        ({"state": 1}, r"state must be one of .*, got 1"),
        ({"tournament": "finished"}, r"tournament must be one of 'running', 'stopped'"),
        ({"hparams": [1]}, r"hparams must be a dict, got \[1\]"),
        ({"version": True}, r"version must be an integer, got True"),
        ({"version": "3"}, r"version must be an integer, got '3'"),
        ({"state": "running", "stop": True}, r"unknown key\(s\) \['stop'\]; keys: hparams, state"),
        (["stopped"], r"a control message must be a dict, got \['stopped'\]"),
    ],
)
def test_a_control_message_of_another_shape_is_refused_clearly(raw, match):
    with pytest.raises(ValueError, match=match):
        ControlMessage.from_dict(raw)


def test_an_unknown_kind_is_refused_clearly():
    with pytest.raises(ValueError, match=r"unknown PodStatus 'dance'; one of 'queued', 'running'"):
        PodStatus("dance")
    with pytest.raises(ValueError, match=r"unknown TournamentStatus 'done'; one of 'created'"):
        TournamentStatus("done")
    with pytest.raises(ValueError, match=r"unknown EventKind 'progres'; one of 'progress'"):
        event("progres", PodStatus.RUNNING)
    with pytest.raises(ValueError, match=r"unknown OutcomeKind 'exploded'; one of 'result'"):
        Outcome("p000", "exploded")
    with pytest.raises(ValueError, match=r"unknown PodStatus \[1, 2\]"):
        PodStatus([1, 2])  # unhashable: refused, not a TypeError


def test_an_outcome_kind_is_a_member():
    o = Outcome("p000", "fenced", error="lease lost")
    assert o.kind is OutcomeKind.FENCED and o.kind == "fenced"


def test_an_event_is_plain_data():
    e = event(EventKind.SEGMENT_END, SegmentEnd.STOPPED, env_steps=10, eval_return=1.5)
    assert e == {"type": "segment_end", "status": "stopped", "env_steps": 10, "eval_return": 1.5}
    assert type(e["type"]) is str and type(e["status"]) is str
    assert list(e) == ["type", "status", "env_steps", "eval_return"]


def test_a_tournament_reports_its_status_typed_and_its_summary_as_plain_data(tmp_path):
    from elegantpod.tournament.orchestrator import Tournament

    t = Tournament(env="CartPole-v1", pods=2, store=tmp_path / "s")
    assert t.status is TournamentStatus.CREATED and t.status == "created"
    s = t.summary()
    assert type(s["status"]) is str and s["status"] == "created"
    assert json.loads(json.dumps(s))["status"] == "created"
