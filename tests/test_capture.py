"""Captured PPO iterations compute what eager ones compute (``elegantpod.capture``).

On a CPU the static path (the functions a CUDA graph records, run eagerly) is checked
against the plain eager path; the captured graphs themselves need a GPU and are checked
in the ``gpu`` tests below, against the same pod run eagerly.
"""

import dataclasses

import pytest
import torch

from elegantpod import Pod, PodSpec
from elegantpod.agents.ppo import PPOConfig
from elegantpod.capture import IterationGraphs, unsupported

HP = PPOConfig(num_envs=16, horizon=16, minibatch_size=64, epochs=2)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _spec(device="cpu", **kw):
    return PodSpec(env_id="CartPole-v1", algo="ppo", hparams=HP, seed=3, device=device, **kw)


def _assert_same_learners(a, b, exact=True):
    tol = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-4, "atol": 1e-5}
    for x, y in zip(a.learner.params, b.learner.params, strict=True):
        torch.testing.assert_close(x, y, **tol)
    sa, sb = a.learner.optimizers["ppo"].state_dict(), b.learner.optimizers["ppo"].state_dict()
    for k in sa["state"]:
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(sa["state"][k][name], sb["state"][k][name], **tol)


def test_the_static_iteration_is_the_eager_iteration():
    """``update_static`` runs the kernels ``update`` runs, in the same order: the same
    weights, optimizer moments, statistics and next observations, bit for bit."""
    static, eager = Pod(_spec(capture=False)), Pod(_spec(capture=False))
    graphs = IterationGraphs(static.worker, static.learner, capture=False)
    for _ in range(3):
        got = graphs.run()
        want = eager.learner.update(eager.worker.rollout())
        assert got == want
    _assert_same_learners(static, eager)
    torch.testing.assert_close(static.worker.obs, eager.worker.obs, rtol=0, atol=0)
    assert static.worker.pop_train_return() == eager.worker.pop_train_return()


def test_capture_is_refused_with_its_reason_where_it_cannot_apply():
    pod = Pod(_spec(capture=False))
    assert "CUDA" in unsupported(pod.worker, pod.learner)
    assert pod.graphs is None
    assert Pod(_spec()).graphs is None  # the default on a CPU: eager, silently
    with pytest.raises(ValueError, match="capture=True.*CUDA"):
        Pod(_spec(capture=True))
    with pytest.raises(ValueError, match="capture must be True, False or None, got 'yes'"):
        _spec(capture="yes").validate()
    sac = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", device="cpu", capture=False))
    assert "covers PPO, not SAC" in unsupported(sac.worker, sac.learner)


def test_a_spec_without_capture_loads_as_before():
    d = _spec().to_dict()
    del d["capture"]
    assert PodSpec.from_dict(d).capture is None


# -- on a GPU: the graphs against the same pod run eagerly --------------------------------
@needs_cuda
@pytest.mark.gpu
def test_captured_iterations_match_eager_ones_on_cuda():
    captured, eager = Pod(_spec("cuda")), Pod(_spec("cuda", capture=False))
    assert captured.graphs is not None and eager.graphs is None
    for _ in range(4):
        got = captured.graphs.run()
        want = eager.learner.update(eager.worker.rollout())
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert captured.graphs.captures == 1
    _assert_same_learners(captured, eager, exact=False)
    torch.testing.assert_close(captured.worker.obs, eager.worker.obs, rtol=1e-4, atol=1e-5)


@needs_cuda
@pytest.mark.gpu
def test_graphs_follow_hparams_restarts_and_loads_on_cuda(tmp_path):
    pod = Pod(_spec("cuda"), out_dir=tmp_path)
    for _ in range(2):
        pod.graphs.run()
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3))
    pod.graphs.run()
    assert pod.graphs.captures == 2
    assert pod.learner.optimizers["ppo"].param_groups[0]["lr"] == 1e-3
    pod.save()
    pod.restart_episodes()
    twin = Pod(dataclasses.replace(pod.spec, capture=False))
    twin.load(pod.checkpoint_path)
    pod.graphs.run()
    twin.learner.update(twin.worker.rollout())
    _assert_same_learners(pod, twin, exact=False)


@needs_cuda
@pytest.mark.gpu
@pytest.mark.slow
def test_a_captured_pod_solves_cartpole_on_cuda():
    hp = PPOConfig(num_envs=1024, horizon=32, minibatch_size=8192)
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=hp, device="cuda", target_reward=475.0)
    pod = Pod(dataclasses.replace(spec, max_steps=3_000_000))
    result = pod.run()
    assert pod.graphs is not None and pod.graphs.capture and pod.graphs.captures >= 1
    assert result.eval_return_mean >= 475.0
