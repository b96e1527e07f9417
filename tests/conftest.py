import os

import pytest
import torch

# One torch thread per test process, as Dask gives each worker: results stay
# comparable across machines and the 2-core CI box is not oversubscribed.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")


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
