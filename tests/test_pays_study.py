"""benchmarks/pays_study.py: the pre-registered study's runner refuses what the plan does
not allow, counts the first valid run per seed, and counts only confirmed crossings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def ps():
    sys.path.insert(0, str(BENCH))
    import pays_study

    return pays_study


PLAN = {
    "name": "t",
    "code_commit": "0" * 40,
    "machine": "any",
    "tasks": {"pend": {"env": "Pendulum-v1", "algo": "ppo", "target": -200.0, "budget": 30.0}},
    "methods": {
        "tournament": {"rules": ["restart", "exploit"]},
        "restart_only": {"rules": ["restart"]},
        "random": {"rules": [], "init": "sample"},
    },
    "seeds": [1000, 1001, 1002],
    "analysis": {"primary": [["tournament", "restart_only"], ["tournament", "random"]]},
}


def write(tmp_path, **changes):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**PLAN, **changes}))
    return path


def test_the_committed_plans_load(ps):
    plans = sorted((BENCH / "plans").glob("*.json"))
    assert plans
    for path in plans:
        plan = ps.load_plan(path)
        assert all(s >= 1000 for s in plan.seeds)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"seeds": [1000, 950]}, "seeds [950] were used before"),
        ({"seeds": [105]}, "seeds [105] were used before"),
        ({"seeds": [1000, 1000]}, "named twice"),
        ({"code_commit": "HEAD"}, "full commit hash"),
        ({"methods": {"a": {"rules": ["restart", "explot"]}, "b": {"rules": []}}}, "'explot'"),
        ({"methods": {"a": {"rules": [], "init": "grid"}, "b": {"rules": []}}}, "init must be"),
        ({"analysis": {"primary": [["tournament", "sweep"]]}}, "pairs of the plan's methods"),
        ({"extra": 1}, "unknown key(s) ['extra']"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_bad_value(ps, tmp_path, changes, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        ps.load_plan(write(tmp_path, **changes))


def test_methods_are_interleaved_per_seed_in_rotated_order(ps, tmp_path):
    plan = ps.load_plan(write(tmp_path))
    got = ps.order(plan, "pend", [1000, 1001, 1002])
    assert got == [
        (1000, "tournament"),
        (1000, "restart_only"),
        (1000, "random"),
        (1001, "restart_only"),
        (1001, "random"),
        (1001, "tournament"),
        (1002, "random"),
        (1002, "tournament"),
        (1002, "restart_only"),
    ]


def test_the_first_valid_run_per_seed_counts_and_only_infrastructure_failures_rerun(ps):
    lines = [
        {"task": "pend", "method": "random", "seed": 1000, "status": "infra", "error": "x"},
        {"task": "pend", "method": "random", "seed": 1000, "status": "ok", "best": 1},
        {"task": "pend", "method": "random", "seed": 1000, "status": "ok", "best": 2},
    ]
    done = ps.counted(lines)
    assert done == {("pend", "random", 1000): lines[1]}


def test_a_crossing_counts_only_where_its_confirmation_reached_the_target_too(ps):
    history = pd.DataFrame(
        {
            "time": [3.0, 1.0, 2.0, 4.0],
            "score": [-150.0, -300.0, -180.0, float("nan")],
            "confirm": [-120.0, None, -260.0, None],
        }
    )
    assert ps.curve(history, -200.0) == ([1.0, 2.0, 3.0], [-300.0, -260.0, -150.0])


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "plans").mkdir(parents=True)
    (repo / "elegantpod").mkdir()
    (repo / "elegantpod" / "a.py").write_text("x = 1\n")

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    git("add", "-A")
    git("commit", "-qm", "code")
    code = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    return repo, git, code


def test_the_runner_refuses_an_uncommitted_plan_a_dirty_tree_and_other_code(
    ps, tmp_path, monkeypatch
):
    repo, git, code = _repo(tmp_path)
    monkeypatch.setattr(ps, "ROOT", repo)
    path = repo / "benchmarks" / "plans" / "p.json"
    path.write_text(json.dumps({**PLAN, "code_commit": code}))
    plan = ps.load_plan(path)
    log_path = repo / "benchmarks" / "results" / "log.jsonl"
    with pytest.raises(SystemExit, match="not clean"):
        ps.check_tree(plan, log_path)  # the plan itself, untracked
    git("add", "-A")
    git("commit", "-qm", "plan")
    assert ps.check_tree(plan, log_path)  # plan committed after the code: fine
    log_path.parent.mkdir()
    log_path.write_text("{}\n")  # the runner's own log does not make the tree dirty
    assert ps.check_tree(plan, log_path)
    (repo / "elegantpod" / "a.py").write_text("x = 2\n")
    with pytest.raises(SystemExit, match="not clean"):
        ps.check_tree(plan, log_path)
    git("commit", "-qam", "changed the code after the plan")
    with pytest.raises(SystemExit, match="differs from the plan's commit"):
        ps.check_tree(plan, log_path)


def test_tuning_takes_tuning_seeds_only_and_a_study_only_the_plans(ps, tmp_path):
    plan = ps.load_plan(write(tmp_path))
    log_path = tmp_path / "log.jsonl"
    with pytest.raises(SystemExit, match="seeds 900-999 only"):
        ps.study(plan, log_path, ["pend"], [1000], tune={})
    with pytest.raises(SystemExit, match="not in the plan"):
        ps.study(plan, log_path, ["lander"], [900], tune={})
    with pytest.raises(SystemExit, match="method 'sweep' is not in the plan"):
        ps.study(plan, log_path, ["pend"], [900], tune={}, methods=["sweep"])
    assert not log_path.exists()


def test_the_busy_share_is_a_fraction(ps):
    assert 0.0 <= ps.busy_share(0.2) <= 1.0


def test_the_report_pairs_by_seed_and_applies_holm_over_every_tasks_primary_family(
    ps, tmp_path, monkeypatch
):
    plan_d = {
        **PLAN,
        "tasks": {
            "a": {"env": "Pendulum-v1", "algo": "ppo", "target": 10.0, "budget": 30.0},
            "b": {"env": "CartPole-v1", "algo": "ppo", "target": 10.0, "budget": 30.0},
        },
        "seeds": list(range(1000, 1008)),
    }
    plan = ps.load_plan(write(tmp_path, **plan_d))
    monkeypatch.setattr(ps, "RESULTS_DIR", tmp_path)
    log_path = tmp_path / "log.jsonl"
    solve = {"tournament": 5.0, "restart_only": 20.0, "random": 6.0}
    with open(log_path, "w") as f:
        for task in ("a", "b"):
            for seed in plan.seeds:
                for m, at in solve.items():
                    at = at + (seed - 1000) * 0.5
                    run = {"time": [1.0, at], "score": [0.0, 11.0], "budget": 30.0}
                    line = {"task": task, "method": m, "seed": seed, "status": "ok", **run}
                    f.write(json.dumps({**line, "target": 10.0}) + "\n")
        # a second valid run of one seed never counts, nor does an infrastructure failure
        f.write(json.dumps({**line, "time": [1.0], "score": [0.0]}) + "\n")
    text = ps.report(plan, log_path)
    family = json.loads((tmp_path / "pays_study_t_family.json").read_text())["family"]
    assert [(f["task"], f["other"]) for f in family] == [
        ("a", "restart_only"),
        ("a", "random"),
        ("b", "restart_only"),
        ("b", "random"),
    ]
    assert all(f["seeds"] == 8 and "paired" in f["pairing"] for f in family)
    by = {(f["task"], f["other"]): f for f in family}
    assert by["a", "restart_only"]["verdict"] == "pays"  # 15 s faster on all 8 seeds
    assert by["a", "random"]["rmst_difference"][0] == pytest.approx(-1.0)
    assert all(f["p_holm"] >= f["p"] for f in family)
    assert "Primary family (4 one-sided tests, Holm at 0.025)" in text


def test_a_bad_generator_setting_is_refused_when_the_plan_loads(ps, tmp_path):
    tasks = {"pend": {**PLAN["tasks"]["pend"], "generator": {"ready_segment": 8}}}
    with pytest.raises(SystemExit, match="task 'pend', method 'tournament': generator"):
        ps.load_plan(write(tmp_path, tasks=tasks))
