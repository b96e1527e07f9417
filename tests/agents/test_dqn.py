import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.dqn import DQN, DQNConfig, QNetwork, td_target
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
ACT = gym.spaces.Discrete(3)


def rollout(T=4, N=8, n_actions=3):
    return Batch(
        torch.randn(T, N, 4),
        torch.randint(0, n_actions, (T, N)),
        torch.ones(T, N),
        torch.randn(T, N, 4),
        torch.rand(T, N) < 0.1,
        torch.zeros(T, N, dtype=torch.bool),
    )


def test_dqn_target_is_the_max_of_the_target_net():
    reward = torch.tensor([1.0, 0.0, -1.0])
    terminated = torch.tensor([False, False, True])
    q_next_target = torch.tensor([[10.0, 2.0], [4.0, 8.0], [7.0, 9.0]])
    y = td_target(reward, terminated, 0.5, q_next_target)
    torch.testing.assert_close(y, torch.tensor([1.0 + 5.0, 0.0 + 4.0, -1.0]))


def test_double_dqn_target_values_the_online_argmax_with_the_target_net():
    reward = torch.tensor([1.0, 0.0, -1.0])
    terminated = torch.tensor([False, False, True])
    q_next_target = torch.tensor([[10.0, 2.0], [4.0, 8.0], [7.0, 9.0]])
    q_next_online = torch.tensor([[1.0, 5.0], [3.0, 0.0], [0.0, 1.0]])  # argmax: 1, 0, 1
    y = td_target(reward, terminated, 0.5, q_next_target, q_next_online)
    torch.testing.assert_close(y, torch.tensor([1.0 + 1.0, 0.0 + 2.0, -1.0]))


def test_dueling_head_is_value_plus_advantage_minus_its_mean():
    net = QNetwork((4,), 3, (16,), dueling=True)
    obs = torch.randn(32, 4)
    h = net.trunk(obs)
    v, a = net.value(h), net.advantage(h)
    torch.testing.assert_close(net(obs), v + a - a.mean(-1, keepdim=True))
    # the mean over actions of Q is V: the split is identifiable
    torch.testing.assert_close(net(obs).mean(-1, keepdim=True), v)
    plain = QNetwork((4,), 3, (16,), dueling=False)
    assert plain.value is None
    torch.testing.assert_close(plain(obs), plain.advantage(plain.trunk(obs)))


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("dueling", [False, True])
def test_every_combination_learns_a_constant_reward(double, dueling):
    # One state, reward 1 forever, gamma 0.5: Q(s, a) = 1 + 0.5 max Q(s, .) = 2 for all a.
    torch.manual_seed(0)  # network init and data: the same run in any test order
    cfg = DQNConfig(
        double=double,
        dueling=dueling,
        gamma=0.5,
        learning_starts=0,
        batch_size=64,
        replay_ratio=2.0,
        target_update_every=20,
        lr=3e-3,
        hidden=(32,),
    )
    dqn = DQN(OBS, ACT, cfg)
    b = rollout()
    for x in (b.obs, b.next_obs, b.terminated):
        x.zero_()
    for _ in range(20):
        stats = dqn.update(b)
    assert set(stats) == {"losses/q", "charts/q", "charts/epsilon"}
    assert dqn.gradient_steps == 20 * 64
    q = dqn.q(torch.zeros(1, 4)).detach()
    # (the target net trails by up to 20 steps, so Q approaches 2 from below)
    torch.testing.assert_close(q, torch.full((1, 3), 2.0), atol=0.15, rtol=0)


def test_hard_target_copies_every_n_gradient_steps():
    dqn = DQN(OBS, ACT, DQNConfig(learning_starts=0, batch_size=8, replay_ratio=0.25))
    dqn.set_hparams(target_update_every=16)
    same = []
    for _ in range(4):  # 32 transitions x 0.25: 8 gradient steps per rollout
        dqn.update(rollout())
        same.append(
            all(
                torch.equal(p, t)
                for p, t in zip(dqn.q.parameters(), dqn.q_target.parameters(), strict=True)
            )
        )
    assert same == [False, True, False, True]


def test_epsilon_falls_linearly_in_env_steps_then_stays():
    dqn = DQN(OBS, ACT, DQNConfig(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=1000))
    for seen, eps in ((0, 1.0), (500, 0.55), (1000, 0.1), (50_000, 0.1)):
        dqn.seen = seen
        assert dqn.epsilon == pytest.approx(eps)


def test_exploration_is_epsilon_greedy_and_act_is_greedy():
    dqn = DQN(OBS, ACT, DQNConfig(learning_starts=0, epsilon_end=0.3, epsilon_decay_steps=1))
    dqn.seen = 10
    obs = torch.randn(1, 4).expand(30_000, 4)
    greedy = dqn.q(obs[:1]).argmax(-1)
    assert torch.equal(dqn.act(obs), greedy.expand(30_000))
    stored, to_env = dqn.explore(obs)
    assert stored is to_env and stored.dtype == torch.int64
    # greedy with probability 1 - eps + eps / n_actions = 0.8
    assert float((stored == greedy).float().mean()) == pytest.approx(0.8, abs=0.02)
    dqn.seen = 0
    dqn.set_hparams(learning_starts=100)  # warm-up: uniform actions
    counts = torch.bincount(dqn.explore(obs)[0], minlength=3).float() / 30_000
    torch.testing.assert_close(counts, torch.full((3,), 1 / 3), atol=0.02, rtol=0)


def test_registry_and_config_validation():
    assert get_algo("DQN") is DQN
    with pytest.raises(ValueError, match="epsilon_end must be in"):
        DQNConfig(epsilon_start=0.1, epsilon_end=0.2).validate()
    with pytest.raises(ValueError, match="'dueling' fixes the network"):
        DQN(OBS, ACT).set_hparams(dueling=False)
    dqn = DQN(OBS, ACT)
    dqn.set_hparams(double="false")  # the target rule may change live
    assert dqn.config.double is False


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_dqn_solves_cartpole(seed):
    pod = Pod(
        PodSpec(env_id="CartPole-v1", algo="dqn", seed=seed, max_steps=150_000, target_reward=475)
    )
    result = pod.run()
    assert result.solved, result
    assert result.eval_return_mean >= 475
