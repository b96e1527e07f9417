"""``elegantpod.compare``: figures against a hand-computed case, real stores and pod runs,
hostile stores, the CLI, and the report in headless Chromium."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import elegantpod
from elegantpod.comparison import statistics as st
from elegantpod.comparison import survival as sv
from elegantpod.comparison.comparison import MAX_RESAMPLED, MAX_RUNS, compare
from elegantpod.comparison.runs import MAX_SCORE, RunCurve, RunError
from elegantpod.tournament.core.spec import TournamentSpec
from tests.helpers import CHROMIUM, need_chromium
from tests.tournament.store.test_hostile_store import make_store, record

EVIL = '<img src=x onerror="window.__pwned=1;alert(1)">'
CLOCK = {"total_steps": 0, "elapsed_seconds": 1000.0}
"""A saved tournament clock past every history row below (a store checks it is)."""


def curve(times, scores, **kw):
    return {"time": list(times), "score": list(scores), **kw}


def hand_case():
    """Two methods, four runs each, target 10, budget 30.

    fast: reaches 10 at 5, 10, 15 and never (9 at 25) -> censored times 5, 10, 15, 30;
    slow: 20, 25, never, never -> 20, 25, 30, 30. Finals (best by 30 s): fast 12, 11,
    10, 9; slow 10, 10, 8, 7 (a 50 at 40 s lies past the budget and is ignored)."""
    fast = [
        curve([0, 5, 20], [0, 10, 12]),
        curve([0, 10], [1, 11]),
        curve([0, 15], [2, 10]),
        curve([0, 25], [3, 9]),
    ]
    slow = [
        curve([0, 20], [0, 10]),
        curve([0, 25], [0, 10]),
        curve([0, 29, 40], [0, 8, 50]),
        curve([0, 30], [0, 7]),
    ]
    return {"fast": fast, "slow": slow}


def test_the_figures_of_a_hand_computed_case():
    c = compare(hand_case(), target=10, budget=30, reps=2000)
    assert c.times("fast").tolist() == [5, 10, 15, math.inf]
    assert c.censored_times("slow").tolist() == [20, 25, 30, 30]
    assert c.finals("slow").tolist() == [10, 10, 8, 7]
    t = c.table
    assert t.loc["fast", "solved"] == 0.75 and t.loc["slow", "solved"] == 0.5
    # IQM of 4 runs drops one at each end: fast (10 + 15) / 2, slow (25 + 30) / 2
    assert t.loc["fast", "time_iqm"] == 12.5 and t.loc["slow", "time_iqm"] == 27.5
    assert t.loc["fast", "final_iqm"] == 10.5 and t.loc["slow", "final_iqm"] == 9.0
    assert t.loc["fast", "solved_low"] == pytest.approx(0.3006, abs=1e-3)  # Wilson 3/4
    (v,) = c.versus
    assert (v.method, v.other) == ("fast", "slow")
    assert v.time_difference.value == -15.0
    # fast < slow in 12 of 16 pairs (5, 10 and 15 beat all four), tied in 2 (30 and the
    # two 30s): (12 + 1) / 16
    assert v.faster.value == pytest.approx(13 / 16)
    assert v.time_difference.low <= -15.0 <= v.time_difference.high
    pairs = c.pairs
    assert pairs.loc[0, "verdict"] == v.verdict
    assert list(c.run_table()["seconds_to_target"].isna()) == [False] * 3 + [True] + [
        False,
        False,
        True,
        True,
    ]


def test_a_method_pays_only_when_the_interval_excludes_zero():
    rng = np.random.default_rng(0)
    quick = [curve([0, t], [0, 1]) for t in rng.uniform(5, 10, 10)]
    late = [curve([0, t], [0, 1]) for t in rng.uniform(40, 50, 10)]
    mixed = [curve([0, t], [0, 1]) for t in rng.uniform(5, 50, 10)]
    c = compare({"quick": quick, "late": late, "mixed": mixed}, target=1, budget=60)
    verdicts = {v.other: v.verdict for v in c.versus}
    assert verdicts["late"] == "pays"
    assert c.versus[0].pays and c.versus[0].time_difference.high < 0
    c2 = compare({"late": late, "quick": quick}, target=1, budget=60)
    assert c2.versus[0].verdict == "loses"
    same = compare({"a": quick, "b": quick}, target=1, budget=60)
    assert same.versus[0].verdict == "undecided"


@pytest.mark.parametrize("n", [1, 2])
def test_too_few_runs_get_no_verdict_however_far_apart(n):
    """One run's bootstrap interval is a point, so 5 s against 50 s looked like "pays"
    with the interval [-45, -45] (the first lander seed of the benchmark did this)."""
    quick = [curve([0, 5.0 + i], [0, 1]) for i in range(n)]
    late = [curve([0, 50.0 + i], [0, 1]) for i in range(n)]
    c = compare({"quick": quick, "late": late}, target=1, budget=60)
    (v,) = c.versus
    assert v.runs == n and v.time_difference.high < 0  # the interval alone would say pays
    assert v.verdict == "too few runs" and not v.pays
    assert c.pairs.loc[0, "verdict"] == "too few runs"
    assert "too few runs: " in c.to_markdown() and 'class="too-few-runs"' in c.to_html()
    more = compare({"quick": quick * 3, "late": late * 3}, target=1, budget=60)
    assert more.versus[0].verdict == "pays"


def test_target_and_budget_come_from_the_stores_when_they_agree(tmp_path):
    spec = TournamentSpec(env_id="CartPole-v1", target_reward=100.0, max_seconds=50.0).to_dict()
    for i, hit in enumerate([10.0, 20.0]):
        hist = [{"segment": 1, "env_steps": 10, "score": 5.0, "time": 1.0}]
        hist.append({"segment": 2, "env_steps": 20, "score": 120.0, "time": hit})
        make_store(
            tmp_path / f"s{i}", pods=[record(history=hist, segment=2)], spec=spec, state=CLOCK
        )
    c = compare({"t": [tmp_path / "s0", tmp_path / "s1"]})
    assert (c.target, c.budget) == (100.0, 50.0)
    assert c.times("t").tolist() == [10.0, 20.0]
    other = dict(spec, target_reward=90.0)
    make_store(tmp_path / "s2", pods=[record()], spec=other)
    with pytest.raises(
        ValueError, match=r"give target=: the runs say different targets \[90.0, 100.0\]"
    ):
        compare({"t": [tmp_path / "s0", tmp_path / "s2"]})
    assert compare({"t": [tmp_path / "s0", tmp_path / "s2"]}, target=100).target == 100


@pytest.mark.parametrize(
    "runs, target, budget, message",
    [
        ({}, 1, None, "non-empty mapping"),
        ({"a": []}, 1, None, r"runs\['a'\] is empty"),
        ({"a": "one/store"}, 1, None, r"runs\['a'\] must be a list of runs"),
        ({"": [curve([0], [1])]}, 1, None, "method names must be non-empty strings"),
        ({"a": [curve([0], [1])]}, math.nan, None, "target"),
        ({"a": [curve([0], [1])]}, 1, -3.0, "budget must be > 0 seconds, got -3.0"),
        ({"a": [curve([0], [1])]}, None, None, "give target=: no run says its target"),
        ({"a": [{"time": [0, 1], "score": [1]}]}, 1, None, "'time' has 2 values and 'score' 1"),
        ({"a": [{"time": [0], "score": ["x"]}]}, 1, None, r"\[0\].score must be a number"),
        ({"a": [{"time": [-1], "score": [1]}]}, 1, None, r"\[0\].time must be a finite number"),
        ({"a": [{"time": [0], "score": [1], "cmd": "x"}]}, 1, None, "unknown keys"),
        ({"a": [42]}, 1, None, "a run must be a store"),
        # a target or budget no run can mean: refused, not turned into figures
        ({"a": [curve([0], [1])]}, 1e308, 10, r"target must be .* got 1e\+308"),
        ({"a": [curve([0], [1])]}, 1, 1e-300, r"budget must be between .*, got 1e-300"),
        ({"a": [curve([0], [1])]}, 1, 1e300, r"budget must be between .*, got 1e\+300"),
        ({"a": [curve([0], [1e308])]}, 1, 10, r"\[0\].score must be .* got 1e\+308"),
        ({"a": [curve([0], [1], target=-1e300)]}, None, 10, r"target must be .* got -1e\+300"),
        ({"\x1b[2Jpwned": [curve([0], [1])]}, 1, 10, r"'\\x1b\[2Jpwned' holds a control"),
    ],
)
def test_bad_input_is_refused_naming_the_value(runs, target, budget, message):
    with pytest.raises(ValueError, match=message):
        compare(runs, target, budget=budget)


def test_a_title_that_would_drive_the_terminal_is_refused():
    with pytest.raises(ValueError, match=r"title .*'\\x1b\]0;x\\x07' holds a control"):
        compare(hand_case(), 10, budget=30, title="\x1b]0;x\x07")


def test_too_many_runs_are_refused_before_any_is_read():
    """Past the bounds, one line naming the count and the bound, and no run is read
    (these paths do not exist)."""
    runs = {"a": ["missing"] * 3, "b": ["missing"] * (MAX_RUNS + 1)}
    with pytest.raises(ValueError, match=rf"runs\['b'\] has 1,001 runs; at most {MAX_RUNS:,}"):
        compare(runs, 1)
    reps = MAX_RESAMPLED // 400 + 1
    with pytest.raises(ValueError, match=rf"{reps:,} resamples of the 400 runs of 'b' .* at most"):
        compare({"a": ["missing"], "b": ["missing"] * 400}, 1, reps=reps)


def test_scores_at_the_bound_give_finite_figures_and_a_verdict():
    """The largest scores accepted: every IQM, difference and interval stays finite."""
    top = [curve([0, 1 + i], [-MAX_SCORE, MAX_SCORE]) for i in range(8)]
    bottom = [curve([0, 20 + i], [-MAX_SCORE, -MAX_SCORE]) for i in range(8)]
    c = compare({"top": top, "bottom": bottom}, MAX_SCORE, budget=30, reps=200)
    figures = c.to_dict()
    for f in figures["methods"].values():
        assert all(math.isfinite(x) for x in f["time_iqm"] + f["final_iqm"])
    (v,) = figures["versus"]
    assert all(math.isfinite(x) for k in ("time_difference", "final_difference") for x in v[k])
    assert v["verdict"] == "pays"


def test_hostile_run_folders_are_refused_in_one_line_naming_the_file(tmp_path):
    run = tmp_path / "pod"
    run.mkdir()
    result = run / "result.json"
    result.write_text('{"curve": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(RunError, match=r"pod: cannot read result.json: nested too deeply"):
        compare({"a": [run]}, 1)
    result.write_text('{"curve": [{"wall_seconds": 1, "score": ' + "9" * 400 + "}]}")
    with pytest.raises(RunError, match=r"result.json: curve\[0\].score must be a finite number"):
        compare({"a": [run]}, 1)
    # a link out of the run folder is refused as a store refuses one, even to a good file
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"curve": [{"wall_seconds": 1.0, "score": 5.0}]}))
    result.unlink()
    result.symlink_to(elsewhere)
    with pytest.raises(RunError, match=r"result.json' is a symbolic link"):
        compare({"a": [run]}, 1)
    good = tmp_path / "good"
    good.mkdir()
    (good / "result.json").write_bytes(elsewhere.read_bytes())
    (tmp_path / "linked").symlink_to(good, target_is_directory=True)
    # the run folder itself may be a link the user typed, as a store's root may
    assert compare({"a": [tmp_path / "linked"]}, 1).times("a").tolist() == [1.0]


def test_hostile_stores_and_run_folders_are_refused_naming_the_run(tmp_path):
    make_store(
        tmp_path / "nan", pods=[record(history=[{"time": 1.0, "score": "NaN"}])], state=CLOCK
    )
    with pytest.raises(RunError, match=r"nan: not a readable tournament store: .*history\[0\]"):
        compare({"a": [tmp_path / "nan"]}, 1)
    make_store(tmp_path / "neg", pods=[record(history=[{"time": -5.0, "score": 1.0}])])
    with pytest.raises(RunError, match="neg: not a readable tournament store"):
        compare({"a": [tmp_path / "neg"]}, 1)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(RunError, match="neither a tournament's store .* nor a pod's output"):
        compare({"a": [tmp_path / "nothing"]}, 1)
    run = tmp_path / "pod"
    run.mkdir()
    (run / "result.json").write_text(json.dumps({"curve": [{"wall_seconds": "soon", "score": 1}]}))
    with pytest.raises(RunError, match=r"result.json: curve\[0\].time must be a number"):
        compare({"a": [run]}, 1)
    (run / "result.json").write_text("[1, 2]")
    with pytest.raises(RunError, match="result.json must hold an object, got list"):
        compare({"a": [run]}, 1)
    os.remove(run / "result.json")
    os.mkfifo(run / "result.json")  # a FIFO must not block the read
    with pytest.raises(RunError, match="cannot read result.json"):
        compare({"a": [run]}, 1)


def test_real_stores_and_pod_runs_are_compared(client, tmp_path):
    """A real tournament's store and a real single pod's output folder, side by side."""
    t = elegantpod.Tournament(
        "CartPole-v1",
        algos=["ppo"],
        pods=2,
        store=str(tmp_path / "store"),
        client=client,
        max_steps=2 * 2_048,
        segment_steps=2_048,
        eval_episodes=2,
    )
    t.start()
    t.wait(timeout=300)
    elegantpod.train(
        "CartPole-v1", "ppo", max_steps=4_096, eval_every_steps=2_048, out=tmp_path / "pod", seed=1
    )
    c = compare({"tournament": [tmp_path / "store"], "one pod": [tmp_path / "pod"]}, target=10)
    runs = {r.kind: r for rs in c.runs.values() for r in rs}
    assert set(runs) == {"tournament", "pod"}
    assert len(runs["tournament"].times) == len(t.history().dropna(subset=["score"]))
    assert max(runs["tournament"].scores) == pytest.approx(t.history()["score"].max())
    assert runs["pod"].times and all(math.isfinite(x) for x in runs["pod"].scores)
    assert c.table.loc["tournament", "runs"] == 1


def test_the_cli_prints_the_figures_and_writes_the_report(tmp_path, capsys):
    from elegantpod.cli.main import main

    data = tmp_path / "d"
    for i, hit in enumerate([3.0, 4.0]):
        hist = [{"segment": 1, "env_steps": 10, "score": 50.0, "time": hit}]
        make_store(data / f"a{i}", pods=[record(history=hist, segment=1)], state=CLOCK)
        hist = [{"segment": 1, "env_steps": 10, "score": 50.0, "time": 10 * hit}]
        make_store(data / f"b{i}", pods=[record(history=hist, segment=1)], state=CLOCK)
    argv = ["compare", "--method", "a", str(data / "a0"), str(data / "a1")]
    argv += ["--method", "b", str(data / "b0"), str(data / "b1"), "--target", "40"]
    assert main([*argv, "--budget", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["methods"]["a"]["seconds_to_target"] == [3.0, 4.0]
    assert out["versus"][0]["other"] == "b" and out["target"] == 40
    assert main([*argv, "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("| task | method |") and "| b |" in md
    assert main([*argv, "--html", str(tmp_path / "r.html")]) == 0
    assert "IQM" in capsys.readouterr().out and (tmp_path / "r.html").stat().st_size > 10_000
    assert main(["compare", "--method", "a", "--target", "1"]) == 2
    assert "--method 'a' has no runs" in capsys.readouterr().err
    assert main([*argv, "--html", str(tmp_path / "missing" / "r.html")]) == 2
    assert "report directory" in capsys.readouterr().err


def test_the_report_is_self_contained_escaped_and_renders_in_chromium(tmp_path):
    need_chromium()
    from playwright.sync_api import sync_playwright

    runs = hand_case()
    runs[EVIL] = runs.pop("slow")
    path = tmp_path / "report.html"
    c = compare(runs, target=10, budget=30, title=f"trap {EVIL}", out=path)
    html = path.read_text()
    assert EVIL not in html and "&lt;img src=x" in html
    assert EVIL not in c._repr_html_() and EVIL not in c.to_markdown()
    requests, dialogs = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            rows = [
                [cell.inner_text() for cell in row.locator("td").all()]
                for row in page.locator("#methods tbody tr").all()
            ]
            charts = page.locator("img.chart")
            loaded = [
                charts.nth(i).evaluate("img => img.complete && img.naturalWidth > 400")
                for i in range(charts.count())
            ]
            verdict = page.locator("#pairs td.pays, #pairs td.loses, #pairs td.undecided")
            verdict_text = verdict.inner_text()
            family_text = page.locator("#pairs td.family-not-shown").inner_text()
            runs_text = page.locator("#runs").inner_text()
            pwned = page.evaluate("window.__pwned || 0")
            title = page.title()
        finally:
            browser.close()
    assert requests == [path.as_uri()]  # nothing else: no script, font or image fetched
    assert not dialogs and not pwned
    assert title == f"trap {EVIL}"  # shown as text
    assert rows[0][:3] == ["fast", "4", "3/4 [0.3, 0.95]"]
    # the RMST beside the solved fraction; half of the slow runs are censored, so its
    # IQM of times includes the budget and is shown as the lower bound it is
    assert rows[1][0] == EVIL and rows[1][3].startswith("26.2 [")
    assert rows[1][4].startswith("\u2265 27.5 [") and rows[0][4].startswith("12.5 [")
    assert loaded == [True, True]
    assert verdict_text == c.versus[0].verdict
    assert family_text == "not shown" and "> 30 (censored)" in runs_text


def test_a_run_curve_reads_as_its_evaluations():
    r = RunCurve("x", "curve", (1.0, 2.0, 5.0), (0.0, 3.0, 9.0))
    assert r.time_to(3.0) == 2.0 and r.time_to(9.0, budget=4.0) == math.inf
    assert r.best() == 9.0 and r.best(budget=4.0) == 3.0 and math.isnan(r.best(budget=0.5))


def test_censored_time_to_target_gets_km_rmst_and_censored_labels():
    """The hand case: fast 5, 10, 15, >30; slow 20, 25, >30, >30 (target 10, budget 30).
    RMST = the mean of min(T, 30): 15 and 26.25. Slow's IQM (25 + 30) / 2 includes a run
    counted at the budget: a lower bound, labelled so everywhere it is printed."""
    from elegantpod.comparison.command import text_table

    c = compare(hand_case(), target=10, budget=30, reps=500)
    t = c.table
    assert t.loc["fast", "rmst"] == 15.0 and t.loc["slow", "rmst"] == 26.25
    assert t.loc["slow", "rmst_low"] <= 26.25 <= t.loc["slow", "rmst_high"] <= 30
    assert list(t["censored"]) == [1, 2]
    # 1 of 4 censored is the quarter the IQM drops; 2 of 4 is not
    assert list(t["time_iqm_censored"]) == [False, True]
    km = c.kaplan_meier("slow")
    assert km["seconds"].tolist() == [0, 20, 25, 30]
    assert km["survival"].tolist() == [1.0, 0.75, 0.5, 0.5]
    assert km["censored"].tolist() == [0, 0, 0, 2]
    (v,) = c.versus
    assert v.rmst_difference.value == -11.25 and v.test.difference == -11.25
    assert (
        v.logrank.p == sv.logrank([5, 10, 15, 30], [1, 1, 1, 0], [20, 25, 30, 30], [1, 1, 0, 0]).p
    )
    assert not v.test.paired and v.pairing == "unpaired: 4 run(s) of 'fast' say no seed"
    md, text, page = c.to_markdown(), text_table(c), c.to_html()
    for shown in (md, text, page):
        assert "\u2265 27.5 [" in shown and "12.5 [" in shown and "\u2265 12.5" not in shown
        assert "3/4 vs 2/4" in shown  # the solved fractions beside the RMST difference
    assert "(censored) s, P(faster)" in md and "&gt; 30 (censored)" in page
    assert "middle six" in page and "not the same bound for every method" in page
    figures = c.to_dict()
    assert figures["methods"]["slow"]["time_iqm_censored"] is True
    assert figures["methods"]["slow"]["kaplan_meier"]["survival"] == [0.75, 0.5, 0.5]


def seeded(times, seeds, budget_hit=True):
    """Runs reaching the target (1) at each of ``times``, with their seeds."""
    return [curve([0, t], [0, 1], seed=s) for t, s in zip(times, seeds, strict=True)]


def test_runs_with_the_same_seeds_are_compared_pair_by_pair():
    """The seeds given in another order for each method: the test pairs run by seed and
    equals the paired test on the seed-aligned arrays; its p-value is exact."""
    a_t = [3.0, 8.0, 12.0, 4.0, 50.0, 9.0]
    b_t = [9.0, 10.0, 30.0, 4.0, 70.0, 20.0]
    seeds = [10, 11, 12, 13, 14, 15]
    order = [5, 2, 0, 4, 1, 3]
    runs = {
        "tournament": seeded(a_t, seeds),
        "sweep": seeded([b_t[i] for i in order], [seeds[i] for i in order]),
    }
    c = compare(runs, target=1, budget=60, reps=500)
    (v,) = c.versus
    a = np.minimum(a_t, 60.0)
    b = np.minimum(b_t, 60.0)
    want = sv.paired_permutation_test(a, np.array(a_t) < 60, b, np.array(b_t) < 60, 60.0)
    assert v.test == want and v.test.paired and v.test.exact
    assert v.pairing == "paired by seed (6 seeds)"
    # a faster or tied on every seed, ties (seed 13) swap to the same difference:
    # only the swaps of seeds where a == b are as extreme, 2 of 64
    assert v.test.p_less == 2 / 64 and v.p_value == v.test.p
    unpaired = compare(runs, target=1, budget=60, reps=500, paired=False).versus[0]
    assert not unpaired.test.paired and unpaired.pairing == "unpaired: paired=False"
    runs["sweep"][0] = curve([0, 9.0], [0, 1], seed=99)
    c = compare(runs, target=1, budget=60, reps=500)
    assert c.versus[0].pairing.startswith("unpaired: the two methods ran different seeds")
    with pytest.raises(ValueError, match=r"paired=True, but 'tournament' against 'sweep' is"):
        compare(runs, target=1, budget=60, paired=True)


def test_a_declared_family_is_holm_adjusted_with_a_verdict_at_its_level():
    rng = np.random.default_rng(0)
    seeds = list(range(1000, 1012))
    fast = seeded(rng.uniform(5, 30, 12), seeds)
    slow = seeded(rng.uniform(40, 100, 12), seeds)  # beyond 60 s: censored
    near = seeded(rng.uniform(5, 32, 12), seeds)
    runs = {"tournament": fast, "restart_only": near, "random": slow}
    family = [("tournament", "restart_only"), ("tournament", "random")]
    c = compare(runs, target=1, budget=60, reps=500, family=family, alternative="less", level=0.025)
    assert [(v.method, v.other) for v in c.versus] == family
    raw = [v.p_value for v in c.versus]
    assert [v.p_adjusted for v in c.versus] == st.holm(raw).tolist()
    assert raw[1] == 1 / 2**12  # every seed faster: only the identity is as low
    assert c.versus[1].family_verdict == "faster" and c.versus[0].family_verdict == "not shown"
    pairs = c.pairs
    assert pairs["p_adjusted"].tolist() == [v.p_adjusted for v in c.versus]
    assert pairs["family_verdict"].tolist() == ["not shown", "faster"]
    md = c.to_markdown()
    assert "| at family-wise 0.025 |" in md and "paired, exact, less" in md
    every = compare(runs, target=1, budget=60, reps=500, family="all")
    assert len(every.versus) == 3 and every.versus[2].method == "restart_only"


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"family": [("a", "c")]}, "family names 'c', which is not one of the methods"),
        ({"family": [("a", "a")]}, "family compares 'a' with itself"),
        ({"family": [("a", "b"), ("b", "a")]}, "holds the comparison 'b' against 'a' twice"),
        ({"family": "every"}, "family must be 'reference', 'all' or a list"),
        ({"family": []}, "family is empty"),
        ({"alternative": "lower"}, "alternative must be one of .* got 'lower'"),
        ({"level": 0.7}, r"level must be a number in \(0, 0.5\], got 0.7"),
        ({"level": math.nan}, "level must be a number .* got nan"),
        ({"permutations": 10}, r"permutations must be an integer in \[1000, 1000000\], got 10"),
        ({"paired": "yes"}, "paired must be None, True or False, got 'yes'"),
    ],
)
def test_bad_test_settings_are_refused_before_any_run_is_read(kw, message):
    runs = {"a": ["missing"], "b": ["missing"]}  # never read: the settings fail first
    with pytest.raises(ValueError, match=message):
        compare(runs, 1, budget=10, **kw)


def test_seeds_are_read_from_stores_pod_outputs_and_data(tmp_path):
    spec = TournamentSpec(env_id="CartPole-v1", seed=7).to_dict()
    make_store(tmp_path / "s", pods=[record()], spec=spec)
    c = compare({"t": [tmp_path / "s"]}, 1, budget=10)
    assert c.runs["t"][0].seed == 7
    run = tmp_path / "pod"
    run.mkdir()
    (run / "result.json").write_text(
        json.dumps({"seed": 3, "curve": [{"wall_seconds": 1.0, "score": 5.0}]})
    )
    assert compare({"p": [run]}, 1, budget=10).runs["p"][0].seed == 3
    (run / "result.json").write_text(json.dumps({"seed": 1.5, "curve": []}))
    with pytest.raises(RunError, match=r"result.json: seed must be an integer .* got 1.5"):
        compare({"p": [run]}, 1, budget=10)
    with pytest.raises(RunError, match=r"<data>.seed must be an integer .* got True"):
        compare({"d": [curve([0], [1], seed=True)]}, 1, budget=10)


def test_the_cli_declares_the_family_and_its_level(tmp_path, capsys):
    from elegantpod.cli.main import main

    runs = tmp_path / "runs"
    runs.mkdir()
    argv = ["compare"]
    for name, base in (("a", 1.0), ("b", 20.0), ("c", 30.0)):
        paths = []
        for s in range(4):
            path = runs / f"{name}{s}"
            path.mkdir()
            (path / "result.json").write_text(
                json.dumps({"seed": s, "curve": [{"wall_seconds": base + s, "score": 5.0}]})
            )
            paths.append(str(path))
        argv += ["--method", name, *paths]
    argv += ["--target", "1", "--budget", "60", "--alternative", "less", "--level", "0.025"]
    assert main([*argv, "--pair", "a", "c", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["family"] == [["a", "c"]] and out["level"] == 0.025
    (v,) = out["versus"]
    assert v["test"]["paired"] and v["test"]["p"] == 1 / 16 and v["family_verdict"] == "not shown"
    assert main([*argv, "--family", "all", "--paired", "no"]) == 0
    text = capsys.readouterr().out
    assert "RMST s [95% CI]" in text and "b vs c: " in text and "unpaired: paired=False" in text


def test_runs_that_stopped_at_the_target_and_unequal_evaluation_rates_are_flagged():
    """Issue 59, item 6: a single pod evaluated every 0.1 s and stopping at the target,
    against a tournament evaluated every 3 s: the report says both."""
    often = [curve(np.arange(0, 4 + k, 0.1).round(2), [0] * len(np.arange(0, 4 + k, 0.1)))
             for k in range(4)]  # fmt: skip
    for run in often[:2]:  # these two reached the target at their last evaluation
        run["score"][-1] = 10
    every_3s = [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    rarely = [curve(every_3s, [0] * 5 + [s] + [0] * 5) for s in (10, 5)]  # on past 10
    c = compare({"pod": often, "tournament": rarely}, target=10, budget=30, reps=200)
    runs = c.run_table()
    assert runs["stopped_at_target"].tolist() == [True, True, False, False, False, False]
    notes = c.notes()
    assert len(notes) == 2
    assert "stopped when they reached the target (pod 2 of 4)" in notes[0]
    assert "very different rates" in notes[1] and "pod 10.2, tournament 0.367" in notes[1]
    html = c.to_html()
    assert "id='notes'" in html and "(stopped there)" in html
    assert c.to_dict()["notes"] == notes and "Read with care" in c.to_markdown()
    # one schedule, no stop at the target: nothing to flag
    same = compare({"a": rarely, "b": rarely[::-1]}, target=10, budget=30, reps=200)
    assert same.notes() == [] and "id='notes'" not in same.to_html()
