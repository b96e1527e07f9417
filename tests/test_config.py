import pytest

from elegantpod.agents.ddpg import DDPGConfig
from elegantpod.agents.dqn import DQNConfig
from elegantpod.agents.ppo import PPOConfig
from elegantpod.agents.sac import SACConfig
from elegantpod.agents.td3 import TD3Config
from elegantpod.checks.limits import MAX_EVAL_EPISODES
from elegantpod.checks.overrides import parse_assignments, replace_checked
from elegantpod.config import PodSpec


def test_replace_checked_coerces_strings_to_field_types():
    cfg = replace_checked(
        PPOConfig(), {"lr": "1e-4", "epochs": "3", "normalize_obs": "true", "hidden": "32,32"}
    )
    assert cfg.lr == 1e-4 and cfg.epochs == 3 and cfg.normalize_obs is True
    assert cfg.hidden == (32, 32)
    for spelled in ("[256,256]", "(256, 256)", "256,256", "[256, 256]"):  # as users type them
        assert replace_checked(PPOConfig(), {"hidden": spelled}).hidden == (256, 256)
    assert replace_checked(SACConfig(), {"target_entropy": "none"}).target_entropy is None
    assert replace_checked(SACConfig(), {"target_entropy": "-2"}).target_entropy == -2.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lrr": "1"}, "unknown hyperparameter 'lrr'"),
        ({"epochs": "2.5"}, "epochs must be an integer, got '2.5'"),
        ({"lr": "fast"}, "lr must be a number, got 'fast'"),
        ({"normalize_obs": "maybe"}, "normalize_obs must be a boolean"),
        ({"lr": "-1"}, "lr must be > 0, got -1.0"),
        ({"gamma": "nan"}, "gamma must be a finite number"),
        ({"lr": "inf"}, "lr must be a finite number"),
    ],
)
def test_replace_checked_names_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        replace_checked(PPOConfig(), overrides)


def test_configs_are_frozen_and_keyword_only():
    with pytest.raises(AttributeError):
        PPOConfig().lr = 1.0
    with pytest.raises(TypeError):
        PPOConfig(0.1)


def test_pod_spec_json_round_trip():
    spec = PodSpec(
        env_id="Pendulum-v1",
        algo="sac",
        hparams=SACConfig(hidden=(32, 16)),
        seed=4,
        target_reward=-150.0,
        extra={"parent": "pod-1"},
    )
    back = PodSpec.from_json(spec.to_json())
    assert back == spec and back.hparams.hidden == (32, 16)
    assert back.device == "auto"  # decided where the pod is built


def test_a_spec_nested_past_the_parser_is_one_error():
    """A checkpoint's spec is untrusted JSON: nested 100,000 deep it raised a raw
    RecursionError from json.loads."""
    with pytest.raises(ValueError, match="a spec must be JSON text: nested too deeply"):
        PodSpec.from_json('{"env_id": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="a spec must be JSON text: Expecting"):
        PodSpec.from_json("{not json")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"device": "gpu"}, "unknown device 'gpu'"),
        ({"learners": 2, "learner_devices": ("cpu", "cuda:z")}, "unknown device 'cuda:z'"),
    ],
)
def test_spec_devices_are_checked_in_form_only(changes, message):
    PodSpec(env_id="CartPole-v1", algo="ppo", device="cuda:7").validate()  # maybe elsewhere
    PodSpec(
        env_id="CartPole-v1", algo="ppo", learners=2, learner_devices=("auto", "cpu")
    ).validate()
    with pytest.raises(ValueError, match=message):
        PodSpec(env_id="CartPole-v1", algo="ppo", **changes).validate()


def test_parse_assignments():
    assert parse_assignments(["lr=1e-3", " gamma = 0.9"]) == {"lr": "1e-3", "gamma": "0.9"}
    with pytest.raises(ValueError, match="key=value, got 'lr'"):
        parse_assignments(["lr"])


ALL_CONFIGS = [PPOConfig, SACConfig, TD3Config, DDPGConfig, DQNConfig]


@pytest.mark.parametrize("config_cls", ALL_CONFIGS)
@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lr", 1e308, r"lr must be <= 1.0 \(a hard limit\)"),
        ("num_envs", 10**9, "num_envs must be <= 4,194,304"),
        ("horizon", 10**9, "horizon must be <= 100,000"),
        ("hidden", (10**6, 10**6), "hidden layer size 1,000,000 exceeds 65,536"),
        ("hidden", (8,) * 65, "hidden has 65 layers; at most 64"),
        ("num_envs", 2.5, "num_envs must be an integer"),
        ("gamma", 1.5, r"gamma must be in \[0.0, 1.0\]"),
    ],
)
def test_every_config_has_hard_limits(config_cls, key, value, message):
    with pytest.raises(ValueError, match=message):
        replace_checked(config_cls(), {key: value})


@pytest.mark.parametrize(
    ("config_cls", "key", "value", "message"),
    [
        (PPOConfig, "epochs", 10**9, "epochs must be <= 1,000"),
        (PPOConfig, "minibatch_size", 2**30, "minibatch_size must be <= 16,777,216"),
        (PPOConfig, "clip_coef", 2.0, "clip_coef must be <= 1.0"),
        (SACConfig, "batch_size", 2**30, "batch_size must be <= 16,777,216"),
        (SACConfig, "buffer_size", 2**40, "buffer_size must be <= 1,073,741,824"),
        (TD3Config, "replay_ratio", 1e9, "replay_ratio must be <= 1,000.0"),
        (DQNConfig, "learning_starts", 2**40, "learning_starts must be <= 1,073,741,824"),
    ],
)
def test_sizes_and_counts_past_their_limits_are_named(config_cls, key, value, message):
    with pytest.raises(ValueError, match=message):
        replace_checked(config_cls(), {key: value})


def test_defaults_limits_and_search_spaces_stay_valid():
    from elegantpod.agents import ALGOS, get_algo

    for config_cls in ALL_CONFIGS:
        config_cls().validate()
    replace_checked(PPOConfig(), {"epochs": 1000, "lr": 1.0, "num_envs": 2**22})
    replace_checked(SACConfig(), {"hidden": (65_536,), "batch_size": 2**24, "buffer_size": 2**24})
    from elegantpod.search.space import Choice

    for algo, space in {a: cls.search_space for a, cls in ALGOS.items()}.items():
        for key, bound in space.items():
            if isinstance(bound, Choice):  # every option of a categorical one
                values = bound.options
            else:
                values = (bound.clip(bound.low), bound.clip(bound.high))
            for value in values:
                replace_checked(get_algo(algo).config_cls(), {key: value})


def test_eval_episodes_are_bounded():
    spec = PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=10**9)
    with pytest.raises(ValueError, match="eval_episodes must be <= 10,000"):
        spec.validate()
    PodSpec(env_id="CartPole-v1", algo="ppo", eval_episodes=MAX_EVAL_EPISODES).validate()
