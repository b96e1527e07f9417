"""The README's and the docs pages' Python examples are what a newcomer copies: each one
runs, here, as written, with only its budgets shrunk (issue 32; the docs pages since
issue 43).

Every ```` ```python ```` block of ``README.md`` and of the Markdown pages under
``docs/`` must be claimed by exactly one entry of :data:`RUNS` (a new block fails
:func:`test_every_python_block_is_run` until it is; the same example shown on two pages,
word for word, is one example and runs once), and
each budget substitution must still match the README (a rewritten example fails instead
of silently running unshrunk). Notebook-style blocks run in a real Jupyter kernel
(nbclient), as their prose says; the script example runs as a script with ``python``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def pages() -> list[Path]:
    """The README and every Markdown page of the docs site (not its build output), with
    ``deploy/README.md``, which the site includes as its Kubernetes guide."""
    docs = ROOT / "docs"
    found = sorted(p for p in docs.rglob("*.md") if "_build" not in p.parts)
    return [README, *found, ROOT / "deploy" / "README.md"]


def python_blocks() -> list[tuple[str, str]]:
    """``("file:line", code)`` of every ```` ```python ```` block of the pages."""
    blocks = []
    for page in pages():
        text = page.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            line = text[: m.start()].count("\n") + 1
            blocks.append((f"{page.relative_to(ROOT)}:{line}", m.group(1)))
    return blocks


def block(first_line: str) -> str:
    """The one example whose first line is ``first_line`` (on one page or several)."""
    found = {code for _, code in python_blocks() if code.splitlines()[0] == first_line}
    assert len(found) == 1, f"{len(found)} examples start with {first_line!r}"
    return found.pop()


def shrink(code: str, budgets: dict[str, str]) -> str:
    """``code`` with each budget ``old`` replaced by ``new``; each must occur."""
    for old, new in budgets.items():
        assert old in code, f"the README example no longer says {old!r}: update {__name__}"
        code = code.replace(old, new)
    return code


@dataclass(frozen=True)
class Run:
    """How one or more README blocks run: their first lines, in order, glue cells
    (test code, not README code) before some of them, and the budgets to shrink."""

    blocks: tuple[str, ...]
    budgets: dict[str, str] = field(default_factory=dict)
    glue: dict[str, str] = field(default_factory=dict)  # first line -> code run before it
    skip: str | None = None  # why it cannot run on this machine (None: it runs)


# The quickstart, as cells of one notebook: start, steer (once pods have scored), wait.
# "Steering" clones p000 and pauses p001: the glue waits until p000 is on the leaderboard.
WAIT_FOR_A_SCORE = """
import time
deadline = time.monotonic() + 120
while "p000" not in set(t.leaderboard["pod"]) and time.monotonic() < deadline:
    time.sleep(0.5)
assert "p000" in set(t.leaderboard["pod"]), t.summary()
"""
CHECK_QUICKSTART = """
assert t.status == "finished", t.summary()
assert not t.leaderboard.empty and agent.env_steps > 0
pods = t.pods.set_index("pod_id")
assert pods.loc["p002", "status"] == "stopped", pods
assert len(pods) >= 6 and (pods["parent"] == "p000").any(), pods  # the clone, the fresh one
assert t2.status == "created" and set(t2.pods["pod_id"]) <= set(pods.index)
"""
CHECK_DEPLOY = """
import os
assert action.shape == (4096,) and os.path.getsize("cartpole.onnx") > 1_000
assert video.frames == sum(video.steps) + len(video.steps)
"""
CHECK_TRADING = """
assert result.trials >= 1 and len(returns) > 200 and os.path.getsize("report.html") > 10_000
"""

# The comparison guide's runs, made as files (a store and output folders with their
# evaluations) so that its block reads them as written: compare() itself is what it shows.
MAKE_RUNS = """
import json, os
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store.store import Store

for i, hit in enumerate([30.0, 45.0, 60.0]):
    s = Store(f"runs/t-seed{i + 1}")
    s.ensure()
    s.write_json("tournament.json", TournamentSpec(env_id="Pendulum-v1").to_dict())
    history = [{"segment": 1, "env_steps": 8000, "score": 20.0, "time": 10.0},
               {"segment": 2, "env_steps": 16000, "score": 95.0, "time": hit}]
    pod = {"pod_id": "p000", "algo": "td3", "hparams": {}, "seed": i, "status": "idle",
           "history": history, "segment": 2}
    s.save_state({"pods": [pod], "leaderboard": [],
                  "state": {"total_steps": 16000, "elapsed_seconds": 240.0}})
for lr, hit in [("3e-4", None), ("1e-3", 200.0), ("3e-3", None)]:
    os.makedirs(f"runs/lr-{lr}", exist_ok=True)
    curve = [{"wall_seconds": 100.0, "score": 40.0}]
    curve.append({"wall_seconds": hit or 230.0, "score": 95.0 if hit else 60.0})
    with open(f"runs/lr-{lr}/result.json", "w") as f:
        json.dump({"curve": curve}, f)
"""
CHECK_COMPARE_FAMILY = """
# the guide's tables, as printed there
assert [round(v.p_adjusted, 5) for v in c.versus] == [0.00391, 0.0166]
assert [v.family_verdict for v in c.versus] == ["faster", "faster"]
assert "| ≥ 62.2 [42, 81] |" in c.to_markdown()
"""
CHECK_COMPARE = """
assert c.table.loc["tournament", "solved"] == 1.0 and c.table.loc["sweep", "solved"] == 1 / 3
assert c.pairs.loc[0, "other"] == "sweep" and os.path.getsize("comparison.html") > 10_000
"""

RUNS = {
    "quickstart": Run(
        blocks=(
            "import elegantpod\n",
            't.pause("p001"); t.unpause("p001"); t.stop("p002")',
            "t.wait()                      # until the target or the budget ends it; raises",
        ),
        budgets={"max_seconds=600": "max_seconds=40"},
        glue={'t.pause("p001"); t.unpause("p001"); t.stop("p002")': WAIT_FOR_A_SCORE},
    ),
    "one pod": Run(
        blocks=(
            "import elegantpod\n",
            'policy = elegantpod.Policy.load("runs/cartpole")          # its best.pt',
        ),
    ),
    "trading": Run(
        blocks=("from elegantpod import Tournament, finance",),
        # env steps, not seconds: a busy machine still finishes segments to rank
        budgets={"max_seconds=600": "max_steps=8_000, segment_steps=2_000"},
    ),
    "mjx": Run(
        blocks=("import elegantpod\n",),
        budgets={"max_seconds=600": "max_seconds=20"},
        skip=None if torch.cuda.is_available() else "needs CUDA (MJX on the GPU)",
    ),
    "own learner": Run(blocks=("from dataclasses import dataclass",)),
    "own selection rule": Run(
        blocks=("import elegantpod\n",),
        # env steps, not seconds: a busy machine still scores enough segments to cull
        budgets={"max_seconds=60,": "max_steps=60_000, segment_steps=4_000,"},
    ),
    "own metric": Run(blocks=("import numpy as np",)),
    "own setting": Run(blocks=("import argparse",)),
    "own cluster kind": Run(
        blocks=("import os",),
        # env steps, not seconds: a busy machine still finishes segments to rank
        budgets={"max_seconds=60": "max_steps=8_000, segment_steps=2_000"},
    ),
    "compare": Run(blocks=("import elegantpod\n",), glue={"import elegantpod\n": MAKE_RUNS}),
    "compare family": Run(blocks=("import elegantpod\n",)),
    "gateway": Run(
        blocks=("import elegantpod\n",),
        skip="needs a daskhub (JupyterHub + Dask Gateway + S3): tests/test_jupyterhub.py "
        "runs the same cluster(gateway=True) call from a user's server",
    ),
    "kubernetes": Run(
        blocks=("import elegantpod\n",),
        skip="needs a Kubernetes cluster running deploy/kubernetes/ (checked statically "
        "by tests/test_deploy.py; cluster(address) itself by tests/clusters/)",
    ),
    "hub sizes": Run(
        blocks=(
            "import elegantpod\n",
            't = elegantpod.Tournament("Pendulum-v1", algos=["ppo", "sac"], pods=8,',
        ),
        skip="needs a daskhub whose gateway offers GPUs, and an S3 bucket",
    ),
}


# The worked learner (docs/guides/algorithms.md) learns, deploys and exports as the page
# says: measured best 500 (last 485) at 100k steps in 2.7 s on a 2-vCPU EPYC; random ~22.
CHECK_OWN_LEARNER = """
import numpy as np, onnxruntime
assert result.algo == "reinforce" and result.best_eval_return_mean >= 150, result
obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
session = onnxruntime.InferenceSession("runs/reinforce/policy.onnx")
assert (session.run(None, {"obs": obs})[0] == policy.predict(obs)[0]).all()
"""


# The page's own kind (docs/internals/cluster-kinds.md) ran a tournament whose pods were
# scored, on workers that really run at the lower priority.
CHECK_OWN_CLUSTER_KIND = """
s = t.summary()
assert s["pods_finished"] >= 2 and s["best_score"] is not None, s
assert client.status == "closed"
probe = nice_client(1)
try:
    assert set(probe.run(os.nice, 0).values()) == {min(os.nice(0) + 10, 19)}
finally:
    elegantpod.shutdown(probe)
"""


# The page's rule (docs/internals/selection-rules.md) replaced pods, named in the lineage.
CHECK_OWN_SELECTION_RULE = """
culled = [o for o in t.lineage()["origin"] if o.get("rule") == "culling"]
assert culled and all(o.get("replaced") for o in culled), t.lineage().to_dict("records")
"""

# The page's metric (docs/internals/finance-metrics.md) by hand, and Sharpe as declared.
CHECK_OWN_METRIC = """
import math
from elegantpod.finance.stats.metrics import sharpe_ratio
r = daily[:, 0]
assert math.isclose(omega.of(daily, periods_per_year=252)[0], r[r > 0].sum() / -r[r < 0].sum())
declared = BY_NAME["sharpe"].of(daily, periods_per_year=252)
assert (declared == sharpe_ratio(daily, periods_per_year=252)).all()
"""


# The page's spec (docs/internals/settings.md) took its checks, flags and defaults from its
# declarations, and the tournament's pod took the shared settings.
CHECK_OWN_SETTING = """
assert (args.warmup, args.learners, args.eval_episodes) == (3, 2, None)
assert "evaluations before ranking (default: 2)" in parser.format_help()
assert (pod.eval_episodes, pod.learners, pod.seed) == (20, 2, 7)
"""


CHECKS = {
    "quickstart": CHECK_QUICKSTART,
    "trading": "import os\n" + CHECK_TRADING,
    "one pod": CHECK_DEPLOY,
    "compare": "import os\n" + CHECK_COMPARE,
    "compare family": CHECK_COMPARE_FAMILY,
    "own learner": CHECK_OWN_LEARNER,
    "own cluster kind": CHECK_OWN_CLUSTER_KIND,
    "own selection rule": CHECK_OWN_SELECTION_RULE,
    "own metric": CHECK_OWN_METRIC,
    "own setting": CHECK_OWN_SETTING,
}
"""The cell run after each example's blocks: what the example must have done."""


def marker(code: str) -> str:
    """What tells apart blocks that share a first line (``import elegantpod``)."""
    for key, needle in (
        ("own learner", "class Reinforce(Learner):"),
        ("quickstart", "client = elegantpod.cluster()          #"),
        ("script", 'if __name__ == "__main__":'),
        ("one pod", 'elegantpod.train("CartPole-v1"'),
        ("mjx", 'backend="mjx"'),
        ("kubernetes", 'cluster("tcp://elegantpod-scheduler:8786")'),
        ("hub sizes", "worker_gpus=1)"),
        ("gateway", "gateway=True"),
        ("own selection rule", "register_rule(Culling"),
        ("compare family", "family=[("),
        ("compare", "elegantpod.compare("),
    ):
        if needle in code:
            return key
    return code.splitlines()[0]


def find(run_name: str, first_line: str) -> str:
    """The block of ``run_name`` that starts with ``first_line``."""
    if first_line != "import elegantpod\n":
        return block(first_line.rstrip("\n"))
    found = {c for _, c in python_blocks() if marker(c) == run_name}
    assert len(found) == 1, f"{len(found)} examples for {run_name!r}"
    return found.pop()


def test_every_python_block_is_run():
    claimed = []
    for name, run in RUNS.items():
        claimed += [find(name, first).strip() for first in run.blocks]
    claimed.append(find("script", "import elegantpod\n").strip())
    missing = [where for where, code in python_blocks() if code.strip() not in claimed]
    assert not missing, f"python blocks at {missing} are run by no test"
    assert {where.split(":")[0] for where, _ in python_blocks()} > {"README.md"}  # docs too


def _execute(cells: list[str], tmp_path: Path, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.setenv("ELEGANTPOD_WORKDIR", str(tmp_path / "workdir"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return nb


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "quickstart",
        "one pod",
        "trading",
        "mjx",
        "compare",
        "compare family",
        "own learner",
        "own cluster kind",
        "own selection rule",
        "own metric",
        "own setting",
    ],
)
def test_a_notebook_example_runs(name, tmp_path, monkeypatch):
    run = RUNS[name]
    if run.skip:
        pytest.skip(run.skip)
    cells = []
    for i, first in enumerate(run.blocks):
        code = find(name, first)
        if first in run.glue:
            cells.append(run.glue[first])
        cells.append(shrink(code, run.budgets) if i == 0 else code)  # the first holds them
    if name in CHECKS:
        cells.append(CHECKS[name])
    _execute(cells, tmp_path, monkeypatch)


@pytest.mark.slow
def test_the_script_example_runs_as_a_script(tmp_path):
    small = {"max_seconds=600": "max_steps=8_000, segment_steps=2_000"}  # see "trading"
    code = shrink(find("script", "import elegantpod\n"), small)
    script = tmp_path / "pendulum.py"
    script.write_text(code)
    env = dict(os.environ, ELEGANTPOD_WORKDIR=str(tmp_path / "workdir"))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    head, *rows = done.stdout.strip().splitlines()  # it printed the leaderboard, whole
    assert head.split() == ["rank", "pod", "algo", "score_mean", "env_steps"], done.stdout
    assert rows and all(len(r.split()) == 6 for r in rows), done.stdout
