"""Where a pod runs: ``device="auto"``, a device this machine lacks, torch's threads."""

import dataclasses
import json

import pytest
import torch

from elegantpod import train
from elegantpod.agents.ppo import PPOConfig
from elegantpod.config import PodSpec
from elegantpod.devices import available_bytes, resolve_device
from elegantpod.pod.memory import check_memory
from elegantpod.pod.pod import Pod
from elegantpod.threads import default_threads, torch_threads

HERE = "cuda" if torch.cuda.is_available() else "cpu"
CPU_ONLY_TORCH = torch.version.cuda is None
SMALL = PPOConfig(num_envs=4, horizon=16)


# -- device -------------------------------------------------------------------------------
def test_auto_is_the_default_and_resolves_where_the_pod_is_built(tmp_path):
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=SMALL, max_steps=64)
    assert spec.device == "auto"
    spec.validate()
    assert resolve_device("auto") == HERE
    pod = Pod(spec)
    assert pod.spec.device == HERE and pod.env.device.type == HERE
    assert pod.save(tmp_path / "c.pt")
    assert Pod.from_checkpoint(tmp_path / "c.pt").spec.device == HERE  # what was used


@pytest.mark.parametrize(
    ("device", "want"), [("cpu", "cpu"), (torch.device("cpu"), "cpu"), ("cpu:0", "cpu:0")]
)
def test_a_named_device_is_kept(device, want):
    assert resolve_device(device) == want


@pytest.mark.parametrize(
    "device", ["gpu", "cuda:x", "", "CUDA", None, 3, "meta", "xla", "cuda:300", "cpu:999"]
)
def test_a_malformed_device_is_named(device):
    with pytest.raises(ValueError, match="device") as err:
        resolve_device(device)
    assert repr(device) in str(err.value)
    with pytest.raises(ValueError, match="device"):
        PodSpec(env_id="CartPole-v1", algo="ppo", device=device).validate()


def test_memory_checks_take_auto():
    spec = PodSpec(env_id="CartPole-v1", algo="ppo")
    assert available_bytes("auto") is None  # decided, and checked, where the pod is built
    check_memory(spec)
    huge = dataclasses.replace(spec, device="cpu", hparams=PPOConfig(num_envs=2**22, horizon=2**16))
    with pytest.raises(ValueError, match="would need about"):
        check_memory(huge)


@pytest.mark.skipif(not CPU_ONLY_TORCH, reason="needs a CPU-only build of torch")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_on_a_cpu_only_torch_is_one_clear_error_before_any_env(device, tmp_path):
    message = "CUDA is not available in this torch build"
    with pytest.raises(ValueError, match=message) as err:
        resolve_device(device)
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu126" in str(err.value)
    # An env that cannot be built would fail with its own error: the device fails first.
    bad_env = {"data": str(tmp_path / "missing.csv")}
    spec = PodSpec(env_id="StockTrading-v0", algo="ppo", device=device, env_kwargs=bad_env)
    with pytest.raises(ValueError, match=message):
        Pod(spec)
    with pytest.raises(ValueError, match=message):
        train("StockTrading-v0", device=device, env_kwargs=bad_env, out=tmp_path / "o")
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.gpu
def test_the_default_pod_trains_on_the_gpu():
    pod = Pod(PodSpec(env_id="CartPole-v1", algo="ppo", max_steps=2048))
    assert pod.spec.device == "cuda"
    params = [p for m in pod.learner.modules.values() for p in m.parameters()]
    assert params and all(p.device.type == "cuda" for p in params)
    assert pod.run().env_steps == 2048


# -- threads ------------------------------------------------------------------------------
def test_default_threads_on_a_cpu(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads("cpu") == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads("cpu") == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")
    assert default_threads("cpu") == 1


def test_train_runs_with_one_thread_on_a_cpu_and_restores_the_count(monkeypatch, tmp_path):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # as torch's default on a 2-core machine
    try:
        seen = []
        result = train(
            "CartPole-v1",
            device="cpu",
            max_steps=2048,
            eval_every_steps=1024,
            eval_episodes=2,
            out=tmp_path / "run",
            callback=lambda p: seen.append(torch.get_num_threads()),
        )
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        assert json.loads((tmp_path / "run" / "spec.json").read_text())["device"] == "cpu"
        assert result.env_steps >= 2048
        seen.clear()
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a user set: the run takes it
        torch.set_num_threads(2)
        train(
            "CartPole-v1", max_steps=1024, callback=lambda p: seen.append(torch.get_num_threads())
        )
        train(
            "CartPole-v1",
            max_steps=1024,
            threads=0,
            callback=lambda p: seen.append(-1 * torch.get_num_threads()),
        )
        assert set(seen) == {1, -2} and torch.get_num_threads() == 2  # 0: torch's own setting
    finally:
        torch.set_num_threads(before)


def test_threads_given_are_used_and_bad_ones_refused():
    before = torch.get_num_threads()
    with torch_threads(2, "cpu") as n:
        assert n == torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    with torch_threads(0, "cpu") as n:  # torch's own setting
        assert n == before
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be an integer"):
            train("CartPole-v1", threads=bad)


LIMITED = """
import resource, sys
import psutil
from elegantpod.agents.sac import SACConfig
from elegantpod.config import PodSpec
from elegantpod.devices import host_available_bytes
from elegantpod.pod.memory import check_memory, estimate_pod_bytes

spec = PodSpec(env_id="Pendulum-v1", algo="sac", device="cpu",
               hparams=SACConfig(buffer_size=20_000_000))  # about 800 MB of replay
need = estimate_pod_bytes(spec, 3, 1)
free = host_available_bytes()
if len(sys.argv) > 1:  # ulimit -v: what this process maps now, and 256 MiB more
    vms = psutil.Process().memory_info().vms
    resource.setrlimit(resource.RLIMIT_AS, (vms + 2**28, resource.RLIM_INFINITY))
    free = host_available_bytes()
    assert free <= 2**28, free
try:
    check_memory(spec, 3, 1)
    print("fits", need, free)
except ValueError as exc:
    print("refused", exc)
"""


def test_the_memory_check_honours_ulimit(tmp_path):
    """A pod under ``ulimit -v`` is checked against what the process may still map, not
    the machine's free memory: refused with its sizes, never killed mid-allocation."""
    import subprocess
    import sys

    run = [sys.executable, "-c", LIMITED]
    free = subprocess.run(run, capture_output=True, text=True, timeout=120)
    limited = subprocess.run([*run, "limit"], capture_output=True, text=True, timeout=120)
    assert free.stdout.startswith("fits"), free.stdout + free.stderr  # 24 GiB here
    assert limited.stdout.startswith("refused this sac pod would need about"), limited.stderr
    assert "buffer_size=20000000" in limited.stdout
