"""Tournaments on a real Dask LocalCluster (worker processes); no mocks of Dask."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from distributed import Client

from elegantpod import Pod, Tournament, TournamentFailed, cluster
from elegantpod.pod.checkpoint import load_checkpoint
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store.store import Store
from tests.helpers import latest_steps, wait_until

TINY_PPO = {"ppo": {"num_envs": 8, "horizon": 16}}


def check_store_intact(store):
    root = Path(store)
    for name in ("tournament.json", "leaderboard.json", "state/LATEST"):
        json.loads((root / name).read_text())
    saved = Store(root).load_state()
    assert set(saved) == {"leaderboard", "pods", "state"}
    assert json.loads((root / "leaderboard.json").read_text()) == saved["leaderboard"]
    for ckpt in root.glob("pods/*/seg-*.pt"):
        load_checkpoint(ckpt)
    assert not list(root.rglob("*.tmp"))


@pytest.mark.slow
def test_mixed_tournament_finishes_with_sorted_loadable_leaderboard(client, tmp_path):
    t = Tournament(
        env="Pendulum-v1",
        algos=["ppo", "sac"],
        pods=4,
        target_reward=-200,
        max_seconds=120,
        store=tmp_path / "s",
        client=client,
        seed=1,
    )
    t.start()
    summary = t.wait(timeout=200)
    assert summary["status"] == "finished" and summary["pods_failed"] == 0
    board = t.leaderboard
    assert len(board) >= 2 and list(board["rank"]) == list(range(1, len(board) + 1))
    assert list(board["score_mean"]) == sorted(board["score_mean"], reverse=True)
    assert set(board["algo"]) <= {"ppo", "sac"}
    assert set(t.pods["algo"]) == {"ppo", "sac"}
    for ckpt in board["checkpoint"]:
        Pod.from_checkpoint(ckpt)
    best = t.best()
    assert best.spec.env_id == "Pendulum-v1"
    if summary["solved"]:
        assert summary["best_score"] >= -200
    check_store_intact(tmp_path / "s")
    assert (
        json.loads((tmp_path / "s" / "leaderboard.json").read_text())[0]["pod_id"]
        == summary["best_pod"]
    )


@pytest.mark.slow
def test_pause_resume_mutate_stop_reach_a_running_pod(client, tmp_path):
    t = Tournament(
        env="CartPole-v1",
        algos=["ppo"],
        pods=2,
        max_seconds=120,
        segment_steps=10**8,
        store=tmp_path / "s",
        client=client,
    )
    t.start()
    try:
        assert wait_until(lambda: latest_steps(t, "p000") is not None, 30)
        t.pause("p000")
        assert t.pod("p000")["status"] == "paused"
        assert wait_until(lambda: t.curves("p000")[-1].get("status") == "paused", 60)
        s1 = latest_steps(t, "p000")
        time.sleep(1.0)
        assert latest_steps(t, "p000") == s1  # paused: the step count does not grow
        other = latest_steps(t, "p001")
        assert wait_until(lambda: latest_steps(t, "p001") > other, 60)  # p001 keeps going
        t.unpause("p000")
        assert wait_until(lambda: latest_steps(t, "p000") > s1, 60)
        assert t.pod("p000")["status"] == "running"

        with pytest.raises(ValueError, match="unknown hyperparameter 'learning_rate'"):
            t.mutate("p000", learning_rate=1e-4)
        with pytest.raises(ValueError, match="lr must be a number"):
            t.mutate("p000", lr="fast")
        with pytest.raises(ValueError, match="unknown pod 'p999'"):
            t.pause("p999")
        with pytest.raises(ValueError, match="'hidden' fixes the network"):
            t.mutate("p000", hidden=(8,))
        assert t.pod("p000")["hparams"]["lr"] == 3e-3  # untouched by the bad calls
        t.mutate("p000", lr=1e-4)
        assert wait_until(lambda: t.curves("p000")[-1].get("lr") == pytest.approx(1e-4), 60)

        t.stop("p000")
        assert wait_until(lambda: t.pod("p000")["status"] == "stopped", 60)
        assert t.pod("p001")["status"] == "running"
    finally:
        t.stop()
        t.wait(60)
    assert t.status == "stopped"  # stop() ended it before its budget (issue 32)
    assert t.pod("p000")["latest_checkpoint"] is not None  # a stopped pod checkpointed
    check_store_intact(tmp_path / "s")


@pytest.mark.slow
def test_killed_worker_costs_at_most_one_segment(tmp_path):
    c = cluster(n_workers=2, dashboard_address=None)
    try:
        # long enough (about 2 s) that the kill lands inside the segment, not after it:
        # a segment that had already finished cost no death, and the count read 0 once
        seg = 32768
        # a budget the test never reaches: near a spent budget a segment is cut short,
        # which on a slow machine once cut the re-run segment measured below
        t = Tournament(
            env="CartPole-v1",
            algos=["ppo"],
            pods=2,
            max_steps=100 * seg,
            segment_steps=seg,
            store=tmp_path / "s",
            client=c,
        )
        t.start()
        assert wait_until(lambda: t.pod("p000")["segment"] >= 1, 60)
        before = t.pod("p000")
        nxt = before["segment"] + 1
        assert wait_until(lambda: any(m["segment"] == nxt for m in t.curves("p000")), 30)
        victim = next(m["worker"] for m in t.curves("p000") if m["segment"] == nxt)
        pid = c.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)

        def ends():
            curves = t.curves("p000")
            return [m for m in curves if m["type"] == "segment_end" and m["segment"] == nxt]

        assert wait_until(lambda: ends(), 120)  # the segment ran again and finished
        t.stop()
        summary = t.wait(timeout=180)
        assert summary["status"] == "stopped" and summary["pods_failed"] == 0
        assert summary["worker_deaths_survived"] >= 1
        # the re-run resumed from the previous checkpoint: the count continues, not from 0
        # (its checkpoint itself may be pruned by now: the pod has newer ones)
        assert ends()[-1]["env_steps"] == before["env_steps"] + seg
        check_store_intact(tmp_path / "s")
    finally:
        cl = c.cluster
        c.close()
        cl.close()


@pytest.mark.slow
def test_pods_in_flight_follow_the_workers(tmp_path):
    c = cluster(n_workers=1, dashboard_address=None)
    try:
        t = Tournament(
            env="CartPole-v1", algos=["ppo"], pods=3, max_seconds=90, store=tmp_path / "s", client=c
        )
        t.start()
        assert wait_until(lambda: t.pods_in_flight == 1, 30)
        time.sleep(1.0)
        assert t.pods_in_flight == 1
        c.cluster.scale(2)
        assert wait_until(lambda: t.pods_in_flight == 2, 60)
        t.stop()
        t.wait(60)
    finally:
        cl = c.cluster
        c.close()
        cl.close()


@pytest.mark.slow
def test_resume_after_the_client_is_gone(client, tmp_path):
    store = tmp_path / "s"
    first = Client(client.cluster)
    t = Tournament(
        env="CartPole-v1", algos=["ppo"], pods=2, max_steps=65536, store=store, client=first
    )
    t.start()
    s1 = t.wait(120)
    board1 = t.leaderboard
    assert set(t.pods["status"]) <= {"idle", "replaced"}  # every live pod is resumable
    segments1 = {r["pod_id"]: r["segment"] for r in Store(store).load_state()["pods"]}
    first.close()
    second = Client(client.cluster)
    try:
        t2 = Tournament.resume(store, client=second, max_steps=4 * 65536)
        assert set(t2.pods["status"]) <= {"queued", "replaced"}
        assert list(t2.leaderboard["pod"]) == list(board1["pod"])  # loaded before start
        t2.start()
        s2 = t2.wait(180)
        assert s2["status"] == "finished"
        assert s2["env_steps_total"] > s1["env_steps_total"] >= 65536
        assert s2["best_score"] >= s1["best_score"]
        assert any(t2.pod(p)["segment"] > n for p, n in segments1.items())
        with pytest.raises(ValueError, match="already holds a tournament"):
            Tournament(env="CartPole-v1", algos=["ppo"], pods=2, max_steps=10, store=store)
    finally:
        second.close()


@pytest.mark.slow
def test_32_tiny_pods_no_lost_events_and_a_responsive_client(client, tmp_path):
    t = Tournament(
        env="CartPole-v1",
        algos=["ppo"],
        pods=32,
        segment_steps=256,
        max_steps=32 * 256 * 2,
        eval_episodes=2,
        hparams=TINY_PPO,
        store=tmp_path / "s",
        client=client,
    )
    t.start()
    from elegantpod.widgets.dashboard import Dashboard

    # refreshed by hand below, as its thread would; how long a refresh and the client
    # calls take is benchmarks/dashboard_refresh.py's to measure, not a test's
    dash = Dashboard(t, refresh_seconds=0)
    refreshes = 0
    while t.status == "running":
        dash.refresh()
        assert t.leaderboard is not None
        t.summary()
        refreshes += 1
        time.sleep(0.05)
    summary = t.wait(300)
    assert summary["status"] == "finished" and summary["pods_failed"] == 0
    pods = t.pods
    assert (pods[pods["pod_id"].isin([f"p{i:03d}" for i in range(32)])]["segment"] >= 1).all()
    log = t.engine.progress  # what segments reported sending, and what arrived
    assert log.events_sent > 32
    assert wait_until(lambda: sum(log.events_received.values()) >= log.events_sent, 60)
    assert sum(log.events_received.values()) == log.events_sent
    assert refreshes >= 1  # the client answered while 32 pods ran
    dash.refresh()
    assert sum(1 for row in dash._cells if row[1].value) == len(t.leaderboard)
    dash.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algos": ["ppo", "a2c"]}, "unknown algorithm 'a2c'"),
        ({"algos": ["sac"]}, "sac cannot handle action space Discrete"),
        ({"pods": 0}, "pods must be > 0, got 0"),
        ({"pods": 2.5}, "pods must be an integer"),
        ({"env": "CartPol-v1"}, "unknown env id 'CartPol-v1'"),
        ({"hparams": {"ppo": {"lrr": 1}}}, "unknown hyperparameter 'lrr'"),
        ({"hparams": {"sac": {"lr": 1}}}, "not in algos"),
        ({"max_seconds": -1}, "max_seconds must be > 0"),
        ({"max_secs": 3}, "unknown tournament option 'max_secs'; did you mean max_seconds"),
        ({"hparams": {"ppo": 3}}, r"hparams\['ppo'\] must be a dict"),
        ({"hparams": {"ppo": {"hidden": "[64,x]"}}}, "hidden must be an integer, got 'x'"),
    ],
)
def test_bad_input_fails_before_any_cluster_work(tmp_path, kwargs, message):
    args = {
        "env": "CartPole-v1",
        "algos": ["ppo"],
        "pods": 2,
        "store": tmp_path / "s",
        "max_seconds": 10,
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        Tournament(**args)
    assert not (tmp_path / "s").exists()


def test_store_of_another_env_is_refused_and_untouched(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "tournament.json").write_text('{"env_id": "Pendulum-v1"}')
    with pytest.raises(ValueError, match="belongs to a tournament on 'Pendulum-v1'"):
        Tournament(env="CartPole-v1", algos=["ppo"], pods=2, store=store, max_seconds=5)
    assert (store / "tournament.json").read_text() == '{"env_id": "Pendulum-v1"}'
    with pytest.raises(ValueError, match="holds no tournament"):
        Tournament.resume(tmp_path / "empty")


def test_infinite_values_are_refused_up_front(tmp_path):
    for kwargs, message in [
        ({"max_seconds": float("inf")}, "max_seconds must be a finite number"),
        ({"target_reward": float("inf")}, "target_reward must be a finite"),
        ({"hparams": {"ppo": {"lr": float("inf")}}}, "lr must be a finite"),
    ]:
        args = {
            "env": "CartPole-v1",
            "algos": ["ppo"],
            "pods": 2,
            "store": tmp_path / "s",
            "max_steps": 10,
            **kwargs,
        }
        with pytest.raises(ValueError, match=message):
            Tournament(**args)


def test_algorithm_names_are_normalized(tmp_path):
    t = Tournament(
        env="Pendulum-v1",
        algos="PPO, Sac",
        pods=2,
        max_steps=10,
        store=tmp_path / "s",
        hparams={"SAC": {"lr": 3e-4}},
    )
    assert t.spec.algos == ("ppo", "sac") and t.spec.hparams == {"sac": {"lr": 3e-4}}


@pytest.mark.slow
def test_every_worker_death_is_counted_from_the_schedulers_view(tmp_path):
    # Before: deaths were inferred from progress events, so a worker killed before its
    # segment's first event (0.5 s in) went uncounted (1 of 2, 2 of 3 kills).
    c = cluster(n_workers=2, dashboard_address=None)
    try:
        t = Tournament(
            env="CartPole-v1",
            algos=["ppo"],
            pods=1,
            max_seconds=240,
            segment_steps=10**8,  # one long segment, killed twice
            store=tmp_path / "s",
            client=c,
            max_retries=5,
        )
        t.start()
        prefix = f"elegantpod-{t.id}-p000-"
        for kill in range(2):

            def victim():
                running = c.processing()
                return next(
                    (
                        w
                        for w, keys in running.items()
                        if any(str(k).startswith(prefix) for k in keys)
                    ),
                    None,
                )

            assert wait_until(lambda: victim() is not None, 60)
            w = victim()
            pid = c.run(os.getpid, workers=[w])[w]
            os.kill(pid, signal.SIGKILL)  # at once: no progress event from this segment
            assert wait_until(lambda n=kill + 1: t.worker_deaths_survived == n, 30)
            assert wait_until(lambda w=w: victim() not in (None, w), 60)
        t.stop()
        summary = t.wait(timeout=120)
        assert summary["worker_deaths_survived"] == 2
        assert summary["pods_failed"] == 0
    finally:
        cl = c.cluster
        c.close()
        cl.close()


@pytest.mark.slow
def test_a_parent_whose_checkpoint_fails_to_load_breeds_no_more(client, tmp_path):
    from tests.tournament.store.test_hostile_store import entry, make_store, record

    store = tmp_path / "s"
    make_store(
        store,
        pods=[
            record("p000", status="replaced", segment=1),
            record(
                "p001", status="queued", parent="p000", parent_checkpoint="pods/p000/seg-00001.pt"
            ),
        ],
        leaderboard=[entry("p000")],
        state={"total_steps": 2048, "elapsed_seconds": 1.0, "next_index": 2},
        spec=TournamentSpec(env_id="CartPole-v1", pods=2).to_dict(),
    )
    (store / "pods/p000").mkdir(parents=True)
    (store / "pods/p000/seg-00001.pt").write_bytes(b"not a checkpoint")
    # p001 fails at once, its replacement trains a segment (about a second): then stop
    t = Tournament.resume(store, client=client, max_seconds=20)
    t.start()

    def replacement_trained():
        pods = t.pods
        return "p002" in set(pods["pod_id"]) and t.pod("p002")["segment"] >= 1

    assert wait_until(replacement_trained, 30)
    t.stop()
    summary = t.wait(timeout=60)
    # p001 failed on its parent; its replacement is a fresh pod, not another child of it
    assert summary["pods_failed"] == 1 and summary["status"] == "stopped"
    children = {r["pod_id"]: r["parent"] for r in t.pods.to_dict("records")}
    assert [p for p, parent in children.items() if parent == "p000"] == ["p001"], t.pods
    assert t.pod("p002")["segment"] >= 1
    failure = t.pod("p001")["error"]
    assert failure.startswith("ParentCheckpointError") and "seg-00001.pt" in failure
    assert list(summary["failures"]) == [failure]
    saved = Store(store).load_state()
    usable = {e["pod_id"]: e["usable"] for e in saved["leaderboard"]}
    assert usable["p000"] is False  # the generator skips it from now on
    with pytest.raises(ValueError, match="'p000': its checkpoint failed to load"):
        t.add_pod(parent="p000")


@pytest.mark.slow
def test_a_tournament_whose_every_pod_failed_has_failed_and_says_why(client, tmp_path):
    from tests.tournament.store.test_hostile_store import orphan_child_store

    store = tmp_path / "s"
    orphan_child_store(store, pods=1, failed_replacements=0)  # its parent never wrote one
    t = Tournament.resume(store, client=client, max_seconds=60)
    t.start()
    with pytest.raises(TournamentFailed, match="every pod failed") as failed:
        t.wait(timeout=90)  # a script that only waits does not go on as if it trained
    summary = failed.value.summary
    assert summary["status"] == "failed"
    assert summary["error"].startswith("every pod failed: 1 x ParentCheckpointError")
    assert "does not exist" in summary["error"]


# -- what a newcomer sees first (issue 32) ------------------------------------------------
def test_an_algorithm_with_a_single_pod_is_warned_about_at_construction(tmp_path):
    import warnings

    from elegantpod.tournament.core.spec import lone_pods_warning

    kw = {"algos": ["ppo", "sac"], "max_seconds": 1}
    with pytest.warns(UserWarning, match="each of ppo, sac has a single pod") as caught:
        Tournament("Pendulum-v1", pods=2, store=tmp_path / "a", **kw)
    (w,) = caught
    assert "mutated copy of itself" in str(w.message) and "pods=4" in str(w.message)
    assert w.filename == __file__  # it points at the caller's line
    with pytest.warns(UserWarning, match="1 of ppo, sac will have a single pod"):
        Tournament("Pendulum-v1", pods=3, store=tmp_path / "b", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tournament("Pendulum-v1", pods=4, store=tmp_path / "c", **kw)
        Tournament("CartPole-v1", pods=1, store=tmp_path / "d", max_seconds=1)  # nothing to breed
    assert lone_pods_warning(["ppo", "sac", "td3"], 5).startswith("5 pods for 3 algorithms: 1 of")
    assert lone_pods_warning(["ppo"], 2) is None


def lone_store(path):
    """A saved ppo + sac tournament: a child that mutated lr and epochs leads."""
    import dataclasses

    from elegantpod.agents.ppo import PPOConfig
    from elegantpod.agents.sac import SACConfig
    from tests.tournament.store.test_hostile_store import entry, make_store, record

    def hp(config):
        return json.loads(json.dumps(dataclasses.asdict(config)))  # as a store holds them

    child = hp(PPOConfig(lr=0.0024, epochs=3))
    make_store(
        path,
        pods=[
            record("p000", status="replaced", segment=1, hparams=hp(PPOConfig())),
            record("p001", parent="p000", mutation={"lr": [0.003, 0.0024], "epochs": [4, 3]}),
            record("p002", algo="sac", hparams=hp(SACConfig())),
        ],
        leaderboard=[
            entry(
                "p001",
                score_mean=200.0,
                hparams=child,
                parent="p000",
                mutation={"lr": [0.003, 0.0024], "epochs": [4, 3]},
            ),
            entry("p002", algo="sac", score_mean=100.0, hparams=hp(SACConfig())),
            entry("p000", score_mean=50.0, hparams=hp(PPOConfig())),
        ],  # fmt: skip
        state={"total_steps": 163_840, "elapsed_seconds": 12.0, "next_index": 3},
        spec=TournamentSpec(env_id="Pendulum-v1", algos=("ppo", "sac"), pods=4).to_dict(),
    )


def test_the_leaderboard_is_short_and_its_hyperparameters_keep_their_types(tmp_path):
    import pandas as pd

    from elegantpod.agents.sac import SACConfig
    from elegantpod.tournament.core import views

    lone_store(tmp_path / "s")
    t = Tournament.resume(tmp_path / "s")
    board = t.leaderboard
    assert list(board.columns) == views.LEADERBOARD_COLUMNS
    assert list(board["pod"]) == ["p001", "p002", "p000"]
    cells = [v for row in board.to_dict("records") for v in row.values()]
    assert not [v for v in cells if isinstance(v, dict | list | tuple)]  # no whole dicts
    # it was about 600 characters a row; the checkpoint's path is as long as the store's
    text = board.drop(columns="checkpoint").to_string()
    assert max(len(line) for line in text.splitlines()) < 130, text
    hp = t.leaderboard_hparams()
    assert list(hp.columns[:6]) == views.HPARAMS_COLUMNS
    assert list(hp["pod"]) == list(board["pod"])  # the same rows, in the same order
    top = hp.iloc[0]
    assert top["lr"] == 0.0024 and hp["lr"].dtype == "float64"  # numbers stay numbers
    assert top["epochs"] == 3 and hp["epochs"].dtype == "Int64"
    assert pd.isna(hp.set_index("pod").loc["p002", "epochs"])  # sac has no epochs
    assert hp.set_index("pod").loc["p002", "tau"] == SACConfig().tau
    assert set(top["mutated"]) == {"lr", "epochs"} and top["parent"] == "p000"
    assert list(hp.set_index("pod").loc["p001", "hidden"]) == [64, 64]
    # the HTML views still show each pod's key hyperparameters
    assert "lr=0.0024 clip_coef=0.2 epochs=3" in t._repr_html_()


def test_a_tournament_has_a_short_repr(tmp_path):
    lone_store(tmp_path / "s")
    t = Tournament.resume(tmp_path / "s")
    assert repr(t) == (
        "Tournament(Pendulum-v1, ppo+sac, 4 pods: created, 3 made, 163,840 env steps in 12 s, "
        f"best return 200 by p001; store {str(tmp_path / 's')!r})"
    )
    fresh = Tournament("CartPole-v1", pods=2, store=tmp_path / "new", max_seconds=1)
    assert "0 made, 0 env steps in 0 s, no score yet" in repr(fresh)
