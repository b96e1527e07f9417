"""The gymnasium adapter: any id, sync/async, and next-step auto-reset converted."""

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

from elegantpod.envs import GymVecEnv, make_env


def _run(env, steps, seed=0):
    obs = env.reset(seed=seed)
    out = []
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        a = torch.randint(0, 3, (env.num_envs,), generator=g)
        nxt, r, term, trunc, info = env.step(a)
        out.append((obs, a, r, term, trunc, info["final_obs"], nxt))
        obs = nxt
    return out


def test_adapter_on_env_without_native_twin():
    env = make_env("MountainCar-v0", num_envs=3, seed=0)  # no native MountainCar-v0
    assert isinstance(env, GymVecEnv)
    obs = env.reset()
    assert obs.dtype == torch.float32 and obs.shape == (3, 2)
    obs, r, term, trunc, info = env.step(torch.tensor([0, 1, 2]))
    assert r.shape == (3,) and term.dtype == torch.bool and info["final_obs"].shape == (3, 2)
    env.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_next_step_and_disabled_modes_become_same_step(mode):
    """A user's NEXT_STEP vector env gives exactly what a SAME_STEP one gives."""
    kw = dict(max_episode_steps=30)
    ref = GymVecEnv(
        gym.make_vec(
            "MountainCar-v0", 4, vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kw
        )
    )
    conv = GymVecEnv(
        gym.make_vec("MountainCar-v0", 4, vector_kwargs={"autoreset_mode": mode}, **kw)
    )
    a, b = _run(ref, 75), _run(conv, 75)
    dones = 0
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            torch.testing.assert_close(u, v)
        dones += int((x[3] | x[4]).sum())
    assert dones >= 8  # episodes of 30 steps ended twice in each of 4 sub-envs


def test_final_obs_semantics_on_truncation():
    env = make_env("MountainCar-v0", num_envs=2, seed=1, native=False, max_episode_steps=5)
    env.reset()
    for t in range(5):
        nxt, r, term, trunc, info = env.step(torch.tensor([2, 2]))
        if t < 4:
            torch.testing.assert_close(info["final_obs"], nxt)
    assert trunc.all()
    assert not torch.allclose(info["final_obs"], nxt)  # reset obs differ from final ones
    assert (info["episode_length"] == 5).all()
    assert torch.allclose(info["episode_return"], torch.full((2,), -5.0, dtype=torch.float32))


def test_async_vector_env():
    env = GymVecEnv("Pendulum-v1", num_envs=2, vectorization_mode="async", seed=0)
    try:
        obs = env.reset()
        for _ in range(3):
            obs, r, *_ = env.step(torch.zeros(2, 1))
        assert obs.shape == (2, 3)
    finally:
        env.close()


def test_adapter_matches_native_rollout():
    """The same seeds and actions give the same Pendulum trajectory through both paths."""
    native = make_env("Pendulum-v1", 1, seed=0)
    adapted = make_env("Pendulum-v1", 1, seed=0, native=False)
    obs_a = adapted.reset(seed=0)
    th = float(torch.atan2(obs_a[0, 1], obs_a[0, 0]))
    native.reset()
    native.state = torch.tensor([[th], [float(obs_a[0, 2])]])
    for _ in range(50):
        u = torch.rand(1, 1) * 4 - 2
        o1, r1, *_ = native.step(u)
        o2, r2, *_ = adapted.step(u)
        torch.testing.assert_close(o1, o2, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(r1, r2, rtol=1e-4, atol=1e-4)


def test_bad_inputs():
    with pytest.raises(ValueError, match="num_envs"):
        GymVecEnv("MountainCar-v0", num_envs=0)
    with pytest.raises(ValueError, match="vectorization_mode"):
        GymVecEnv("MountainCar-v0", vectorization_mode="threads")
    with pytest.raises(TypeError):
        GymVecEnv(42)
