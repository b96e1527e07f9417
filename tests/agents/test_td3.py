import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.td3 import TD3, TD3Config
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def batch(B=5, terminated=None):
    return Batch(
        torch.randn(B, 3),
        torch.rand(B, 1) * 2 - 1,
        torch.arange(B, dtype=torch.float32),
        torch.randn(B, 3),
        torch.zeros(B, dtype=torch.bool) if terminated is None else terminated,
        torch.zeros(B, dtype=torch.bool),
    )


def test_registry_and_twin_critics():
    assert get_algo("TD3") is TD3
    td3 = TD3(OBS, ACT)
    assert td3.critic(torch.zeros(7, 3), torch.zeros(7, 1)).shape == (2, 7)


def test_target_is_the_min_of_the_twin_target_critics_at_the_smoothed_action():
    td3 = TD3(OBS, ACT, TD3Config(gamma=0.5))
    b = batch(terminated=torch.tensor([False, True, False, False, True]))
    q1 = torch.tensor([1.0, 2.0, -3.0, 4.0, 5.0])
    q2 = torch.tensor([2.0, 1.0, -1.0, 4.0, -5.0])
    seen = {}

    def stub_critic(obs, action):
        seen["obs"], seen["action"] = obs, action
        return torch.stack((q1, q2))

    td3.critic_target = stub_critic
    state = td3.generator.get_state()
    y = td3.td_target(b)
    td3.generator.set_state(state)
    expected_action = td3.target_action(b.next_obs)
    assert seen["obs"] is b.next_obs and torch.equal(seen["action"], expected_action)
    # min(q1, q2) = [1, 1, -3, 4, -5]; terminated transitions do not bootstrap
    expected = b.reward + 0.5 * torch.tensor([1.0, 0.0, -3.0, 4.0, 0.0])
    torch.testing.assert_close(y, expected)


def test_target_policy_smoothing_noise_is_clipped_and_actions_stay_in_bounds():
    td3 = TD3(OBS, ACT, TD3Config(policy_noise=5.0, noise_clip=0.3))
    next_obs = torch.randn(4096, 3)
    mu = td3.actor_target(next_obs)
    a = td3.target_action(next_obs)
    eps = a - mu
    assert eps.abs().max() <= 0.3 + 1e-6 and a.abs().max() <= 1.0
    # a noise of std 5 clipped at 0.3 sits at the clip bounds most of the time
    assert (eps.abs() > 0.3 - 1e-4).float().mean() > 0.9
    assert not torch.equal(td3.target_action(next_obs), a)  # fresh noise each call


def test_actor_and_targets_move_only_every_policy_delay_critic_steps():
    td3 = TD3(OBS, ACT, TD3Config(learning_starts=0, batch_size=8, replay_ratio=0.2))
    rollout = Batch(*(x.reshape(5, 1, *x.shape[1:]) for x in vars(batch()).values()))

    def snapshot():
        return [
            torch.cat([p.detach().flatten() for p in m.parameters()])
            for m in (td3.actor, td3.actor_target, td3.critic, td3.critic_target)
        ]

    moved = []
    for _ in range(4):  # 5 transitions x 0.2: one critic step per rollout
        before = snapshot()
        stats = td3.update(rollout)
        moved.append([not torch.equal(x, y) for x, y in zip(before, snapshot(), strict=True)])
        assert ("losses/actor" in stats) == (td3.gradient_steps % 2 == 0)
    # (actor, actor_target, critic, critic_target) at critic steps 1, 2, 3, 4
    assert moved == [[False, False, True, False], [True, True, True, True]] * 2


def test_actions_respect_the_env_bounds():
    td3 = TD3(OBS, ACT, TD3Config(learning_starts=0, exploration_noise=3.0))
    obs = torch.randn(512, 3) * 100
    for a in (td3.act(obs), td3.act(obs, deterministic=False), td3.explore(obs)[1]):
        assert a.min() >= -2.0 and a.max() <= 2.0
    stored, to_env = td3.explore(obs)
    assert stored.abs().max() <= 1.0
    torch.testing.assert_close(to_env, stored * 2.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"policy_delay": 0}, "policy_delay must be >= 1"),
        ({"noise_clip": -0.1}, "noise_clip must be >= 0"),
        ({"exploration_noise": -1.0}, "exploration_noise must be >= 0"),
        ({"learning_starts": -1}, "learning_starts must be >= 0"),
    ],
)
def test_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        TD3Config(**changes).validate()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_td3_solves_pendulum(seed):
    pod = Pod(
        PodSpec(env_id="Pendulum-v1", algo="td3", seed=seed, max_steps=60_000, target_reward=-250)
    )
    result = pod.run()
    assert result.solved, result
    assert result.eval_return_mean >= -250
