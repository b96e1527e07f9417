"""A local daskhub on 127.0.0.1: JupyterHub, its proxy and Dask Gateway as a hub service.

What the ``dask/daskhub`` Helm chart runs on Kubernetes, as local processes, for
developers and for the tests (``tests/test_jupyterhub.py`` runs exactly these files):

    python deploy/local/daskhub.py [--users alice,bob] [--password ...] [--folder DIR]

prints the hub's address and the password, and runs until Ctrl-C, which stops every
process it started (the hub, the proxy, users' servers, the gateway and its clusters).
Everything listens on 127.0.0.1. It is for trying the hub path, not for sharing a
machine: see :data:`NOTICE` (all users' servers run as one Unix user).
The configuration is in ``jupyterhub_config.py`` and ``gateway_config.py`` beside this
file; ``deploy/README.md`` explains it for hub admins.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
NOTICE = """\
This local daskhub is for trying the hub path on one machine; it does not isolate users:
- every user's server and every gateway cluster runs as YOUR Unix user, so the users are
  NOT isolated from each other: one user's code can read another's files and API token
  (/proc/<pid>/environ) and with it reach their server and list their clusters;
- the shared password (--password) is for testing only;
- a cluster's dashboard (<hub>/services/dask-gateway/clusters/<name>/status) needs no
  token: the cluster's random name is the secret (a capability URL), share it only with
  those who may see that cluster.
Everything listens on 127.0.0.1 only. For real users: deploy/README.md (daskhub)."""
"""What the launcher says before anything else: what this hub does not protect."""


_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for port 0 (Linux's default: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free TCP port on 127.0.0.1, below the kernel's ephemeral range, never the same
    one twice in a process.

    Why: a port that the kernel handed us for port 0 and we released is handed to the
    next process that binds port 0 (a Dask worker, a user's server) as readily, and
    then our server cannot bind it (CI once saw the gateway's proxy fail so). Ports
    below the ephemeral range are given only to those who ask for them by number.
    """
    high = _ephemeral_low()
    low = max(1024, high - 12000)
    for _ in range(1000):
        port = secrets.randbelow(high - low) + low
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {low}-{high - 1}")


@dataclass
class LocalDaskHub:
    """A running local daskhub: where it listens and how to reach it.

    ``url`` is the hub (behind its proxy); ``gateway_url`` the gateway through the hub's
    proxy, as users' servers reach it; ``gateway_proxy`` the gateway's own port (its API
    and the schedulers' TLS traffic); ``admin_token`` an API token with user and token
    management scopes (the ``hub-admin`` service).
    """

    folder: Path
    url: str
    gateway_url: str
    gateway_proxy: str
    password: str
    users: list[str]
    admin_token: str
    processes: list[subprocess.Popen] = field(default_factory=list)
    seen: dict = field(default_factory=dict)
    """Every process started under the hub or the gateway, by pid (``psutil.Process``
    objects: signalling one checks it is still the same process, not a reused pid)."""

    def api(self, path: str, method: str = "GET", body: bytes | None = None) -> bytes:
        """A hub REST API call with the admin token (``path`` after ``/hub/api``)."""
        req = urllib.request.Request(
            f"{self.url}/hub/api{path}",
            data=body,
            method=method,
            headers={"Authorization": f"token {self.admin_token}"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()

    def user_token(self, user: str) -> str:
        """A new API token of ``user`` (what ``JUPYTERHUB_API_TOKEN`` is in their server)."""
        import json

        data = json.loads(self.api(f"/users/{user}/tokens", "POST", b'{"note": "test"}'))
        return data["token"]

    def track(self) -> None:
        """Remember the pids of every process now running under ours."""
        import psutil

        for p in self.processes:
            with contextlib.suppress(psutil.Error):
                parent = psutil.Process(p.pid)
                for proc in (parent, *parent.children(recursive=True)):
                    self.seen.setdefault(proc.pid, proc)


def _wait_http(url: str, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:  # not up yet, or not routed yet (the hub's proxy answers 404)
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout:.0f} s; see {log}")


def _start(cmd: list[str], root: Path, env: dict, log_name: str):
    """``cmd`` in its own session (so that Ctrl-C in a terminal reaches only us), its
    output appended to ``root/log_name``."""
    log = root / log_name
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


def _stop(proc: subprocess.Popen, timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


@contextlib.contextmanager
def local_daskhub(
    folder: str | Path | None = None,
    users: tuple[str, ...] = ("alice", "bob"),
    password: str | None = None,
    user_env: dict[str, str] | None = None,
):
    """Start a local daskhub; yield a :class:`LocalDaskHub`; stop every process on exit.

    Parameters
    ----------
    folder
        Its state (databases, users' homes, clusters' folders); a temporary folder when
        ``None``, removed at the end.
    users
        Who may log in (with ``password``).
    user_env
        Extra environment variables of every user's server.
    """
    import psutil

    tmp = tempfile.TemporaryDirectory(prefix="elegantpod-daskhub-") if folder is None else None
    root = Path(tmp.name if tmp else folder).resolve()
    root.mkdir(parents=True, exist_ok=True)
    ports = {
        "ELEGANTPOD_HUB_PORT": free_port(),
        "ELEGANTPOD_HUB_API_PORT": free_port(),
        "ELEGANTPOD_PROXY_API_PORT": free_port(),
        "ELEGANTPOD_GATEWAY_PORT": free_port(),
        "ELEGANTPOD_GATEWAY_API_PORT": free_port(),
    }
    hub = LocalDaskHub(
        folder=root,
        url=f"http://127.0.0.1:{ports['ELEGANTPOD_HUB_PORT']}",
        gateway_url=f"http://127.0.0.1:{ports['ELEGANTPOD_HUB_PORT']}/services/dask-gateway",
        gateway_proxy=f"http://127.0.0.1:{ports['ELEGANTPOD_GATEWAY_PORT']}",
        password=password or secrets.token_urlsafe(12),
        users=list(users),
        admin_token=secrets.token_hex(32),
    )
    env = dict(
        os.environ,
        **{k: str(v) for k, v in ports.items()},
        ELEGANTPOD_HUB_DIR=str(root),
        ELEGANTPOD_HUB_USERS=",".join(users),
        ELEGANTPOD_HUB_PASSWORD=hub.password,
        ELEGANTPOD_GATEWAY_TOKEN=secrets.token_hex(32),
        ELEGANTPOD_HUB_ADMIN_TOKEN=hub.admin_token,
        **{f"ELEGANTPOD_USER_ENV_{k}": v for k, v in (user_env or {}).items()},
    )
    env.pop("JUPYTERHUB_API_TOKEN", None)  # the gateway's comes from its config
    try:
        hub_cmd = [str(BIN / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")]
        proc, log = _start(hub_cmd, root, env, "jupyterhub.log")
        hub.processes.append(proc)
        _wait_http(f"{hub.url}/hub/api/", 90, proc, log)
        gw_cmd = [str(BIN / "dask-gateway-server"), "-f", str(HERE / "gateway_config.py")]
        proc, log = _start(gw_cmd, root, env, "gateway.log")
        hub.processes.append(proc)
        _wait_http(f"{hub.gateway_url}/api/health", 60, proc, log)
        hub.track()
        yield hub
    finally:
        hub.track()
        for proc in reversed(hub.processes):  # the gateway stops its clusters first
            _stop(proc)
        # anything a stopped parent left behind (a user's kernel, a cluster's worker)
        for proc in hub.seen.values():
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    proc.terminate()
        gone = time.monotonic() + 10
        while time.monotonic() < gone and alive(hub.seen):
            time.sleep(0.2)
        for pid in alive(hub.seen):
            with contextlib.suppress(psutil.Error):
                hub.seen[pid].kill()
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()


def alive(seen: dict) -> list[int]:
    """The pids of the processes in ``seen`` (pid -> ``psutil.Process``) that still run;
    zombies and reused pids do not count."""
    import psutil

    out = []
    for pid, proc in seen.items():
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", default="alice,bob")
    ap.add_argument(
        "--password", default=None, help="the shared password, for testing only (default: random)"
    )
    ap.add_argument("--folder", default=None, help="state folder (default: a temporary one)")
    args = ap.parse_args()
    print(NOTICE, flush=True)
    with local_daskhub(args.folder, tuple(args.users.split(",")), args.password) as hub:
        print(f"JupyterHub at {hub.url}/hub/login: users {', '.join(hub.users)}, password")
        print(f"{hub.password}; Dask Gateway at {hub.gateway_url}. Ctrl-C stops it all.")
        with contextlib.suppress(KeyboardInterrupt):
            while all(p.poll() is None for p in hub.processes):
                time.sleep(1)
                hub.track()


if __name__ == "__main__":
    main()
