import pytest

import elegantpod


@pytest.fixture(scope="module")
def client():
    """A real LocalCluster: two worker processes, one thread each, on loopback."""
    c = elegantpod.cluster(n_workers=2, dashboard_address=None)
    yield c
    cluster = c.cluster
    c.close()
    cluster.close()
