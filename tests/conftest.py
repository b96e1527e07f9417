import logging
import os

import pytest
import torch

# One torch thread per test process, as Dask gives each worker: results stay
# comparable across machines and the 2-core CI box is not oversubscribed.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")


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


@pytest.fixture(scope="module")
def client():
    """A real LocalCluster: two worker processes, one thread each, on loopback."""
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
