"""Static checks of deploy/: the Docker image and the Kubernetes and Helm files around it.

Nothing here builds an image or talks to a cluster (no Docker, Kubernetes or Helm in CI).
The tests keep the files consistent with the package (version, dependencies, extras),
with each other (image tag, cluster name) and with how elegantpod runs pods: one pod per
worker thread, one worker per GPU with the resource GPU=1.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from dask.utils import parse_bytes
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from elegantpod.clusters.gateway import GATEWAY_OPTIONS
from elegantpod.clusters.local import MMAP_THRESHOLD, TRIM_THRESHOLD

yaml = pytest.importorskip("yaml")
if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
IMAGE = f"ghcr.io/elegantpod/elegantpod:{VERSION}"
CUDA_IMAGE = f"{IMAGE}-cuda"
OPERATOR_API = "kubernetes.dask.org/v1"
MANIFESTS = {
    "daskcluster.yaml": ["DaskCluster"],
    "gpu-workers.yaml": ["DaskWorkerGroup"],
    "autoscaler.yaml": ["DaskAutoscaler"],
}
SECRETISH = re.compile(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY|CREDENTIAL", re.IGNORECASE)


def load_all(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def manifest(name: str) -> dict:
    (doc,) = load_all(DEPLOY / "kubernetes" / name)
    return doc


def values() -> dict:
    return load_all(DEPLOY / "daskhub" / "values.yaml")[0]


def walk(node):
    """Every (key, value) pair in nested dicts and lists."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def env_entries(node):
    """(name, spec) of env vars: k8s `env` lists and z2jh / gateway env mappings."""
    for key, value in walk(node):
        if key == "env" and isinstance(value, list):
            yield from ((e["name"], e) for e in value)
        elif key in ("extraEnv", "environment") and isinstance(value, dict):
            for name, spec in value.items():
                yield name, spec if isinstance(spec, dict) else {"value": spec}


def image_refs(node):
    for key, value in walk(node):
        if key == "image" and isinstance(value, str):
            yield value
        elif key == "image" and isinstance(value, dict) and "name" in value:
            yield f"{value['name']}:{value['tag']}"


def gateway_snippet() -> str:
    (src,) = values()["dask-gateway"]["gateway"]["extraConfig"].values()
    return src


def k8s_quantity(q) -> Fraction:
    """A Kubernetes quantity: 4Gi (binary), 4G (decimal), 500m (milli), 2."""
    units = {"m": Fraction(1, 1000), "": 1, "k": 10**3, "M": 10**6, "G": 10**9}
    units |= {"T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", str(q))
    assert m and m[2] in units, f"not a Kubernetes quantity: {q!r}"
    return Fraction(m[1]) * units[m[2]]


def arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) pairs, comments dropped and continuation lines joined."""
    lines = (DEPLOY / "Dockerfile").read_text().splitlines()
    text = "\n".join(x for x in lines if not x.lstrip().startswith("#")).replace("\\\n", " ")
    return [tuple(x.split(None, 1)) for x in text.splitlines() if x.strip()]


def docker_env() -> dict[str, str]:
    out = {}
    for _, rest in (i for i in dockerfile() if i[0] == "ENV"):
        out |= dict(w.split("=", 1) for w in shlex.split(rest))
    return out


def pip_installs() -> tuple[list[str], list[str]]:
    """Requirement files and positional arguments of every `pip install` in a RUN."""
    with_value = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links"}
    with_value |= {"--trusted-host", "-t", "--target", "--prefix", "--root"}
    files, args = [], []
    for _, rest in (i for i in dockerfile() if i[0] == "RUN"):
        for command in re.split(r"&&|\|\||;", rest):
            words = shlex.split(command)
            if "install" not in words or not any(
                Path(w).name.startswith("pip") for w in words[: words.index("install")]
            ):
                continue
            it = iter(words[words.index("install") + 1 :])
            for w in it:
                if w in ("-r", "--requirement", "-c", "--constraint"):
                    files.append(next(it))
                elif w in ("-e", "--editable"):
                    args.append(next(it))
                elif w in with_value:
                    next(it)
                elif not w.startswith("-"):
                    args.append(w)
    return files, args


def requirements_file(path: Path) -> list[Requirement]:
    lines = (x.split("#")[0].strip() for x in path.read_text().splitlines())
    return [Requirement(x) for x in lines if x]


def image_extras() -> list[str]:
    _, args = pip_installs()
    assert len(args) == 1, f"the Dockerfile pip-installs {args}, expected only '.[extras]'"
    m = re.fullmatch(r"\.\[([\w,-]+)\]", args[0])
    assert m, f"expected the package as '.[extras]', got {args[0]!r}"
    return m[1].split(",")


def worker_containers() -> list[tuple[str, dict]]:
    out = []
    for name in ("daskcluster.yaml", "gpu-workers.yaml"):
        for c in manifest(name)["spec"]["worker"]["spec"]["containers"]:
            out.append((name, c))
    return out


def kube_cluster_config_traits() -> set[str]:
    """Settings a Gateway options handler may return (KubeClusterConfig's traits).

    Read from the installed source: importing the Kubernetes backend needs
    kubernetes_asyncio, which the tests do not install.
    """
    base = pytest.importorskip("dask_gateway_server.backends.base")
    (pkg,) = importlib.util.find_spec("dask_gateway_server").submodule_search_locations
    tree = ast.parse(Path(pkg, "backends", "kubernetes", "backend.py").read_text())
    (cls,) = [n for n in tree.body if getattr(n, "name", None) == "KubeClusterConfig"]
    own = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets}
    return set(base.ClusterConfig.class_trait_names()) | own


def test_yaml_parses_with_expected_kinds():
    """A manifest that no longer parses, or changes kind or apiVersion."""
    for path in DEPLOY.rglob("*.y*ml"):
        assert load_all(path), f"{path} is empty"
    found = {p.name for p in (DEPLOY / "kubernetes").glob("*.y*ml")}
    assert found == set(MANIFESTS), "add new manifests to MANIFESTS in this test"
    for name, kinds in MANIFESTS.items():
        docs = load_all(DEPLOY / "kubernetes" / name)
        assert [d["kind"] for d in docs] == kinds
        assert {d["apiVersion"] for d in docs} == {OPERATOR_API}
    assert set(values()) <= {"rbac", "jupyterhub", "dask-gateway", "dask-kubernetes"}


def test_every_image_is_the_documented_tag():
    """Manifests, Helm values or docs naming another image or an old version."""
    docker = (DEPLOY / "Dockerfile").read_text()
    assert f"docker build -f deploy/Dockerfile -t {IMAGE} ." in docker
    assert f"-t {CUDA_IMAGE} ." in docker
    assert f'org.opencontainers.image.version="{VERSION}"' in docker
    for path in [*DEPLOY.rglob("*.y*ml"), DEPLOY / "README.md", DEPLOY / "Dockerfile"]:
        for ref in re.findall(r"elegantpod/elegantpod:[\w.-]+", path.read_text()):
            assert f"ghcr.io/{ref}" in (IMAGE, CUDA_IMAGE), f"{path.name}: {ref}"
    for name in MANIFESTS:
        expected = CUDA_IMAGE if name == "gpu-workers.yaml" else IMAGE
        assert set(image_refs(manifest(name))) <= {expected}, name
    v = values()
    assert set(image_refs(v)) == {IMAGE}
    user = v["jupyterhub"]["singleuser"]["image"]
    assert f"{user['name']}:{user['tag']}" == IMAGE
    backend = v["dask-gateway"]["gateway"]["backend"]["image"]
    assert f"{backend['name']}:{backend['tag']}" == IMAGE


def test_dockerfile_installs_torch_from_the_makefile_pin():
    """The image's torch drifting from requirements/torch.txt, which the Makefile uses."""
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_REQ\s*:?=\s*requirements/torch.txt$", make, re.MULTILINE)
    assert re.search(r"pip install\b.* -r \$\(TORCH_REQ\)", make)
    files, _ = pip_installs()
    assert files[0] == "requirements/torch.txt", "torch goes in first, from the pin file"
    (torch,) = requirements_file(ROOT / "requirements" / "torch.txt")
    assert torch.name == "torch" and str(torch.specifier).startswith("==")
    pinned = str(torch.specifier)[2:]
    ranges = [Requirement(r) for r in PROJECT["dependencies"]]
    assert all(r.specifier.contains(pinned) for r in ranges if r.name == "torch")


def test_dockerfile_base_and_sources():
    """A base image outside requires-python, unpinned, or a COPY of a missing file."""
    (base,) = [rest for cmd, rest in dockerfile() if cmd == "FROM"]
    m = re.fullmatch(r"python:(\d+\.\d+)-slim[\w-]*", base)
    assert m, f"expected a python:X.Y-slim tag, got {base!r}"
    assert SpecifierSet(PROJECT["requires-python"]).contains(m[1])
    for cmd, rest in dockerfile():
        if cmd == "COPY" and "--from" not in rest:
            for src in shlex.split(rest)[:-1]:
                assert (ROOT / src).exists(), f"COPY {src}: not in the build context"


def test_image_gets_exactly_the_package_dependencies():
    """Extras that do not exist, or packages pip-installed by name next to the package."""
    extras = image_extras()
    optional = PROJECT["optional-dependencies"]
    assert set(extras) <= set(optional)
    assert {"gateway", "s3", "gcs", "azure", "mujoco", "notebook"} <= set(extras)
    wanted = [Requirement(r) for r in PROJECT["dependencies"]]
    wanted += [Requirement(r) for e in extras for r in optional[e]]
    names = {canonicalize_name(r.name) for r in wanted}
    files, _ = pip_installs()
    assert files == ["requirements/torch.txt", "deploy/requirements-jupyter.txt"]
    # The notebook server is the only addition; it must not re-pin a package dependency.
    pinned_elsewhere = {
        canonicalize_name(Requirement(r).name): Requirement(r).specifier
        for reqs in optional.values()
        for r in reqs
    }
    for req in requirements_file(DEPLOY / "requirements-jupyter.txt"):
        name = canonicalize_name(req.name)
        assert name not in names | {"torch"}, f"{req} duplicates a package requirement"
        if name in pinned_elsewhere:
            assert req.specifier == pinned_elsewhere[name], f"{req} drifted from pyproject"


def test_image_runtime_settings_match_the_local_cluster():
    """Thread, malloc and Dask worker settings drifting from elegantpod.cluster()."""
    env = docker_env()
    assert env["OMP_NUM_THREADS"] == "1"
    assert int(env["MALLOC_TRIM_THRESHOLD_"]) == TRIM_THRESHOLD
    assert int(env["MALLOC_MMAP_THRESHOLD_"]) == MMAP_THRESHOLD
    assert not [k for k in env if SECRETISH.search(k)], "no credentials in the image"
    (user,) = [rest for cmd, rest in dockerfile() if cmd == "USER"]
    assert user.split(":")[0] not in ("root", "0")
    assert ("COPY", "deploy/dask-config.yaml /etc/dask/elegantpod.yaml") in dockerfile()
    config = load_all(DEPLOY / "dask-config.yaml")[0]["distributed"]
    assert config["nanny"]["pre-spawn-environ"]["MALLOC_TRIM_THRESHOLD_"] == TRIM_THRESHOLD
    assert config["nanny"]["pre-spawn-environ"]["MALLOC_MMAP_THRESHOLD_"] == MMAP_THRESHOLD
    assert config["worker"]["daemon"] is False
    assert config["worker"]["profile"]["enabled"] is False


def test_worker_resources_match_their_arguments():
    """CPU or memory limits out of step with --nthreads / --memory-limit, or GPU counts."""
    found = worker_containers()
    assert {name for name, _ in found} == {"daskcluster.yaml", "gpu-workers.yaml"}
    for name, c in found:
        args, limits = c["args"], c["resources"]["limits"]
        assert args[:2] == ["dask", "worker"], name
        nthreads = int(arg(args, "--nthreads"))
        assert k8s_quantity(limits["cpu"]) == nthreads * 1, name
        memory = arg(args, "--memory-limit")
        assert re.fullmatch(r"\d+(\.\d+)?[KMGT]i?B?", memory), f"{name}: {memory!r}"
        assert parse_bytes(memory) == k8s_quantity(limits["memory"]), name
        requests = c["resources"]["requests"]
        assert [requests[k] for k in ("cpu", "memory")] == [limits["cpu"], limits["memory"]]
        env = dict(env_entries(c))
        assert env["OMP_NUM_THREADS"]["value"] == "1", name
        gpus = dict(r.split("=") for r in [arg(args, "--resources") or ""] if r).get("GPU")
        if name == "gpu-workers.yaml":
            assert int(gpus) == int(limits["nvidia.com/gpu"]) == 1, "one worker per GPU"
            assert nthreads == 1, "one pod per GPU"
        else:
            assert gpus is None and "nvidia.com/gpu" not in limits, name


def test_scheduler_ports_probes_and_cluster_names():
    """Service ports, probes or cluster names that no longer line up."""
    cluster = manifest("daskcluster.yaml")
    name = cluster["metadata"]["name"]
    (sched,) = cluster["spec"]["scheduler"]["spec"]["containers"]
    assert sched["args"][:2] == ["dask", "scheduler"]
    ports = {p["name"]: p["containerPort"] for p in sched["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    for probe in ("readinessProbe", "livenessProbe"):
        assert sched[probe]["tcpSocket"]["port"] in ("tcp-comm", 8786)
    service = cluster["spec"]["scheduler"]["service"]
    assert {p["name"]: p["port"] for p in service["ports"]} == ports
    assert service["selector"]["dask.org/cluster-name"] == name
    assert manifest("gpu-workers.yaml")["spec"]["cluster"] == name
    scaler = manifest("autoscaler.yaml")["spec"]
    assert scaler["cluster"] == name and 0 <= scaler["minimum"] <= scaler["maximum"]


def test_secrets_come_from_secret_refs():
    """A literal credential in a manifest, the Helm values or the image."""
    texts = {p: p.read_text() for p in DEPLOY.rglob("*") if p.is_file()}
    for path, text in texts.items():
        assert not re.search(r"AKIA[0-9A-Z]{16}", text), path
        assert not re.search(r"(?i)secret_access_key\s*[:=]\s*['\"]?[\w/+]{30,}", text), path
    for path in DEPLOY.rglob("*.y*ml"):
        for doc in load_all(path):
            for name, spec in env_entries(doc):
                if SECRETISH.search(name):
                    assert "value" not in spec, f"{path.name}: literal {name}"
                    assert "secretKeyRef" in spec["valueFrom"], f"{path.name}: {name}"
    for _, c in worker_containers():
        assert "secretKeyRef" in dict(env_entries(c))["AWS_SECRET_ACCESS_KEY"]["valueFrom"]
    assert not {k for k, _ in walk(values()) if re.search("(?i)token|password", str(k))}
    for key, value in walk(load_all(DEPLOY / "daskhub" / "secrets.example.yaml")[0]):
        if isinstance(value, str):
            assert re.fullmatch(r"<[^>]+>", value), f"{key}: not a placeholder"


def test_gateway_options_snippet_compiles_and_offers_elegantpod_options():
    """A cluster-options snippet that does not compile or lacks cluster()'s options."""
    src = gateway_snippet()
    compile(src, "dask_gateway_config.py", "exec")
    fields = re.findall(r"(?:Integer|Float)\(\s*\"(\w+)\"", src)
    assert sorted(fields) == sorted(GATEWAY_OPTIONS)
    worker = values()["dask-gateway"]["gateway"]["backend"]["worker"]
    assert worker["threads"] == worker["cores"]["limit"], "one pod per worker thread"
    assert values()["dask-gateway"]["gateway"]["auth"]["type"] == "jupyterhub"


def test_gateway_options_give_consistent_worker_pods():
    """Gateway workers whose threads, memory, GPU or image differ from the manifests'."""
    options = pytest.importorskip("dask_gateway_server.options")
    traitlets = pytest.importorskip("traitlets.config")
    c = traitlets.Config()
    exec(compile(gateway_snippet(), "dask_gateway_config.py", "exec"), {"c": c})
    assert c.KubeClusterConfig.scheduler_cmd == ["dask", "scheduler"]
    assert c.KubeClusterConfig.worker_cmd == ["dask", "worker"]
    opts = c.Backend.cluster_options
    assert isinstance(opts, options.Options)
    assert sorted(f.field for f in opts.fields) == sorted(GATEWAY_OPTIONS)

    def configure(**request):
        return opts.get_configuration(opts.parse_options(request), None)

    cpu = configure(worker_cores=2, worker_memory=3.5, worker_gpus=0)
    assert cpu["worker_threads"] == cpu["worker_cores"] == cpu["worker_cores_limit"] == 2
    assert cpu["worker_memory"] == cpu["worker_memory_limit"] == int(3.5 * 2**30)
    assert cpu["image"] == IMAGE and "--resources" not in cpu["worker_cmd"]
    gpu = configure(worker_cores=2, worker_gpus=1)
    assert gpu["image"] == CUDA_IMAGE and gpu["worker_threads"] == 1
    assert gpu["worker_cmd"][-2:] == ["--resources", "GPU=1"]
    assert gpu["worker_extra_container_config"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert set(cpu) | set(gpu) <= kube_cluster_config_traits()
    for config in (cpu, gpu):
        for name, spec in env_entries(config["worker_extra_container_config"]):
            assert "secretKeyRef" in spec["valueFrom"] and "value" not in spec, name


LOCAL_ENV = {
    "ELEGANTPOD_HUB_DIR": "/nonexistent/hub",
    "ELEGANTPOD_HUB_PORT": "20001",
    "ELEGANTPOD_HUB_API_PORT": "20002",
    "ELEGANTPOD_PROXY_API_PORT": "20003",
    "ELEGANTPOD_GATEWAY_PORT": "20004",
    "ELEGANTPOD_GATEWAY_API_PORT": "20005",
    "ELEGANTPOD_GATEWAY_TOKEN": "t" * 64,
    "ELEGANTPOD_HUB_PASSWORD": "p",
    "ELEGANTPOD_GATEWAY_GPUS": "1",
}


def _load_local_config(name: str, monkeypatch):
    """A deploy/local config file as its server loads it (``get_config()``), no server."""
    traitlets = pytest.importorskip("traitlets.config")
    for key, value in LOCAL_ENV.items():
        monkeypatch.setenv(key, value)
    c = traitlets.Config()
    path = DEPLOY / "local" / name
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: c})
    return c


def _urls(value) -> list[str]:
    return re.findall(r"[a-z]+://[^/\s\"']+", str(value))


def test_the_local_daskhub_binds_everything_to_loopback(monkeypatch):
    """The local daskhub (deploy/local/) listens on 127.0.0.1 only: the gateway worker
    once listened on 0.0.0.0 and [::] (``dask worker`` without ``--host``)."""
    pytest.importorskip("dask_gateway_server")
    from dask_gateway_server.backends.local import UnsafeLocalBackend

    gw = _load_local_config("gateway_config.py", monkeypatch)
    assert gw.DaskGateway.address.startswith("127.0.0.1:")
    assert gw.Proxy.address.startswith("127.0.0.1:")
    assert UnsafeLocalBackend.default_host == "127.0.0.1"  # the scheduler's --host

    def binds_loopback(cmd):
        return any(cmd[i : i + 2] == ["--host", "127.0.0.1"] for i in range(len(cmd)))

    assert binds_loopback(gw.ClusterConfig.worker_cmd), gw.ClusterConfig.worker_cmd
    opts = gw.Backend.cluster_options
    gpu = opts.get_configuration(opts.parse_options({"worker_gpus": 1}), None)
    assert binds_loopback(gpu["worker_cmd"]) and "GPU=1" in gpu["worker_cmd"]

    hub = _load_local_config("jupyterhub_config.py", monkeypatch)
    assert hub.JupyterHub.ip == hub.JupyterHub.hub_ip == hub.Spawner.ip == "127.0.0.1"
    urls = _urls(hub.ConfigurableHTTPProxy.api_url) + _urls(hub.Spawner.environment)
    urls += _urls([s["url"] for s in hub.JupyterHub.services if "url" in s])
    assert urls and all(u.split("://")[1].startswith("127.0.0.1:") for u in urls), urls


def test_the_local_daskhub_says_what_it_does_not_isolate():
    """One Unix user for every user's server, a testing-only password, dashboards whose
    name is the secret: said in deploy/README.md and printed by the launcher."""
    from tests.servers import daskhub  # deploy/local/daskhub.py, loaded as the tests do

    readme = " ".join((DEPLOY / "README.md").read_text().split())
    notice = " ".join(daskhub.NOTICE.split())
    for text in (readme, notice):
        assert re.search(r"not isolated from each other", text, re.IGNORECASE), text
        assert "/proc/<pid>/environ" in text and "capability URL" in text
        assert re.search(r"--password.{0,80}for testing only", text), text
    assert "print(NOTICE" in (DEPLOY / "local" / "daskhub.py").read_text()
