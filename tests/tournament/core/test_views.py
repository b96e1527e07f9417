"""What a view renders is bounded (issue 29, minor items): a store with thousands of
pods, long errors and long histories still gives pages of a few hundred kilobytes."""

from types import SimpleNamespace

import pandas as pd

from elegantpod.agents.ppo import PPOConfig
from elegantpod.tournament.core import field_checks, views
from elegantpod.tournament.store import state as stored_state
from elegantpod.widgets.html import MAX_ROWS, leaderboard_html, lineage_html, schedule_html

LIMIT = 400_000
"""Bytes a rendered table may take (the review saw a 13 MB lineage widget)."""


def hostile_population(pods: int, rows: int):
    hp = [dict(vars(PPOConfig()), lr=lr, hidden=[64, 64]) for lr in (1e-3, 2e-3)]
    long = ["x" * 200] * 64  # the longest mutation value a store may hold
    records = [
        {
            "pod_id": f"p{i:04d}",
            "algo": "ppo",
            "hparams": {},
            "seed": i,
            "status": "failed",
            "error": "<b>E</b>" * 500,
            "mutation": {name: [long, long] for name in ("lr", "gamma", "clip_coef", "epochs")},
            "history": [
                {"segment": j + 1, "env_steps": j, "score": 0.0, "time": 0.0, "hparams": hp[j % 2]}
                for j in range(rows if i == 0 else 0)
            ],
        }
        for i in range(pods)
    ]
    loaded, _, _ = stored_state.load({"pods": records}, "state/00000001.json")
    return SimpleNamespace(records=loaded)


def test_the_lineage_view_shows_the_newest_pods_and_counts_the_rest():
    population = hostile_population(pods=3000, rows=0)
    page = lineage_html(views.lineage(population))
    assert len(page) < LIMIT, len(page)
    assert f"{3000 - MAX_ROWS:,} more older pods not shown" in page
    assert "p2999" in page and "p0000" not in page
    assert "<b>E</b>" not in page  # still escaped after cutting


def test_a_schedule_of_ten_thousand_phases_renders_its_newest():
    population = hostile_population(pods=1, rows=field_checks.MAX_HISTORY)
    phases = views.schedule(population, "p0000")
    assert len(phases) == field_checks.MAX_HISTORY  # every row changed the hyperparameters
    page = schedule_html(phases)
    assert len(page) < LIMIT, len(page)
    assert f"{field_checks.MAX_HISTORY - MAX_ROWS:,} more earlier phases not shown" in page


def test_the_leaderboard_view_is_bounded():
    rows = [
        {c: None for c in views.LEADERBOARD_COLUMNS}
        | {"rank": i, "pod": f"p{i:04d}", "algo": "ppo", "score_mean": 1.0, "status": "x" * 4000}
        for i in range(1, 2001)
    ]
    page = leaderboard_html(pd.DataFrame(rows, columns=views.LEADERBOARD_COLUMNS))
    assert len(page) < LIMIT, len(page)
    assert f"{2000 - MAX_ROWS:,} more entries not shown" in page


def test_the_lineage_and_schedule_say_why_each_pod_was_made():
    """Restarts and replacements on evidence are marked, with their figures (issue 31)."""
    base = {"pod_id": "p0000", "algo": "ppo", "hparams": {}, "seed": 0}
    records = [
        {**base, "origin": {"kind": "start"}, "status": "replaced"},
        {
            **base,
            "pod_id": "p0001",
            "parent": "p0002",
            "origin": {
                "kind": "child",
                "replaced": "p0000",
                "score": -1200.5,
                "leader": "p0002",
                "leader_score": -310.25,
                "t": 4.5,
            },
            "history": [{"segment": 1, "env_steps": 10, "score": -300.0, "time": 1.0}],
        },
        {
            **base,
            "pod_id": "p0002",
            "origin": {"kind": "restart", "replaced": "p0003", "stale": 8, "best": -0.05},
            "history": [{"segment": 1, "env_steps": 10, "score": 9.0, "time": 1.0}],
        },
    ]
    snapshot = {"pods": records, "state": {"elapsed_seconds": 2.0}}
    loaded, _, _ = stored_state.load(snapshot, "state/00000001.json")
    population = SimpleNamespace(records=loaded)
    edges = {e["pod"]: e["why"] for e in views.lineage(population)}
    assert edges["p0000"] == "first pods"
    assert edges["p0001"] == ("replaced p0000 on evidence: -1,200 vs leader p0002 -310.2 (t=4.5)")
    assert edges["p0002"] == (
        "restart: replaced p0003 after 8 segments without improvement (best -0.05)"
    )
    page = lineage_html(views.lineage(population))
    assert "why made" in page and "restart: replaced p0003" in page
    phases = views.schedule(population, "p0002")
    assert phases[0]["origin"].startswith("restart")
    assert "restart: replaced p0003" in schedule_html(phases)
