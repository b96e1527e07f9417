import datetime as dt
import ipaddress
import os
import subprocess
import sys
import time

import dask
import pytest
from distributed import LocalCluster
from distributed.security import Security

from elegantpod import cluster


def test_default_local_cluster_is_processes_on_loopback():
    c = cluster(n_workers=2)
    try:
        info = c.scheduler_info()
        assert len(info["workers"]) == 2
        assert all(w["nthreads"] == 1 for w in info["workers"].values())
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in info["workers"])
        assert c.scheduler.address.startswith("tcp://127.0.0.1:")
        assert "127.0.0.1" in c.dashboard_link
        pids = set(c.run(lambda: __import__("os").getpid()).values())
        assert len(pids) == 2 and __import__("os").getpid() not in pids
        # a pod may step a CPU env in processes of its own (gymnasium's async vector env)
        fut = c.submit(_async_env_steps, pure=False)
        assert fut.result(timeout=120) == (2, 4)
    finally:
        cl = c.cluster
        c.close()
        cl.close()


def _worker_process():
    """What a worker's process holds: its parent, the preloaded modules, its settings."""
    import psutil

    from elegantpod.clusters.local import WORKER_PRELOAD

    parent = psutil.Process(os.getppid())
    return {
        "parent": parent.pid,
        "parent_command": " ".join(parent.cmdline()),
        "preloaded": all(m in sys.modules for m in WORKER_PRELOAD),
        "trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
        "late": os.environ.get("ELEGANTPOD_TEST_LATE_VARIABLE"),
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
    }


def test_cpu_workers_are_forked_with_torch_imported_and_this_processs_environment(monkeypatch):
    """Workers come from one forkserver that imported torch and the pod code once (a
    spawned worker spent about 1.5 s of a core importing them), with the workers' malloc
    settings, and with a variable this process set after that server started."""
    from elegantpod.clusters.local import TRIM_THRESHOLD, forkserver_workers

    forkserver_workers({})  # the server runs from here on, whatever ran before
    monkeypatch.setenv("ELEGANTPOD_TEST_LATE_VARIABLE", "set after the server started")
    c = cluster(n_workers=2, dashboard_address=None)
    try:
        seen = list(c.run(_worker_process).values())
    finally:
        cl = c.cluster
        c.close()
        cl.close()
    assert len(seen) == 2 and seen[0]["parent"] == seen[1]["parent"] != os.getpid(), seen
    assert "multiprocessing.forkserver" in seen[0]["parent_command"], seen
    assert all(w["preloaded"] for w in seen), seen
    assert all(w["trim"] == str(TRIM_THRESHOLD) for w in seen), seen
    assert all(w["late"] == "set after the server started" for w in seen), seen
    assert all(w["hash_seed"] == "6640" for w in seen), seen  # as the Nanny's spawned ones


def test_a_forkserver_that_cannot_start_leaves_the_workers_spawned(tmp_path):
    """On Python 3.11 the forkserver's socket is a file under TMPDIR, and a long
    TMPDIR made its path too long for a Unix socket: cluster() failed in the dashboard
    notebooks' test, which gives each kernel a private TMPDIR. It spawns instead."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    script = (
        "import os, elegantpod\n"
        "if __name__ == '__main__':\n"
        "    c = elegantpod.cluster(n_workers=1, dashboard_address=None)\n"
        "    (parent,) = c.run(os.getppid).values()\n"
        "    print('spawned' if parent == os.getpid() else 'forked')\n"
        "    elegantpod.shutdown(c)\n"
    )
    env = dict(os.environ, TMPDIR=str(deep))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # (a Python whose socket is not a file under TMPDIR forks here as anywhere)
    assert done.stdout.split()[-1] in ("spawned", "forked"), done.stdout
    if sys.version_info < (3, 12):
        assert done.stdout.split()[-1] == "spawned", done.stdout


FORKSERVER_SCRIPT = """\
import os, shutil, sys, multiprocessing.util
import elegantpod

def token():
    return os.environ.get("ELEGANTPOD_TEST_TOKEN"), os.environ.get("PYTHONSAFEPATH")

if __name__ == "__main__":
    os.environ["ELEGANTPOD_TEST_TOKEN"] = "secret"
    c = elegantpod.cluster(n_workers=1, dashboard_address=None)
    print("first", *c.run(token).values())
    elegantpod.shutdown(c)
    del os.environ["ELEGANTPOD_TEST_TOKEN"]  # revoked
    shutil.rmtree(multiprocessing.util.get_temp_dir())  # a tmp cleaner, mid-run
    c = elegantpod.cluster(n_workers=1, dashboard_address=None)
    print("second", *c.run(token).values())
    shutil.rmtree(multiprocessing.util.get_temp_dir())  # and once more before the exit
    elegantpod.shutdown(c)
"""


def test_the_forkserver_holds_no_stray_module_no_removed_variable_and_outlives_its_folder(
    tmp_path,
):
    """What forked workers inherit from the forkserver, checked where it went wrong:
    started as ``python -c`` in a folder holding a ``yaml.py``, the server imported it
    (distributed imports yaml) and every worker ran it; a variable deleted after the
    server started (a revoked token) lived on in every later worker; and a removed socket
    folder (``/tmp/pymp-*``) failed every later worker start and the exit with raw
    tracebacks. The workers' own children still see this process's ``PYTHONSAFEPATH``."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "marker"
    (work / "yaml.py").write_text(
        f"open({str(marker)!r}, 'a').write('ran')\nraise ImportError('a stray yaml.py')\n"
    )
    script = tmp_path / "script.py"
    script.write_text(FORKSERVER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-3000:]
    lines = [ln.split() for ln in done.stdout.splitlines()]
    assert ["first", "('secret',", "'')"] in lines, done.stdout
    assert ["second", "(None,", "'')"] in lines, done.stdout
    assert not marker.exists(), "the working folder's yaml.py ran in the forkserver"


def test_existing_scheduler_by_address():
    with LocalCluster(n_workers=1, processes=True, host="127.0.0.1", dashboard_address=None) as lc:
        c = cluster(lc.scheduler_address)
        try:
            assert c.submit(lambda x: x + 1, 1).result() == 2
        finally:
            c.close()


def test_unreachable_address_is_a_clear_error():
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="no Dask scheduler reachable at 'tcp://127.0.0.1:9'"):
        cluster("tcp://127.0.0.1:9", timeout=2)
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 0}, "n_workers must be >= 1, got 0"),
        ({"threads_per_worker": 0}, "threads_per_worker must be >= 1"),
        ({"gateway": "http://127.0.0.1:9", "security": True}, "security= is for address="),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cluster(**kwargs)


def test_gpu_required_without_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="gpu=True"):
        cluster(gpu=True)


def _async_env_steps():
    import torch

    from elegantpod.envs.registry import make_env

    env = make_env("CartPole-v1", num_envs=2, native=False, vectorization_mode="async")
    try:
        obs = env.reset(seed=0)
        env.step(torch.zeros(2, dtype=torch.int64))
        return tuple(obs.shape)
    finally:
        env.close()


# ------------------------------------------------------------------------- TLS schedulers
NO_TLS_CONFIG = {
    "distributed.comm.tls.ca-file": None,
    "distributed.comm.tls.client.cert": None,
    "distributed.comm.tls.client.key": None,
    "distributed.client.security-loader": None,
}


def _write_certificates(folder):
    """A self-signed CA and one certificate it signed for 127.0.0.1, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def build(subject, issuer, public_key, signing_key, ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("elegantpod test CA", "elegantpod test CA", ca_key.public_key(), ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = build("127.0.0.1", "elegantpod test CA", key.public_key(), ca_key, False)
    paths = {name: folder / f"{name}.pem" for name in ("ca", "cert", "key")}
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return {name: str(path) for name, path in paths.items()}


def test_tls_scheduler_by_address(tmp_path):
    pem = _write_certificates(tmp_path)
    roles = ("scheduler", "worker", "client")
    files = {f"tls_{r}_{k}": pem[k] for r in roles for k in ("cert", "key")}
    sec = Security(tls_ca_file=pem["ca"], require_encryption=True, **files)
    with (
        dask.config.set(NO_TLS_CONFIG),
        LocalCluster(
            n_workers=1,
            processes=False,
            protocol="tls",
            host="127.0.0.1",
            security=sec,
            dashboard_address=None,
        ) as lc,
    ):
        address = lc.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        c = cluster(address, security=sec, timeout=10)
        try:
            assert c.submit(lambda: 1).result(timeout=30) == 1
        finally:
            c.close()
        # the CLI's way: certificates from the Dask config, no security= argument
        config = {
            "distributed.comm.tls.ca-file": pem["ca"],
            "distributed.comm.tls.client.cert": pem["cert"],
            "distributed.comm.tls.client.key": pem["key"],
        }
        with dask.config.set(config):
            c = cluster(address, timeout=10)
            try:
                assert c.submit(lambda x: x + 1, 1, pure=False).result(timeout=30) == 2
            finally:
                c.close()


def test_tls_address_without_certificates_is_a_clear_error(tmp_path):
    with dask.config.set(NO_TLS_CONFIG):
        for security in (None, Security()):
            with pytest.raises(ValueError) as info:
                cluster("tls://127.0.0.1:9", security=security, timeout=2)
            msg = str(info.value)
            assert "'tls://127.0.0.1:9' is a TLS scheduler but no CA file" in msg
            for part in (
                "security=distributed.security.Security(",
                "distributed.comm.tls.ca-file",
                "distributed.comm.tls.client.cert",
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY",
            ):
                assert part in msg
        pem = _write_certificates(tmp_path)
        with pytest.raises(ValueError, match="but no client certificate is configured"):
            cluster("tls://127.0.0.1:9", security=Security(tls_ca_file=pem["ca"]), timeout=2)


def test_tls_environment_variables_named_in_the_error_are_read():
    env = {
        "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": "/certs/ca.pem",
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": "/certs/client.pem",
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": "/certs/client.key",
    }
    code = (
        "from distributed.security import Security; "
        "t = Security().get_tls_config_for_role('client'); "
        "print(t['ca_file'], t['cert'], t['key'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["/certs/ca.pem", "/certs/client.pem", "/certs/client.key"]


def test_local_cluster_with_tls():
    c = cluster(n_workers=1, security=Security.temporary(), dashboard_address=None)
    try:
        assert c.scheduler.address.startswith("tls://127.0.0.1:")
        assert all(a.startswith("tls://127.0.0.1:") for a in c.scheduler_info()["workers"])
        assert c.submit(lambda: 1).result(timeout=60) == 1
    finally:
        cl = c.cluster
        c.close()
        cl.close()


def test_importing_the_submodule_never_hides_the_function():
    """``from elegantpod.cluster import ...`` before ``elegantpod.cluster(...)`` (a module
    that imports the submodule at load) once made the call fail: the module had replaced
    the function on the package. The module lives in the ``clusters`` folder, and its
    import leaves the function alone."""
    import subprocess
    import sys

    code = (
        "from elegantpod.clusters.cluster import cluster\n"
        "from elegantpod.clusters.shutdown import shutdown\n"
        "import elegantpod\n"
        "assert callable(elegantpod.cluster), elegantpod.cluster\n"
        "assert elegantpod.cluster.__name__ == 'cluster'\n"
        "import importlib\n"
        "m = importlib.import_module('elegantpod.clusters.cluster')\n"
        "assert m.cluster is cluster and elegantpod.cluster is cluster\n"
        "assert elegantpod.shutdown is shutdown\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


STUCK_WORKER = """\
import multiprocessing, time

if getattr(multiprocessing.current_process(), "_inheriting", False):
    time.sleep(300)  # a worker process stuck in the script's own code, never coming up
import elegantpod

client = elegantpod.cluster(n_workers=1, start_timeout=3)
"""


def test_a_script_without_the_main_guard_fails_fast_with_the_guard(tmp_path):
    """The README's notebook code pasted into a script: each spawned worker imports the
    script again and calls cluster() there. That hung forever; now the worker fails at
    once and the script's cluster() raises, showing the guard. A worker that never comes
    up at all is stopped at start_timeout. (Both scripts run at once, to save time.)"""
    (tmp_path / "no_guard.py").write_text(
        "import elegantpod\n\nclient = elegantpod.cluster(n_workers=1)\n"
    )
    (tmp_path / "stuck.py").write_text(STUCK_WORKER)
    # a guarded script read from stdin (`python - < run.py`): its workers cannot import
    # "<stdin>" again, and failed with the guard's hint; they start as a notebook's do
    from_stdin = subprocess.Popen(
        [sys.executable, "-"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    from_stdin.stdin.write(STDIN_SCRIPT)
    from_stdin.stdin.close()  # it runs now, beside the other two
    t0 = time.monotonic()
    runs = {
        name: subprocess.Popen(
            [sys.executable, f"{name}.py"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("no_guard", "stuck")
    }
    out = {}
    try:
        for name, p in runs.items():
            out[name] = p.communicate(timeout=90)[1]
    finally:
        for p in runs.values():
            p.kill()
    took = time.monotonic() - t0
    assert took < 45, f"took {took:.0f} s"
    assert all(p.returncode != 0 for p in runs.values()), out
    last = out["no_guard"].rsplit("Traceback (most recent call last)", 1)[-1]
    assert "RuntimeError: local Dask workers did not start" in last, out["no_guard"][-3000:]
    assert 'if __name__ == "__main__":\n        main()' in last
    # and in the worker itself, the cause: cluster() called while it was starting
    assert "called in a worker process that was still starting" in out["no_guard"]
    last = out["stuck"].rsplit("Traceback (most recent call last)", 1)[-1]
    assert "did not start within 3 s (start_timeout)" in last, out["stuck"][-3000:]
    assert 'if __name__ == "__main__":' in last
    from_stdin.wait(timeout=90)  # its output is a few lines: the pipes never fill
    said, err = from_stdin.stdout.read(), from_stdin.stderr.read()
    assert from_stdin.returncode == 0 and said.startswith("workers: 1"), err[-3000:]


STDIN_SCRIPT = """
import elegantpod


def main():
    client = elegantpod.cluster(n_workers=1, dashboard_address=None)
    print("workers:", len(client.scheduler_info()["workers"]))
    elegantpod.shutdown(client)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("value", [0, -1, float("nan"), "10"])
def test_start_timeout_must_be_positive(value):
    with pytest.raises(ValueError, match="start_timeout must be > 0 seconds"):
        cluster(start_timeout=value)


def test_on_jupyterhub_the_dashboard_link_goes_through_the_users_server(monkeypatch):
    from distributed.utils import format_dashboard_link

    from elegantpod.clusters.cluster import DASK_DEFAULT_LINK, hub_dashboard_link

    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    with dask.config.set({"distributed.dashboard.link": DASK_DEFAULT_LINK}):
        hub_dashboard_link()
        assert format_dashboard_link("127.0.0.1", 8787) == "/user/alice/proxy/8787/status"
    # a link the deployment configured is kept
    with dask.config.set({"distributed.dashboard.link": "https://dash.example/{port}"}):
        assert hub_dashboard_link() == "https://dash.example/{port}"
    # off a hub, Dask's own link
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX")
    with dask.config.set({"distributed.dashboard.link": DASK_DEFAULT_LINK}):
        assert hub_dashboard_link() == DASK_DEFAULT_LINK
        assert format_dashboard_link("127.0.0.1", 8787) == "http://127.0.0.1:8787/status"


def test_every_kind_of_cluster_has_a_factory_with_examples():
    """One factory per kind, each documented with an Examples section that runs
    (``tests/test_examples.py``; the GPU and gateway ones are marked to skip)."""
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
