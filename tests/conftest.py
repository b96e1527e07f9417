import faulthandler
import logging
import os
import signal
from pathlib import Path

import pytest
import torch

# One torch thread per test process, as Dask gives each worker: results stay
# comparable across machines and the 2-core CI box is not oversubscribed.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")


# Test files, longest first (measured in one two-process run, 2026-12-05; files under 10 s
# follow in the usual order). With two test processes taking whole files (`make test`),
# the longest start first and the last file to finish is a short one: the wall time is
# about half the work, not that plus a long file started last while the other process
# idles (longest-processing-time-first scheduling). Files keep their own test order. (The
# Makefile's --no-loadscope-reorder keeps this order: pytest-xdist's own sorts by count.)
HEAVY_FILES = [
    "tests/envs/test_mjx.py",
    "tests/test_docs.py",
    "tests/test_notebooks.py",
    "tests/cli/test_main.py",
    "tests/test_jupyterhub.py",
    "tests/test_readme.py",
    "tests/tournament/test_orchestrator.py",
    "tests/cli/test_interrupts.py",
    "tests/tournament/client/test_engine.py",
    "tests/test_gpu_check.py",
    "tests/agents/test_dqn.py",
    "tests/agents/test_noise.py",
    "tests/tournament/store/test_store.py",
    "tests/clusters/test_gateway.py",
    "tests/tournament/test_exploration_trap.py",
    "tests/finance/test_pipeline.py",
    "tests/test_hang_guard.py",
    "tests/tournament/worker/test_resident.py",
    "tests/tournament/store/test_object_store.py",
    "tests/tournament/test_ensemble.py",
    "tests/finance/report/test_report.py",
    "tests/agents/test_sac.py",
    "tests/finance/backtests/test_backtest.py",
    "tests/envs/test_user_gym.py",
    "tests/agents/test_ppo.py",
    "tests/clusters/test_cluster.py",
    "tests/test_training.py",
    "tests/widgets/test_dashboard.py",
    "tests/agents/test_td3.py",
    "tests/tournament/test_extending.py",
    "tests/agents/test_ddpg.py",
    "tests/pod/test_checkpoint.py",
    "tests/agents/test_nets.py",
    "tests/pod/test_pod.py",
    "tests/test_security_inputs.py",
    "tests/agents/test_offpolicy.py",
]


# -- what a stuck run was doing (.ci/with_time_limit) ----------------------------------
# With ELEGANTPOD_TEST_WATCH set to a folder, each pytest process (the xdist controller
# and every worker) keeps the test it is running in <pid>.test there, and on SIGUSR1
# dumps every thread's stack to <pid>.stack. A file, not stderr: during a test pytest
# captures fd 2, and a process killed right after would lose the dump with the capture.
_WATCH = os.environ.get("ELEGANTPOD_TEST_WATCH")
_watch_stacks = None


def pytest_configure(config):
    global _watch_stacks
    if _WATCH and Path(_WATCH).is_dir() and _watch_stacks is None:
        _watch_stacks = open(Path(_WATCH) / f"{os.getpid()}.stack", "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=_watch_stacks, all_threads=True)
        _watching("(between tests)")


def _watching(what: str) -> None:
    if _watch_stacks is not None:
        (Path(_WATCH) / f"{os.getpid()}.test").write_text(what + "\n")


def pytest_runtest_logstart(nodeid, location):
    _watching(nodeid)


def pytest_collection_modifyitems(config, items):
    """Longest files first (see HEAVY_FILES); lightest first with
    ``ELEGANTPOD_LIGHT_FIRST=1``, which the GPU check's test step sets so that a run its
    time limit ends has finished the most tests."""
    rank = {path: i for i, path in enumerate(HEAVY_FILES)}
    sign = -1 if os.environ.get("ELEGANTPOD_LIGHT_FIRST") == "1" else 1
    items.sort(key=lambda item: sign * rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_terminal_summary(terminalreporter):
    """Say which browser tests did not run for want of Chromium, and how to get them."""
    from tests.helpers import NO_CHROMIUM

    skipped = []
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if NO_CHROMIUM in reason:
            skipped.append(rep.nodeid)
    if skipped:
        tr = terminalreporter
        tr.section("browser tests skipped", yellow=True)
        tr.write_line(f"{len(skipped)} browser tests did not run: Chromium is not installed.")
        for nodeid in skipped:
            tr.write_line(f"  {nodeid}")
        tr.write_line(
            "To run them: install Debian's chromium (sudo apt-get install chromium; "
            "`bash .ci/run` does it), then `make test` again."
        )


@pytest.fixture
def tmp_out(tmp_path):
    return tmp_path / "run"


@pytest.fixture(scope="session")
def client():
    """A real LocalCluster: two worker processes, one thread each, on loopback.

    One per test process for the whole session (each module starting and closing its
    own cost the suite about 3 s a module): the tests that kill, scale or close a
    cluster start their own."""
    import elegantpod

    c = elegantpod.cluster(n_workers=2, dashboard_address=None)
    yield c
    cluster = c.cluster
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def s3():
    """A real S3-compatible server (moto) on 127.0.0.1, and a fresh bucket per module.

    Yields the environment (credentials, ``AWS_ENDPOINT_URL``) it set for this process;
    pass it to the workers of any cluster that should reach the store.
    """
    pytest.importorskip("s3fs")
    import s3fs

    from tests.servers import s3_server

    s3fs.S3FileSystem.clear_instance_cache()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    with s3_server() as env:
        # moto keeps its state per process: a later module finds the bucket already there
        s3fs.S3FileSystem().makedirs("elegantpod-test", exist_ok=True)
        yield env
    s3fs.S3FileSystem.clear_instance_cache()
