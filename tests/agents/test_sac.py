import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.agents import get_algo
from elegantpod.agents.sac import SAC, SACConfig
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod
from elegantpod.types import Batch

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def test_sac_rejects_discrete_actions():
    with pytest.raises(ValueError, match="sac cannot handle action space Discrete"):
        SAC(OBS, gym.spaces.Discrete(2))


def test_actions_respect_bounds_and_logp_is_finite():
    sac = SAC(OBS, ACT, SACConfig(learning_starts=0))
    a, logp = sac.actor(torch.randn(512, 3) * 100, sac.generator)
    assert a.abs().max() <= 1.0 and torch.isfinite(logp).all()
    env_a = sac.act(torch.randn(512, 3))
    assert env_a.min() >= -2.0 and env_a.max() <= 2.0


def test_update_trains_critic_toward_targets_and_moves_targets():
    sac = SAC(OBS, ACT, SACConfig(learning_starts=0, replay_ratio=1.0, batch_size=64))
    T, N = 8, 16
    batch = Batch(
        torch.randn(T, N, 3),
        torch.rand(T, N, 1) * 2 - 1,
        torch.ones(T, N),
        torch.randn(T, N, 3),
        torch.zeros(T, N, dtype=torch.bool),
        torch.zeros(T, N, dtype=torch.bool),
    )
    before = [p.clone() for p in sac.critic_target.parameters()]
    stats = sac.update(batch)
    assert len(sac.replay) == T * N
    assert set(stats) == {"losses/critic", "losses/actor", "losses/alpha", "charts/alpha"}
    assert any(
        not torch.equal(a, b) for a, b in zip(before, sac.critic_target.parameters(), strict=True)
    )


def test_registry():
    assert get_algo("SAC") is SAC
    with pytest.raises(ValueError, match="unknown algorithm 'td9'"):
        get_algo("td9")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_sac_solves_pendulum(seed):
    pod = Pod(
        PodSpec(env_id="Pendulum-v1", algo="sac", seed=seed, max_steps=40_000, target_reward=-200)
    )
    result = pod.run()
    assert result.solved, result
    assert result.eval_return_mean >= -200
