"""Native envs match gymnasium step for step, and follow the auto-reset contract."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.envs import Acrobot, CartPole, MountainCarContinuous, Pendulum, make_env
from elegantpod.envs.base import ENTRIES_PER_SIZE, compiled_dynamics

N = 64


def _set_gym_state(gym_env, state):
    gym_env.unwrapped.state = np.array(state, dtype=np.float64)


def _gym_state(gym_env):
    return np.asarray(gym_env.unwrapped.state, dtype=np.float64)


def _random_action(space, rng):
    if isinstance(space, gym.spaces.Discrete):
        return int(rng.integers(space.n))
    return rng.uniform(space.low, space.high).astype(np.float32)


@pytest.mark.parametrize("cls", [CartPole, Pendulum, MountainCarContinuous, Acrobot])
def test_single_step_parity_from_shared_states(cls):
    """Drive ours and gymnasium's from the same state with the same action."""
    rng = np.random.default_rng(0)
    ours = cls(num_envs=N, seed=0)
    ours.reset()
    gyms = [gym.make(cls.env_id) for _ in range(N)]
    for i, g in enumerate(gyms):
        g.reset(seed=i)
    for _step in range(40):
        # Start each step from gymnasium's states so float32 drift never accumulates.
        state = np.stack([_gym_state(g) for g in gyms])
        ours.state = torch.tensor(state.T, dtype=torch.float32)
        ours.elapsed = torch.zeros(N, dtype=torch.int64)
        actions = [_random_action(ours.action_space, rng) for _ in range(N)]
        act_t = torch.as_tensor(np.array(actions))
        _, reward, terminated, truncated, info = ours.step(act_t)
        for i, g in enumerate(gyms):
            obs_g, r_g, term_g, trunc_g, _ = g.step(actions[i])
            np.testing.assert_allclose(info["final_obs"][i].numpy(), obs_g, rtol=1e-4, atol=1e-4)
            assert reward[i].item() == pytest.approx(r_g, rel=1e-4, abs=1e-4)
            assert bool(terminated[i]) == term_g
            if term_g or trunc_g:
                g.reset(seed=1000 + i + _step)


@pytest.mark.parametrize("cls", [CartPole, Pendulum, MountainCarContinuous, Acrobot])
def test_truncation_at_time_limit_matches_gymnasium(cls):
    gym_env = gym.make(cls.env_id)
    limit = gym_env.spec.max_episode_steps
    assert cls.default_max_episode_steps == limit
    ours = cls(num_envs=1, seed=0)
    ours.reset()
    gym_env.reset(seed=0)
    terminated_early = False
    for t in range(1, limit + 1):
        ours.state = torch.tensor(_gym_state(gym_env)[:, None], dtype=torch.float32)
        action = gym_env.action_space.sample() if cls is not CartPole else t % 2
        if cls is CartPole:  # keep the pole up by hand-crafted balancing so it can time out
            x, xd, th, thd = _gym_state(gym_env)
            action = int(th + 0.5 * thd + 0.01 * x + 0.1 * xd > 0)
        _, _, term, trunc, _ = ours.step(torch.as_tensor(np.array([action])))
        _, _, term_g, trunc_g, _ = gym_env.step(action)
        assert bool(term[0]) == term_g and bool(trunc[0]) == trunc_g, t
        if term_g:
            terminated_early = True
            break
    if not terminated_early:
        assert bool(trunc[0]) and t == limit


def test_same_step_autoreset_keeps_final_obs_and_stats():
    env = CartPole(num_envs=8, seed=3)
    env.reset()
    pushes = torch.ones(8, dtype=torch.int64)  # always push right: the pole falls soon
    returns = torch.zeros(8)
    for _ in range(200):
        next_obs, reward, term, trunc, info = env.step(pushes)
        returns += reward
        done = term | trunc
        if done.any():
            d = done.nonzero().squeeze(1)
            # the terminal observation is out of bounds; the returned one is a fresh start
            fo = info["final_obs"][d]
            assert ((fo[:, 0].abs() > 2.4) | (fo[:, 2].abs() > CartPole.theta_threshold)).all()
            assert (next_obs[d].abs() <= 0.05).all()
            torch.testing.assert_close(info["episode_return"][d], returns[d])
            torch.testing.assert_close(info["episode_length"][d].float(), returns[d])
            returns[d] = 0
            alive = (~done).nonzero().squeeze(1)
            torch.testing.assert_close(info["final_obs"][alive], next_obs[alive])
            return
    pytest.fail("no episode ended")


def test_reset_is_seeded_and_step_needs_reset():
    a = make_env("Pendulum-v1", 16, seed=5).reset()
    b = make_env("Pendulum-v1", 16, seed=5).reset()
    c = make_env("Pendulum-v1", 16, seed=6).reset()
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)
    with pytest.raises(RuntimeError, match="reset"):
        make_env("CartPole-v1", 2).step(torch.zeros(2, dtype=torch.int64))


def test_many_envs_and_inference_mode():
    env = make_env("CartPole-v1", 65_536, seed=0)
    obs = env.reset()
    with torch.inference_mode():
        for _ in range(5):
            obs, r, term, trunc, info = env.step(torch.randint(0, 2, (65_536,)))
    assert obs.shape == (65_536, 4) and r.shape == (65_536,)
    # and again outside inference mode: persistent state was never mutated in place
    env.step(torch.randint(0, 2, (65_536,)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.gpu
def test_native_env_on_cuda():
    env = make_env("CartPole-v1", 4096, device="cuda", seed=0)
    obs = env.reset()
    obs, *_ = env.step(torch.randint(0, 2, (4096,), device="cuda"))
    assert obs.device.type == "cuda"


def test_compiled_dynamics_match_eager():
    """``compile=True`` (the default on CUDA): same state and action, same next state."""
    eager = make_env("Pendulum-v1", num_envs=64, seed=3, compile=False)
    compiled = make_env("Pendulum-v1", num_envs=64, seed=3, compile=True)
    eager.reset()
    g = torch.Generator().manual_seed(0)
    for _ in range(210):  # crosses the 200-step time limit
        action = torch.rand(64, 1, generator=g) * 4 - 2
        want = eager.dynamics(eager.state, action)
        got = compiled._step_dynamics(eager.state, action)
        for x, y in zip(got, want, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
        eager.step(action)


# -- one compiled step per class, size and device in a process ----------------------------
def test_envs_of_one_class_size_and_device_share_one_compiled_step():
    a, b = (CartPole(num_envs=8, compile=True) for _ in range(2))
    assert a._dynamics is b._dynamics is compiled_dynamics(CartPole, 8, "cpu")
    assert CartPole(num_envs=16, compile=True)._dynamics is not a._dynamics
    assert Acrobot(num_envs=8, compile=True)._dynamics is not a._dynamics
    assert CartPole(num_envs=8, compile=False)._dynamics == CartPole.dynamics  # eager


def test_the_recompile_limit_fits_every_size_a_process_compiles():
    import torch._dynamo.config as dynamo

    sizes = range(5001, 5013)  # more sizes than torch's default limit of 8 allows
    for n in sizes:
        MountainCarContinuous(num_envs=n, compile=True)
    assert dynamo.recompile_limit >= ENTRIES_PER_SIZE * len(sizes)


def test_a_rebuilt_env_reuses_the_compiled_step():
    """Counted in dynamo's own cache: the second env of a size compiles nothing."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def graphs() -> int:
        return len(_debug_get_cache_entry_list(CartPole.dynamics.__func__.__code__))

    def steps(env) -> None:
        env.reset(seed=0)
        with torch.inference_mode():  # as in a rollout
            for _ in range(3):
                env.step(torch.randint(0, 2, (24,)))

    start = graphs()
    steps(CartPole(num_envs=24, compile=True))
    first = graphs()
    assert start < first <= start + ENTRIES_PER_SIZE
    steps(CartPole(num_envs=24, compile=True))
    assert graphs() == first
