"""Real servers for the scale-out tests, started on 127.0.0.1 and stopped by the tests.

* :func:`gateway_server`: ``dask-gateway-server`` with its ``UnsafeLocalBackend`` (clusters
  are local processes of the server's user; fine for a test, never for a shared machine),
  cluster options ``worker_cores`` and ``worker_memory`` offered as a daskhub admin would.
* :func:`s3_server`: moto's S3-compatible server, reached through s3fs like any bucket.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import psutil

BIN = Path(sys.executable).parent


def _load_daskhub():
    """``deploy/local/daskhub.py``, a launcher script rather than a package module."""
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "elegantpod_local_daskhub", root / "deploy" / "local" / "daskhub.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


daskhub = _load_daskhub()
free_port = daskhub.free_port
"""One port picker for every server the tests start (see ``daskhub.free_port``)."""


def processes_under(folder: Path) -> list[psutil.Process]:
    """Live processes whose working directory is inside ``folder`` (leak detection)."""
    out = []
    for p in psutil.process_iter(["cwd", "status"]):
        with contextlib.suppress(psutil.Error, TypeError):
            if p.info["status"] != psutil.STATUS_ZOMBIE and str(p.info["cwd"]).startswith(
                str(folder)
            ):
                out.append(p)
    return out


GATEWAY_CONFIG = """
from dask_gateway_server.options import Float, Integer, Options

c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.DaskGateway.address = "127.0.0.1:{api_port}"
c.Proxy.address = "127.0.0.1:{proxy_port}"
c.LocalBackend.cluster_working_dir = "{workdir}/{{cluster_name}}"
c.ClusterConfig.scheduler_cmd = ["{bin}/dask", "scheduler"]
c.ClusterConfig.worker_cmd = ["{bin}/dask", "worker"]
c.ClusterConfig.idle_timeout = 600


def options_handler(options):
    return {{
        "worker_cores": options.worker_cores,
        "worker_memory": int(options.worker_memory * 2**30),
    }}


c.Backend.cluster_options = Options(
    Integer("worker_cores", 1, min=1, max=2, label="Worker cores"),
    Float("worker_memory", 1.0, min=0.5, max=4.0, label="Worker memory (GiB)"),
    handler=options_handler,
)
"""


@contextlib.contextmanager
def gateway_server(tmp: Path):
    """Yield the address of a running gateway (its proxy); stop it and check for leaks."""
    tmp.mkdir(parents=True, exist_ok=True)
    workdir = tmp / "clusters"
    api_port, proxy_port = free_port(), free_port()
    config = tmp / "gateway_config.py"
    config.write_text(
        textwrap.dedent(
            GATEWAY_CONFIG.format(
                api_port=api_port, proxy_port=proxy_port, workdir=workdir, bin=BIN
            )
        )
    )
    log = open(tmp / "gateway.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(BIN / "dask-gateway-server"), "-f", str(config)],
        cwd=tmp,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    address = f"http://127.0.0.1:{proxy_port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # plain HTTP: no client event loop just to see the server is up
            if proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {(tmp / 'gateway.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{address}/api/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
        yield address, workdir
    finally:
        proc.send_signal(signal.SIGTERM)  # the gateway stops its clusters on the way out
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        leaked = processes_under(workdir)
        for p in leaked:
            with contextlib.suppress(psutil.Error):
                p.kill()
        assert not leaked, f"gateway left processes behind: {[p.cmdline() for p in leaked]}"


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def s3_server():
    """Yield the environment that points s3fs (here and in workers) at a moto server."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def gateway_clusters(address: str) -> list[str]:
    """Names of the clusters a gateway runs for this user (its REST API, basic auth)."""
    token = base64.b64encode(f"{getpass.getuser()}:".encode()).decode()
    req = urllib.request.Request(
        f"{address}/api/v1/clusters/", headers={"Authorization": f"Basic {token}"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return sorted(json.load(r))
