"""JupyterHub of the local daskhub (deploy/local/daskhub.py): what the daskhub Helm chart
sets up on Kubernetes, on 127.0.0.1 with local processes.

- users log in with one shared password (``SharedPasswordAuthenticator``); only the
  listed users may;
- each user's server is a local ``jupyterhub-singleuser`` process of this Python, with
  its home under the hub's folder (``SimpleLocalProcessSpawner``: no Unix accounts).
  All servers run as the hub's Unix user, so users are NOT isolated from each other:
  one user's code can read another's files and API token (``/proc/<pid>/environ``) and
  with it reach that user's server and clusters. For trying the hub path, not for
  people who must not trust each other;
- Dask Gateway is an external JupyterHub service, reached through the hub's proxy at
  ``/services/dask-gateway/``, and each user's server finds it from its environment,
  the ``gateway.*`` Dask config that daskhub writes (``DASK_GATEWAY__*``);
- a user's server token may use the gateway (``access:services!service=dask-gateway``),
  which the gateway checks (``JupyterHubAuthenticator`` with a service name).

Read by ``jupyterhub -f``; every setting that varies comes from the environment that
``daskhub.py`` (or ``tests/servers.py``) sets, so tests run exactly this file.
"""

import os
import sys
from pathlib import Path

env = os.environ
state = Path(env["ELEGANTPOD_HUB_DIR"])
bin_dir = Path(sys.executable).parent
users = env.get("ELEGANTPOD_HUB_USERS", "alice,bob").split(",")
hub_url = f"http://127.0.0.1:{env['ELEGANTPOD_HUB_PORT']}"
gateway_url = f"http://127.0.0.1:{env['ELEGANTPOD_GATEWAY_PORT']}"
USER_ENV = "ELEGANTPOD_USER_ENV_"
"""``ELEGANTPOD_USER_ENV_X=v`` in the hub's environment is ``X=v`` in every user's."""

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

# -- network: loopback only ------------------------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(env["ELEGANTPOD_HUB_PORT"])
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env["ELEGANTPOD_HUB_API_PORT"])
c.Spawner.ip = "127.0.0.1"  # users' servers (JupyterHub's default, said here)
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env['ELEGANTPOD_PROXY_API_PORT']}"
# the Python implementation of configurable-http-proxy (PyPI), a drop-in for the npm one
c.ConfigurableHTTPProxy.command = [str(bin_dir / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.cleanup_servers = True  # a stopped hub stops its users' servers
c.JupyterHub.cleanup_proxy = True

# -- state: all under the hub's folder ---------------------------------------------------
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")

# -- who may log in ----------------------------------------------------------------------
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = env["ELEGANTPOD_HUB_PASSWORD"]
c.Authenticator.allowed_users = set(users)

# -- users' servers ----------------------------------------------------------------------
c.JupyterHub.spawner_class = "simple"  # SimpleLocalProcessSpawner
c.SimpleLocalProcessSpawner.home_dir_template = str(state / "home" / "{username}")
c.Spawner.cmd = [str(bin_dir / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
if os.geteuid() == 0:  # CI and containers run as root; Jupyter refuses that unless told
    c.Spawner.args = ["--allow-root"]
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.Spawner.environment = {
    # what daskhub's values.yaml writes into every user's environment
    "DASK_GATEWAY__ADDRESS": f"{hub_url}/services/dask-gateway",
    "DASK_GATEWAY__PROXY_ADDRESS": f"gateway://127.0.0.1:{env['ELEGANTPOD_GATEWAY_PORT']}",
    "DASK_GATEWAY__PUBLIC_ADDRESS": f"{hub_url}/services/dask-gateway",
    "DASK_GATEWAY__AUTH__TYPE": "jupyterhub",
    # as a user image would set it: one torch thread per pod
    "OMP_NUM_THREADS": "1",
    # ELEGANTPOD_USER_ENV_X=v in the hub's environment becomes X=v in every user's
    # (the tests set ELEGANTPOD_SMALL_BUDGET so the tutorials run in seconds)
    **{k.removeprefix(USER_ENV): v for k, v in env.items() if k.startswith(USER_ENV)},
}

# -- Dask Gateway as a JupyterHub service --------------------------------------------------
c.JupyterHub.services = [
    {
        "name": "dask-gateway",
        "url": gateway_url,  # the proxy routes /services/dask-gateway/ here
        "api_token": env["ELEGANTPOD_GATEWAY_TOKEN"],
        "display": False,
    }
]
c.JupyterHub.load_roles = [
    {
        # JupyterHub 5 grants no service access by default: users (and their servers'
        # tokens, below) may use the gateway
        "name": "dask-gateway-users",
        "scopes": ["access:services!service=dask-gateway"],
        "users": users,
    },
    {
        # a server's token: JupyterHub's default scopes plus the gateway
        "name": "server",
        "scopes": [
            "users:activity!user",
            "access:servers!server",
            "access:services!service=dask-gateway",
        ],
    },
]
if env.get("ELEGANTPOD_HUB_ADMIN_TOKEN"):
    # an API token for scripts and tests that manage users and tokens (never for users)
    c.JupyterHub.services.append(
        {"name": "hub-admin", "api_token": env["ELEGANTPOD_HUB_ADMIN_TOKEN"], "display": False}
    )
    c.JupyterHub.load_roles.append(
        {
            "name": "hub-admin",
            "scopes": ["admin:users", "admin:servers", "tokens", "list:services"],
            "services": ["hub-admin"],
        }
    )
