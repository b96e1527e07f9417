"""Fused learners: exact averaging, fusion at every epoch, shards, pods and checkpoints."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from elegantpod.agents.dqn import DQN, DQNConfig
from elegantpod.agents.fusion import FusedLearners
from elegantpod.agents.ppo import PPO, PPOConfig
from elegantpod.agents.sac import SAC, SACConfig
from elegantpod.agents.td3 import TD3, TD3Config
from elegantpod.config import PodSpec
from elegantpod.envs.registry import make_env
from elegantpod.pod.collector import Collector
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch


def _learners(cls, config, env, k=2):
    return [cls(env.observation_space, env.action_space, config, "cpu", seed=i) for i in range(k)]


def _snapshot(learner):
    mods = {
        f"{n}.{k}": v.clone()
        for n, m in learner.modules.items()
        for k, v in m.state_dict().items()
        if v.is_floating_point()
    }
    opts = {}
    for name, opt in learner.optimizers.items():
        for j, p in enumerate(p for g in opt.param_groups for p in g["params"]):
            for key, v in opt.state.get(p, {}).items():
                if torch.is_tensor(v) and v.is_floating_point():
                    opts[f"{name}.{j}.{key}"] = v.clone()
    return mods, opts


@pytest.mark.parametrize(
    ("cls", "config", "env_id"),
    [
        (
            PPO,
            PPOConfig(num_envs=8, horizon=16, minibatch_size=32, normalize_obs=True),
            "Pendulum-v1",
        ),
        (SAC, SACConfig(num_envs=4, learning_starts=0, batch_size=32), "Pendulum-v1"),
    ],
)
def test_fused_parameters_and_moments_are_the_average(cls, config, env_id):
    env = make_env(env_id, num_envs=config.num_envs, seed=0)
    fused = FusedLearners(_learners(cls, config, env))
    batch = Collector(env, fused, 64 if cls is SAC else config.horizon, seed=0).rollout()
    # let the learners diverge: each updates on its own shard, no fusion in between
    for learner, shard in zip(fused.learners, fused.shard(batch), strict=True):
        learner.update(shard)
    (m0, o0), (m1, o1) = (_snapshot(x) for x in fused.learners)
    assert any(not torch.equal(m0[k], m1[k]) for k in m0)  # they did diverge
    assert o0 and set(o0) == set(o1)  # optimizer moments exist for both
    fused.fuse()
    for learner in fused.learners:
        mods, opts = _snapshot(learner)
        for key, value in mods.items():
            torch.testing.assert_close(value, (m0[key] + m1[key]) / 2, rtol=0, atol=1e-7)
        for key, value in opts.items():
            torch.testing.assert_close(value, (o0[key] + o1[key]) / 2, rtol=0, atol=1e-7)


class _CountingFusion(FusedLearners):
    """Records when fusions happen (a probe on the real class, not a stand-in)."""

    def fuse(self):
        self.calls = getattr(self, "calls", 0) + 1
        super().fuse()


def test_ppo_fuses_after_every_epoch_and_ends_identical():
    env = make_env("CartPole-v1", num_envs=8, seed=0)
    cfg = PPOConfig(num_envs=8, horizon=16, minibatch_size=32, epochs=3)
    fused = _CountingFusion(_learners(PPO, cfg, env, k=4))
    assert getattr(fused, "calls", 0) == 0  # copied from the first learner, not averaged
    batch = Collector(env, fused, cfg.horizon, seed=0).rollout()
    stats = fused.update(batch)
    assert fused.calls == cfg.epochs
    assert set(stats) >= {"losses/policy", "losses/value"}
    ref = fused.learners[0]
    for other in fused.learners[1:]:
        for a, b in zip(ref.actor.parameters(), other.actor.parameters(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("cls", "config", "env_id"),
    [
        (PPO, PPOConfig(normalize_obs=True), "Pendulum-v1"),
        (SAC, SACConfig(), "Pendulum-v1"),
        (TD3, TD3Config(), "Pendulum-v1"),
        (DQN, DQNConfig(), "CartPole-v1"),
    ],
)
def test_fused_learners_start_as_copies_of_the_first(cls, config, env_id):
    env = make_env(env_id, num_envs=4, seed=0)
    learners = _learners(cls, config, env, k=3)
    first = {
        name: {k: v.clone() for k, v in m.state_dict().items()}
        for name, m in learners[0].modules.items()
    }
    assert any(  # independent inits differ: there is something to copy
        not torch.equal(v, learners[1].modules[name].state_dict()[k])
        for name, state in first.items()
        for k, v in state.items()
        if v.is_floating_point() and v.numel() > 1
    )
    fused = FusedLearners(learners)
    for learner in fused.learners:  # target networks included, nothing averaged
        for name, module in learner.modules.items():
            for key, value in module.state_dict().items():
                assert torch.equal(value, first[name][key]), (name, key)


def _first_update_and_epsilon(learner, batches):
    """Env steps at the first gradient step, and epsilon after each rollout."""
    first, epsilons, steps = None, [], 0
    for batch in batches:
        stats = learner.update(batch)
        steps += len(batch)
        if stats and first is None:
            first = steps
        epsilons.append(learner.epsilon)
    return first, epsilons


def test_fused_off_policy_clocks_count_the_pods_env_steps():
    env = make_env("CartPole-v1", num_envs=4, seed=0)
    cfg = DQNConfig(
        num_envs=4, horizon=8, learning_starts=256, batch_size=32, epsilon_decay_steps=1024
    )
    collector = DQN(env.observation_space, env.action_space, cfg, "cpu", seed=9)
    worker = Collector(env, collector, cfg.horizon, seed=0)
    batches = []
    for _ in range(40):  # copies: the worker's rollout buffer is reused
        b = worker.rollout()
        batches.append(Batch(*(getattr(b, f.name).clone() for f in dataclasses.fields(b))))
    single = DQN(env.observation_space, env.action_space, cfg, "cpu", seed=0)
    fused = FusedLearners(_learners(DQN, cfg, env, k=2))
    start_1, eps_1 = _first_update_and_epsilon(single, batches)
    start_2, eps_2 = _first_update_and_epsilon(fused, batches)
    assert start_1 == start_2 == 256  # 8 rollouts of 32 env steps, K=1 and K=2 alike
    assert eps_1 == eps_2 and eps_1[-1] < eps_1[0]
    assert all(x.seen == single.seen == 40 * 32 for x in fused.learners)


def test_shards_partition_the_sub_envs():
    env = make_env("CartPole-v1", num_envs=6, seed=0)
    cfg = PPOConfig(num_envs=6, horizon=4)
    fused = FusedLearners(_learners(PPO, cfg, env, k=3))
    batch = Collector(env, fused, cfg.horizon, seed=0).rollout()
    shards = fused.shard(batch)
    assert [s.reward.shape for s in shards] == [(4, 2)] * 3
    torch.testing.assert_close(torch.cat([s.obs for s in shards], dim=1), batch.obs)


def test_pod_with_fused_learners_checkpoints_and_resumes(tmp_path):
    spec = PodSpec(env_id="Pendulum-v1", algo="sac", learners=2, max_steps=1600, eval_episodes=2)
    pod = Pod(spec, out_dir=tmp_path)
    pod.run()
    assert isinstance(pod.learner, FusedLearners) and pod.learner.k == 2
    replays = [len(x.replay) for x in pod.learner.learners]
    assert replays == [800, 800]  # each learner filled its own replay with its shard
    path = pod.save()
    again = Pod(spec, out_dir=tmp_path, resume=True)
    assert [len(x.replay) for x in again.learner.learners] == replays
    obs = torch.randn(5, 3)
    torch.testing.assert_close(again.learner.act(obs), pod.learner.act(obs))
    # a single learner's checkpoint seeds every fused learner (e.g. a child pod)
    single = Pod(PodSpec(env_id="Pendulum-v1", algo="sac", max_steps=400), out_dir=tmp_path / "s")
    single.run()
    fused = Pod(spec)
    fused.load(single.save(), restore_rng=False)
    for learner in fused.learner.learners:
        torch.testing.assert_close(learner.act(obs), single.learner.act(obs))
    assert path.endswith("checkpoint.pt")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (dict(learners=0), "learners must be > 0"),
        (dict(learners=2, learner_devices=("cpu",)), "one per learner"),
        (dict(learners=True), "learners must be an integer"),
    ],
)
def test_bad_fusion_settings(changes, match):
    with pytest.raises(ValueError, match=match):
        PodSpec(env_id="CartPole-v1", algo="ppo", **changes).validate()


def test_more_learners_than_sub_envs_is_an_error():
    with pytest.raises(ValueError, match="num_envs >= 8"):
        Pod(PodSpec(env_id="Pendulum-v1", algo="sac", learners=8))


def test_fusion_needs_two_learners_of_one_kind():
    env = make_env("Pendulum-v1", seed=0)
    with pytest.raises(ValueError, match="at least 2"):
        FusedLearners(_learners(SAC, SACConfig(), env, k=1))
    mixed = [*_learners(SAC, SACConfig(), env, k=1), *_learners(PPO, PPOConfig(), env, k=1)]
    with pytest.raises(ValueError, match="one algorithm"):
        FusedLearners(mixed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_ppo_solves_cartpole(seed):
    spec = PodSpec(
        env_id="CartPole-v1",
        algo="ppo",
        learners=2,
        seed=seed,
        target_reward=475,
        max_steps=400_000,
    )
    result = Pod(spec).run()
    assert result.solved and result.eval_return_mean >= 475


def test_the_saved_layout_is_known_here_only():
    """``strip`` and ``part_of`` (issue 33: three modules walked the fused layout)."""
    from elegantpod.agents.fusion import part_of, strip

    state = {"modules": 1, "replay": "r0", "generator": "g0", "fused": [{"replay": "r1"}, "odd"]}
    kept = strip(state, "replay")
    assert kept == {"modules": 1, "generator": "g0", "fused": [{}, "odd"]}
    assert state["fused"][0] == {"replay": "r1"}  # pure: the input is untouched
    plain = {"modules": 1}
    assert strip(plain, "replay") is plain  # nothing to drop: the same object
    assert part_of(state, 0) == (state, "")
    assert part_of(state, 1) == ({"replay": "r1"}, "fused[0]")
    assert part_of(state, 2) == (state, "")  # not a dict: the first learner's
    assert part_of(state, 3) == (state, "")  # past the saved ones: the first learner's
