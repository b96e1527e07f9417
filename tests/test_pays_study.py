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


@pytest.fixture(scope="module")
def tp(ps):  # ps put benchmarks/ on the path
    import tune_pbt

    return tune_pbt


def test_a_plan_names_ray_tunes_pbt_or_pb2_as_a_method_and_nothing_else(ps, tmp_path):
    methods = {**PLAN["methods"], "tune_pbt": {"tune": "pbt"}, "tune_pb2": {"tune": "pb2"}}
    plan = ps.load_plan(write(tmp_path, methods=methods))
    assert plan.methods["tune_pb2"] == {"tune": "pb2"}
    bad = {**PLAN["methods"], "asha": {"tune": "asha"}}
    with pytest.raises(SystemExit, match=r"method 'asha': tune must be one of .*'asha'"):
        ps.load_plan(write(tmp_path, methods=bad))
    mixed = {**PLAN["methods"], "t": {"tune": "pbt", "rules": ["restart"]}}
    with pytest.raises(SystemExit, match="a Tune method takes no rules or init"):
        ps.load_plan(write(tmp_path, methods=mixed))


def test_pb2_models_log_scale_hyperparameters_in_log_space_and_leaves_choices_out(tp):
    import math

    from elegantpod.search.space import Bound, Choice

    space = {
        "lr": Bound(1e-5, 1e-2, log=True),
        "batch_size": Bound(32, 256, integer=True),
        "gamma": Bound(0.9, 0.999),
        "noise": Choice(("gaussian", "ou")),
    }
    bounds, logs = tp.pb2_bounds(space)
    assert bounds == {
        "lr": [pytest.approx(math.log(1e-5)), pytest.approx(math.log(1e-2))],
        "batch_size": [32.0, 256.0],
        "gamma": [0.9, 0.999],
    }
    assert logs == {"lr"}
    start = {"lr": 3e-4, "batch_size": 64, "gamma": 0.99, "noise": "ou", "tau": 0.005}
    config = {"start": 1, "lr": math.log(2e-3), "batch_size": 100.6, "gamma": 1.2}
    hp = tp.trial_hparams(config, start, space, logs)
    # back from log space, rounded to the integer grid, clipped to the bound; what the
    # scheduler does not model stays at the pod's start
    assert hp == {
        "lr": pytest.approx(2e-3),
        "batch_size": 101,
        "gamma": 0.999,
        "noise": "ou",
        "tau": 0.005,
    }
    assert type(hp["batch_size"]) is int


def test_a_tune_run_is_summarized_on_its_own_clock_with_its_overheads_apart(tp):
    t0 = 1000.0  # the first segment's start: the run's clock starts there

    def seg(trial, at, score, confirm=None, save_s=0.1):
        return {
            "kind": "segment",
            "trial": trial,
            "wall": t0 + at,
            "score": score,
            "confirm": confirm,
            "eval_s": 0.2,
            "save_s": save_s,
            "env_steps": int(at * 100),
        }

    stats = [
        {"kind": "start", "trial": "a", "first_segment": t0, "restored": False, "donor": None},
        {"kind": "start", "trial": "b", "first_segment": t0 + 0.5, "restored": False},
        seg("a", 2.0, 5.0),
        seg("b", 3.0, 12.0, confirm=8.0),  # a crossing its fresh episodes did not confirm
        # b paused and resumed from its own checkpoint, then exploited a's
        {"kind": "start", "trial": "b", "first_segment": t0 + 4, "restored": True,
         "donor": "b", "restore_s": 0.3},
        {"kind": "start", "trial": "b", "first_segment": t0 + 5, "restored": True,
         "donor": "a", "restore_s": 0.4},
        seg("a", 6.0, 11.0, confirm=10.5),  # confirmed: solved here
        seg("b", 31.0, 20.0, confirm=20.0),  # after the 30 s budget: censored
    ]  # fmt: skip
    out = tp.summarize(stats, budget=30.0, target=10.0, fit_at=t0 - 4.0, init_s=2.5)
    assert out["time"] == [2.0, 3.0, 6.0, 31.0]
    assert out["score"] == [5.0, 8.0, 10.5, 20.0]  # a crossing counts as the lesser score
    assert out["solved_at"] == 6.0
    assert out["unconfirmed"] == 1
    assert out["best"] == 10.5
    assert out["segments_per_pod"] == [1, 2]
    assert out["replaced_on_evidence"] == 1  # the resume from its own checkpoint is not
    o = out["overhead"]
    assert o["ray_init_s"] == 2.5 and o["startup_s"] == 4.0
    assert o["checkpoint_s"] == pytest.approx(3 * 0.1 + 0.3 + 0.4)
    assert o["restores"] == 2 and o["trial_starts"] == 4
    with pytest.raises(RuntimeError, match="no trial started"):
        tp.summarize([], budget=30.0, target=10.0, fit_at=0.0, init_s=0.0)
