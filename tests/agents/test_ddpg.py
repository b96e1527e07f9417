import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.ddpg import DDPG, DDPGConfig
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(-1.0, 3.0, (1,), np.float32)


def transitions(*lead, terminated=None):
    """Random transitions with leading shape ``lead``: flat ``(B,)`` or a rollout ``(T, N)``."""
    return Batch(
        torch.randn(*lead, 3),
        torch.rand(*lead, 1) * 2 - 1,
        torch.randn(*lead),
        torch.randn(*lead, 3),
        torch.zeros(lead, dtype=torch.bool) if terminated is None else terminated,
        torch.zeros(lead, dtype=torch.bool),
    )


def test_registry_and_single_critic():
    assert get_algo("ddpg") is DDPG
    ddpg = DDPG(OBS, ACT)
    assert ddpg.critic(torch.zeros(7, 3), torch.zeros(7, 1)).shape == (1, 7)


def test_target_evaluates_the_target_critic_at_the_target_actors_action():
    ddpg = DDPG(OBS, ACT, DDPGConfig(gamma=0.9))
    with torch.no_grad():
        for p in ddpg.actor_target.parameters():  # a different target actor than mu
            p.add_(torch.randn_like(p))
    terminated = torch.tensor([False, False, True, False, False, True])
    b = transitions(6, terminated=terminated)
    with torch.no_grad():
        a_next = ddpg.actor_target(b.next_obs)
        q_next = ddpg.critic_target(b.next_obs, a_next)[0]
    expected = b.reward + 0.9 * (~terminated).float() * q_next
    torch.testing.assert_close(ddpg.td_target(b), expected)
    torch.testing.assert_close(ddpg.td_target(b), expected)  # no smoothing noise


def test_every_critic_step_also_moves_actor_and_targets():
    ddpg = DDPG(OBS, ACT, DDPGConfig(learning_starts=0, batch_size=8, replay_ratio=1.0))
    rollout = transitions(2, 4)
    before = [m.state_dict()["net.0.weight"].clone() for m in (ddpg.actor, ddpg.actor_target)]
    stats = ddpg.update(rollout)
    assert ddpg.gradient_steps == 8
    assert set(stats) == {"losses/critic", "losses/actor", "charts/q"}
    after = [m.state_dict()["net.0.weight"] for m in (ddpg.actor, ddpg.actor_target)]
    assert all(not torch.equal(x, y) for x, y in zip(before, after, strict=True))


def test_exploration_adds_clipped_gaussian_noise_to_the_actor():
    obs = torch.randn(1024, 3)
    quiet = DDPG(OBS, ACT, DDPGConfig(learning_starts=0, exploration_noise=0.0))
    stored, to_env = quiet.explore(obs)
    torch.testing.assert_close(stored, quiet.actor(obs))
    torch.testing.assert_close(to_env, quiet.act(obs))  # [-1, 1] scaled to [-1, 3]
    noisy = DDPG(OBS, ACT, DDPGConfig(learning_starts=0, exploration_noise=0.5))
    with torch.no_grad():
        stored, to_env = noisy.explore(obs)
        noise = stored - noisy.actor(obs)
    assert 0.4 < float(noise.std()) < 0.6 and stored.abs().max() <= 1.0
    assert to_env.min() >= -1.0 and to_env.max() <= 3.0


def test_warm_up_actions_are_uniform_over_the_box():
    ddpg = DDPG(OBS, ACT, DDPGConfig(learning_starts=10_000))
    _, to_env = ddpg.explore(torch.zeros(20_000, 3))
    assert to_env.min() >= -1.0 and to_env.max() <= 3.0
    assert float(to_env.mean()) == pytest.approx(1.0, abs=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ddpg_solves_pendulum(seed):
    pod = Pod(
        PodSpec(env_id="Pendulum-v1", algo="ddpg", seed=seed, max_steps=60_000, target_reward=-250)
    )
    result = pod.run()
    assert result.solved, result
    assert result.eval_return_mean >= -250
