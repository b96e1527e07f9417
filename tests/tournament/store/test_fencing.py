"""Two writers, one store: a writer whose lease was taken writes nothing more, nothing it
left behind is adopted, and a store's checkpoints must say they are what the record says.

Each case reproduces what an adversarial round found: after ``--resume --force`` the first
writer's worker still wrote two checkpoints and the new writer's segments adopted them
without training; a writer waiting at its end wrote no heartbeat; ``best()`` returned a
Pendulum SAC checkpoint swapped into a CartPole PPO store.
"""

import threading
import time

import pytest

from elegantpod import Tournament
from elegantpod.agents.ppo import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from elegantpod.pod.pod import Pod
from elegantpod.tournament.store.lease import Lease, LeaseLost
from elegantpod.tournament.store.store import Store
from elegantpod.tournament.worker.segment import SegmentFailure, SegmentTask, run_segment
from tests.tournament.store.test_hostile_store import entry, make_store, record

SPEC = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=PPOConfig(num_envs=8, horizon=32), seed=3)
UID = "0123456789abcdef0123456789abcdef"


def lease(store, **kw):
    return Lease(store, settle_seconds=0.0, **kw)


def task(store, seg, writer, resume_from=None, uid=UID, pod_id="p000", run="t"):
    return SegmentTask(
        tournament_id=run,
        pod_id=pod_id,
        segment=seg,
        spec_json=SPEC.to_json(),
        checkpoint=store.checkpoint(pod_id, seg),
        resume_from=resume_from,
        segment_steps=512,
        tournament_uid=uid,
        store=store.url,
        writer=writer.token,
    )


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s")
    s.ensure()
    return s


def test_a_writer_whose_lease_was_taken_writes_no_checkpoint(store, tmp_path):
    first = lease(store).acquire()
    lease(store).acquire(force=True)  # `--resume --force` elsewhere
    out = run_segment(task(store, 1, first))
    assert isinstance(out, SegmentFailure) and out.kind == "fenced"
    assert "lease lost, now held by" in out.error
    assert not (tmp_path / "s/pods/p000/seg-00001.pt").exists()


def test_a_checkpoint_another_writer_left_is_trained_over_not_adopted(store):
    first = lease(store).acquire()
    done = run_segment(task(store, 1, first))
    assert done.env_steps_delta == 512
    assert load_checkpoint(done.checkpoint)["origin"]["writer"] == first.token
    second = lease(store).acquire(force=True)
    # The old writer's seg-00001 sits where the new writer's segment 1 goes.
    again = run_segment(task(store, 1, second))
    assert again.env_steps_delta == 512  # trained, not adopted
    assert load_checkpoint(again.checkpoint)["origin"]["writer"] == second.token
    # A re-run of the new writer's own segment still reuses it (idempotent).
    assert run_segment(task(store, 1, second)).env_steps_delta == 0


def test_a_segment_refuses_to_resume_from_another_tournaments_checkpoint(store):
    writer = lease(store).acquire()
    # (run=: another tournament's run, so no pod of it is resident in this one's key)
    other = run_segment(task(store, 1, writer, uid="f" * 32, run="other"))
    with pytest.raises(CheckpointError, match="written by tournament 'f{32}'"):
        run_segment(task(store, 2, writer, resume_from=other.checkpoint))
    swapped = run_segment(task(store, 1, writer, pod_id="p001", run="other"))
    with pytest.raises(CheckpointError, match="written by pod 'p001', not by 'p000'"):
        run_segment(task(store, 2, writer, resume_from=swapped.checkpoint))


def test_the_heartbeat_runs_in_the_background_until_release(store):
    held = lease(store).acquire()
    held.keep_alive(every=0.05)
    before = store.read_json("lease.json")["heartbeat"]
    time.sleep(0.4)  # the writer is busy elsewhere (waiting for a stopped worker)
    assert store.read_json("lease.json")["heartbeat"] > before
    assert held.release()
    time.sleep(0.2)
    assert not store.exists("lease.json")  # no beat lands after the release


def test_the_background_heartbeat_reports_a_takeover(store):
    held = lease(store).acquire()
    held.keep_alive(every=0.05)
    lease(store).acquire(force=True)
    deadline = time.monotonic() + 5
    while held.lost is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert isinstance(held.lost, LeaseLost)
    assert not held.release()  # the new writer's lease stays


def _swap_in_a_pendulum_sac_checkpoint(path):
    pod = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", seed=0))
    save_checkpoint(path, pod.checkpoint_payload())
    pod.close()


def test_best_never_returns_a_swapped_checkpoint_nor_an_unusable_entry(tmp_path):
    path = tmp_path / "s"
    store = make_store(
        path,
        pods=[record("p000"), record("p001")],
        leaderboard=[entry("p000", score_mean=500.0), entry("p001", score_mean=100.0)],
    )
    writer = lease(store).acquire()
    for pod_id in ("p000", "p001"):
        run_segment(task(store, 1, writer, pod_id=pod_id, uid=None))  # no origin: legacy
    writer.release()
    _swap_in_a_pendulum_sac_checkpoint(path / "pods/p000/seg-00001.pt")
    t = Tournament.resume(path)
    assert t.summary()["best_pod"] == "p000"
    best = t.best()  # the swapped leader is refused, the next entry returned
    assert best.spec.algo == "ppo" and best.spec.env_id == "CartPole-v1"
    assert "p000" in t.warning and "'sac' agent for 'Pendulum-v1'" in t.warning
    assert t.summary()["best_pod"] == "p001"  # an unusable entry is never best
    assert not t.leaderboard.set_index("pod").loc["p000", "usable"]
    _swap_in_a_pendulum_sac_checkpoint(path / "pods/p001/seg-00001.pt")
    with pytest.raises(ValueError, match="no usable entry.*'sac' agent for 'Pendulum-v1'"):
        t.best()


def test_best_refuses_a_checkpoint_of_another_tournament(tmp_path):
    path = tmp_path / "s"
    store = make_store(path, leaderboard=[entry("p000")])
    writer = lease(store).acquire()
    run_segment(task(store, 1, writer, uid="e" * 32))  # another tournament's CartPole PPO
    writer.release()
    t = Tournament.resume(path)
    with pytest.raises(ValueError, match="written by tournament 'e{32}'"):
        t.best()


@pytest.mark.parametrize("uid", ["../x", "F" * 32, 7, "a" * 31, "<script>"])
def test_a_hostile_tournament_uid_is_refused_on_resume(tmp_path, uid):
    from elegantpod.tournament.core.field_checks import StateError

    make_store(tmp_path / "s", state={"elapsed_seconds": 1.0, "tournament_uid": uid})
    with pytest.raises(StateError, match="tournament_uid must match"):
        Tournament.resume(tmp_path / "s")


def test_a_resume_keeps_the_tournaments_uid(tmp_path):
    make_store(tmp_path / "s", state={"elapsed_seconds": 1.0, "tournament_uid": UID})
    assert Tournament.resume(tmp_path / "s").uid == UID


# -- one writer even after a pause (issue 42, item 3) ------------------------------------
class PausingStore(Store):
    """A real store whose reads of ``lease.json`` in one thread wait at ``gate`` after
    reading: as a writer stopped (SIGSTOP) between its lease check and its write."""

    def __init__(self, url, thread_name):
        super().__init__(url)
        self.thread_name = thread_name
        self.read_lease = threading.Event()
        self.gate = threading.Event()

    def read_bytes(self, name, limit=None):
        data = super().read_bytes(name, limit)
        if name == "lease.json" and threading.current_thread().name == self.thread_name:
            self.read_lease.set()
            assert self.gate.wait(30)
        return data


def _paused_then_taken_over(tmp_path, write):
    """Writer A checks its lease, pauses; writer B forces a takeover meanwhile; A goes on.

    Returns ``{"a": what A's write raised or None, "b": B's lease}``, A's lease and the
    store B used."""
    paused = PausingStore(tmp_path / "s", "writer-a")
    paused.ensure()
    a = lease(paused).acquire()
    paused.read_lease.clear()
    outcome = {}

    def writer_a():
        try:
            write(paused, a)
            outcome["a"] = None
        except LeaseLost as exc:
            outcome["a"] = exc

    thread = threading.Thread(target=writer_a, name="writer-a")
    thread.start()
    assert paused.read_lease.wait(30)  # A has read its lease and is paused
    b_store = Store(tmp_path / "s")
    taking = threading.Thread(
        target=lambda: outcome.setdefault("b", lease(b_store).acquire(force=True)),
        name="writer-b",
    )
    taking.start()
    time.sleep(0.5)  # B's takeover runs now, or waits for A's write to end
    paused.gate.set()  # SIGCONT
    thread.join(30)
    taking.join(30)
    return outcome, a, b_store


def test_a_paused_heartbeat_never_lands_after_a_takeover(tmp_path):
    """Found: a writer stopped with SIGSTOP mid-heartbeat, fenced out by --force, still
    wrote lease.json once continued. The check and the write are one step now: B's
    takeover waits for A's heartbeat, and A's next one fails."""
    outcome, a, _ = _paused_then_taken_over(tmp_path, lambda s, a: a.heartbeat())
    b = outcome["b"]
    assert Store(tmp_path / "s").read_json("lease.json")["token"] == b.token
    with pytest.raises(LeaseLost):
        a.heartbeat()  # A's next one: it writes nothing
    assert Store(tmp_path / "s").read_json("lease.json")["token"] == b.token


def test_a_paused_writer_writes_no_snapshot_after_a_takeover(tmp_path):
    """A snapshot checked under A's lease lands before B holds the store, or not at all,
    and B's start sees it (it re-reads the store after taking the lease)."""
    from elegantpod.tournament.store.lease import fenced

    def save(store, a):
        with fenced(store, a.token):
            store.save_state({"leaderboard": [], "by": "a"})

    outcome, _, b_store = _paused_then_taken_over(tmp_path, save)
    b = outcome["b"]
    assert Store(tmp_path / "s").read_json("lease.json")["token"] == b.token
    state = Store(tmp_path / "s").load_state()
    assert state == {"leaderboard": [], "by": "a"} and outcome["a"] is None  # before B
    with pytest.raises(LeaseLost, match="was not made"), fenced(b_store, "ab" * 16):
        raise AssertionError("a fenced-out writer's body ran")


def test_a_store_that_moved_on_is_seen_by_the_reader_that_fell_behind(tmp_path):
    old, other = Store(tmp_path / "s"), Store(tmp_path / "s")
    other.save_state({"leaderboard": [], "n": 1})
    assert old.load_state() == {"leaderboard": [], "n": 1} and old.moved_on() is None
    other.save_state({"leaderboard": [], "n": 2})
    assert old.moved_on() == 2
    old.load_state()
    assert old.moved_on() is None


def test_a_tournament_that_read_a_store_never_writes_over_a_newer_state(client, tmp_path, capsys):
    """Found: a tournament read the store, another writer resumed and advanced it, then
    the first started and wrote its stale state over the other's (688,128 env steps back
    to 319,488). Now its start re-reads the store after taking the lease and refuses."""
    from elegantpod.tournament.store.lease import LeaseError

    store = str(tmp_path / "t")
    kw = {"client": client, "segment_steps": 1_024}
    first = Tournament("CartPole-v1", pods=2, store=store, max_steps=2_048, seed=1, **kw)
    first.start()
    done = first.wait(timeout=120, progress=True)  # as a script in a terminal shows it
    assert done["status"] == "finished"
    assert "env steps" in capsys.readouterr().err
    budget = done["env_steps_total"] + 2_048  # pods overshoot a budget by whole segments
    stale = Tournament.resume(store, max_steps=budget, **kw)  # reads the store now
    other = Tournament.resume(store, max_steps=budget, **kw)
    other.start()
    advanced = other.wait(timeout=120)
    assert advanced["status"] == "finished"
    with pytest.raises(LeaseError, match="has moved on since this tournament read it"):
        stale.start()
    again = Tournament.resume(store, max_steps=budget, **kw)
    assert again.summary()["env_steps_total"] == advanced["env_steps_total"]
    with pytest.raises(ValueError, match=f"budget is spent .*max_steps={budget:,}.*resume it"):
        again.start()  # a resume of a finished run says so, instead of ending at once
    assert "lease.json" not in {p.name for p in (tmp_path / "t").iterdir()}  # released
