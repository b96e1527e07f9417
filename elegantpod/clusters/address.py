"""``address_client()``: a Dask client on a scheduler that already runs, at an address.

The cloud way without a gateway: a dask-kubernetes cluster, a scheduler started by hand
with ``dask scheduler``, or one a colleague shares. Nothing is started here; the
scheduler's workers are whatever it has (a tournament follows them as they come and go).
A ``tls://`` address gets a clear error when no certificates are configured, instead of
distributed's TypeError about a missing ``ssl_context``.
"""

from __future__ import annotations

import dask
from distributed import Client
from distributed.security import Security

from elegantpod.clusters.gc_pause import gc_paused

TLS_HELP = (
    "in Python pass security=distributed.security.Security(tls_ca_file=..., "
    "tls_client_cert=..., tls_client_key=..., require_encryption=True); from the CLI or "
    "anywhere else set the Dask config distributed.comm.tls.ca-file, "
    "distributed.comm.tls.client.cert and distributed.comm.tls.client.key (environment "
    "variables DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT, DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY)"
)
"""How to give a client the certificates a ``tls://`` scheduler asks for."""


def address_client(address: str, *, security=None, timeout: float = 10.0) -> Client:
    """A client on the scheduler at ``address``.

    Parameters
    ----------
    address
        The scheduler (``"tcp://10.0.0.5:8786"``, a dask-kubernetes cluster's
        ``scheduler_address``, ``"tls://..."``).
    security
        TLS for a ``tls://`` scheduler: a ``distributed.security.Security`` with the CA
        and this client's certificate and key (``None``: the Dask config's
        ``distributed.comm.tls.*``, see :data:`TLS_HELP`).
    timeout
        Seconds to wait for the scheduler to answer.

    Raises
    ------
    ValueError
        When no scheduler answers at ``address`` within ``timeout``, or a ``tls://``
        address comes without certificates.

    Examples
    --------
    >>> from distributed import LocalCluster
    >>> from elegantpod.clusters.address import address_client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc:
    ...     client = address_client(lc.scheduler_address)
    ...     print(len(client.scheduler_info()["workers"]))
    ...     client.close()
    1
    """
    check_tls(address, security)
    try:
        with gc_paused():  # see elegantpod.clusters.gc_pause: no finalizer inside its start
            return Client(address, timeout=timeout, security=security)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"no Dask scheduler reachable at {address!r}: {exc}") from exc


def check_tls(address: str, security) -> None:
    """A clear error for a ``tls://`` address without a CA file and client certificate.

    Without them distributed fails with a TypeError about a missing ``ssl_context``.
    """
    if not str(address).lower().startswith("tls://"):
        return
    if security is None:
        if dask.config.get("distributed.client.security-loader", None):
            return  # the loader supplies the certificates
        security = Security()  # what the Dask config holds
    elif isinstance(security, dict):
        security = Security(**security)
    elif not isinstance(security, Security):
        return  # True: temporary certificates, for distributed to judge
    tls = security.get_tls_config_for_role("client")
    missing = [
        what
        for key, what in (("ca_file", "CA file"), ("cert", "client certificate"))
        if not tls.get(key)
    ]
    if missing:
        raise ValueError(
            f"{address!r} is a TLS scheduler but no {' and no '.join(missing)} is "
            f"configured: {TLS_HELP}"
        )
