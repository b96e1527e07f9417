import pytest

from elegantpod.agents import PPOConfig, SACConfig
from elegantpod.config import PodSpec, parse_assignments, replace_checked


def test_replace_checked_coerces_strings_to_field_types():
    cfg = replace_checked(
        PPOConfig(), {"lr": "1e-4", "epochs": "3", "normalize_obs": "true", "hidden": "32,32"}
    )
    assert cfg.lr == 1e-4 and cfg.epochs == 3 and cfg.normalize_obs is True
    assert cfg.hidden == (32, 32)
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


def test_parse_assignments():
    assert parse_assignments(["lr=1e-3", " gamma = 0.9"]) == {"lr": "1e-3", "gamma": "0.9"}
    with pytest.raises(ValueError, match="key=value, got 'lr'"):
        parse_assignments(["lr"])
