import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.agents.ppo import PPO, PPOConfig, gae
from elegantpod.config import PodSpec
from elegantpod.pod.pod import Pod


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Plain per-env loop, written independently of the vectorized version."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rewards[t, n] + gamma * bootstrap - values[t, n]
            if terminated[t, n] or truncated[t, n]:
                running = 0.0
            running = delta + gamma * lam * running
            adv[t, n] = running
    return adv, adv + values


def test_gae_matches_reference_loop():
    rng = np.random.default_rng(0)
    T, N = 37, 5
    r, v, nv = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, N))
    term, trunc = rng.random((T, N)) < 0.1, rng.random((T, N)) < 0.1
    expected_adv, expected_ret = reference_gae(r, v, nv, term, trunc, 0.97, 0.9)
    t = lambda x: torch.as_tensor(x)  # noqa: E731
    adv, ret = gae(t(r), t(v), t(nv), t(term), t(term | trunc), 0.97, 0.9)
    np.testing.assert_allclose(adv.numpy(), expected_adv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret.numpy(), expected_ret, rtol=1e-10, atol=1e-10)


def test_gae_single_step_closed_form():
    # One step, not terminated: A = r + gamma V(s') - V(s)
    adv, _ = gae(
        torch.tensor([[1.0]]),
        torch.tensor([[0.5]]),
        torch.tensor([[2.0]]),
        torch.tensor([[False]]),
        torch.tensor([[True]]),
        0.9,
        0.95,
    )
    assert adv.item() == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)


def test_continuous_actions_are_clipped_for_the_env_only():
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    ppo = PPO(gym.spaces.Box(-1, 1, (3,), np.float32), space, PPOConfig(init_log_std=3.0))
    stored, to_env = ppo.explore(torch.zeros(256, 3))
    assert stored.abs().max() > 2.0
    assert to_env.abs().max() <= 2.0


def test_set_hparams_reaches_optimizer_and_rejects_structural_changes():
    ppo = PPO(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
    ppo.set_hparams(lr=1e-4, clip_coef="0.1")
    assert ppo.optimizers["ppo"].param_groups[0]["lr"] == 1e-4
    assert ppo.config.clip_coef == 0.1
    with pytest.raises(ValueError, match="hidden"):
        ppo.set_hparams(hidden=(8,))
    with pytest.raises(ValueError, match="gamma must be in"):
        ppo.set_hparams(gamma=1.5)
    assert ppo.config.gamma == 0.99


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_solves_cartpole(seed):
    pod = Pod(
        PodSpec(env_id="CartPole-v1", algo="ppo", seed=seed, max_steps=400_000, target_reward=475)
    )
    result = pod.run()
    assert result.solved, result
    assert result.eval_return_mean >= 475
    assert len(pod.last_eval.returns) == 10


@pytest.mark.slow
def test_ppo_continuous_with_obs_normalization_learns_pendulum():
    cfg = PPOConfig(
        num_envs=64,
        horizon=64,
        lr=1e-3,
        gamma=0.95,
        gae_lambda=0.95,
        epochs=10,
        normalize_obs=True,
        minibatch_size=1024,
    )
    pod = Pod(
        PodSpec(
            env_id="Pendulum-v1",
            algo="ppo",
            seed=0,
            hparams=cfg,
            max_steps=600_000,
            target_reward=-400,
        )
    )
    result = pod.run()
    assert result.eval_return_mean >= -400, result
