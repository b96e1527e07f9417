"""Dask Gateway of the local daskhub (deploy/local/daskhub.py), as daskhub configures
it, on 127.0.0.1:

- users authenticate with their JupyterHub API tokens (``JupyterHubAuthenticator``); a
  token must carry ``access:services!service=dask-gateway`` (the hub's roles grant it);
- it serves its API and the schedulers' TLS traffic on one port, under the prefix
  ``/services/dask-gateway`` that the hub's proxy forwards;
- clusters are local processes (``UnsafeLocalBackend``: this machine has no Unix account
  per hub user, which the backend that switches users needs); the gateway still keeps
  each user's clusters to that user through its API, but every cluster runs as the
  gateway's Unix user, so the processes are not isolated from each other;
- schedulers, workers and their nannies listen on 127.0.0.1 only (the backend gives the
  scheduler ``--host 127.0.0.1``; the worker command below adds it, without which a
  worker listens on every interface);
- a cluster's dashboard is served through the hub's address at
  ``/services/dask-gateway/clusters/<name>/status`` without a token: the name (a random
  UUID) is the only secret, a capability URL;
- the cluster options are those of ``deploy/daskhub/values.yaml``: ``worker_cores``,
  ``worker_memory`` (GiB) and ``worker_gpus``, with one pod per worker thread and a
  ``GPU`` resource on GPU workers.

Read by ``dask-gateway-server -f``; ports and tokens come from the environment.
"""

import os
import sys
from pathlib import Path

from dask_gateway_server.options import Float, Integer, Options

env = os.environ
bin_dir = Path(sys.executable).parent
c = get_config()  # noqa: F821 (traitlets' config loader defines it)

c.DaskGateway.address = f"127.0.0.1:{env['ELEGANTPOD_GATEWAY_API_PORT']}"  # private API
c.Proxy.address = f"127.0.0.1:{env['ELEGANTPOD_GATEWAY_PORT']}"  # HTTP + scheduler TLS
c.Proxy.prefix = "/services/dask-gateway"
c.DaskGateway.db_url = f"sqlite:///{Path(env['ELEGANTPOD_HUB_DIR']) / 'gateway.sqlite'}"

c.DaskGateway.authenticator_class = "dask_gateway_server.auth.JupyterHubAuthenticator"
c.JupyterHubAuthenticator.jupyterhub_api_token = env["ELEGANTPOD_GATEWAY_TOKEN"]
c.JupyterHubAuthenticator.jupyterhub_api_url = (
    f"http://127.0.0.1:{env['ELEGANTPOD_HUB_API_PORT']}/hub/api"
)
c.JupyterHubAuthenticator.jupyterhub_service_name = "dask-gateway"

c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.LocalBackend.cluster_working_dir = str(
    Path(env["ELEGANTPOD_HUB_DIR"]) / "clusters" / "{cluster_name}"
)
c.ClusterConfig.scheduler_cmd = [str(bin_dir / "dask"), "scheduler"]
LOOPBACK = ["--host", "127.0.0.1"]  # worker and nanny: never 0.0.0.0 / [::]
c.ClusterConfig.worker_cmd = [str(bin_dir / "dask"), "worker", *LOOPBACK]
c.ClusterConfig.idle_timeout = 600
c.ClusterConfig.environment = {"OMP_NUM_THREADS": "1"}


def options_handler(options):
    """The cluster options of deploy/daskhub/values.yaml, for local processes."""
    config = {
        "worker_cores": options.worker_cores,
        "worker_memory": int(options.worker_memory * 2**30),
        "worker_threads": 1 if options.worker_gpus else options.worker_cores,
    }
    if options.worker_gpus:
        config["worker_cmd"] = [
            str(bin_dir / "dask"), "worker", *LOOPBACK,
            "--resources", f"GPU={options.worker_gpus}",
        ]  # fmt: skip
    return config


c.Backend.cluster_options = Options(
    Integer("worker_cores", default=1, min=1, max=2, label="Worker cores (pods per worker)"),
    Float("worker_memory", default=1.0, min=0.5, max=4.0, label="Worker memory (GiB)"),
    Integer(
        "worker_gpus",
        default=0,
        min=0,
        max=int(env.get("ELEGANTPOD_GATEWAY_GPUS", "0")),
        label="GPUs per worker",
    ),  # fmt: skip
    handler=options_handler,
)
