"""A setting is declared once, in its spec's field (issue 60, item 2): the checks, the
tournament's pods, ``train``'s keywords, the command line's flags and a resume's rules all
read the declaration, so a field added to it shows up in each of them.

The checks here iterate over the declarations rather than name the settings of today:
a setting added tomorrow is covered by them as it is."""

import argparse
import dataclasses
import inspect
import math

import pytest

from elegantpod.checks.limits import Limit
from elegantpod.checks.settings import (
    SETTING,
    check_settings,
    declared,
    defaults,
    flagged,
    kind,
    setting,
)
from elegantpod.config import PodSettings, PodSpec
from elegantpod.tournament.core.spec import RESUME_CHANGEABLE, TournamentSpec


def subparser(command: str) -> argparse.ArgumentParser:
    from elegantpod.cli.args import parser

    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def flags_of(command: str) -> dict[str, argparse.Action]:
    return {
        a.dest: a
        for a in subparser(command)._actions
        if any(s.startswith("--") for s in a.option_strings)
    }


def beyond(spec_cls: type, name: str):
    """A value of setting ``name`` that its declaration refuses, or ``None``."""
    s, (of, _) = declared(spec_cls)[name], kind(spec_cls, name)
    if s.choices:
        return "<not one of them>"
    if s.limit is not None:
        return s.limit.high * 10 + 1 if s.limit.integer else s.limit.high * 10.0
    return {int: 2.5, float: math.inf, bool: "maybe", str: ""}.get(of)


# -- one home ---------------------------------------------------------------------------
def test_every_field_of_both_specs_is_a_declared_setting():
    for spec_cls in (PodSpec, TournamentSpec):
        assert set(declared(spec_cls)) == {f.name for f in dataclasses.fields(spec_cls)}


def test_the_shared_settings_are_the_same_field_in_both_specs_and_reach_every_pod():
    shared = {f.name: f for f in dataclasses.fields(PodSettings)}
    assert {"env_id", "device", "eval_episodes", "fitness", "learners"} <= set(shared)
    for spec_cls in (PodSpec, TournamentSpec):
        fields = {f.name: f for f in dataclasses.fields(spec_cls)}
        for name, f in shared.items():
            assert fields[name] is f, (spec_cls, name)  # inherited: not a copy
    # a tournament's pod takes every shared value (whatever value: pod_spec only copies)
    t = TournamentSpec(env_id="CartPole-v1")
    marks = {name: object() for name in shared}
    pod = dataclasses.replace(t, **marks).pod_spec("ppo", None, seed=7)
    assert all(getattr(pod, name) is mark for name, mark in marks.items())
    assert (pod.algo, pod.seed) == ("ppo", 7)


@pytest.mark.parametrize("spec_cls", [PodSpec, TournamentSpec], ids=["pod", "tournament"])
def test_validation_refuses_each_declared_setting_past_its_declaration(spec_cls):
    base = {"env_id": "CartPole-v1", **({"algo": "ppo"} if spec_cls is PodSpec else {})}
    spec_cls(**base).validate()
    checked = 0
    for name in declared(spec_cls):
        bad = beyond(spec_cls, name)
        if bad is None or name in base:
            continue
        with pytest.raises(ValueError, match=rf"^{name} must "):
            spec_cls(**base, **{name: bad}).validate()
        checked += 1
    assert checked >= 8  # the declarations say enough to check most settings


def test_each_flagged_setting_is_a_flag_of_its_command_with_its_help_and_default():
    from elegantpod.cli.run_config import options

    for command, spec_cls in (("train", PodSpec), ("tournament", TournamentSpec)):
        flags, keys = flags_of(command), options(command)
        default = vars(defaults(spec_cls))
        for name, s in flagged(spec_cls).items():
            action = flags[name]
            assert action.option_strings[0] == "--" + name.replace("_", "-")
            assert action.default is None  # not given: the spec's default stands
            assert action.help.startswith(s.help)
            if default[name] is not None and not isinstance(default[name], bool):
                assert f"(default: {default[name]})" in action.help
            assert name in keys  # a run file's key too
    # the shared settings are flags of both commands, from one declaration
    assert set(flagged(PodSettings)) <= set(flags_of("train")) & set(flags_of("tournament"))


def test_train_and_its_spec_builder_default_to_the_declarations():
    from elegantpod.training import TRAIN_SETTINGS, build_spec, train

    params = inspect.signature(train).parameters
    declared_defaults = vars(defaults(PodSpec))
    for name in TRAIN_SETTINGS:
        default = params[name].default
        assert default == declared_defaults[name] or (default is None and name.endswith("kwargs"))
    assert set(flagged(PodSpec)) <= set(TRAIN_SETTINGS)
    spec = build_spec("CartPole-v1", "ppo")
    for name in flagged(PodSpec):
        assert getattr(spec, name) == declared_defaults[name], name
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['eval_episode'\]"):
        build_spec("CartPole-v1", "ppo", eval_episode=3)


def test_a_pods_step_limits_are_the_budgets_it_runs_with():
    """A spec that passes its checks runs: ``Budget`` takes every step count the spec's
    declaration allows, and refuses past it (a spec once passed, then failed in ``run``)."""
    from elegantpod.pod.budget import Budget

    for name, budget in (("max_steps", "steps"), ("eval_every_steps", "evaluate_every")):
        high = declared(PodSpec)[name].limit.high
        Budget(**{budget: high})
        with pytest.raises(ValueError, match=rf"Budget.{budget} must be an integer in"):
            Budget(**{budget: high + 1})


def test_the_tournament_and_a_resume_read_the_declarations():
    from elegantpod.tournament.orchestrator import Tournament

    params = inspect.signature(Tournament).parameters
    for name in ("algos", "pods", "target_reward", "max_seconds", "max_steps"):
        assert params[name].default == getattr(defaults(TournamentSpec), name), name
    # what a resume could change before the declarations said it (issue 60), no more
    assert RESUME_CHANGEABLE == (
        "device", "target_reward", "eval_episodes", "confirm_target", "max_seconds",
        "max_steps", "segment_steps", "segment_seconds", "leaderboard_size", "pods_per_gpu",
        "generator", "max_retries", "failed_replacements", "search_space",
    )  # fmt: skip


def test_the_cli_gives_each_flagged_setting_to_the_tournament_and_to_train(tmp_path):
    """Flags the tournament had no hand-written flag for (``--learners``,
    ``--leaderboard-size``...) reach its spec; a train flag not given keeps the default."""
    from elegantpod.cli.args import check_args, parser
    from elegantpod.cli.commands import tournament_options
    from elegantpod.tournament.core.spec import make_spec, spec_names

    argv = ["tournament", "--env", "CartPole-v1", "--store", str(tmp_path), "--max-steps",
            "1000", "--learners", "2", "--leaderboard-size", "5", "--max-retries", "1",
            "--no-confirm-target", "--init", "sample", "--eval-episodes", "3"]  # fmt: skip
    args = parser().parse_args(argv)
    check_args(args)
    spec = make_spec(**spec_names(tournament_options(args)))
    assert (spec.learners, spec.leaderboard_size, spec.max_retries) == (2, 5, 1)
    assert (spec.confirm_target, spec.init, spec.eval_episodes) == (False, "sample", 3)
    assert spec.pod_spec("ppo", None).learners == 2
    args = parser().parse_args(["train", "--env", "CartPole-v1", "--algo", "ppo"])
    assert all(getattr(args, name) is None for name in flagged(PodSpec))


# -- the mechanism, on a spec of one's own ------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class Warmup(PodSettings):
    """A made-up spec with one setting more than the shared ones."""

    warmup: int = setting(
        2, limit=Limit(0, 100, integer=True), help="evaluations before any ranking"
    )
    noise: float | None = setting(None, help="observation noise")
    mode: str = setting("fast", choices=("fast", "exact"), help="how")
    verbose: bool = setting(False, flag=False)


def test_a_setting_added_to_a_spec_is_checked_flagged_and_defaulted_with_no_other_code():
    from elegantpod.cli.args import add_settings

    assert kind(Warmup, "warmup") == (int, False) and kind(Warmup, "noise") == (float, True)
    assert defaults(Warmup).warmup == 2 and defaults(Warmup).eval_episodes == 10
    spec = Warmup(env_id="CartPole-v1")
    check_settings(spec)
    for value, message in [
        (101, r"warmup must be <= 100 \(a hard limit\), got 101"),
        (-1, "warmup must be >= 0, got -1"),
        (True, "warmup must be an integer, got True"),
        (None, r"warmup must be given \(None is not a value of it\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_settings(dataclasses.replace(spec, warmup=value))
    for changes, message in [
        ({"noise": math.nan}, "noise must be a finite number, got nan"),
        ({"mode": "slow"}, r"mode must be one of \['fast', 'exact'\], got 'slow'"),
        ({"verbose": 1}, "verbose must be True or False, got 1"),
        ({"eval_episodes": 0}, "eval_episodes must be > 0, got 0"),  # inherited ones too
        ({"env_id": ""}, "env_id must be a non-empty string"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_settings(dataclasses.replace(spec, **changes))
    check_settings(dataclasses.replace(spec, noise=None, warmup=0, mode="exact"))

    p = argparse.ArgumentParser()
    add_settings(p, Warmup)
    helps = {a.dest: a.help for a in p._actions}
    assert helps["warmup"] == "evaluations before any ranking (default: 2)"
    assert "verbose" not in helps and "env_id" not in helps  # flag=False
    args = p.parse_args(["--warmup", "7", "--mode", "exact", "--learners", "3"])
    assert (args.warmup, args.mode, args.learners, args.noise) == (7, "exact", 3, None)
    with pytest.raises(SystemExit):  # argparse refuses a mode outside the choices
        p.parse_args(["--mode", "slow"])
    assert SETTING in {k for f in dataclasses.fields(Warmup) for k in f.metadata}
