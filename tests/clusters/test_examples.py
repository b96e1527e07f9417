"""The Examples sections of the clusters' factories run as written (doctest), each on a
real local cluster: they are what a reader copies to start one of their own. The GPU
and gateway examples need a GPU node or a gateway and are marked to skip."""

from __future__ import annotations

import doctest
import importlib

import pytest

RUNNABLE = (
    "elegantpod.clusters.cluster",
    "elegantpod.clusters.local",
    "elegantpod.clusters.address",
    "elegantpod.clusters.shutdown",
)


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_examples_run_as_written(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example that runs"
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (output above)"


def test_every_factory_has_an_examples_section():
    from elegantpod.clusters import address, cluster, gateway, gpu, local, shutdown

    for factory in (
        cluster.cluster,
        local.local_client,
        gpu.gpu_client,
        address.address_client,
        gateway.gateway_cluster,
        shutdown.shutdown,
    ):
        assert "Examples\n    --------" in (factory.__doc__ or ""), factory.__qualname__
