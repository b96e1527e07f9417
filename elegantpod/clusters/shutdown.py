"""``shutdown()``: closing a client and its cluster, whichever kind it is, quietly.

What the owner of a cluster calls when the work is done. A gateway cluster would
otherwise keep its workers (and the cloud bill) until the gateway's idle timeout; a
local one would keep its processes until the interpreter exits. The close is quiet: the
nanny's and comms' ordinary shutdown noise stays off the user's terminal
(:func:`quiet_shutdown`).
"""

from __future__ import annotations

import contextlib
import threading

from distributed import Client

from elegantpod.clusters.gateway import close_cluster
from elegantpod.clusters.gc_pause import gc_paused


def shutdown(client: Client) -> None:
    """Close ``client`` and shut its cluster down (local, gateway or any ``SpecCluster``).

    A client on a scheduler at an address is only closed: that cluster is not ours.

    Examples
    --------
    >>> from elegantpod import cluster, shutdown
    >>> client = cluster(n_workers=1, dashboard_address=None)
    >>> shutdown(client)
    >>> client.status
    'closed'
    """
    cl = getattr(client, "cluster", None)
    # closing stops LoopRunners: the same lock as a start (elegantpod.clusters.gc_pause)
    with quiet_shutdown(), gc_paused():
        client.close()
        if cl is None:
            return
        if hasattr(cl, "gateway"):  # dask_gateway.GatewayCluster
            close_cluster(cl, shutdown=True)  # stops scheduler, workers and its Gateway
        else:
            cl.close()


SHUTDOWN_LOGGERS = (
    "distributed.nanny",
    "distributed.worker",
    "distributed.core",
    "distributed.batched",
    "distributed.comm",
    "distributed.scheduler",
    "distributed.client",
    "tornado.application",
)
"""Loggers that report an ordinary shutdown as trouble: the nanny's "Worker process
still alive after ... seconds, killing" (a worker busy in torch past the nanny's grace
period is killed, which is what closing asks for), and comms closed mid-message."""


@contextlib.contextmanager
def quiet_shutdown():
    """While a cluster closes, its expected noise stays off the user's terminal.

    Only records below ``ERROR`` are held back, and only during the close: a worker that
    fails while training still logs as before.
    """
    import logging

    global _quiet_closers, _quiet_levels
    with _quiet_lock:  # two tournaments may close at once: the last one restores
        if _quiet_closers == 0:
            _quiet_levels = {name: logging.getLogger(name).level for name in SHUTDOWN_LOGGERS}
            for name, level in _quiet_levels.items():
                logging.getLogger(name).setLevel(max(level, logging.ERROR))
        _quiet_closers += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_closers -= 1
            if _quiet_closers == 0:
                for name, level in _quiet_levels.items():
                    logging.getLogger(name).setLevel(level)


_quiet_lock = threading.Lock()
_quiet_closers = 0
_quiet_levels: dict[str, int] = {}
