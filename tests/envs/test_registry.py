import pytest

from elegantpod.envs import CartPole, GymVecEnv, available_envs, make_env


def test_native_preferred_and_adapter_on_request():
    assert isinstance(make_env("CartPole-v1", 4), CartPole)
    assert isinstance(make_env("CartPole-v1", 4, native=False), GymVecEnv)
    assert {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCarContinuous-v0"} <= set(
        available_envs()
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(env_id="CartPol-v1"), "unknown env id 'CartPol-v1'.*CartPole-v1"),
        (dict(env_id="CartPole-v1", num_envs=0), "num_envs must be >= 1, got 0"),
        (dict(env_id="LunarLander-v3", native=True), "no native env"),
        (dict(env_id=""), "non-empty"),
    ],
)
def test_bad_input_names_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_env(**kwargs)
