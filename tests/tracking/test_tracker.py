"""The Tracker's bookkeeping and its failure handling, with loggers of our own.

The loggers here are test doubles of a user's own ``Logger`` subclass (recording,
raising, sleeping), not mocks of a tracking library: the real backends are read back
in ``test_backends.py``.
"""

import threading

import pytest

from elegantpod.tournament.core.record import PodRecord
from elegantpod.tracking.base import Logger
from elegantpod.tracking.tracker import Tracker, check_loggers, make_logger


class Recording(Logger):
    name = "recording"

    def __init__(self):
        self.calls = []

    def open(self, group, config):
        self.calls.append(("open", group, config))

    def start_run(self, run_id, name, tags, params):
        self.calls.append(("start_run", run_id, tags, params))

    def log_metrics(self, run_id, metrics, step):
        self.calls.append(("log_metrics", run_id, metrics, step))

    def log_params_change(self, run_id, changes, step):
        self.calls.append(("log_params_change", run_id, changes, step))

    def log_tables(self, tables):
        self.calls.append(("log_tables", tables))

    def close(self):
        self.calls.append(("close",))

    def of(self, kind, run_id=None):
        return [c for c in self.calls if c[0] == kind and (run_id is None or c[1] == run_id)]


class Raising(Logger):
    name = "down"

    def log_metrics(self, run_id, metrics, step):
        raise ConnectionError("tracking server down")


def row(segment, steps, score, **extra):
    return {"segment": segment, "env_steps": steps, "score": score, "time": segment * 1.5, **extra}


def records():
    hp = {"lr": 0.1, "gamma": 0.99}
    a = PodRecord("p000", "ppo", dict(hp), 0, origin={"kind": "start"})
    b = PodRecord("p001", "ppo", {"lr": 0.2, "gamma": 0.99}, 1, parent="p000")
    b.mutation, b.env_steps, b.origin = {"lr": [0.1, 0.2]}, 100, {"kind": "child"}
    c = PodRecord("p002", "ppo", dict(hp), 2, parent="p001")
    return {r.pod_id: r for r in (a, b, c)}


def test_observe_logs_runs_rows_and_step_stamped_changes_once():
    rec, lg = records(), Recording()
    tr = Tracker([lg])
    tr.open("g", {"env_id": "CartPole-v1"})
    tr.observe(rec, {})
    a = rec["p000"]
    a.history = [row(1, 100, 10.0, hparams={"lr": 0.1, "gamma": 0.99})]
    a.score_std, a.env_steps = 2.0, 100
    tr.observe(rec, {"p000": {"env_steps": 90, "train_return": 9.0, "losses": {"value": 0.5}}})
    a.hparams = {"lr": 0.05, "gamma": 0.99}  # Tournament.mutate, live
    tr.observe(rec, {})
    a.history.append(row(2, 200, 20.0, hparams={"lr": 0.05, "gamma": 0.99}))
    a.history.append(row(3, 300, 30.0, hparams={"lr": 0.05, "gamma": 0.9}))
    a.env_steps, a.hparams = 300, {"lr": 0.05, "gamma": 0.9}  # a mutation it trained with
    tr.observe(rec, {})
    tr.observe(rec, {})  # nothing new: nothing logged
    tr.close({"leaderboard": [{"pod": "p000"}]})

    assert lg.calls[0] == ("open", "g", {"env_id": "CartPole-v1"})
    starts = {c[1]: c[2] for c in lg.of("start_run")}
    assert [starts[p]["generation"] for p in ("p000", "p001", "p002")] == ["0", "1", "2"]
    assert starts["p001"]["parent"] == "p000" and starts["p001"]["origin"] == "child"
    steps = [(c[3], c[2].get("fitness")) for c in lg.of("log_metrics", "p000")]
    assert steps == [(90, None), (100, 10.0), (200, 20.0), (300, 30.0)]
    assert lg.of("log_metrics", "p000")[0][2] == {"train_return": 9.0, "losses/value": 0.5}
    assert lg.of("log_metrics", "p000")[1][2]["score_std"] == 2.0
    changes = [(c[3], c[2]) for c in lg.of("log_params_change", "p000")]
    # the live change at the pod's steps then; a row's at its segment's start
    assert changes == [(100, {"lr": [0.1, 0.05]}), (200, {"gamma": [0.99, 0.9]})]
    assert lg.of("log_params_change", "p001")[0][2:] == ({"lr": [0.1, 0.2]}, 100)
    assert lg.calls[-2:] == [("log_tables", {"leaderboard": [{"pod": "p000"}]}), ("close",)]
    assert tr.warning is None


def test_a_raising_logger_is_disabled_with_a_warning_and_the_others_go_on(caplog):
    rec, good = records(), Recording()
    tr = Tracker([Raising(), good])
    tr.open("g", {})
    tr.observe(rec, {})
    rec["p000"].history = [row(1, 100, 1.0)]
    tr.observe(rec, {})
    rec["p000"].history.append(row(2, 200, 2.0))
    tr.observe(rec, {})
    tr.close()
    assert [c[3] for c in good.of("log_metrics", "p000")] == [100, 200]
    assert "logger 'down' disabled" in tr.warning and "tracking server down" in tr.warning
    assert "tracking server down" in caplog.text


def test_a_malformed_record_is_skipped_with_a_warning_and_the_others_logged():
    rec, lg = records(), Recording()
    rec["p001"].mutation = {"lr": 3}  # as a hostile store could hold it
    tr = Tracker([lg])
    tr.open("g", {})
    tr.observe(rec, {})
    tr.close()
    assert "skips pod 'p001'" in tr.warning
    assert {c[1] for c in lg.of("start_run")} == {"p000", "p001", "p002"}


class Blocked(Logger):
    """A logger stuck in its first call until released (a dead tracking server)."""

    name = "slow"

    def __init__(self):
        self.release, self.calls = threading.Event(), 0

    def log_metrics(self, run_id, metrics, step):
        self.calls += 1
        self.release.wait(120)


def _finishes(fn) -> bool:
    """Whether ``fn()`` returns within 30 s ("did not hang"), run on its own thread."""
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    thread.join(30)
    return not thread.is_alive()


def test_a_slow_logger_never_blocks_the_feed_and_closing_is_bounded():
    rec, stuck = records(), Blocked()
    tr = Tracker([stuck], queue_items=3, close_seconds=0.2)
    tr.open("g", {})

    def feed():
        for i in range(1, 11):
            rec["p000"].history.append(row(i, 100 * i, float(i)))
            tr.observe(rec, {})

    try:
        assert _finishes(feed)  # while the logger is still stuck in its first call
        assert stuck.calls <= 1 and "behind" in tr.warning
        assert _finishes(tr.close)  # close gives up on it after close_seconds
        assert not stuck.release.is_set() and "dropped" in tr.warning
    finally:
        stuck.release.set()


def test_an_unreachable_mlflow_server_costs_a_warning(monkeypatch):
    from elegantpod.tracking import MLflowLogger

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    rec, good = records(), Recording()
    tr = Tracker([MLflowLogger("http://127.0.0.1:9"), good])  # nothing listens on port 9
    tr.open("g", {})
    tr.observe(rec, {})
    tr.close()
    assert "logger 'mlflow' disabled after open failed" in tr.warning
    assert {c[1] for c in good.of("start_run")} == {"p000", "p001", "p002"}


def test_a_tracker_without_loggers_does_nothing():
    tr = Tracker()
    tr.open("g", {})
    tr.observe(records(), {})
    tr.close({"leaderboard": []})
    assert not tr.is_active and tr.warning is None


def test_loggers_are_checked_early():
    with pytest.raises(ValueError, match="got 42"):
        check_loggers([42])
    with pytest.raises(ValueError, match="unknown tracking backend 'neptune'"):
        make_logger("neptune")
    assert [type(lg).__name__ for lg in check_loggers("tensorboard")] == ["TensorBoardLogger"]


def test_tournament_and_train_refuse_a_non_logger_before_any_work(tmp_path):
    from elegantpod import Tournament, train

    with pytest.raises(ValueError, match="got 'not a logger'|unknown tracking backend"):
        Tournament("CartPole-v1", store=tmp_path / "s", max_steps=10, loggers=["not a logger"])
    with pytest.raises(ValueError, match="got <object"):
        train("CartPole-v1", "ppo", max_steps=10, logger=object())
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())
