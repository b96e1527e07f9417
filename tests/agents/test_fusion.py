"""Fused learners: exact averaging, fusion at every epoch, shards, pods and checkpoints."""

from __future__ import annotations

import pytest
import torch

from elegantpod.agents import PPO, SAC, PPOConfig, SACConfig
from elegantpod.agents.fusion import FusedLearners
from elegantpod.config import PodSpec
from elegantpod.envs import make_env
from elegantpod.pod import Pod, Worker


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
    batch = Worker(env, fused, 64 if cls is SAC else config.horizon, seed=0).rollout()
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
    assert fused.calls == 1  # one set of weights from the start
    batch = Worker(env, fused, cfg.horizon, seed=0).rollout()
    stats = fused.update(batch)
    assert fused.calls == 1 + cfg.epochs
    assert set(stats) >= {"losses/policy", "losses/value"}
    ref = fused.learners[0]
    for other in fused.learners[1:]:
        for a, b in zip(ref.actor.parameters(), other.actor.parameters(), strict=True):
            assert torch.equal(a, b)


def test_shards_partition_the_sub_envs():
    env = make_env("CartPole-v1", num_envs=6, seed=0)
    cfg = PPOConfig(num_envs=6, horizon=4)
    fused = FusedLearners(_learners(PPO, cfg, env, k=3))
    batch = Worker(env, fused, cfg.horizon, seed=0).rollout()
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
