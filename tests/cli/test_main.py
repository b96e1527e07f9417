"""The CLI as a user runs it: a real subprocess, stdout/stderr and exit codes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

CLI = [sys.executable, "-m", "elegantpod.cli"]
REQUIRED = {
    "env",
    "algo",
    "seed",
    "solved",
    "eval_return_mean",
    "eval_return_std",
    "env_steps",
    "wall_seconds",
    "checkpoint",
}


def run(*args, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_train_json_contract(tmp_path):
    out = tmp_path / "ppo"
    p = run(
        "train",
        "--env",
        "CartPole-v1",
        "--algo",
        "ppo",
        "--seed",
        "1",
        "--max-steps",
        "300000",
        "--target-reward",
        "475",
        "--set",
        "lr=3e-3",
        "--out",
        str(out),
        "--json",
    )
    assert p.returncode == 0, p.stderr
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert set(last) >= REQUIRED
    assert last["solved"] is True and last["eval_return_mean"] >= 475
    assert last["env"] == "CartPole-v1" and last["algo"] == "ppo" and last["seed"] == 1
    assert 0 < last["wall_seconds"] < 120 and last["env_steps"] > 0
    assert os.path.isfile(last["checkpoint"])
    assert {"checkpoint.pt", "spec.json", "result.json"} <= set(os.listdir(out))
    here = "cuda" if torch.cuda.is_available() else "cpu"  # --device auto, decided
    assert json.loads((out / "spec.json").read_text())["device"] == here
    assert "%|" in p.stderr  # tqdm progress bar went to stderr, not stdout
    # resume continues from the saved step count
    p2 = run(
        "train",
        "--env",
        "CartPole-v1",
        "--algo",
        "ppo",
        "--seed",
        "1",
        "--out",
        str(out),
        "--resume",
        "--max-steps",
        str(last["env_steps"] + 4096),
        "--json",
        "--quiet",
    )
    assert p2.returncode == 0, p2.stderr
    assert json.loads(p2.stdout.strip().splitlines()[-1])["env_steps"] == last["env_steps"] + 4096


BAD_TRAIN_INPUT = [
    (["--env", "CartPool-v1", "--algo", "ppo"], "unknown env id 'CartPool-v1'"),
    (["--env", "CartPole-v1", "--algo", "sac"], "sac cannot handle action space Discrete(2)"),
    (
        ["--env", "CartPole-v1", "--algo", "ppo", "--num-envs", "0"],
        "num_envs must be >= 1, got 0",
    ),
    (
        ["--env", "CartPole-v1", "--algo", "ppo", "--set", "learning_rate=1"],
        "unknown hyperparameter 'learning_rate'",
    ),
    (
        ["--env", "CartPole-v1", "--algo", "ppo", "--set", "epochs=many"],
        "epochs must be an integer, got 'many'",
    ),
    (["--env", "CartPole-v1", "--algo", "ppo", "--set", "lr"], "key=value, got 'lr'"),
    (["--env", "CartPole-v1", "--algo", "xyz"], "unknown algorithm 'xyz'"),
    (["--env", "CartPole-v1", "--algo", "ppo", "--max-steps", "-5"], "max_steps must be > 0"),
    (["--env", "CartPole-v1", "--algo", "ppo", "--device", "gpu"], "unknown device 'gpu'"),
    (["--env", "CartPole-v1", "--algo", "ppo", "--threads", "-1"], "threads must be"),
    (
        ["--env", "CartPole-v1", "--algo", "ppo", "--env-arg", "data=sp500"],
        "'CartPole-v1' takes no keyword 'data'; its keywords: max_episode_steps",
    ),
    (
        ["--env", "CartPole-v1", "--algo", "ppo", "--set", "hidden=[64,x]"],
        "hidden must be an integer, got 'x'",  # a list is parsed: the bad item is named
    ),
    (["--env", "CartPol", "--algo", "ppo"], "did you mean 'CartPole-v1', 'CartPole-v0'?"),
]
CUDA_MISSING = (
    ["--env", "CartPole-v1", "--algo", "ppo", "--device", "cuda"],
    "CUDA is not available in this torch build",
)


@pytest.fixture(scope="module")
def bad_train_runs(tmp_path_factory):
    """Every bad-input case of ``elegantpod train``, each through the real entry point
    (``elegantpod.cli.main.main``), all in one fresh interpreter: one Python start (seconds:
    torch, Dask) instead of one per case. Maps each case's arguments to its exit code,
    its stderr and the ``--out`` folder it was given."""
    folder = tmp_path_factory.mktemp("bad-input")
    cases = BAD_TRAIN_INPUT + ([CUDA_MISSING] if torch.version.cuda is None else [])
    argvs = [
        ["train", *args, "--out", str(folder / str(i) / "o"), "--quiet"]
        for i, (args, _) in enumerate(cases)
    ]
    script = (
        "import contextlib, io, json, sys\n"
        "from elegantpod.cli.main import main\n"
        "results = []\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        try:\n"
        "            code = main(argv)\n"
        "        except SystemExit as exc:\n"
        "            code = exc.code\n"
        "    results.append([code, err.getvalue()])\n"
        "print(json.dumps(results))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-c", script, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout.strip().splitlines()[-1])
    return {
        tuple(args): (code, err, folder / str(i) / "o")
        for i, ((args, _), (code, err)) in enumerate(zip(cases, results, strict=True))
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        *BAD_TRAIN_INPUT,
        pytest.param(
            *CUDA_MISSING,
            marks=pytest.mark.skipif(torch.version.cuda is not None, reason="a CUDA torch"),
        ),
    ],
)
def test_bad_input_is_one_clear_error_before_training(args, message, bad_train_runs):
    code, stderr, out = bad_train_runs[tuple(args)]
    assert code == 2
    lines = [line for line in stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("elegantpod: error:"), stderr
    assert message in lines[0]
    assert not out.exists()  # nothing was created: the error came first


def test_unwritable_out_and_existing_run_are_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run("train", "--env", "CartPole-v1", "--algo", "ppo", "--out", str(blocker / "sub"))
    assert p.returncode == 2 and "is not writable" in p.stderr and str(blocker) in p.stderr
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        p = run("train", "--env", "CartPole-v1", "--algo", "ppo", "--out", str(ro / "x"))
        assert p.returncode == 2 and "not writable" in p.stderr
    done = tmp_path / "done"
    done.mkdir()
    (done / "result.json").write_text('{"precious": true}')
    p = run(
        "train", "--env", "CartPole-v1", "--algo", "ppo", "--out", str(done), "--max-steps", "10"
    )
    assert p.returncode == 2 and "--overwrite" in p.stderr
    assert (done / "result.json").read_text() == '{"precious": true}'
    p = run("train", "--env", "CartPole-v1", "--algo", "ppo", "--out", str(done), "--resume")
    assert p.returncode == 2 and "no checkpoint.pt" in p.stderr


def test_python_api_mirrors_cli(tmp_path):
    import elegantpod

    r = elegantpod.train(
        "Pendulum-v1", "sac", max_steps=2048, seed=0, out=tmp_path / "s", learning_starts=1024
    )
    assert r.env_steps == 2048 and r.checkpoint == str(tmp_path / "s" / "best.pt")  # the agent
    assert r.last_checkpoint == str(tmp_path / "s" / "checkpoint.pt")  # what a resume takes
    with pytest.raises(ValueError, match="unknown hyperparameter 'lr_actor'"):
        elegantpod.train("Pendulum-v1", "sac", lr_actor=1e-3)


TOURNAMENT_KEYS = {
    "solved",
    "best_score",
    "best_pod",
    "wall_seconds",
    "env_steps_total",
    "pods_finished",
    "pods_failed",
    "worker_deaths_survived",
    "pods_hung",
}


@pytest.mark.slow
def test_tournament_json_contract(tmp_path, capsys, monkeypatch):
    store = tmp_path / "t"
    p = run(
        "tournament",
        "--env",
        "CartPole-v1",
        "--algos",
        "ppo",
        "--pods",
        "2",
        "--workers",
        "2",
        "--max-steps",  # the contract, not learning: a few segments, seconds apart
        "32768",
        "--store",
        str(store),
        "--json",
        # base hyperparameters per algorithm (a list parsed as users type it), a device
        "--set",
        "ppo.lr=0.003",
        "--set",
        "ppo.hidden=[64,64]",
        "--device",
        "cpu",
    )
    assert p.returncode == 0, p.stderr
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert set(last) >= TOURNAMENT_KEYS
    spec = json.loads((store / "tournament.json").read_text())
    assert spec["hparams"]["ppo"] == {"lr": 0.003, "hidden": [64, 64]}
    assert spec["device"] == "cpu"
    # what the terminal shows reads well: progress lines labelled with the fitness,
    # rounded, printed only on change; '-' for no parent; a quiet cluster shutdown
    for noise in ("WARNING", "ERROR", "Traceback", "NaN", "None"):
        assert noise not in p.stderr, p.stderr
    progress = [ln for ln in p.stderr.splitlines() if ln.startswith("[")]
    assert progress and all("best return " in ln for ln in progress)
    assert len({ln.split("] ", 1)[1] for ln in progress}) == len(progress)
    assert not re.search(r"\d\.\d{5,}", p.stderr), p.stderr
    board = [ln.split() for ln in p.stderr.splitlines() if re.match(r"\s+1 p0", ln)]
    assert board and (board[0][-1] == "-" or board[0][-1].startswith("p0"))  # the parent
    assert last["pods_failed"] == 0 and last["env_steps_total"] > 0
    assert last["best_pod"] in last["best_checkpoint"]
    assert "rank" in p.stderr  # the leaderboard is printed on stderr
    board = json.loads((store / "leaderboard.json").read_text())
    assert board[0]["pod_id"] == last["best_pod"]

    # --resume needs no --env; what is given must agree with the store (checked in this
    # process: a refusal needs no process of its own)...
    resume = ["tournament", "--store", store, "--resume"]
    status, _, err = main_in_process([*resume, "--env", "Pendulum-v1"], capsys, monkeypatch)
    assert status == 2
    assert "env_id='CartPole-v1'; a resume cannot change it to 'Pendulum-v1'" in err
    status, _, err = main_in_process([*resume, "--pods", "8"], capsys, monkeypatch)
    assert status == 2 and "pods=2; a resume cannot change it to 8" in err
    # ...and a budget changes visibly; the store's spec is used for everything else
    p = run(
        "tournament",
        "--store",
        str(store),
        "--resume",
        "--workers",
        "2",
        "--target-reward",
        "1000",
        "--max-steps",
        str(last["env_steps_total"] + 20000),
        "--json",
    )
    assert p.returncode == 0, p.stderr
    assert "resume: target_reward None -> 1000.0" in p.stderr
    resumed = json.loads(p.stdout.strip().splitlines()[-1])
    assert resumed["env"] == "CartPole-v1" and resumed["env_steps_total"] > last["env_steps_total"]


def test_tournament_bad_input_is_exit_status_2_from_the_real_process(tmp_path):
    """One refusal through a real ``elegantpod`` process (exit status and stderr as a
    shell sees them); the other refusals run ``main()`` in-process, in
    ``test_bad_arguments_are_one_clear_error``: a process costs about 4 s of imports."""
    p = run(
        "tournament", "--env", "CartPole-v1", "--max-seconds", "5",
        "--store", str(tmp_path / "t"), "--pods", "0",
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "pods must be > 0, got 0" in p.stderr
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_demo_runs_tournament_backtest_and_writes_the_report(tmp_path):
    """`make demo` in small: PPO + SAC tournament, backtest, report path, leaderboard.
    Two 16,384-step segments (an env-step budget): a busy machine ranks pods all the same."""
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "demo", "--max-seconds", "600"]
        + ["--max-steps", "32768", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Leaderboard (score = validation Sharpe ratio" in p.stdout
    assert "validation_dsr" in p.stdout and "luck-only evaluations" in p.stdout
    assert "Equal-weight buy & hold" in p.stdout and "S&P 500" in p.stdout
    report = Path(p.stdout.strip().splitlines()[-1].removeprefix("HTML report: "))
    assert report == tmp_path / "backtest_report.html"
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script src=" not in html


PLUGIN = '''
from elegantpod.agents.ppo import PPO
from elegantpod.agents import register_algo


@register_algo
class MyPPO(PPO):
    """A user's algorithm in a module of their own."""

    name = "myppo"
'''


def test_import_registers_a_users_algorithm(tmp_path):
    (tmp_path / "my_algos.py").write_text(PLUGIN)
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "train", "--import", "my_algos"]
        + ["--env", "CartPole-v1", "--algo", "myppo", "--max-steps", "4096", "--json"]
        + ["--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["algo"] == "myppo"
    bad = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", "train", "--import", "no_such_mod"]
        + ["--env", "CartPole-v1", "--algo", "ppo"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert "cannot import 'no_such_mod'" in bad.stderr


SHADOW = "open({marker!r}, 'w').write('ran')\nraise ImportError('a stray sympy.py')\n"


@pytest.mark.parametrize("how", ["console script", "python -m"])
def test_modules_in_the_working_folder_never_shadow_installed_ones(how, tmp_path):
    """A ``sympy.py`` lying in the working folder must not run: torch imports sympy while
    the first optimizer is built, and ``python -m`` puts the working folder on sys.path."""
    marker = tmp_path / "marker"
    # sympy: torch imports it late; pandas and torch: the package imports them, and with
    # ``python -m`` that happens before the CLI's own code runs (so the package is lazy)
    for name in ("sympy", "pandas", "torch"):
        (tmp_path / f"{name}.py").write_text(SHADOW.format(marker=str(marker)))
    (tmp_path / "my_algos.py").write_text(PLUGIN)
    cmd = (
        [str(Path(sys.executable).parent / "elegantpod")]
        if how == "console script"
        else [sys.executable, "-m", "elegantpod.cli"]
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for extra in ([], ["--import", "my_algos", "--algo", "myppo"]):
        p = subprocess.run(
            [*cmd, "train", "--env", "CartPole-v1", "--algo", "ppo", "--max-steps", "2048"]
            + ["--quiet", "--json", *extra],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        assert p.returncode == 0, p.stderr
        assert not marker.exists(), f"the working folder's sympy.py ran ({extra})"
    # --import still finds a module in the working folder, and a file named by path
    assert json.loads(p.stdout.strip().splitlines()[-1])["algo"] == "myppo"
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "more_algos.py").write_text(PLUGIN.replace("myppo", "otherppo"))
    p = subprocess.run(
        [*cmd, "train", "--import", "plugins/more_algos.py", "--env", "CartPole-v1"]
        + ["--algo", "otherppo", "--max-steps", "2048", "--quiet", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["algo"] == "otherppo"


STRAY = "open({marker!r}, 'a').write('ran in %d\\n' % __import__('os').getpid())\n" + (
    "raise ImportError('a stray module in the working folder')\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("start", ["forked", "spawned"])
def test_a_stray_module_in_the_working_folder_never_runs_in_a_worker(start, tmp_path):
    """A ``yaml.py`` (dask's config imports yaml) or a ``socket.py`` (multiprocessing
    imports it before a new process takes its parent's path) lying in a fresh working
    folder must not run in any process a CLI tournament starts. Found: the forkserver
    was started as ``python -c ...`` in that folder, which puts it first on the path,
    and imported its preload there, so the stray module ran in it and in every worker
    forked from it. ``spawned``: a TMPDIR too
    long for the forkserver's socket makes the workers spawned, the path a restart and
    the GPU layout take."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "marker"
    for name in ("yaml", "socket", "sympy"):
        (work / f"{name}.py").write_text(STRAY.format(marker=str(marker)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if start == "spawned":
        long_tmp = tmp_path / ("t" * 100)
        long_tmp.mkdir()
        env["TMPDIR"] = str(long_tmp)
    console = str(Path(sys.executable).parent / "elegantpod")
    p = subprocess.run(
        [console, "tournament", "--env", "CartPole-v1", "--algos", "ppo", "--pods", "2"]
        + ["--workers", "2", "--max-steps", "4096", "--segment-steps", "2048"]
        + ["--store", str(tmp_path / "store"), "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1])["env_steps_total"] > 0
    assert not marker.exists(), marker.read_text()
    assert not marker.exists()


@pytest.mark.slow
def test_a_tournament_whose_every_pod_failed_exits_non_zero_and_says_why(tmp_path):
    from tests.tournament.store.test_hostile_store import orphan_child_store

    store = tmp_path / "s"
    orphan_child_store(store, pods=1, failed_replacements=0)  # its parent never wrote one
    p = run(
        "tournament",
        "--store",
        str(store),
        "--resume",
        "--workers",
        "1",
        "--max-seconds",
        "60",
        "--quiet",
    )
    assert p.returncode == 1, p.stderr
    assert "tournament failed: every pod failed: 1 x ParentCheckpointError" in p.stderr


@pytest.mark.slow
def test_a_tournament_whose_env_hangs_exits_non_zero_naming_the_pod(tmp_path, capsys, monkeypatch):
    """Issue 56: an env whose ``step`` never returns ended ``finished`` (exit 0). Now the
    run fails after its budget and a bounded grace, and the last lines name the pod."""
    import inspect

    from tests.tournament.client.test_engine import StuckWalk

    (tmp_path / "stuck_env.py").write_text(
        "import os, threading\nimport gymnasium\nimport numpy as np\n\n"
        + inspect.getsource(StuckWalk)
        + '\ngymnasium.register("StuckWalk-v0", entry_point=StuckWalk, max_episode_steps=20)\n'
    )
    monkeypatch.chdir(tmp_path)  # where --import finds it; the workers get it shipped
    args = ["tournament", "--import", "stuck_env", "--env", "StuckWalk-v0", "--pods", "1"]
    args += ["--workers", "1"]
    args += ["--max-seconds", "3", "--store", tmp_path / "s", "--quiet"]
    args += ["--set", "ppo.num_envs=8", "--set", "ppo.horizon=16"]
    status, _, err = main_in_process(args, capsys, monkeypatch)
    assert status == 1, err
    assert "tournament failed: no segment completed in this run" in err and "p000" in err
    assert "elegantpod: warning: pod p000 did not return within the budget" in err, err


def test_overwrite_replaces_the_earlier_run_whole(tmp_path):
    """A best.pt left by an earlier run would be loaded as the new run's agent."""
    from elegantpod.training import prepare_out_dir

    for name in ("checkpoint.pt", "best.pt", "result.json", "spec.json"):
        (tmp_path / name).write_text("earlier run")
    (tmp_path / "notes.txt").write_text("mine")
    prepare_out_dir(tmp_path, resume=True)  # a resume keeps everything
    assert (tmp_path / "best.pt").is_file()
    prepare_out_dir(tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- one clear error line, in-process (issue 29, minor items) -----------------------------
def main_in_process(args, capsys, monkeypatch):
    """``elegantpod ARGS`` through ``main()`` in this process: (status, stdout, stderr)."""
    from elegantpod.cli.main import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # main() drops the working folder
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


TRAIN = ["train", "--env", "CartPole-v1", "--algo", "ppo", "--quiet"]
TOURNAMENT = ["tournament", "--env", "CartPole-v1", "--max-seconds", "5"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (TRAIN + ["--device", "meta"], "unknown device 'meta': use one of auto, cpu, cuda, cuda:N"),
        (TRAIN + ["--device", "xla"], "unknown device 'xla'"),
        (TRAIN + ["--device", "vulkan"], "unknown device 'vulkan'"),
        (TRAIN + ["--threads", "100000"], "threads must be an integer in 0.."),
        (  # one gymnasium env object per sub-env: 2**22 of them refused before any is made
            ["train", "--env", "LunarLander-v3", "--algo", "ppo", "--num-envs", str(2**22)],
            "this ppo pod would need about 326.1 GiB of memory (num_envs=4194304",
        ),
        (TRAIN + ["--out", ""], "--out '' names no folder"),
        (
            TRAIN + ["--set", "num_envs=4", "--num-envs", "2"],
            "num_envs=4 and --num-envs 2 disagree",
        ),
        (TRAIN + ["--set", "num_envs=four"], "num_envs must be an integer, got 'four'"),
        (TRAIN + ["--set", "seed=3"], "--set seed=... is not a hyperparameter: use --seed"),
        (
            TOURNAMENT + ["--store", "{tmp}/t", "--workers", "100000"],
            "--workers must be in 1..1024",
        ),
        (TOURNAMENT + ["--store", "{tmp}/t", "--workers", "0"], "--workers must be in 1..1024"),
        (TOURNAMENT + ["--store", "{tmp}/t", "--address", "inproc://x"], "'inproc://x': give a"),
        (TOURNAMENT + ["--store", "/dev/null"], "'/dev/null' is not a folder"),
        (TOURNAMENT + ["--store", "{tmp}/file"], "is not a folder: a store must be a folder"),
        (TOURNAMENT + ["--store", "zip://x.zip"], "zip:// is read-only"),
        (TOURNAMENT + ["--store", "https://example.com/s"], "https:// is read-only"),
        (TOURNAMENT + ["--store", "{tmp}/t", "--allow-remote"], "goes with --resume"),
        (TOURNAMENT + ["--store", "{tmp}/t", "--device", "meta"], "unknown device 'meta'"),
        (TOURNAMENT + ["--store", "{tmp}/t", "--algos", "ppo,dqn9"], "unknown algorithm 'dqn9'"),
        (
            TOURNAMENT + ["--store", "{tmp}/t", "--address", "tls://127.0.0.1:9"],
            "'tls://127.0.0.1:9' is a TLS scheduler but no",
        ),
        (
            TOURNAMENT + ["--store", "{tmp}/t", "--set", "lr=3e-4"],
            "--set expects ALGO.KEY=VALUE in a tournament",
        ),
        (["tournament", "--env", "CartPole-v1", "--store", "{tmp}/t"], "end condition"),
        (["demo", "--max-seconds", "0", "--out", "{tmp}/d"], "max_seconds must be > 0, got 0.0"),
        (
            ["demo", "--max-steps", "-5", "--out", "{tmp}/d"],
            "max_steps must be an integer > 0, got -5",
        ),
        (
            ["backtest", "--checkpoint", "{tmp}/x.pt", "--index", "http://127.0.0.1:9/i.csv"],
            "is a URL: give a built-in index (sp500) or a local CSV",
        ),
        (["backtest", "--checkpoint", "{tmp}/x.pt", "--device", "meta"], "unknown device"),
        (["demo", "--out", ""], "--out '' names no folder"),
        (["export", "--checkpoint", "{tmp}/nope"], "nope' does not exist"),
        (["export", "--checkpoint", "{tmp}/file", "--format", "zip"], "unknown --format 'zip'"),
        (["export", "--checkpoint", "{tmp}", "--out", "{tmp}/p.txt"], "cannot tell the export"),
        (
            ["export", "--checkpoint", "{tmp}/file", "--format", "onnx", "--out", "{tmp}/p.pt2"],
            "format 'onnx' and the file name",
        ),
        (["export", "--checkpoint", "{tmp}", "--out", "{tmp}/no/p.onnx"], "folder does not exist"),
        (["export", "--checkpoint", "{tmp}/file"], "is corrupt or not a torch file"),
        (["export", "--checkpoint", "{tmp}"], "is a folder with no best.pt or checkpoint.pt"),
    ],
)
def test_bad_arguments_are_one_clear_error(args, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("precious")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    status, out, err = main_in_process(args, capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("elegantpod: error:"), err
    assert message in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["file"]  # nothing created
    assert (tmp_path / "file").read_text() == "precious"


def test_set_num_envs_reaches_train_as_num_envs(capsys, monkeypatch):
    import elegantpod.training

    seen = {}

    def fake_train(env, algo, **kwargs):
        seen.update(kwargs)
        raise ValueError("stopped before training")

    monkeypatch.setattr(elegantpod.training, "train", fake_train)
    status, _, err = main_in_process(TRAIN + ["--set", "num_envs=4"], capsys, monkeypatch)
    assert status == 2 and "stopped before training" in err
    assert seen["num_envs"] == 4 and "num_envs" not in {k for k in seen if k != "num_envs"}


def test_an_import_that_exits_is_an_error_not_success(tmp_path, capsys, monkeypatch):
    quits = tmp_path / "quits.py"
    quits.write_text("import sys\nsys.exit(0)\n")
    args = ["train", "--import", quits, "--env", "CartPole-v1", "--algo", "ppo"]
    status, out, err = main_in_process([*args, "--out", tmp_path / "o"], capsys, monkeypatch)
    assert status == 2 and "cannot import" in err and "sys.exit(0)" in err
    assert not (tmp_path / "o").exists()


def test_threads_within_the_bound_are_accepted():
    from elegantpod.cli.args import max_threads

    assert max_threads() >= 4 and max_threads() <= 4 * (os.cpu_count() or 64)


# -- what a run ends with (issue 32) ----------------------------------------------------
SUMMARY = {
    "status": "finished",
    "solved": False,
    "best_score": 500.0,
    "best_pod": "p003",
    "env_steps_total": 467_648,
    "wall_seconds": 61.23,
    "store": "/tmp/s",
}


def test_a_tournament_stopped_by_ctrl_c_says_stopped_and_no_solved_without_a_target():
    from elegantpod.cli.commands import ended_by, summary_line

    stopped = ended_by(SUMMARY, pressed=True)
    assert stopped["status"] == "stopped" and SUMMARY["status"] == "finished"
    assert json.loads(json.dumps(stopped))["status"] == "stopped"  # what --json prints
    assert ended_by(SUMMARY, pressed=False)["status"] == "finished"
    assert ended_by({**SUMMARY, "status": "failed"}, pressed=True)["status"] == "failed"
    line = summary_line(stopped, "return", None)
    assert line == (
        "tournament stopped: best return 500 by p003, 467,648 env steps in 61.2s; store /tmp/s"
    )
    assert "solved" not in line
    line = summary_line({**SUMMARY, "solved": True}, "return", 475.0)
    assert line.startswith("tournament finished: solved (target 475), best return 500 by p003")
    assert "target 475 not reached" in summary_line(SUMMARY, "return", 475.0)
    empty = {**SUMMARY, "best_score": None, "best_pod": None, "env_steps_total": 0}
    assert "best sharpe - by -, 0 env steps" in summary_line(empty, "sharpe", None)


def test_steps_print_alike_and_a_replaced_leader_is_explained():
    from elegantpod.number_text import steps as fmt_steps
    from elegantpod.tournament.progress import leaderboard_note

    assert fmt_steps(163_840) == "163,840" and fmt_steps("-") == "-"
    import numpy as np

    assert fmt_steps(np.int64(467_648)) == "467,648"
    assert leaderboard_note(["idle", "queued", "running"]) is None
    note = leaderboard_note(["replaced", "queued", "stopped", "replaced"])
    assert note.startswith("The leaderboard keeps each pod's best evaluation ever")
    assert "replaced or stopped since keeps its entry" in note


def test_the_train_line_gives_the_best_evaluation_and_the_agent(tmp_path):
    from elegantpod.cli.commands import train_line
    from elegantpod.types import TrainResult

    r = TrainResult(
        env="Hopper-v4",
        algo="sac",
        seed=0,
        solved=False,
        eval_return_mean=1435.2,
        eval_return_std=20.0,
        env_steps=1_000_000,
        wall_seconds=3600.0,
        checkpoint="runs/hopper/best.pt",
        best_eval_return_mean=2897.0,
        best_env_steps=700_000,
    )
    assert train_line(r) == (
        "sac on Hopper-v4: finished, eval return 1435.2 +- 20.0 after 1,000,000 steps in "
        "3600.0s, best 2,897 at 700,000 steps; checkpoint runs/hopper/best.pt"
    )


def test_a_lone_pod_per_algorithm_is_one_warning_line(tmp_path, capsys, monkeypatch):
    space = tmp_path / "space.yaml"  # a good search space passes on to the cluster
    space.write_text("sac:\n  lr: {loguniform: [1.0e-4, 1.0e-3]}\n  batch_size: {choice: [64]}\n")
    args = ["tournament", "--env", "Pendulum-v1", "--algos", "ppo,sac", "--pods", "2"]
    # a TLS address without certificates: the first cluster step fails at once (an
    # unreachable tcp:// one would wait out the 10 s connect timeout first)
    args += ["--max-seconds", "5", "--store", tmp_path / "t", "--address", "tls://127.0.0.1:9"]
    args += ["--search-space", str(space), "--init", "sample"]
    status, _, err = main_in_process(args, capsys, monkeypatch)  # no cluster: ends there
    lines = err.strip().splitlines()
    assert status == 2 and "'tls://127.0.0.1:9' is a TLS scheduler" in lines[-1], err
    assert lines[0].startswith("elegantpod: warning: 2 pods for 2 algorithms: each of ppo, sac")
    assert "UserWarning" not in err and len(lines) == 2, err


# -- --segment-seconds (the Python API's segment_seconds) --------------------------------
def test_segment_seconds_is_parsed_and_defaults_to_the_spec_default():
    from elegantpod.cli.args import parser
    from elegantpod.tournament.core.spec import TournamentSpec

    args = parser().parse_args([*TOURNAMENT, "--store", "s", "--segment-seconds", "2.5"])
    assert args.segment_seconds == 2.5
    args = parser().parse_args([*TOURNAMENT, "--store", "s"])
    assert args.segment_seconds is None and TournamentSpec(env_id="x").segment_seconds is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "segment_seconds must be > 0, got 0.0"),
        ("-1", "segment_seconds must be > 0, got -1.0"),
        ("nan", "segment_seconds must be a finite number, got nan"),
        ("inf", "segment_seconds must be a finite number, got inf"),
        ("1e999", "segment_seconds must be a finite number, got inf"),
        ("1e12", "segment_seconds must be <= 1,000,000,000.0 (a hard limit)"),
    ],
)
def test_a_bad_segment_seconds_is_one_clear_error_before_any_cluster(
    value, message, tmp_path, capsys, monkeypatch
):
    # tcp://127.0.0.1:9 has no scheduler: reaching the cluster would be another error
    args = [*TOURNAMENT, "--store", tmp_path / "t", "--address", "tcp://127.0.0.1:9"]
    status, _, err = main_in_process([*args, "--segment-seconds", value], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("elegantpod: error:"), err
    assert message in lines[0]
    assert not (tmp_path / "t").exists()


def test_segment_seconds_that_is_not_a_number_is_refused_by_the_parser(capsys):
    from elegantpod.cli.args import parser

    with pytest.raises(SystemExit) as exc:
        parser().parse_args([*TOURNAMENT, "--store", "s", "--segment-seconds", "2s"])
    assert exc.value.code == 2
    assert "--segment-seconds: invalid float value: '2s'" in capsys.readouterr().err


@pytest.mark.slow
def test_segment_seconds_cuts_segments_and_a_resume_may_change_it(tmp_path):
    store = tmp_path / "t"
    p = run(
        "tournament", "--env", "CartPole-v1", "--pods", "1", "--workers", "1",
        "--segment-seconds", "0.25", "--max-steps", "30000", "--store", str(store),
        "--json", "--quiet",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["status"] == "finished"
    assert json.loads((store / "tournament.json").read_text())["segment_seconds"] == 0.25
    latest = json.loads((store / "state" / "LATEST").read_text())["name"]
    state = json.loads((store / latest).read_text())
    steps = [h["env_steps"] for h in state["pods"][0]["history"]]
    # without it one segment of PPO's default 32,768 steps would end the run; a step
    # budget (not a time one) so that a busy machine gets more segments, not fewer
    assert len(steps) >= 2, steps
    assert all(b - a < 32_768 for a, b in zip([0, *steps[:-1]], steps, strict=True)), steps

    # a bad value on a resume is refused before anything runs or is written...
    before = {f: f.stat().st_mtime_ns for f in store.rglob("*")}
    p = run("tournament", "--store", str(store), "--resume", "--segment-seconds", "0")
    assert p.returncode == 2 and "segment_seconds must be > 0, got 0.0" in p.stderr, p.stderr
    assert {f: f.stat().st_mtime_ns for f in store.rglob("*")} == before
    # ...and a good one changes the store's, visibly, as the other segment budgets do
    p = run(
        "tournament", "--store", str(store), "--resume", "--workers", "1",
        "--segment-seconds", "0.5", "--max-steps", "45000", "--json", "--quiet",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "resume: segment_seconds 0.25 -> 0.5" in p.stderr, p.stderr
    assert json.loads((store / "tournament.json").read_text())["segment_seconds"] == 0.5


# -- --search-space FILE and --init (issue 34) -----------------------------------------
@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "s.json",
            '{"ppo": {"lr": {"loguniform": [1e-4, 10]}}}',
            "search_space['ppo']['lr'] = Bound(low=0.0001, high=10.0, log=True, integer=False, "
            "q=None): lr must be <= 1.0 (a hard limit), got 10.0",
        ),
        (
            "s.yaml",
            "ppo:\n  lrr: {uniform: [0.1, 0.2]}\n",
            "['lrr'] = Bound(low=0.1, high=0.2, log=False, integer=False, q=None): not a ppo",
        ),
        ("s.yml", "sac:\n  lr: {uniform: [0.1, 0.2]}\n", "search_space given for 'sac', which"),
        ("s.json", '{"ppo": {"lr": {"normal": [0, 1]}}}', "['lr'] must name one of uniform"),
        ("s.json", "{not json", "s.json:1: not JSON: Expecting property name"),
        ("s.yaml", "a: [", "s.yaml:1: expected the node content"),
        ("s.json", '{"ppo": {"lr": [1e-4, 1e-2], "lr": [0.5, 0.9]}}', "key 'lr' given twice"),
        ("s.yaml", "- 1\n", "search_space must be an object {algorithm"),
        ("missing.json", None, "missing.json': cannot read it"),
    ],
)
def test_a_bad_search_space_file_is_one_error_naming_the_key_before_any_cluster(
    name, content, message, tmp_path, capsys, monkeypatch
):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    args = [*TOURNAMENT, "--store", tmp_path / "t", "--address", "tcp://127.0.0.1:9"]
    status, _, err = main_in_process([*args, "--search-space", str(path)], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("elegantpod: error:"), err
    assert message in lines[0]
    assert not (tmp_path / "t").exists()


def test_init_takes_default_or_sample(capsys):
    from elegantpod.cli.args import parser

    assert parser().parse_args([*TOURNAMENT, "--store", "s", "--init", "sample"]).init == "sample"
    assert parser().parse_args([*TOURNAMENT, "--store", "s"]).init is None  # the spec's default
    with pytest.raises(SystemExit):
        parser().parse_args([*TOURNAMENT, "--store", "s", "--init", "random"])
    assert "invalid choice: 'random'" in capsys.readouterr().err


# -- --rules: the selection rules and their controls (issue 58) ---------------------------
@pytest.mark.parametrize(
    ("flag", "rules"),
    [("restart", ["restart"]), ("restart, copy", ["restart", "copy"]), ("none", [])],
)
def test_rules_name_the_selection_rules_over_the_files_generator(flag, rules, tmp_path):
    from elegantpod.cli.args import parser
    from elegantpod.cli.commands import tournament_options
    from elegantpod.cli.run_config import apply_run_files

    run = tmp_path / "run.yaml"
    run.write_text("generator:\n  evidence_t: 3.0\n")
    argv = [*TOURNAMENT, "--store", "s", "--config", str(run), "--rules", flag]
    args = parser().parse_args(argv)
    args.run_config = apply_run_files(args, argv)
    g = tournament_options(args)["generator"]
    assert g == {"evidence_t": 3.0, "rules": rules}
    plain = parser().parse_args([*TOURNAMENT, "--store", "s"])
    assert "generator" not in tournament_options(plain)  # the spec's default line-up


def test_an_unknown_rule_is_one_error_naming_it_before_any_cluster(tmp_path, capsys, monkeypatch):
    args = [*TOURNAMENT, "--store", tmp_path / "t", "--address", "tcp://127.0.0.1:9"]
    status, _, err = main_in_process([*args, "--rules", "restart,explot"], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "unknown selection rule 'explot'" in lines[0], err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("argv", [["--version"], ["presets"], ["train", "--help"]])
def test_a_light_command_parses_without_torch_or_dask(argv):
    """The tournament's setting flags are read from its spec, whose layer imports torch
    and Dask: a command that needs neither parses without them (it took 2 s, not 0.1)."""
    code = (
        "import sys\nfrom elegantpod.cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted({'torch', 'distributed'} & set(sys.modules)), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr[-2000:]
    assert done.stdout.strip()  # it did print its version, presets or help
