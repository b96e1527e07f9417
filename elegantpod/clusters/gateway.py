"""``gateway_cluster()``: a Dask client on a Dask Gateway cluster, new or reconnected.

The JupyterHub way (daskhub): the gateway starts scheduler and workers for the user.
:func:`elegantpod.cluster` comes here with ``gateway=``; :func:`elegantpod.shutdown`
closes what this starts.
"""

from __future__ import annotations

import contextlib

import dask
from distributed import Client

from elegantpod.clusters.gc_pause import gc_paused

GATEWAY_OPTIONS = ("worker_cores", "worker_memory", "worker_gpus")
"""Cluster options with their own keyword in :func:`gateway_cluster` (when offered)."""


def gateway_cluster(
    gateway: str | bool = True,
    *,
    name: str | None = None,
    n_workers: int | None = None,
    adapt: tuple[int, int] | None = None,
    worker_cores: float | None = None,
    worker_memory: float | None = None,
    worker_gpus: int | None = None,
    options: dict | None = None,
    proxy_address: str | None = None,
    auth=None,
    shutdown_on_close: bool | None = None,
) -> Client:
    """A client on a Dask Gateway cluster: a new one, or an existing one by ``name``.

    Why a gateway: on a JupyterHub over Kubernetes users may not start pods themselves;
    the gateway starts scheduler and workers for them, with resource limits set by the
    admins, and the cluster outlives the notebook kernel (reconnect with ``name``).

    Parameters
    ----------
    gateway
        Gateway address (``"http://..."``; the proxy's HTTP address on a daskhub), or
        ``True`` for the one in the Dask config (``gateway.address``).
    name
        Reconnect to this running cluster (``client.cluster.name`` of an earlier call)
        instead of creating one. A reconnected cluster is not shut down on close unless
        ``shutdown_on_close=True``.
    n_workers
        Scale to this many workers (``None``: leave the gateway's default).
    adapt
        ``(minimum, maximum)``: adaptive scaling instead of a fixed ``n_workers``.
    worker_cores, worker_memory, worker_gpus
        Cluster options, when the gateway offers them (memory in GiB, as gateways
        usually take it). Others by name in ``options``. An option the gateway does
        not offer is an error naming the ones it does.
    proxy_address, auth
        Passed to ``dask_gateway.Gateway`` (``auth``: ``"basic"``, ``"jupyterhub"``,
        ``"kerberos"`` or an auth object; ``None``: the Dask config's).
    shutdown_on_close
        Shut the cluster down when its client's ``cluster.close()`` runs (what a
        tournament that made its own client does at its end). Default: yes for a new
        cluster, no for a reconnected one. :func:`elegantpod.shutdown` always shuts it down.

    Raises
    ------
    ValueError
        For bad arguments (before contacting anything), a missing ``dask-gateway``
        package, no configured address, an unknown cluster name or cluster option, or
        a gateway that does not answer.

    Examples
    --------
    On a daskhub (skipped here; ``tests/test_jupyterhub.py`` runs it from a real user's
    server)::

        >>> from elegantpod import shutdown
        >>> from elegantpod.clusters.gateway import gateway_cluster
        >>> client = gateway_cluster(True, adapt=(1, 8), worker_memory=4)  # doctest: +SKIP
        >>> name = client.cluster.name  # later: gateway_cluster(name=name)  # doctest: +SKIP
        >>> shutdown(client)  # doctest: +SKIP
    """
    if isinstance(gateway, str):
        if not gateway.startswith(("http://", "https://")):
            raise ValueError(f"gateway must be an http(s):// address or True, got {gateway!r}")
    elif gateway is not True:
        raise ValueError(f"gateway must be an http(s):// address or True, got {gateway!r}")
    if n_workers is not None and (
        isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0
    ):
        raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
    if adapt is not None:
        if n_workers is not None:
            raise ValueError("give either n_workers or adapt=(minimum, maximum), not both")
        ok = (
            isinstance(adapt, tuple | list)
            and len(adapt) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in adapt)
            and adapt[0] <= adapt[1]
        )
        if not ok:
            raise ValueError(
                f"adapt must be (minimum, maximum) integers, 0 <= min <= max, got {adapt!r}"
            )
    wanted = dict(options or {})
    for key, value in (
        ("worker_cores", worker_cores),
        ("worker_memory", worker_memory),
        ("worker_gpus", worker_gpus),
    ):
        if value is not None:
            wanted[key] = value
    try:
        from dask_gateway import Gateway
    except ImportError as exc:
        raise ValueError(
            "gateway= needs the dask-gateway client: pip install 'elegantpod[gateway]'"
        ) from exc
    address = gateway if isinstance(gateway, str) else dask.config.get("gateway.address", None)
    if not address:
        raise ValueError(
            "gateway=True but no gateway is configured (gateway.address in the Dask "
            "config, DASK_GATEWAY__ADDRESS); pass gateway='http://...'"
        )
    # Every Gateway, GatewayCluster and Client made here starts or stops a LoopRunner:
    # with the collector paused, no dropped one's finalizer can deadlock them (gc_pause).
    with gc_paused():
        cl = _open_cluster(Gateway, address, name, wanted, proxy_address, auth, shutdown_on_close)
        try:
            if adapt is not None:
                cl.adapt(minimum=adapt[0], maximum=adapt[1])
            elif n_workers is not None:
                cl.scale(n_workers)
            return cl.get_client()  # the default client, as Client(LocalCluster()) is
        except BaseException:
            close_cluster(cl)  # never left for the collector to finalise
            raise


def _open_cluster(gateway_cls, address, name, wanted, proxy_address, auth, shutdown_on_close):
    """The ``GatewayCluster``: reconnected by ``name``, or a new one with ``wanted`` options.

    The ``Gateway`` used to reach it is closed here, whatever happens.
    """
    gw = _gateway_client(gateway_cls, address, proxy_address, auth)
    try:
        if name is not None:
            known = [c.name for c in gw.list_clusters()]
            if name not in known:
                raise ValueError(
                    f"no running gateway cluster named {name!r} at {address}; running: "
                    f"{', '.join(known) or 'none'}"
                )
            return gw.connect(name, shutdown_on_close=bool(shutdown_on_close))
        opts = gw.cluster_options() if wanted else None
        for key, value in wanted.items():
            if key not in opts:
                raise ValueError(
                    f"gateway {address} offers no cluster option {key!r}; it offers "
                    f"{sorted(opts) or 'none'}"
                )
            try:
                opts[key] = value
            except (TypeError, ValueError) as exc:
                raise ValueError(f"cluster option {key}={value!r}: {exc}") from exc
        return gw.new_cluster(
            opts, shutdown_on_close=True if shutdown_on_close is None else shutdown_on_close
        )
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"no Dask Gateway answering at {address!r}: {exc}") from exc
    finally:
        close_gateway(gw)


def close_cluster(cl, shutdown: bool | None = None) -> None:
    """Close a ``GatewayCluster`` and its own ``Gateway`` now, not at garbage collection.

    ``shutdown``: stop its scheduler and workers too (``None``: the cluster's own
    ``shutdown_on_close``).
    """
    if cl is None:
        return
    with gc_paused():  # closing stops a LoopRunner: the same lock as a start (gc_pause)
        try:
            cl.close(shutdown=shutdown)
        finally:
            close_gateway(getattr(cl, "gateway", None))


def close_gateway(gw) -> None:
    """Close a ``dask_gateway.Gateway`` once and for all.

    dask-gateway 2026.3's ``Gateway.__del__`` closes it again, and with distributed
    2026.8 a second close raises (its loop runner is gone) and prints a traceback at
    garbage collection. Dropping the runner after the first close makes ``__del__``
    skip it. A gateway whose start failed (no running loop) only loses its runner.
    """
    if gw is None or not hasattr(gw, "_loop_runner"):
        return
    with gc_paused():  # closing stops a LoopRunner: the same lock as a start (gc_pause)
        with contextlib.suppress(RuntimeError, AttributeError):
            gw.close()
        with contextlib.suppress(AttributeError):
            del gw._loop_runner


def _gateway_client(gateway_cls, address, proxy_address, auth):
    """``Gateway(...)``, tried a second time when its IO-loop thread did not start.

    distributed's ``LoopRunner`` waits 10 s for the thread it starts and then fails with
    a bare ``AssertionError``; on an overloaded machine (a 2-core box in a busy test run)
    that happened once. A second try almost always gets the thread; a second failure is
    said in words. A try that failed is closed at once: left to the garbage collector,
    its ``__del__`` could run inside the next one's start and deadlock it
    (:mod:`elegantpod.clusters.gc_pause`).
    """
    for attempt in (1, 2):
        gw = gateway_cls.__new__(gateway_cls)  # a handle on it even if __init__ fails
        try:
            gw.__init__(address, proxy_address=proxy_address, auth=auth)
            return gw
        except AssertionError:
            close_gateway(gw)
            if attempt == 2:
                raise RuntimeError(
                    f"the Dask Gateway client for {address} could not start its IO loop "
                    "within 10 s, twice: the machine may be overloaded; try again"
                ) from None
        except BaseException:
            close_gateway(gw)
            raise
    raise AssertionError("unreachable")
