"""``tournament.json`` is untrusted input (issue 29, minor items): a field of the wrong
shape, a number of hundreds of digits, a value nested past reason or megabytes long is
one clear error naming the file and the field, before anything uses it."""

import json

import pytest

from elegantpod import Tournament
from elegantpod.tournament.spec import TournamentSpec
from elegantpod.tournament.store import Store, StoreError


def store_with_spec(path, **changes) -> Store:
    s = Store(path)
    s.ensure()
    spec = TournamentSpec(env_id="CartPole-v1").to_dict()
    spec.update(changes)
    s.write_json("tournament.json", spec)
    s.save_state({"pods": [], "leaderboard": [], "state": {}})
    return s


def resume_refused(path, match) -> str:
    with pytest.raises(StoreError, match=match) as info:
        Tournament.resume(path)
    message = str(info.value)
    assert "tournament.json" in message and len(message) < 800, message
    assert "Traceback" not in message
    return message


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("hparams", "x", r"hparams must be an object of objects.*got 'x'"),
        ("hparams", [], r"hparams must be an object of objects.*got \[\]"),
        ("hparams", {"ppo": "x"}, r"hparams must be an object of objects.*'ppo': 'x'"),
        ("hparams", {"ppo": [1]}, r"hparams must be an object of objects"),
        ("env_kwargs", "x", r"env_kwargs must be an object \(a dict\), got 'x'"),
        ("env_kwargs", [1, 2], r"env_kwargs must be an object \(a dict\), got \[1, 2\]"),
        ("eval_env_kwargs", 7, r"eval_env_kwargs must be an object \(a dict\), got 7"),
        ("generator", "x", r"generator must be an object \(a dict\), got 'x'"),
        ("algos", "ppo", r"algos must be a list of algorithm names, got 'ppo'"),
        ("env_id", None, r"env_id must be an env id"),
    ],
)
def test_a_field_of_the_wrong_shape_is_one_error_naming_file_and_field(
    tmp_path, field, value, match
):
    store_with_spec(tmp_path / "s", **{field: value})
    resume_refused(tmp_path / "s", match)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("learners", 10**400, r"learners must be <= 1,024 \(a hard limit\)"),
        ("seed", -(10**400), r"seed must be within \+-2\*\*32"),
        ("target_reward", 10**400, "target_reward must be a finite number"),
        ("max_steps", 10**400, "max_steps must be <="),
        ("max_seconds", 10**400, "max_seconds must be <="),
        ("leaderboard_size", 10**400, "leaderboard_size must be <="),
        ("max_retries", 10**400, r"max_retries must be in \[0, 1,000\]"),
        ("pods_per_gpu", 10**400, "pods_per_gpu must be a power of two"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "",
)
def test_integers_of_hundreds_of_digits_are_named_not_an_overflow(tmp_path, field, value, match):
    store_with_spec(tmp_path / "s", **{field: value})
    message = resume_refused(tmp_path / "s", match)
    assert "<an integer of about 401 digits>" in message


def test_hostile_hyperparameters_name_the_algorithm(tmp_path):
    store_with_spec(tmp_path / "s", hparams={"ppo": {"ent_coef": -1.0}})
    resume_refused(tmp_path / "s", r"hparams\['ppo'\]: ent_coef must be >= 0, got -1.0")


def test_values_nested_past_reason_are_refused_before_anything_walks_them(tmp_path):
    deep = json.loads("[" * 900 + "]" * 900)  # JSON reads it; a recursive walk would not
    store_with_spec(tmp_path / "s", env_kwargs={"tickers": deep})
    resume_refused(tmp_path / "s", "nests lists or objects deeper than 32 levels")


@pytest.mark.parametrize("field", ["env_id", "device", "fitness", "max_retries", "zzz"])
def test_errors_repeat_at_most_a_few_hundred_characters_of_a_hostile_value(tmp_path, field):
    hostile = "<script>" + "A" * 100_000
    if field == "zzz":  # an unknown key: its name is the hostile value
        s = store_with_spec(tmp_path / "s")
        spec = s.read_json("tournament.json")
        spec[hostile] = 1
        s.write_json("tournament.json", spec)
    else:
        store_with_spec(tmp_path / "s", **{field: hostile})
    message = resume_refused(tmp_path / "s", "<script>")
    assert message.count("A") < 300
