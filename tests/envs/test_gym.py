"""The gymnasium adapter: any id, sync/async, and next-step auto-reset converted."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.registry import make_env


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


# -- observations that are not a flat Box (issue 42, item 6) -----------------------------
def test_a_discrete_state_is_its_one_hot_vector_and_final_obs_too():
    env = make_env("FrozenLake-v1", num_envs=2, seed=0, is_slippery=False)
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (16,), "float32")
    obs = env.reset()
    assert obs.dtype == torch.float32 and obs.tolist() == [[1.0] + [0.0] * 15] * 2
    # left from the start: the agent stays in state 0; down four times falls into a hole
    for _ in range(2):
        obs, _, terminated, _, info = env.step(torch.tensor([1, 1]))
    assert obs.argmax(1).tolist() == [8, 8] and not terminated.any()
    obs, _, terminated, _, info = env.step(torch.tensor([1, 1]))  # state 12: a hole
    assert terminated.all() and info["final_obs"].argmax(1).tolist() == [12, 12]
    assert obs.argmax(1).tolist() == [0, 0]  # same-step reset, one-hot again
    assert (info["final_obs"].sum(1) == 1).all() and (obs.sum(1) == 1).all()


def test_tuple_and_dict_observations_are_concatenated_one_hots():
    env = make_env("Blackjack-v1", num_envs=3, seed=0)
    assert env.observation_space.shape == (32 + 11 + 2,)
    obs = env.reset()
    assert obs.shape == (3, 45) and (obs.sum(1) == 3).all()  # one hot per part
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,))})
    from elegantpod.envs.gym import flattened_space

    assert flattened_space(space, "x") is space
    assert gym.spaces.flatten_space(space).shape == (5,)


def test_images_keep_their_shape_and_formless_spaces_say_what_to_do():
    """Frames (a uint8 Box of 3 dimensions) are not flattened: the learners with an
    image encoder read them as float32 pixel values 0..255 in their own shape."""
    from elegantpod.envs.gym import flattened_space

    image = gym.spaces.Box(0, 255, (96, 96, 3), "uint8")
    assert flattened_space(image, "CarRacing-v3") is None
    env = make_env("CarRacing-v3", num_envs=2, seed=0)
    try:
        space = env.observation_space
        assert space.shape == (96, 96, 3) and space.dtype == np.float32 and space.high.max() == 255
        obs = env.reset()
        assert obs.shape == (2, 96, 96, 3) and obs.dtype == torch.float32 and obs.max() <= 255
        obs, *_ = env.step(torch.zeros(2, 3))
        assert obs.shape == (2, 96, 96, 3)
    finally:
        env.close()
    with pytest.raises(ValueError, match="Text spaces, which have no fixed-size vector form"):
        flattened_space(gym.spaces.Text(8), "Words-v0")
    assert flattened_space(gym.spaces.Box(-1, 1, (4,)), "x") is None


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_ppo_and_dqn_solve_frozen_lake_from_its_discrete_states(algo):
    """FrozenLake-v1 (4x4, not slippery) observes a Discrete state: from its one-hot
    vector both reach the goal in every evaluation episode (measured: PPO 0.8 s, DQN
    5.7 s for 20k steps on a 2-vCPU Xeon)."""
    import elegantpod

    result = elegantpod.train(
        "FrozenLake-v1",
        algo,
        env_kwargs={"is_slippery": False},
        max_steps=20_000,
        seed=0,
        progress=False,
    )
    assert result.best_eval_return_mean == 1.0, result.curve


# -- a user's env with hostile or odd observations (issue 56) ----------------------------
class _Declared(gym.Env):
    """An env that declares ``space`` and observes what ``observe(step)`` returns."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, space, observe, close_error=None):
        self.observation_space, self.observe, self.close_error = space, observe, close_error

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observe(0), {}

    def step(self, action):
        self.t += 1
        return self.observe(self.t), 0.0, False, False, {}

    def close(self):
        if self.close_error is not None:
            raise self.close_error


@pytest.fixture
def declare():
    """Register ``_Declared`` envs under fresh ids (removed afterwards): a user's env."""
    ids = []

    def register(space, observe, **kwargs):
        env_id = f"Declared{len(ids)}-v0"
        gym.register(env_id, entry_point=_Declared, kwargs=dict(space=space, observe=observe))
        ids.append(env_id)
        return lambda **kw: make_env(env_id, num_envs=2, seed=0, **kwargs, **kw)

    yield register
    for env_id in ids:
        del gym.registry[env_id]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            gym.spaces.Box(0, 255, (2048, 2048, 3), np.uint8),
            r"observes Box\(0, 255, \(2048, 2048, 3\), uint8\), 12,582,912 values a frame",
        ),
        (gym.spaces.Discrete(10**9), r"Discrete\(1000000000\), 1,000,000,000 values once"),
        (
            gym.spaces.Dict({"x": gym.spaces.MultiDiscrete([2**62, 2**62])}),
            r"9,223,372,036,854,775,808 values once flattened",  # no int64 overflow
        ),
    ],
)
def test_huge_observations_are_refused_before_anything_is_allocated(declare, space, message):
    """A billion-wide one-hot or 2048x2048 frames failed in an allocation (or torch)
    before the pod's memory check: refused when the first sub-env is built."""
    make = declare(space, lambda t: space.sample())
    with pytest.raises(ValueError, match=message + r".*at most 4,194,304 \(MAX_OBS_VALUES\)"):
        make()
    vector = gym.make_vec("CartPole-v1", 1)
    vector.single_observation_space = space  # a ready vector env: checked as well
    with pytest.raises(ValueError, match=message):
        GymVecEnv(vector)


@pytest.mark.parametrize("disable_env_checker", [False, True])
def test_observations_of_another_dtype_than_declared_are_refused(declare, disable_env_checker):
    """Float frames in a uint8 space crashed in gymnasium's batching (``Cannot cast
    array data``) or were mis-cast (300 -> 44): refused, naming both dtypes."""
    frames = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    kw = dict(disable_env_checker=disable_env_checker)
    reset_half = declare(frames, lambda t: np.full((8, 8, 3), 0.5), **kw)
    with pytest.raises(ValueError, match=r"declares uint8 .* reset\(\) returned float64"):
        reset_half().reset()
    step_300 = declare(frames, lambda t: np.full((8, 8, 3), 300.0) if t else frames.low + 1, **kw)
    env = step_300()
    assert env.reset().max() == 1.0
    with pytest.raises(ValueError, match=r"declares uint8 .* step\(\) returned float64"):
        env.step(torch.zeros(2))
    wide = declare(frames, lambda t: np.full((8, 8, 3), 300, np.uint16), **kw)
    with pytest.raises(ValueError, match=r"returned uint16 .* 300, outside uint8's 0\.\.255"):
        wide().reset()
    signed = declare(frames, lambda t: np.zeros((8, 8, 3), np.int64), **kw)
    with pytest.raises(ValueError, match=r"declares uint8 .* reset\(\) returned int64"):
        signed().reset()
    state = declare(gym.spaces.Discrete(4), lambda t: 1.5, **kw)
    with pytest.raises(ValueError, match=r"declares int64 .* returned float64"):
        state().reset()
    shape = declare(gym.spaces.Box(-1, 1, (3,)), lambda t: np.zeros(4, np.float32), **kw)
    with pytest.raises(ValueError, match=r"of shape \(3,\), .* returned one of shape \(4,\)"):
        shape().reset()
    fine = declare(gym.spaces.Box(-1, 1, (3,)), lambda t: np.zeros(3), **kw)  # float64: fine
    env = fine()
    env.reset()
    assert env.step(torch.zeros(2))[0].shape == (2, 3)


@pytest.mark.parametrize("disable_env_checker", [False, True])
def test_dict_observations_with_other_keys_are_refused_naming_them(declare, disable_env_checker):
    """Keys {a, c} for a space of {a, b} gave a raw KeyError (or gymnasium's assertion);
    extra keys were dropped silently."""
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)})
    kw = dict(disable_env_checker=disable_env_checker)
    other = declare(space, lambda t: {"a": 0, "c": 1}, **kw)
    with pytest.raises(ValueError, match=r"lacks the key 'b' .* has the key 'c' it does not"):
        other().reset()
    extra = declare(space, lambda t: {"a": 0, "b": 1, **({"z": 2} if t else {})}, **kw)
    env = extra()
    env.reset()
    with pytest.raises(ValueError, match=r"step\(\) returned has the key 'z' it does not declare"):
        env.step(torch.zeros(2))
    nested = gym.spaces.Tuple((space, gym.spaces.Discrete(2)))
    deep = declare(nested, lambda t: ({"a": 0.5, "b": 1}, 0), **kw)
    with pytest.raises(ValueError, match=r"observation\[0\]\['a'\]: .* declares int64"):
        deep().reset()


def test_an_env_whose_close_raises_warns_and_keeps_the_original_error(declare):
    """A user's ``close()`` that raises escaped the pod's clean-up (a tournament's
    ``pod.close()`` after a failure), masking the real error."""
    from elegantpod.config import PodSpec
    from elegantpod.pod.pod import Pod

    make = declare(gym.spaces.Box(-1, 1, (3,)), lambda t: np.zeros(3, np.float32))
    env_id = make().env_id
    gym.registry[env_id].kwargs["close_error"] = OSError("socket already gone")
    env = make()
    env.reset()
    with pytest.warns(RuntimeWarning, match=rf"closing {env_id!r} raised OSError\('socket already"):
        env.close()
    spec = PodSpec(env_id=env_id, algo="ppo", device="cpu", eval_episodes=1)
    with (
        pytest.raises(RuntimeError, match="the real error"),  # not the OSError
        pytest.warns(RuntimeWarning, match="socket already gone"),
        Pod(spec),
    ):
        raise RuntimeError("the real error")


def test_a_first_observation_unlike_the_declared_is_refused_before_any_pod_is_built(declare):
    """``check_eval_env`` (run by ``train`` and a tournament's spec before any cluster
    work) resets its probe of a gymnasium env: a refused observation fails there."""
    from elegantpod.envs.registry import check_eval_env

    frames = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    env_id = declare(frames, lambda t: np.full((8, 8, 3), 0.5))().env_id
    with pytest.raises(ValueError, match=r"declares uint8 .* reset\(\) returned float64"):
        check_eval_env(env_id, {}, {}, "return")
