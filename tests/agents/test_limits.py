"""Every numeric hyperparameter of every learner has a finite hard range, enforced alike
for a user's value and a value read from a store (issue 29, item 10)."""

import dataclasses
import math
import typing

import pytest

from elegantpod.agents import ALGOS, BUILTIN, get_algo
from elegantpod.agents.hparams import limits
from elegantpod.checks.limits import MAX_LEARNERS
from elegantpod.checks.overrides import replace_checked
from elegantpod.config import PodSpec
from elegantpod.tournament.core import field_checks, hparam_checks
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store import state as stored_state

LEARNERS = sorted(BUILTIN)


def numeric_fields(config_cls) -> list[str]:
    """Fields whose type is a number (``int``, ``float``, optionally ``None``); tuples of
    numbers are layer sizes (``hidden``), which ``check_hidden`` bounds."""
    hints = typing.get_type_hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        tp = hints[f.name]
        if typing.get_origin(tp) is tuple:
            assert f.name == "hidden", f"{config_cls.__name__}.{f.name}: a tuple, unchecked"
            continue
        if ({tp} | set(typing.get_args(tp))) & {int, float}:
            out.append(f.name)
    return out


def outside(limit) -> list:
    """Values past each end of ``limit``, and the absurd ones a hostile store holds."""
    below = limit.low if limit.open_low else limit.low - (1 if limit.integer else 1e-9)
    above = limit.high + (1 if limit.integer else max(1e-9, abs(limit.high) * 1e-9))
    return [below, above, 10**40, -(10**40), 10**400, 1e308, -1e308, float("nan")]


@pytest.mark.parametrize("algo", LEARNERS)
def test_every_numeric_hyperparameter_has_a_finite_enforced_range(algo):
    config_cls = ALGOS[algo].config_cls
    default = config_cls()
    names = numeric_fields(config_cls)
    assert names  # the walk found the fields
    with pytest.raises(field_checks.StateError, match="hidden layer size <an integer of about 401"):
        hparam_checks.hparams(algo, {"hidden": [10**400]}, "state.json: pods[0].hparams")
    for name in names:
        limit = limits(config_cls).get(name)
        assert limit is not None, f"{algo}.{name} declares no hard limit"
        assert math.isfinite(limit.low) and math.isfinite(limit.high), f"{algo}.{name}"
        value = getattr(default, name)
        assert value is None or limit.low <= value <= limit.high, f"{algo}.{name} default"
        for bad in outside(limit):
            # a user's value (as from --set) and a store's value take the same check
            with pytest.raises(ValueError, match=rf"{name} must") as user:
                replace_checked(default, {name: bad})
            with pytest.raises(field_checks.StateError, match=rf"hparams: {name} must") as store:
                hparam_checks.hparams(algo, {name: bad}, "state.json: pods[0].hparams")
            for info in (user, store):
                message = str(info.value)  # names the value, shortly
                assert "got " in message and len(message) < 400, message
                if isinstance(bad, int) and bad.bit_length() > 600:
                    assert "an integer of about 401 digits" in message
                elif isinstance(bad, float) and not limit.integer:
                    assert f"got {bad!r}" in message, message
        # the ends themselves are allowed (the low one unless it is open)
        # each end with the fields it must agree with (a limit of its own)
        other = {
            "epsilon_start": {"epsilon_end": 0.0},  # end <= start
            "batch_size": {"buffer_size": limits(config_cls).get("buffer_size", limit).high},
            "buffer_size": {"batch_size": 1},  # a batch fits in the replay
        }.get(name, {})
        replace_checked(default, {name: limit.high, **other})
        if not limit.open_low:
            replace_checked(default, {name: limit.low, **other})


@pytest.mark.parametrize(
    ("algo", "name", "value", "message"),
    [
        ("ppo", "ent_coef", -0.01, "ent_coef must be >= 0, got -0.01"),
        ("ppo", "vf_coef", -1.0, "vf_coef must be >= 0, got -1.0"),
        ("sac", "target_entropy", -1e308, r"target_entropy must be >= -10000, got -1e\+308"),
        ("ppo", "init_log_std", 1e308, r"init_log_std must be <= 5.0 \(a hard limit\)"),
        ("td3", "policy_delay", 10**40, r"policy_delay must be <= 1,000 \(a hard limit\)"),
    ],
)
def test_the_values_the_review_stored_are_refused(tmp_path, algo, name, value, message):
    with pytest.raises(ValueError, match=message):
        replace_checked(get_algo(algo).config_cls(), {name: value})
    record = {"pod_id": "p000", "algo": algo, "hparams": {name: value}, "seed": 1}
    with pytest.raises(field_checks.StateError, match=rf"pods\[0\] \(p000\)\.hparams: {message}"):
        stored_state.load({"pods": [record]}, "state/00000001.json")


def test_sensible_values_stay_allowed():
    assert replace_checked(get_algo("sac").config_cls(), {"target_entropy": -6.0})
    assert replace_checked(get_algo("sac").config_cls(), {"target_entropy": None})
    assert replace_checked(get_algo("ppo").config_cls(), {"ent_coef": 0.01, "vf_coef": 0.5})
    assert replace_checked(get_algo("td3").config_cls(), {"policy_delay": 1000})


def test_the_number_of_fused_learners_is_bounded():
    with pytest.raises(ValueError, match=r"learners must be <= 1,024 \(a hard limit\)"):
        PodSpec(env_id="CartPole-v1", algo="ppo", learners=10**40).validate()
    with pytest.raises(ValueError, match="learners must be <= 1,024"):
        TournamentSpec(env_id="CartPole-v1", learners=MAX_LEARNERS + 1).validate()


@pytest.mark.parametrize(
    ("algo", "hparams", "message"),
    [
        (
            "sac",
            {"batch_size": 4096, "buffer_size": 1000},
            r"batch_size=4096 must be at most buffer_size=1000",
        ),
        ("dqn", {"batch_size": 512, "buffer_size": 500}, r"batch_size=512 .* buffer_size=500"),
        (
            "ppo",
            {"num_envs": 2**22, "horizon": 100_000},
            r"num_envs \* horizon must be at most 1,073,741,824 .*"
            r"got num_envs=4194304, horizon=100000: 419,430,400,000 transitions",
        ),
        ("td3", {"num_envs": 2**21, "horizon": 1024}, r"num_envs=2097152, horizon=1024"),
    ],
)
def test_sizes_valid_alone_but_not_together_are_refused(algo, hparams, message):
    """Issue 56: each size in range, the combination impossible (a batch larger than the
    replay it is drawn from, a rollout of 4e11 transitions) is refused as a user's value
    and as a store's, naming the fields and their values."""
    config_cls = get_algo(algo).config_cls
    for name, value in hparams.items():
        replace_checked(config_cls(), {name: value})  # each alone is fine
    with pytest.raises(ValueError, match=message):
        replace_checked(config_cls(), hparams)
    record = {"pod_id": "p000", "algo": algo, "hparams": hparams, "seed": 1}
    with pytest.raises(field_checks.StateError, match=rf"pods\[0\] \(p000\)\.hparams: .*{message}"):
        stored_state.load({"pods": [record]}, "state/00000001.json")
