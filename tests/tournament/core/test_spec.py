"""``tournament.json`` is untrusted input (issue 29, minor items): a field of the wrong
shape, a number of hundreds of digits, a value nested past reason or megabytes long is
one clear error naming the file and the field, before anything uses it. A tournament's
own search space (issue 34) is checked the same way, given or read back."""

import json

import pytest

from elegantpod import Tournament
from elegantpod.search.space import choice, loguniform, randint, uniform
from elegantpod.tournament.core.spec import TournamentSpec, make_spec, resume_changes
from elegantpod.tournament.store.files import StoreError
from elegantpod.tournament.store.store import Store


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
        ("seed", -(10**400), r"seed must be in \[-4294967296, 4294967296\]"),
        ("target_reward", 10**400, "target_reward must be a finite number"),
        ("max_steps", 10**400, "max_steps must be <="),
        ("max_seconds", 10**400, "max_seconds must be <="),
        ("leaderboard_size", 10**400, "leaderboard_size must be <="),
        ("max_retries", 10**400, r"max_retries must be <= 1,000 \(a hard limit\)"),
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


# -- search_space and init (issue 34): checked when given, and when read back ------------
SPACE = {"ppo": {"lr": loguniform(1e-4, 1e-2), "epochs": choice([2, 4, 8])}}


def test_a_search_space_round_trips_through_tournament_json_in_every_form():
    spec = make_spec(env="CartPole-v1", search_space=SPACE, init="sample")
    assert spec.search_space == SPACE and spec.init == "sample"
    saved = json.loads(spec.to_json())
    plain = {"ppo": {"lr": {"loguniform": [1e-4, 1e-2]}, "epochs": {"choice": [2, 4, 8]}}}
    assert saved["search_space"] == plain and saved["init"] == "sample"
    assert TournamentSpec.from_dict(saved) == spec
    assert make_spec(env="CartPole-v1", search_space={"PPO": plain["ppo"]}) == make_spec(
        env="CartPole-v1", search_space=SPACE
    )  # the plain form (a config file's) and any case of the algorithm's name
    older = {k: v for k, v in saved.items() if k not in ("search_space", "init")}
    assert TournamentSpec.from_dict(older).search_space == {}  # a store from before
    assert TournamentSpec.from_dict(older).init == "base"  # it started from the base
    assert TournamentSpec.from_dict(dict(saved, init="default")).init == "base"  # the old name
    # a resume may change the search space (children and restarts use the new one)
    changes = resume_changes(spec, {"search_space": plain}, "store")
    assert changes == {}  # the same space, in another form: no change
    wider = {"ppo": {"lr": {"loguniform": [1e-5, 1e-2]}}}
    assert resume_changes(spec, {"search_space": wider}, "store")["search_space"][1] == {
        "ppo": {"lr": loguniform(1e-5, 1e-2)}
    }
    with pytest.raises(ValueError, match="a resume cannot change it"):
        resume_changes(spec, {"init": "base"}, "store")


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"sac": {"lr": uniform(1e-4, 1e-3)}}, r"search_space given for 'sac', which is not in"),
        ({"nope": {}}, r"search_space: unknown algorithm 'nope'"),
        ({"ppo": {"lr": 0.1}}, r"search_space\['ppo'\]\['lr'\] must be a Bound, a Choice"),
        ({"ppo": {"lrr": uniform(1e-4, 1e-3)}}, r"\['lrr'\] = .*: not a ppo hyperparameter"),
        ({"ppo": {"lr": loguniform(1e-4, 10)}}, r"\['lr'\] = Bound.*lr must be <= 1.0 \(a hard"),
        ({"ppo": {"ent_coef": uniform(-1, 0)}}, r"\['ent_coef'\].*ent_coef must be >= 0"),
        ({"ppo": {"epochs": uniform(2, 8)}}, r"\['epochs'\].*epochs is an integer; use randint"),
        ({"ppo": {"epochs": randint(1, 2000)}}, r"epochs must be <= 1,000 \(a hard limit\)"),
        ({"ppo": {"epochs": choice([2, "many"])}}, r"epochs must be an integer, got 'many'"),
        ({"ppo": {"normalize_obs": uniform(0, 1)}}, r"'normalize_obs' fixes the network"),
        ({"ppo": {"hidden": choice([64, 128])}}, r"'hidden' fixes the network or buffer shapes"),
        ({"ppo": {"lr": {"loguniform": [1e-4]}}}, r"\['lr'\].*loguniform takes 2 arguments"),
        ("x", r"search_space must be an object \{algorithm: \{hyperparameter: domain\}\}"),
    ],
)
def test_a_bad_search_space_is_one_error_naming_the_key_before_any_cluster(space, message):
    with pytest.raises(ValueError, match=message):
        make_spec(env="CartPole-v1", search_space=space)


def test_init_must_be_base_or_sample():
    with pytest.raises(ValueError, match=r"init must be one of \['base', 'sample'\]"):
        make_spec(env="CartPole-v1", init="random")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("x", r"search_space must be an object \(a dict\), got 'x'"),
        ({"ppo": "x"}, r"search_space\['ppo'\] must be an object \{hyperparameter"),
        ({"ppo": {"lr": {"eval": ["os.system('x')"]}}}, r"\['lr'\] must name one of uniform"),
        ({"ppo": {"lr": {"loguniform": [1e-4, 1e308]}}}, r"lr must be <= 1.0 \(a hard limit\)"),
        ({"ppo": {"lr": {"loguniform": [10**400, 1]}}}, "<an integer of about 401 digits>"),
        ({"ppo": {"epochs": {"choice": list(range(10**5))}}}, "Choice needs 1 to 64 options"),
        ({"ppo": {"lr": {"quniform": [0, 1e300, 1e-300]}}}, "must be multiples of q=1e-300"),
        ({"ppo": {"hidden": {"choice": [8]}}}, r"'hidden' fixes the network or buffer"),
        ({"sac": {"lr": {"uniform": [1e-4, 1e-3]}}}, r"search_space given for 'sac', which is"),
        ({"ppo": {"<script>" + "A" * 10**5: {"uniform": [0, 1]}}}, r"'<script>AAA.*: not a ppo"),
    ],
)
def test_a_hostile_search_space_in_tournament_json_is_refused_naming_it(tmp_path, value, match):
    store_with_spec(tmp_path / "s", search_space=value)
    resume_refused(tmp_path / "s", match)


def test_a_store_resumes_with_its_search_space_or_a_new_one(tmp_path):
    plain = {"ppo": {"lr": {"loguniform": [1e-4, 1e-2]}, "epochs": {"choice": [2, 4, 8]}}}
    store_with_spec(tmp_path / "s", search_space=plain, init="sample")
    t = Tournament.resume(tmp_path / "s")  # read back, checked, no cluster
    assert t.spec.search_space == SPACE and t.spec.init == "sample" and not t.resume_changes
    wider = {"ppo": {"lr": loguniform(1e-5, 1e-2)}}  # replaces the store's space whole
    t = Tournament.resume(tmp_path / "s", search_space=wider)
    assert t.spec.search_space == wider and t.resume_changes["search_space"] == [SPACE, wider]


def test_a_hostile_init_in_tournament_json_is_refused(tmp_path):
    store_with_spec(tmp_path / "s", init="<script>")
    resume_refused(tmp_path / "s", r"init must be one of \['base', 'sample'\], got '<script>'")


def test_hyperparameters_impossible_together_fail_the_start_before_any_cluster(tmp_path):
    """Issue 56: a batch larger than the replay it is drawn from (each size in range
    alone) is one error naming both, at the start and on a resume of such a store."""
    message = r"hparams\['sac'\]: batch_size=256 must be at most buffer_size=100"
    with pytest.raises(ValueError, match=message):
        Tournament(
            "Pendulum-v1", ["sac"], hparams={"sac": {"buffer_size": 100}}, store=tmp_path / "s"
        )
    assert not (tmp_path / "s").exists()
    store_with_spec(
        tmp_path / "r", env_id="Pendulum-v1", algos=["sac"], hparams={"sac": {"buffer_size": 100}}
    )
    resume_refused(tmp_path / "r", message)
