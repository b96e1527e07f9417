"""Captured PPO iterations compute what eager ones compute (``elegantpod.pod.capture``).

On a CPU the static path (the functions a CUDA graph records, run eagerly) is checked
against the plain eager path; the captured graphs themselves need a GPU and are checked
in the ``gpu`` tests below, against the same pod run eagerly.
"""

import dataclasses
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from elegantpod import Pod, PodSpec
from elegantpod.agents.ppo import PPOConfig
from elegantpod.pod.budget import Budget
from elegantpod.pod.capture import IterationGraphs, unsupported

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
    graphs = IterationGraphs(static.collector, static.learner, capture=False)
    for _ in range(3):
        got = graphs.run()
        want = eager.learner.update(eager.collector.rollout())
        assert got == want
    _assert_same_learners(static, eager)
    torch.testing.assert_close(static.collector.obs, eager.collector.obs, rtol=0, atol=0)
    assert static.collector.pop_train_return() == eager.collector.pop_train_return()


def test_capture_is_refused_with_its_reason_where_it_cannot_apply():
    pod = Pod(_spec(capture=False))
    assert "CUDA" in unsupported(pod.collector, pod.learner)
    assert pod.graphs is None
    assert Pod(_spec()).graphs is None  # the default on a CPU: eager, silently
    with pytest.raises(ValueError, match="capture=True.*CUDA"):
        Pod(_spec(capture=True))
    with pytest.raises(ValueError, match="capture must be True, False or None, got 'yes'"):
        _spec(capture="yes").validate()
    sac = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", device="cpu", capture=False))
    reason = unsupported(sac.collector, sac.learner)
    assert reason == (
        "SAC has no static update to capture (it lacks use_static_update, "
        "update_static, STAT_KEYS; PPO has one)"
    )


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
        want = eager.learner.update(eager.collector.rollout())
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert captured.graphs.captures == 1
    _assert_same_learners(captured, eager, exact=False)
    torch.testing.assert_close(captured.collector.obs, eager.collector.obs, rtol=1e-4, atol=1e-5)


@needs_cuda
@pytest.mark.gpu
def test_graphs_follow_hparams_restarts_and_loads_on_cuda(tmp_path):
    pod = Pod(_spec("cuda"), out_dir=tmp_path)
    for _ in range(2):
        pod.graphs.run()
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3))  # read from a tensor: no capture
    pod.graphs.run()
    assert (pod.graphs.captures, pod.graphs.replays) == (1, 2)
    assert float(pod.learner.optimizers["ppo"].param_groups[0]["lr"]) == pytest.approx(1e-3)
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3, clip_coef=0.3))  # baked in: captured
    pod.graphs.run()
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3, clip_coef=0.25))
    pod.graphs.run()
    assert pod.graphs.captures == 3
    pod.save()
    pod.restart_episodes()
    twin = Pod(dataclasses.replace(pod.spec, capture=False))
    twin.load(pod.checkpoint_path)
    pod.graphs.run()
    twin.learner.update(twin.collector.rollout())
    _assert_same_learners(pod, twin, exact=False)


@needs_cuda
@pytest.mark.gpu
def test_eager_cuda_pods_use_fused_adam_and_captured_ones_capturable():
    eager = Pod(_spec("cuda", capture=False)).learner.optimizers["ppo"].param_groups[0]
    assert eager["fused"] and not eager["capturable"]
    captured = Pod(_spec("cuda")).learner.optimizers["ppo"].param_groups[0]
    assert captured["capturable"] and torch.is_tensor(captured["lr"])


@needs_cuda
@pytest.mark.gpu
def test_a_horizon_one_pod_captures_without_falling_back_on_cuda():
    """The capture meets only the step variant the warm-up compiled: no recompile inside
    it, no failed capture, no compile marked failed."""
    hp = dataclasses.replace(HP, horizon=1, num_envs=64, minibatch_size=32)
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", hparams=hp, seed=3, device="cuda")
    pod = Pod(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(4):
            pod.graphs.run()
    assert pod.graphs.capture and (pod.graphs.captures, pod.graphs.replays) == (1, 3)
    from elegantpod.envs.fused_step import whole_step

    assert pod.env._step_fn is not whole_step(type(pod.env))  # still compiled


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


# -- what a graph holds: fingerprints, the learning rate, restarts (issue 30) --------------
def _static_pod(**kw):
    pod = Pod(_spec(capture=False, **kw))
    pod.graphs = IterationGraphs(pod.collector, pod.learner, capture=False)
    return pod


def test_two_set_hparams_between_fingerprints_change_it():
    """A config is compared by value: after two ``set_hparams`` the new config may sit at
    the address of the one the fingerprint saw, and the graph's constants are stale."""
    pod = _static_pod()
    graphs, learner = pod.graphs, pod.learner
    for i in range(20):
        # CPython often gives the new config the freed one's address (the case that
        # fooled id()s); whether it does depends on the allocator's state, so the test
        # asks only that the fingerprint changes, address reused or not
        before = graphs.fingerprint()
        learner.set_hparams(clip_coef=0.3)
        learner.set_hparams(clip_coef=0.21 + i / 1000)
        assert graphs.fingerprint() != before
    before = graphs.fingerprint()
    learner.set_hparams(ent_coef=0.01)
    learner.set_hparams(ent_coef=0.0)  # the same values again: the same graph constants
    assert graphs.fingerprint() == before


def test_a_new_lr_is_written_into_adams_tensor_and_keeps_the_graphs(tmp_path):
    pod = _static_pod()
    pod.out_dir = tmp_path
    pod.graphs.run()
    lr, adam = pod.learner.lr_tensor, pod.learner.optimizers["ppo"]
    assert adam.param_groups[0]["lr"] is lr and lr.item() == HP.lr
    held = pod.graphs.fingerprint()
    pod.graphs._fingerprint = held  # as after a capture
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3))
    assert pod.learner.lr_tensor is lr and adam.param_groups[0]["lr"] is lr
    assert lr.item() == 1e-3  # in place: a captured Adam reads the new value
    assert pod.graphs._fingerprint is held and pod.graphs.fingerprint() == held
    pod.restart_episodes()  # the carried tensors are copied in: the graphs stay too
    assert pod.graphs._fingerprint is held and pod.graphs.fingerprint() == held
    pod.graphs.run()
    pod.apply_hparams(dataclasses.replace(HP, lr=1e-3, clip_coef=0.3))  # a baked constant
    assert pod.graphs.fingerprint() != held
    pod.save()  # a checkpoint holds a plain number; a load keeps the tensor in place
    assert isinstance(
        torch.load(pod.checkpoint_path)["learner"]["optimizers"]["ppo"]["param_groups"][0]["lr"],
        float,
    )
    pod.load(pod.checkpoint_path)
    assert adam.param_groups[0]["lr"] is lr and lr.item() == 1e-3


def test_adam_is_capturable_only_where_graphs_are_captured():
    from elegantpod.agents.ppo import adam_options

    assert adam_options("cuda", capture=True) == {"capturable": True}
    assert adam_options("cuda:1", capture=False) == {"fused": True}  # eager CUDA pods
    assert adam_options(torch.device("cpu"), capture=False) == {}
    group = Pod(_spec(capture=False)).learner.optimizers["ppo"].param_groups[0]
    assert not group["capturable"] and not group["fused"]


def test_a_capture_is_made_only_where_two_iterations_remain():
    from elegantpod.pod.capture import should_capture

    assert not should_capture(0) and not should_capture(1)
    assert should_capture(2) and should_capture(100) and should_capture(None)  # None: time
    per_rollout = HP.num_envs * HP.horizon
    for iterations, attempts in ((1, False), (2, True)):
        pod = _static_pod(max_steps=iterations * per_rollout)
        pod.graphs.capture = True  # the capture path, as on a GPU (where it would succeed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pod.run(Budget(steps=iterations * per_rollout, evaluate_at_end=False))
        failed = [w for w in caught if "capturing the pod's iterations failed" in str(w.message)]
        # one iteration: no capture tried; two: tried, and on this CPU it fails
        assert bool(failed) is attempts and pod.graphs.captures == 0
        assert pod.env_steps == iterations * per_rollout


@pytest.mark.parametrize(("horizon", "num_envs"), [(1, 17), (3, 19)])
def test_the_static_path_compiles_nothing_after_its_warm_up(monkeypatch, horizon, num_envs):
    """One variant of the env's compiled step: a capture never meets a new one (a compile
    inside a capture fails it). Horizon 1 met the inference variant only in its second
    iteration, which on a GPU is the capture."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    from elegantpod.envs import fused_step as base
    from elegantpod.envs.classic import CartPole

    monkeypatch.setattr(base, "COMPILE_BACKEND", "eager")  # dynamo's caching, no Inductor
    hp = dataclasses.replace(HP, num_envs=num_envs, horizon=horizon, minibatch_size=32)
    pod = Pod(
        PodSpec(
            env_id="CartPole-v1",
            algo="ppo",
            hparams=hp,
            device="cpu",
            capture=False,
            env_kwargs={"compile": True},
        )
    )
    graphs = IterationGraphs(pod.collector, pod.learner, capture=False)
    code = base.step_function(CartPole, num_envs, "cpu").__code__
    graphs.run()  # the warm-up
    assert len(_debug_get_cache_entry_list(code)) == 1
    for _ in range(3):
        graphs.run()
    pod.restart_episodes()  # plain tensors from a reset again
    pod.apply_hparams(dataclasses.replace(hp, lr=1e-3))
    for _ in range(2):
        graphs.run()
    assert len(_debug_get_cache_entry_list(code)) == 1
    assert pod.env._step_fn is base.compiled_step(CartPole, num_envs, "cpu")


class _HostSyncSpy(TorchDispatchMode):
    """Records ops that wait for the device (a captured graph cannot hold them) and
    random ops drawing from torch's default generator (a graph replays only the
    generators registered with it)."""

    SYNCS = ("aten._local_scalar_dense", "aten.nonzero", "aten.randperm", "aten.item")

    def __init__(self):
        super().__init__()
        self.syncs: list[str] = []
        self.default_draws: list[str] = []
        self.in_optimizer = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        # Adam on a CPU reads its CPU step counter with item(); capturable Adam, what a
        # captured update runs, keeps it on the device (checked by the gpu tests)
        if name.startswith(self.SYNCS) and not self.in_optimizer:
            self.syncs.append(name)
        if _is_random(func.overloadpacket) and _generator_of(func, args, kwargs) is None:
            self.default_draws.append(name)
        return func(*args, **kwargs)


def _is_random(packet) -> bool:
    """Whether an op draws random numbers: one of its overloads takes a generator (the
    overload called without one, ``aten.rand.default``, takes none)."""
    return any(
        arg.name == "generator"
        for overload in packet.overloads()
        for arg in getattr(packet, overload)._schema.arguments
    )


def _generator_of(func, args, kwargs):
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == "generator":
            return kwargs.get("generator", args[i] if i < len(args) else None)
    return None


def test_rollout_and_static_update_neither_sync_nor_draw_from_the_default_generator():
    from elegantpod.envs.classic import CartPole
    from elegantpod.envs.fused_step import whole_step

    pod = Pod(_spec(capture=False, env_kwargs={"compile": True}))
    pod.env._step_fn = whole_step(CartPole)  # the fused step, uncompiled: the same ops
    assert pod.env._fused
    graphs = IterationGraphs(pod.collector, pod.learner, capture=False)
    graphs.run()  # lazily made state (Adam's moments) exists from here on
    spy = _HostSyncSpy()
    adam = pod.learner.optimizers["ppo"]
    adam.register_step_pre_hook(lambda *_: setattr(spy, "in_optimizer", True))
    adam.register_step_post_hook(lambda *_: setattr(spy, "in_optimizer", False))
    with spy:
        pod.collector.rollout()
        pod.learner.update_static(pod.collector.buffer.batch(), graphs.sums)
    assert spy.syncs == [] and spy.default_draws == []
    with spy:  # the spy sees what it looks for
        torch.rand(3).nonzero()
    assert spy.syncs == ["aten.nonzero.default"] and spy.default_draws == ["aten.rand.default"]
