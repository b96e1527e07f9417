"""The engine under faults, on a real LocalCluster: a failing store, cancelled futures, a
second writer, and a store that stays bounded over many segments."""

import contextlib
import os
import shutil
import threading
import time

import gymnasium
import numpy as np
import pytest
from distributed import Future

from elegantpod import Tournament, TournamentFailed
from elegantpod.tournament.store.lease import LeaseError
from elegantpod.tournament.store.store import Store
from tests.helpers import wait_until
from tests.tournament.test_orchestrator import TINY_PPO, check_store_intact

FINAL = {"idle", "stopped", "replaced", "failed"}


def tiny(store, client, **kw):
    kw.setdefault("max_seconds", 40)
    return Tournament(
        kw.pop("env", "CartPole-v1"),
        ["ppo"],
        kw.pop("pods", 2),
        store=store,
        client=client,
        hparams=TINY_PPO,
        segment_steps=kw.pop("segment_steps", 512),
        **kw,
    )


@pytest.mark.slow
def test_a_store_that_fails_for_a_while_pauses_saving_and_strands_no_pod(client, tmp_path):
    store = tmp_path / "s"
    t = tiny(store, client, max_seconds=180)  # stopped below once it has shown its point
    t.start()
    assert wait_until(lambda: t.summary()["pods_finished"] >= 2, 60)
    # Root ignores permission bits, so break the state folder itself: a file where the
    # folder was makes every snapshot write fail with an OSError.
    shutil.move(store / "state", tmp_path / "state-away")
    (store / "state").write_text("not a folder")
    warned = wait_until(lambda: t.summary()["warning"] is not None, 60)
    steps = t.summary()["env_steps_total"]
    assert wait_until(lambda: t.summary()["env_steps_total"] > steps, 60)  # pods train on
    (store / "state").unlink()
    shutil.move(tmp_path / "state-away", store / "state")
    assert wait_until(lambda: t.summary()["warning"] is None, 60)  # saving came back
    t.stop()  # no need to wait out the budget
    s = t.wait(90)
    assert warned and "saving to store" in (s["warning"] or "saving to store")
    assert s["status"] == "stopped" and s["warning"] is None
    assert set(t.pods["status"]) <= FINAL
    saved = Store(store).load_state()
    assert saved["state"]["total_steps"] == s["env_steps_total"]  # the last save has it all
    check_store_intact(store)


@pytest.mark.slow
def test_segments_cancelled_behind_its_back_are_run_again(client, tmp_path):
    t = tiny(tmp_path / "s", client, max_seconds=30, segment_steps=10**7)
    t.start()
    prefix = f"elegantpod-{t.id}-"
    ours = lambda: [  # noqa: E731
        k for keys in client.processing().values() for k in keys if str(k).startswith(prefix)
    ]
    assert wait_until(lambda: len(ours()) == 2, 30)
    first = set(ours())
    for key in first:  # another client (an admin, a restart) cancels them
        Future(key, client).cancel()
    assert wait_until(lambda: len(ours()) == 2 and not set(ours()) & first, 30)
    t.stop()
    s = t.wait(90)
    assert s["status"] == "stopped" and s["pods_failed"] == 0
    assert set(t.pods["status"]) <= FINAL and t.pods_in_flight == 0


@pytest.mark.slow
def test_one_writer_per_store(client, tmp_path):
    store = tmp_path / "s"
    t = tiny(store, client, max_seconds=60)
    t.start()
    try:
        second = Tournament.resume(store, client=client)
        with pytest.raises(LeaseError, match=r"is held by .*pid \d+, heartbeat \d+ s ago"):
            second.start()
        assert second.status == "created"
    finally:
        t.stop()
        t.wait(60)
    # the first released the lease at its end: now the second may write
    budget = t.summary()["wall_seconds"] + 10
    second = Tournament.resume(store, client=client, max_seconds=budget)
    second.start()
    assert second.wait(60)["status"] == "finished"
    assert not (store / "lease.json").exists()


@pytest.mark.slow
def test_the_store_stays_bounded_over_many_segments(client, tmp_path):
    store = tmp_path / "s"
    leaderboard = 4
    t = tiny(
        store, client, pods=4, max_seconds=180, segment_steps=128, leaderboard_size=leaderboard
    )
    t.start()  # stopped below, once 60 segments are done
    assert wait_until(lambda: sum(t.pods["segment"]) >= 60, 150)
    t.stop()
    s = t.wait(90)
    segments = sum(t.pods["segment"])
    assert segments >= 40, segments  # many segments, many replaced pods
    files = list(store.glob("pods/*/seg-*.pt"))
    # what can still be needed: each live pod's latest checkpoint, each leaderboard
    # entry's, and the parent of each pod that has not finished a segment yet
    assert len(files) <= 4 + leaderboard + 4, sorted(str(f) for f in files)
    assert s["store_bytes"] == sum(os.path.getsize(f) for f in files)
    saved = Store(store).load_state()
    named = {e["checkpoint"] for e in saved["leaderboard"]} | {
        r["latest_checkpoint"]
        for r in saved["pods"]
        if r["status"] in ("idle", "stopped") and r["latest_checkpoint"]
    }
    assert all((store / name).is_file() for name in named)  # nothing named was pruned
    check_store_intact(store)


@pytest.mark.slow
def test_a_tournament_whose_lease_is_taken_over_stops_writing_and_fails(client, tmp_path):
    from elegantpod.tournament.store.lease import Lease, LeaseLost

    store = tmp_path / "s"
    t = tiny(store, client, max_seconds=60, segment_steps=10**7)
    t.start()
    assert wait_until(lambda: t.pods_in_flight == 2, 30)
    other = Lease(Store(store), owner="someone else").acquire(force=True)
    with pytest.raises(LeaseLost, match="someone else"):
        t.mutate("p000", lr=1e-4)  # its save finds the lease gone
    with pytest.raises(TournamentFailed) as failed:
        t.wait(60)
    s = failed.value.summary
    assert s["status"] == "failed" and "someone else" in s["error"]
    assert other.release()  # the new owner's lease was never touched


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (CI runs as root, as this machine does), unmounted afterwards."""
    import subprocess

    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder):
    """Take every free byte of ``folder``'s file system; return the filler file."""
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 2**16)
                f.flush()
        except OSError:
            pass
    return filler


@pytest.mark.slow
def test_a_full_store_stops_the_tournament_as_failed_and_a_resume_continues(client, small_disk):
    store = small_disk / "s"
    t = tiny(store, client, pods=2, max_seconds=60)
    t.start()
    assert wait_until(lambda: t.summary()["pods_finished"] >= 2, 30)
    filler = fill(small_disk)  # the disk is full from here on
    with pytest.raises(TournamentFailed, match="stopped taking writes") as failed:
        t.wait(60)
    s = failed.value.summary
    assert s["status"] == "failed", s
    assert "stopped taking writes" in s["error"] and "resume" in s["error"]
    assert s["pods_failed"] == 0 and s["failures"] == {}  # the store failed, not the pods
    assert s["saved"] is False and "could not be saved" in s["warning"]
    assert set(t.pods["status"]) <= FINAL - {"failed"}
    filler.unlink()  # space freed: the run continues where the store left it
    saved = Store(store).load_state()
    steps = saved["state"]["total_steps"]
    again = Tournament.resume(store, client=client, max_seconds=s["wall_seconds"] + 15)
    again.start()
    assert wait_until(lambda: again.summary()["env_steps_total"] > steps, 30)
    again.stop()
    s2 = again.wait(60)
    assert s2["status"] == "stopped" and s2["saved"] is True  # stop() ended it
    check_store_intact(store)


@pytest.mark.slow
def test_a_killed_scheduler_fails_the_tournament(tmp_path):
    """Found: a killed Dask scheduler ended a tournament as ``finished`` (exit 0) once its
    budget ran out. A client that cannot reconnect closes; the tournament then ends
    ``failed`` at once, saying so, and ``wait()`` raises."""
    import socket
    import subprocess
    import sys

    from distributed import Client

    from tests.helpers import wait_until

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard"], **quiet,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--no-dashboard"], **quiet,
    )  # fmt: skip
    try:
        assert wait_until(lambda: _listening(port), 60)
        client = Client(address, timeout=3)  # also how long it tries to reconnect
        client.wait_for_workers(1, timeout=60)
        store = tmp_path / "s"
        t = Tournament("CartPole-v1", pods=2, store=str(store), client=client,
                       max_seconds=600, segment_steps=2_048)  # fmt: skip
        t.start()
        assert wait_until(lambda: list(store.glob("pods/*/*.pt")), 60)
        scheduler.kill()
        with pytest.raises(TournamentFailed, match="lost the Dask scheduler") as failed:
            t.wait(timeout=120)
        assert failed.value.summary["status"] == "failed"
    finally:
        scheduler.kill()
        worker.kill()


@pytest.mark.slow
def test_a_run_whose_scheduler_did_not_answer_for_its_budget_fails_saying_so(tmp_path):
    """Found (issue 56): a scheduler SIGSTOPped for a tournament's whole budget, then
    continued, ended it ``finished`` with 0 env steps. A run that trained nothing has
    failed, and says how long the loop waited on the scheduler. (No worker here: a
    segment sent before the stop would train a little once the scheduler continues.)"""
    import signal
    import socket
    import subprocess
    import sys

    from distributed import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_until(lambda: _listening(port), 60)
        client = Client(f"tcp://127.0.0.1:{port}", timeout=10)
        t = tiny(tmp_path / "s", client, max_seconds=5)
        t.start()
        scheduler.send_signal(signal.SIGSTOP)
        time.sleep(12)  # the whole budget and more
        scheduler.send_signal(signal.SIGCONT)
        with pytest.raises(TournamentFailed) as failed:
            t.wait(60)
        s = failed.value.summary
        assert s["status"] == "failed" and s["env_steps_total"] == 0, s
        assert "no segment was sent in this run" in s["error"], s["error"]
        assert "waited" in s["error"] and "on the Dask scheduler" in s["error"], s["error"]
        assert "waited" in s["warning"], s["warning"]
        client.close()
    finally:
        scheduler.send_signal(signal.SIGCONT)
        scheduler.kill()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_a_stopped_worker_is_given_up_when_the_tournament_ends(tmp_path, monkeypatch):
    """Found: a worker stopped with SIGSTOP made a 40 s CLI tournament take 608 s (and
    report 160 s): the end waited 120 s for its segment, then ``Client.run`` waited for
    the frozen worker until Dask removed it. Now a worker whose heartbeat stops moving
    is given up (here after 8 s instead of 30, to keep the test short): the end asks
    nothing more of it, says which pod lost its last segment, and the run ends in
    about the stall time, not in minutes."""
    import signal
    import time

    from elegantpod import cluster
    from elegantpod.tournament.client import runner

    monkeypatch.setattr(runner, "STALL_SECONDS", 8.0)
    c = cluster(n_workers=2, dashboard_address=None)
    pid = None
    try:
        t = Tournament("CartPole-v1", pods=2, store=str(tmp_path / "s"), client=c,
                       max_seconds=600, segment_steps=1_000_000, hparams=TINY_PPO)  # fmt: skip
        t.start()
        assert wait_until(lambda: all(c.processing().values()) and len(c.processing()) == 2, 60)
        victim = sorted(c.processing())[0]
        pid = c.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGSTOP)
        assert wait_until(lambda: t.warning and "stopped answering" in t.warning, 60)
        assert "waits for it" in t.warning and victim in t.warning  # while running
        began = time.monotonic()
        t.stop()
        summary = t.wait(timeout=100)  # before: 120 s of waiting, then minutes in close
        assert summary["status"] == "stopped", summary
        assert time.monotonic() - began < 90
        assert "ended without its last segment" in summary["warning"]
        check_store_intact(tmp_path / "s")
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        cl = c.cluster
        c.close()
        cl.close()


# -- envs that hang (issue 56) --------------------------------------------------------------
class StuckWalk(gymnasium.Env):
    """A walk on a line whose ``step`` never returns on a Dask worker: a hung simulator.

    ``claim``: only the first env to step, of all the pods, hangs (it creates the file
    ``claim`` names; the others find it there and walk on); ``None``: every env hangs.
    Never in the test's own process, which a tournament may ask to build the env."""

    def __init__(self, claim: str | None = None):
        self.claim, self.x = claim, 0.0
        self.observation_space = gymnasium.spaces.Box(-5.0, 5.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0.0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        if self._hangs():
            threading.Event().wait()  # forever: only the worker process's end ends it
        self.x += 1.0 if action == 1 else -1.0
        done = abs(self.x) >= 5
        return np.array([self.x], np.float32), float(self.x >= 5), done, False, {}

    def _hangs(self) -> bool:
        from distributed import get_worker

        try:
            get_worker()
        except ValueError:
            return False  # not on a worker
        if self.claim is None:
            return True
        try:
            os.close(os.open(self.claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True


def own_cluster():
    """A fresh two-worker cluster and its worker processes' ids: a hung segment holds a
    worker thread until its process ends, so it never shares the session's cluster."""
    from elegantpod import cluster

    c = cluster(n_workers=2, dashboard_address=None)
    return c, list(c.run(os.getpid).values())


def close_and_check_gone(c, pids):
    """Close ``c``, then check that its worker processes, hung threads and all, ended."""
    cl = c.cluster
    c.close()
    cl.close()

    def gone(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    assert wait_until(lambda: all(map(gone, pids)), 30), pids


@pytest.mark.slow
def test_a_tournament_whose_every_segment_hangs_fails_in_its_budget_naming_them(tmp_path):
    """Found (issue 56): an env whose ``step`` never returns ended ``finished`` 136 s into
    a 15 s budget, with 0 env steps and no warning. Now the end waits a bounded grace for
    running segments, gives up those that did not return, names them, and a run in
    which no segment completed has failed."""
    gymnasium.register("StuckWalk-v0", entry_point=StuckWalk, max_episode_steps=20)
    c, pids = own_cluster()
    try:
        t = tiny(tmp_path / "s", c, env="StuckWalk-v0", max_seconds=5, segment_steps=512)
        began = time.monotonic()
        t.start()
        with pytest.raises(TournamentFailed) as failed:
            t.wait(120)
        took = time.monotonic() - began
        s = failed.value.summary
        assert s["status"] == "failed" and s["env_steps_total"] == 0, s
        assert "no segment completed" in s["error"], s["error"]
        assert "p000" in s["error"] and "p001" in s["error"]
        assert s["pods_hung"] == ["p000", "p001"]
        assert took < 60, took  # budget 5 s + grace 10 s + the cluster's own time
        assert set(t.pods["status"]) <= FINAL and t.pods_in_flight == 0
    finally:
        close_and_check_gone(c, pids)


@pytest.mark.slow
def test_a_pod_that_hangs_is_named_while_the_others_finish(tmp_path):
    """Issue 56: a run in which some pods trained ends ``finished``, and names the pod
    whose segment never returned (``pods_hung``, the warning)."""
    gymnasium.register("StuckWalk-v0", entry_point=StuckWalk, max_episode_steps=20)
    c, pids = own_cluster()
    try:
        t = tiny(
            tmp_path / "s",
            c,
            env="StuckWalk-v0",
            max_seconds=8,
            segment_steps=512,
            env_kwargs={"claim": str(tmp_path / "claimed")},
        )
        s = t.start().wait(120)
        assert s["status"] == "finished", s
        assert len(s["pods_hung"]) == 1, s
        hung = s["pods_hung"][0]
        assert s["pods_finished"] >= 1 and s["env_steps_total"] > 0
        assert hung in s["warning"] and "did not return" in s["warning"], s["warning"]
        assert "holds its worker until that worker restarts" in s["warning"]  # our cluster
        assert t.pod(hung)["segment"] == 0  # the hung pod trained nothing
    finally:
        close_and_check_gone(c, pids)
