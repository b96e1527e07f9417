"""The dashboard on a real tournament (LocalCluster, 2 workers): real button clicks."""

import time

import pytest

import elegantpod
from elegantpod import Tournament
from elegantpod.tournament.core.generator import GeneratorConfig
from elegantpod.widgets.dashboard import Dashboard, curves_figure, parse_hparams
from elegantpod.widgets.html import leaderboard_html
from tests.helpers import latest_steps, wait_until


@pytest.fixture(scope="module")
def client():
    c = elegantpod.cluster(n_workers=2, dashboard_address="127.0.0.1:0")
    yield c
    cl = c.cluster
    c.close()
    cl.close()


@pytest.mark.slow
def test_buttons_steer_a_running_tournament(client, tmp_path, monkeypatch):
    # no replacement here: the clicks must find their pods alive
    t = Tournament(
        env="CartPole-v1",
        algos=["ppo"],
        pods=2,
        max_seconds=120,
        segment_steps=10**8,  # both pods stay in flight: a click always meets a live pod
        store=tmp_path / "s",
        client=client,
        generator=GeneratorConfig(ready_segments=10**6),
    )
    t.start()
    d = Dashboard(t, refresh_seconds=0.5)
    try:
        assert wait_until(lambda: latest_steps(t, "p000") is not None, 30)
        d.refresh()
        assert list(d.pod_select.options) == ["p000", "p001"]
        d.pod_select.value = "p000"
        d.pause_button.click()
        assert t.pod("p000")["status"] == "paused"
        assert "pause p000: done" in d.message.value
        assert wait_until(lambda: t.curves("p000")[-1].get("status") == "paused", 60)
        s1 = latest_steps(t, "p000")
        time.sleep(1.0)
        assert latest_steps(t, "p000") == s1

        d.resume_button.click()
        assert wait_until(lambda: latest_steps(t, "p000") > s1, 60)

        d.hparam_select.value = "lr"
        d.hparam_value.value = "not-a-number"
        d.mutate_button.click()
        assert "lr must be a" in d.message.value and "#b71c1c" in d.message.value
        assert t.pod("p000")["hparams"]["lr"] == 3e-3
        d.hparam_value.value = "1e-4"
        d.mutate_button.click()
        assert t.pod("p000")["hparams"]["lr"] == 1e-4
        assert wait_until(lambda: t.curves("p000")[-1].get("lr") == pytest.approx(1e-4), 60)

        d.pod_select.value = "p001"
        d.stop_button.click()  # frees a worker slot for the pod added next
        assert wait_until(lambda: t.pod("p001")["status"] == "stopped", 60)
        d.new_hparams.value = "lr=2e-3, epochs=3"
        d.add_button.click()
        assert "added p0" in d.message.value
        new = d.message.value.split("added ")[1].split("<")[0]
        assert t.pod(new)["hparams"]["epochs"] == 3
        assert wait_until(lambda: latest_steps(t, new) is not None, 60)  # the new pod runs
        d.new_hparams.value = "bogus"
        d.add_button.click()
        assert "expected name=value" in d.message.value

        assert wait_until(lambda: len(t.leaderboard) >= 1, 60)  # p001's stopped segment
        d.refresh()
        board = t.leaderboard
        first_row = [c.value for c in d._cells[0]]
        assert first_row[1] == f"<b>{board['pod'][0]}</b>"
        assert "lr=" in first_row[7]  # key hyperparameters column
        assert "pods in flight" in d.cluster.value and "127.0.0.1" in d.cluster.value
        assert "p000" in d.lineage.value
        # the curves tab is a PNG drawn off the main thread (no Output capture)
        assert wait_until(lambda: bytes(d.curves.value).startswith(b"\x89PNG"), 30)
        # its left panel is the fitness the leaderboard ranks, with the target line
        board, hist = t.leaderboard, t.history()
        fig = curves_figure(hist, t.curves(), 400.0, "return")
        lines = fig.axes[0].lines
        plotted = [y for ln in lines if ln.get_label() != "target" for y in ln.get_ydata()]
        assert max(plotted) == pytest.approx(hist["score"].max())
        assert max(plotted) >= board["score_mean"].max() - 1e-9
        assert [list(ln.get_ydata()) for ln in lines if ln.get_label() == "target"] == [[400, 400]]
        assert "schedule</b>" in d.lineage.value
        # "Watch best": the best agent's episode, as t.best().record(...) makes it
        d.watch_steps.value = 20
        monkeypatch.setenv("ELEGANTPOD_WORKDIR", str(tmp_path / "work"))  # the video's folder
        d.watch_button.click()
        assert "best agent: " in d.message.value and "#b71c1c" not in d.message.value
        (shown,) = d.video.outputs
        assert shown["data"]["text/html"].startswith("<video controls")
        assert "base64," in shown["data"]["text/html"]
    finally:
        t.stop()
        t.wait(60)
        d.close()
    assert t.status == "stopped"


def test_static_html_escapes_user_strings(tmp_path):
    import pandas as pd

    board = pd.DataFrame(
        [
            {
                "rank": 1,
                "pod": "<script>x</script>",
                "algo": "ppo",
                "score_mean": 1.5,
                "score_std": 0.1,
                "env_steps": 10,
                "steps_per_second": None,
                "status": "idle",
                "parent": None,
                "hparams": {"lr": "<i>1</i>"},
            }
        ]
    )
    out = leaderboard_html(board, title="<b>t</b>")
    assert "<script>" not in out and "&lt;script&gt;" in out and "&lt;b&gt;t" in out
    assert "<i>" not in out and "lr=&lt;i&gt;1" in out
    t = Tournament(env="CartPole-v1", algos=["ppo"], pods=1, max_steps=10, store=tmp_path / "s")
    assert "no finished segment yet" in t._repr_html_()


def test_parse_hparams():
    assert parse_hparams("lr=1e-3, gamma = 0.9;epochs=2") == {
        "lr": "1e-3",
        "gamma": "0.9",
        "epochs": "2",
    }
    assert parse_hparams("  ") == {}
    with pytest.raises(ValueError, match="expected name=value, got 'lr'"):
        parse_hparams("lr")


def test_table_updates_are_diffed(tmp_path):
    t = Tournament(env="CartPole-v1", algos=["ppo"], pods=1, max_steps=10, store=tmp_path / "s")
    d = Dashboard(t, refresh_seconds=0)
    changes = []
    rows = [
        ["1", "p000", "ppo", "1 ± 0", "10", "-", "idle", "lr=0.003", "-"],
        ["2", "p001", "ppo", "0 ± 0", "10", "-", "idle", "lr=0.001", "-"],
    ]
    d._update_table(rows)
    for row in d._cells:
        for cell in row:
            cell.observe(changes.append, names="value")
    d._update_table(rows)
    assert changes == []  # nothing changed, nothing sent
    rows[1][6] = "running"
    d._update_table(rows)
    assert [c["new"] for c in changes] == ["running"]
    d.close()


def test_one_dashboard_per_tournament(tmp_path):
    """``t.start()`` as a cell's last line displays the dashboard; ``t.dashboard()`` in
    the next cell is that same widget, so one refresh thread serves both."""
    import threading

    t = Tournament(env="CartPole-v1", algos=["ppo"], pods=2, max_seconds=5, store=tmp_path / "s")
    bundle = t._repr_mimebundle_()  # what Jupyter asks of a cell's last value
    assert "application/vnd.jupyter.widget-view+json" in bundle
    d = t.dashboard()
    assert d._repr_mimebundle_() == bundle  # displayed itself, it is that widget
    assert t.dashboard(refresh_seconds=0.5) is d and d.refresh_seconds == 0.5
    refreshers = [th for th in threading.enumerate() if th.name == "elegantpod-dashboard"]
    assert len(refreshers) == 1
    with pytest.raises(ValueError, match="refresh_seconds must be a number >= 0, got -1"):
        d.set_refresh(-1)
    d.close()
    assert d.is_closed
    fresh = t.dashboard(refresh_seconds=0)  # a closed one is replaced
    assert fresh is not d and fresh._thread is None
    fresh.close()
    assert wait_until(
        lambda: not any(th.name == "elegantpod-dashboard" for th in threading.enumerate()), 60
    )


def test_scores_show_only_the_digits_their_spread_supports():
    from elegantpod.widgets.html import fmt, fmt_score

    assert fmt_score(375.7, 157.0) == "376 ± 157"
    assert fmt_score(120.4, 5.004) == "120.4 ± 5.0"
    assert fmt_score(1.2345, 0.0512) == "1.234 ± 0.051"
    assert fmt_score(500.0, 0.0) == "500 ± 0"
    assert fmt_score(float("nan"), 1.0) == "- ± 1"
    assert fmt(2933.2) == "2,933" and fmt(17403.0) == "17,403"  # one style for large numbers
    assert fmt("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"


def test_curves_of_thirty_pods_stay_readable():
    """Found: past 10 pods matplotlib's colours repeated and the legend covered the
    lines. Now 20 distinct colours, one per pod in both panels, and the legend beside
    the panels; env steps spanning decades go on a log axis."""
    import pandas as pd

    rows, events = [], []
    for i in range(30):
        for s in range(3):
            rows.append({"pod": f"p{i:03d}", "parent": None, "fork_segment": None,
                         "segment": s + 1, "env_steps": 1_000 * (s + 1),
                         "score": float(i + s), "time": float(10 * s + i)})  # fmt: skip
            events.append({"pod": f"p{i:03d}", "env_steps": 10 ** (s + 2) * (i + 1),
                           "train_return": float(i * s)})  # fmt: skip
    fig = curves_figure(pd.DataFrame(rows), events, 10.0, "return")
    fitness, steps = fig.axes
    colours = [line.get_color() for line in fitness.get_lines()[:30]]
    assert len({tuple(c) for c in colours[:20]}) == 20
    assert colours == [line.get_color() for line in steps.get_lines()]  # same pod, same colour
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    assert legend.x0 >= steps.get_window_extent(renderer).x1  # beside the data
    assert steps.get_xscale() == "log"
