"""``train()``'s result: the best evaluation beside the last, the agent to use, a short
repr (issue 32: a Hopper run's result said 1,435 while its ``best.pt`` held 2,897)."""

import math

import pytest

import elegantpod
from elegantpod.pod.checkpoint import load_checkpoint
from elegantpod.training import OUTPUT_FILES, best_evaluation
from elegantpod.types import Progress, TrainResult


def point(steps, ret, score=None):
    return Progress(steps, 1.0, ret, 1.0, 0.0, {"losses/policy": 0.1}, score)


def test_the_best_evaluation_is_the_highest_fitness_the_first_of_ties():
    curve = (point(100, 10.0), point(200, 30.0), point(300, 30.0), point(400, 20.0))
    assert best_evaluation(curve, 30.0) == (30.0, None, 200)  # best.pt keeps the first
    assert best_evaluation(curve, None) == (30.0, None, 200)  # no out: nothing saved
    # ranked by the fitness, not the return
    curve = (point(100, 50.0, score=0.5), point(200, 40.0, score=1.5), point(300, 60.0, 0.2))
    assert best_evaluation(curve, 1.5, "sharpe") == (40.0, 1.5, 200)
    # NaN evaluations are never best
    assert best_evaluation((point(1, math.nan), point(2, 5.0)), None) == (5.0, None, 2)


def test_a_best_scored_before_a_resume_is_reported_as_far_as_known():
    curve = (point(5000, 10.0),)
    assert best_evaluation(curve, 80.0) == (80.0, None, None)  # its return is the score
    mean, score, steps = best_evaluation((point(5000, 10.0, score=1.0),), 2.0, "sharpe")
    assert math.isnan(mean) and score == 2.0 and steps is None
    mean, score, steps = best_evaluation((), None)
    assert math.isnan(mean) and score is None and steps is None


def test_train_reports_the_best_evaluation_and_names_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    r = elegantpod.train(
        "CartPole-v1", "ppo", max_steps=8192, eval_every_steps=2048, eval_episodes=2, out=out
    )
    returns = [p.eval_return_mean for p in r.curve]
    assert len(returns) == 4 and r.eval_return_mean == returns[-1]
    assert r.best_eval_return_mean == max(returns) and r.best_score is None
    assert r.best_env_steps == 2048 * (1 + returns.index(max(returns)))
    # the agent to use is the best evaluation's; the latest state is what a resume takes
    assert r.checkpoint == str(out / "best.pt") and r.last_checkpoint == str(out / "checkpoint.pt")
    assert load_checkpoint(r.checkpoint)["best_score"] == r.best_eval_return_mean
    assert r.to_dict()["best_eval_return_mean"] == r.best_eval_return_mean
    # a short repr: no curve, no loss dictionaries
    text = repr(r)
    assert len(text) < 300 and "losses" not in text and "Progress" not in text, text
    assert text.startswith("TrainResult(ppo on CartPole-v1, seed 0; last return ")
    assert f"best {max(returns):.4g} at {r.best_env_steps:,} steps" in text
    assert "8,192 env steps" in text and "best.pt" in text
    # a resumed run whose budget is spent still reports the best, from before the resume
    again = elegantpod.train(
        "CartPole-v1", "ppo", max_steps=8192, eval_episodes=2, out=out, resume=True
    )
    assert again.checkpoint == r.checkpoint and again.curve == ()
    assert again.best_eval_return_mean == r.best_eval_return_mean and again.best_env_steps is None


def test_without_an_output_folder_the_best_comes_from_the_curve():
    r = elegantpod.train(
        "CartPole-v1", "ppo", max_steps=4096, eval_every_steps=2048, eval_episodes=2
    )
    assert r.checkpoint is None and r.last_checkpoint is None
    assert r.best_eval_return_mean == max(p.eval_return_mean for p in r.curve)
    assert "checkpoint" not in repr(r)


def test_the_repr_of_a_result_ranked_by_another_fitness_names_it():
    r = TrainResult(
        env="StockTrading-v0",
        algo="sac",
        seed=3,
        solved=False,
        eval_return_mean=0.05,
        eval_return_std=0.01,
        env_steps=163_840,
        wall_seconds=12.34,
        checkpoint=None,
        curve=tuple(point(i, 0.0, 1.0) for i in range(1000)),
        fitness="sharpe",
        score=1.2345,
        best_score=2.5,
        best_env_steps=40_960,
    )
    assert repr(r) == (
        "TrainResult(sac on StockTrading-v0, seed 3; last sharpe 1.234, best 2.5 at 40,960 "
        "steps; 163,840 env steps in 12.3 s; 1000 evaluations)"
    )


@pytest.mark.parametrize("fitness", ["return", "sharpe"])
def test_a_result_with_no_evaluation_has_a_repr(fitness):
    r = TrainResult(
        "CartPole-v1", "ppo", 0, False, math.nan, math.nan, 0, 0.0, None, fitness=fitness
    )
    assert "best -" in repr(r) and "last" in repr(r)


SCRIPT = """
import elegantpod
r = elegantpod.train("CartPole-v1", "ppo", {budget}, eval_every_steps=2048, eval_episodes=2)
print("LAST", f"{{r.eval_return_mean:.4g}}", flush=True)
"""


def _run_script(budget: str, tty: bool) -> str:
    """Output of a script calling ``train()`` without ``progress=``, its stderr a
    terminal (a pseudo-terminal, as a shell gives) or a pipe (a batch job)."""
    import os
    import pty
    import subprocess
    import sys

    code = SCRIPT.format(budget=budget)
    env = dict(os.environ, COLUMNS="160")
    if not tty:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr
    leader, follower = pty.openpty()
    import fcntl
    import struct
    import termios

    # a terminal 40 rows by 160 columns (a fresh pty has 0 columns: tqdm draws nothing)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_train_shows_progress_on_a_terminal_with_the_latest_evaluation():
    text = _run_script("max_steps=6144", tty=True)
    last = text.split("LAST ")[1].split()[0]
    # the bar counts env steps, and its last line shows the last evaluation, not the
    # one before (issue 32: the postfix lagged one evaluation behind)
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if "ppo CartPole-v1" in ln]
    assert lines, text
    assert "6.14k/6.14k" in lines[-1] and f"eval_return={last}" in lines[-1], lines[-1]


def test_under_a_time_budget_the_bar_shows_elapsed_and_remaining_time():
    text = _run_script("max_seconds=4", tty=True)
    lines = [ln for ln in text.replace("\r", "\n").splitlines() if "ppo CartPole-v1" in ln]
    assert lines and all(" of 00:04, " in ln and " left" in ln for ln in lines), lines
    last = text.split("LAST ")[1].split()[0]
    assert "steps=" in lines[-1] and f"eval_return={last}" in lines[-1], lines[-1]


def test_a_batch_job_is_quiet_by_default():
    text = _run_script("max_steps=2048", tty=False)
    assert "ppo CartPole-v1" not in text and "LAST " in text, text


def test_a_runs_orphan_temporary_files_are_removed(tmp_path):
    """A process killed (or stopped by Ctrl-C) while a background thread wrote
    checkpoint.pt leaves ``.checkpoint.pt.<8 hex>.tmp``; the next run in that folder
    removes it, and a run leaves none. Other files stay."""
    from elegantpod.training import prepare_out_dir

    out = tmp_path / "run"
    out.mkdir()
    orphans = [".checkpoint.pt.1a2b3c4d.tmp", ".best.pt.00ff00ff.tmp"]
    keep = [".notes.txt.1a2b3c4d.tmp", "mine.tmp", ".checkpoint.pt.tmp"]
    for name in orphans + keep:
        (out / name).write_bytes(b"x")
    prepare_out_dir(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(keep)
    elegantpod.train("CartPole-v1", "ppo", max_steps=1024, out=out, overwrite=True, progress=False)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp") and p.name not in keep]


def test_a_second_writer_of_a_run_folder_fails_at_once_and_the_first_keeps_its_run(tmp_path):
    """Issue 56: two ``train --out DIR`` on one folder both exited 0 and one's progress
    was lost. The run holds the folder's lock for its whole length: a second ``train()``
    in this process and an ``elegantpod train`` process fail at once, naming the folder,
    and touch none of its files; the first run ends as if alone."""
    import os
    import subprocess
    import sys
    import threading

    out = tmp_path / "run"
    holding, go_on = threading.Event(), threading.Event()

    def first_evaluation(p):
        holding.set()  # the run is under way: its checkpoint is written
        assert go_on.wait(timeout=120)

    results = []
    first = threading.Thread(
        target=lambda: results.append(
            elegantpod.train(
                "CartPole-v1",
                "ppo",
                max_steps=4096,
                eval_episodes=1,
                out=out,
                progress=False,
                callback=first_evaluation,
            )  # fmt: skip
        )
    )
    first.start()
    try:
        assert holding.wait(timeout=120)
        before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
        message = f"out {str(out)!r} is in use: another run holds it"
        for flags in ({}, {"resume": True}, {"overwrite": True}):
            with pytest.raises(ValueError, match=message):
                elegantpod.train("CartPole-v1", "ppo", max_steps=1024, out=out, **flags)
        cli = subprocess.run(
            [sys.executable, "-m", "elegantpod.cli", "train", "--env", "CartPole-v1"]
            + ["--algo", "ppo", "--max-steps", "1024", "--out", str(out), "--overwrite", "--quiet"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )  # fmt: skip
        assert cli.returncode == 2 and message in cli.stderr, cli.stderr
        assert "Traceback" not in cli.stderr
        assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    finally:
        go_on.set()
        first.join(timeout=120)
    (result,) = results
    assert result.env_steps >= 4096 and (out / "result.json").is_file()
    # the lock went with the run: the folder takes the next one
    again = elegantpod.train("CartPole-v1", "ppo", max_steps=8192, out=out, resume=True,
                             eval_episodes=1, progress=False)  # fmt: skip
    assert again.env_steps >= 8192
    # and left only the run's files (the notebooks list them)
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)
