"""Native envs match gymnasium step for step, and follow the auto-reset contract."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from elegantpod.envs.classic import Acrobot, CartPole, MountainCarContinuous, Pendulum
from elegantpod.envs.fused_step import (
    CPU_COMPILE_MIN_ENVS,
    ENTRIES_PER_SIZE,
    compiled_step,
    step_function,
    whole_step,
)
from elegantpod.envs.noise import uniform_noise
from elegantpod.envs.registry import make_env

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


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "fused"])
def test_same_step_autoreset_keeps_final_obs_and_stats(compile):
    env = CartPole(num_envs=8, seed=3, compile=compile)
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


def _trajectory(env, steps, seed=0):
    """Every output of ``steps`` steps from ``reset(seed)``, under inference mode as in a
    rollout, with the env's own action space sampled by a fixed generator."""
    g = torch.Generator().manual_seed(seed)
    out = [env.reset(seed=seed)]
    with torch.inference_mode():
        for _ in range(steps):
            if isinstance(env.action_space, gym.spaces.Discrete):
                action = torch.randint(0, int(env.action_space.n), (env.num_envs,), generator=g)
            else:
                action = torch.rand(env.num_envs, 1, generator=g) * 2 - 1
            obs, reward, term, trunc, info = env.step(action)
            out += [obs, reward, term, trunc, *info.values()]
    return out


@pytest.mark.parametrize("cls", [CartPole, Pendulum])
def test_compiled_step_matches_the_same_step_uncompiled(cls):
    """``compile=True``: the fused step, compiled, gives what its uncompiled twin (the
    fallback when compiling fails) gives from the same states, through terminations,
    resets and time limits (Pendulum crosses its 200-step limit; its observations are
    computed in the compiled region). The twin restarts from the compiled env's state
    each step: Inductor's fused multiply-adds round differently in the last bit, and
    a chaotic system would grow that into different trajectories."""
    compiled = cls(num_envs=64, seed=3, compile=True)
    twin = cls(num_envs=64, seed=3, compile=True)
    twin._step_fn = whole_step(cls)
    assert compiled._step_fn is compiled_step(cls, 64, "cpu")
    g = torch.Generator().manual_seed(0)
    torch.testing.assert_close(compiled.reset(seed=3), twin.reset(seed=3))
    ended = torch.zeros(64, dtype=torch.bool)
    with torch.inference_mode():
        for _ in range(210):
            if cls is CartPole:
                action = torch.randint(0, 2, (64,), generator=g)
            else:
                action = torch.rand(64, 1, generator=g) * 4 - 2
            got, want = compiled.step(action), twin.step(action)
            for x, y in zip(
                [*got[:4], *got[4].values()], [*want[:4], *want[4].values()], strict=True
            ):
                assert x.dtype == y.dtype and x.shape == y.shape
                torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
            ended |= got[2] | got[3]
            for name in ("state", "elapsed", "episode_return", "_draws"):
                setattr(twin, name, getattr(compiled, name).clone())
    assert ended.all()


def test_fused_and_eager_steps_share_the_protocol_and_the_first_episode():
    """Same seed, same first states and same dynamics; the reset noise of later episodes
    comes from different streams (documented in ``TorchVecEnv``)."""
    fused, eager = CartPole(16, seed=4, compile=True), CartPole(16, seed=4, compile=False)
    fused._step_fn = whole_step(CartPole)  # the same numbers as compiled, without compiling
    a, b = _trajectory(fused, 3), _trajectory(eager, 3)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        torch.testing.assert_close(x, y)


def test_reset_noise_is_uniform_seeded_and_counter_based():
    key = torch.tensor(12345)
    u = uniform_noise((4, 4096), key, torch.tensor(7))
    assert u.dtype == torch.float32 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    torch.testing.assert_close(u, uniform_noise((4, 4096), key, torch.tensor(7)))
    assert not torch.equal(u, uniform_noise((4, 4096), key, torch.tensor(8)))
    assert not torch.equal(u, uniform_noise((4, 4096), torch.tensor(54321), torch.tensor(7)))
    # neighbouring elements and draws are not correlated
    assert abs(torch.corrcoef(torch.stack((u[0, :-1], u[0, 1:])))[0, 1]) < 0.05
    a = CartPole(32, seed=1, compile=True)
    b = CartPole(32, seed=1, compile=True)
    for env in (a, b):
        env._step_fn = whole_step(CartPole)
    for x, y in zip(_trajectory(a, 60), _trajectory(b, 60), strict=True):
        torch.testing.assert_close(x, y)


def test_cpu_envs_compile_from_a_size_on():
    assert not CartPole(num_envs=CPU_COMPILE_MIN_ENVS - 1).fused
    assert CartPole(num_envs=CPU_COMPILE_MIN_ENVS).fused


# -- one compiled step per class, size and device in a process ----------------------------
def test_envs_of_one_class_size_and_device_share_one_compiled_step():
    a, b = (CartPole(num_envs=8, compile=True) for _ in range(2))
    assert a._step_fn is b._step_fn is compiled_step(CartPole, 8, "cpu")
    assert CartPole(num_envs=16, compile=True)._step_fn is not a._step_fn
    assert Acrobot(num_envs=8, compile=True)._step_fn is not a._step_fn
    assert CartPole(num_envs=8, compile=False)._step_fn is whole_step(CartPole)  # eager


def test_each_size_compiles_under_a_code_object_of_its_own():
    """No raised recompile limit is needed (it would not hold: see the next test)."""
    sizes = range(5001, 5013)  # more sizes than torch's default limit of 8 allows
    codes = {step_function(MountainCarContinuous, n, "cpu").__code__ for n in sizes}
    assert len(codes) == len(sizes)
    assert whole_step(MountainCarContinuous).__code__ not in codes


def test_a_rebuilt_env_reuses_the_compiled_step():
    """Counted in dynamo's own cache: the second env of a size compiles nothing."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def graphs() -> int:
        return len(_debug_get_cache_entry_list(step_function(CartPole, 24, "cpu").__code__))

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


# -- compiles where Dask runs them: copied contexts, other threads (issue 30) -------------
def _step_both_variants(env) -> None:
    env.reset(seed=0)
    with torch.inference_mode():  # as in a rollout: plain tensors after the reset, then
        for _ in range(3):  # inference tensors
            env.step(torch.zeros(env.num_envs, dtype=torch.int64))


def test_compiles_in_a_copied_context_and_another_thread_keep_their_limits(monkeypatch):
    """From torch 2.12 dynamo's config is per thread and per ``contextvars`` context, and
    Dask runs each task in a copied context: a limit raised in one task is gone in the
    next. Five sizes of one class, built in one task and stepped in others, make ten
    graphs, past the default limit of 8 per code object; each must still compile."""
    import contextvars
    import threading

    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.utils import counters

    from elegantpod.envs import fused_step as base

    monkeypatch.setattr(base, "COMPILE_BACKEND", "eager")  # dynamo's caching, no Inductor
    sizes = list(range(7001, 7006))
    envs = contextvars.copy_context().run(
        lambda: [CartPole(num_envs=n, compile=True) for n in sizes]
    )
    graphs_before = counters["stats"]["unique_graphs"]
    for env in envs[:2]:  # in tasks of their own
        contextvars.copy_context().run(_step_both_variants, env)
    errors = []

    def in_a_thread():
        try:
            for env in envs[2:]:
                _step_both_variants(env)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert errors == []
    assert counters["stats"]["unique_graphs"] - graphs_before == ENTRIES_PER_SIZE * len(sizes)
    for env, n in zip(envs, sizes, strict=True):
        code = step_function(CartPole, n, "cpu").__code__
        assert len(_debug_get_cache_entry_list(code)) == ENTRIES_PER_SIZE
        assert env._step_fn is compiled_step(CartPole, n, "cpu")


def test_a_failure_inside_a_capture_is_not_a_failed_compile(monkeypatch):
    """Inside a CUDA-graph capture (simulated: torch's query says so) a step that fails
    raises to the capture, which then fails on its own; the compiled step stays for
    this process. Outside one, the same failure marks the compile failed."""
    from elegantpod.envs import fused_step as base

    monkeypatch.setattr(base, "COMPILE_BACKEND", "eager")
    env = CartPole(num_envs=13, compile=True)
    env.reset(seed=0)
    compiled = env._step_fn
    wrong = torch.zeros(5, dtype=torch.int64)  # five actions for thirteen sub-envs
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
        with pytest.raises(Exception, match="size"):
            env.step(wrong)
    assert env._step_fn is compiled is compiled_step(CartPole, 13, "cpu")
    with pytest.warns(RuntimeWarning, match="torch.compile failed"), pytest.raises(RuntimeError):
        env.step(wrong)  # not capturing: marked failed, then the eager step raises too
    assert env._step_fn is whole_step(CartPole) and compiled_step(CartPole, 13, "cpu") is None


def test_the_public_carry_moves_an_env_on_from_another_state():
    """What CUDA-graph capture holds in place (issue 33: it read private fields)."""
    a, b = CartPole(num_envs=16, seed=1), CartPole(num_envs=16, seed=2)
    a.reset(seed=1)
    b.reset(seed=2)
    act = torch.ones(16, dtype=torch.int64)
    for _ in range(3):
        a.step(act)
    carry = a.carry()
    assert carry.state is a.state and carry.elapsed is a.elapsed
    b.set_carry(type(carry)(*(t.clone() for t in carry)))
    b.generator.set_state(a.generator.get_state())
    for _ in range(40):  # through episode ends: the reset noise follows the carry too
        oa, ra, ta, ua, _ = a.step(act)
        ob, rb, tb, ub, _ = b.step(act)
        torch.testing.assert_close(ob, oa, rtol=0, atol=0)
        assert torch.equal(ta, tb) and torch.equal(ua, ub) and torch.equal(ra, rb)
    assert a.fused is False  # 16 sub-envs on a CPU step eagerly
