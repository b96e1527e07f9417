"""Search spaces belong to the learners: ``agents/`` knows nothing of tournaments."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import elegantpod.agents
from elegantpod.agents import ALGOS, BUILTIN, get_algo, register_algo
from elegantpod.agents.ppo import PPO
from elegantpod.search.space import (
    Bound,
    Choice,
    choice,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    quniform,
    randint,
    uniform,
)
from elegantpod.search.space import Bound as SpaceBound
from elegantpod.tournament.core import generator

AGENTS = Path(elegantpod.agents.__file__).parent


def test_agents_import_nothing_from_the_tournament():
    # `import elegantpod` itself loads the tournament (its facade), so load the agents
    # package alone: an empty `elegantpod` package that only knows where its files are.
    script = textwrap.dedent(
        f"""
        import sys, types
        package = types.ModuleType("elegantpod")
        package.__path__ = [{str(AGENTS.parent)!r}]
        sys.modules["elegantpod"] = package

        from dataclasses import dataclass
        from elegantpod.agents.ppo import PPO
        from elegantpod.search.space import Bound
        from elegantpod.agents import register_algo
        from elegantpod.agents.fusion import FusedLearners

        @dataclass(frozen=True, kw_only=True)
        class Config:  # what register_algo checks a learner's config holds
            num_envs: int = 8
            horizon: int = 16
            hidden: tuple = (64,)
            lr: float = 1e-3

            def validate(self):
                pass

        @register_algo(search_space={{"lr": Bound(1e-4, 1e-2, log=True)}})
        class Mine(PPO):
            name = "mine"
            config_cls = Config

        loaded = sorted(m for m in sys.modules if m.startswith("elegantpod.tournament"))
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_no_agents_module_names_the_tournament_even_lazily():
    for path in sorted(AGENTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("elegantpod.tournament") for n in names), path.name


def test_every_builtin_learner_owns_its_space():
    assert Bound is SpaceBound
    for algo in BUILTIN:
        cls = get_algo(algo)
        assert "search_space" in vars(cls) and cls.search_space, algo
        fields = cls.config_cls.__dataclass_fields__
        assert set(cls.search_space) <= set(fields), algo
        assert generator.search_space(algo) == cls.search_space
    assert generator.search_space("td3")["policy_delay"] == Bound(1, 4, integer=True)
    assert "policy_delay" not in generator.search_space("ddpg")


def test_register_algo_sets_the_class_space():
    class Clipless(PPO):
        name = "clipless"

    space = {"lr": Bound(1e-4, 1e-3, log=True), "gamma": Bound(0.9, 0.99)}
    try:
        register_algo(Clipless)
        assert generator.search_space("clipless") == PPO.search_space  # inherited
        register_algo(Clipless, search_space=space)
        assert Clipless.search_space == space and Clipless.search_space is not space
        assert "clip_coef" in PPO.search_space  # the parent's space is untouched
        assert generator.search_space("clipless") == space
        with pytest.raises(ValueError, match="must be Bound"):
            register_algo(Clipless, search_space={"lr": (1e-4, 1e-3)})
        with pytest.raises(ValueError, match=r"unknown Clipless hyperparameters \['nope'\]"):
            register_algo(Clipless, search_space={"nope": Bound(0, 1)})
        assert Clipless.search_space == space  # a refused space changes nothing
    finally:
        ALGOS.pop("clipless", None)
    with pytest.raises(ValueError, match="unknown algorithm"):
        generator.search_space("clipless")


# -- Ray Tune's names: uniform, loguniform, randint, qrandint, choice... ------------------
def draws(domain, n=2000, seed=0):
    rng = random.Random(seed)
    return [domain.sample(rng) for _ in range(n)]


def test_constructors_follow_tunes_bounds_integrality_and_quantization():
    ints = draws(randint(2, 9))
    assert set(ints) == set(range(2, 9)) and all(type(x) is int for x in ints)  # high excluded
    assert min(Counter(ints).values()) > 2000 / 7 * 0.8  # the ends as likely as the rest
    assert set(draws(qrandint(8, 64, 8))) == set(range(8, 65, 8))  # high included
    assert set(draws(qrandint(5, 30, 10))) == {10, 20, 30}  # ends rounded inwards
    assert set(draws(qrandint(1, 5))) == {1, 2, 3, 4}  # q=1: exclusive, as Tune's
    assert set(draws(lograndint(1, 10))) == set(range(1, 10))
    assert set(draws(qlograndint(8, 64, 8))) <= set(range(8, 65, 8))
    assert {8, 64} <= set(draws(qlograndint(8, 64, 8)))
    assert all(-1.0 <= x <= 2.0 and type(x) is float for x in draws(uniform(-1, 2)))
    lr = draws(loguniform(1e-4, 1e-2))
    assert all(1e-4 <= x <= 1e-2 for x in lr)
    assert sum(x < 1e-3 for x in lr) / len(lr) == pytest.approx(0.5, abs=0.05)  # per decade
    assert set(draws(quniform(0.1, 0.5, 0.1))) == {
        0.1,
        0.2,
        0.3,
        0.4,
        0.5,
    }  # no 0.30000000000000004
    assert all(
        round(x / 0.01) * 0.01 == pytest.approx(x) for x in draws(qloguniform(0.01, 1, 0.01))
    )
    c = choice([2, 4, 8])
    assert isinstance(c, Choice) and c == Choice([2, 4, 8]) and set(draws(c)) == {2, 4, 8}
    assert 8 in randint(2, 9) and 9 not in randint(2, 9) and 12 not in qrandint(8, 64, 8)
    assert 0.25 not in quniform(0.1, 0.5, 0.1) and 3 not in c and "8" not in c
    # clip rounds onto the grid and stays inside
    assert qrandint(8, 64, 8).clip(30) == 32 and qrandint(8, 64, 8).clip(1000) == 64
    assert quniform(0.1, 0.5, 0.1).clip(0.26) == 0.3 and Bound(2, 10, integer=True, q=1).q is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Bound(2, 1), "low <= high"),
        (lambda: uniform(float("nan"), 1), "Bound low must be a finite number, got nan"),
        (lambda: uniform(True, 2), "Bound low must be a finite number, got True"),
        (lambda: uniform(0, 10**400), "Bound high must be a finite number"),
        (lambda: loguniform(0, 1), "log-scale Bound needs low > 0"),
        (lambda: randint(5, 5), r"randint\(5, 5\) holds no integer: high is exclusive"),
        (lambda: randint(1.5, 4), r"randint\(1.5, 4\) needs integer bounds"),
        (lambda: qrandint(1, 5, 0), "qrandint q must be an integer >= 1, got 0"),
        (lambda: qrandint(5, 7, 10), r"qrandint\(5, 7, 10\) holds no multiple of 10"),
        (lambda: quniform(0.15, 0.5, 0.1), "must be multiples of q=0.1"),
        (lambda: Bound(0, 10, integer=True, q=2.5), "integer Bound needs an integer q"),
        (lambda: Bound(0, 1, q=-1), "Bound q must be > 0"),
        (lambda: choice([]), "Choice needs 1 to 64 options"),
        (lambda: choice([[64, 64]]), "Choice options must be strings or numbers"),
    ],
)
def test_a_bad_domain_is_a_value_error_naming_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_plain_json_form_round_trips_every_domain_and_names_bad_ones():
    from elegantpod.search.plain import space_from_dict, space_to_dict

    ours = {
        "lr": loguniform(1e-4, 1e-2),
        "a": uniform(-1, 1),
        "b": quniform(0.1, 0.5, 0.1),
        "c": qloguniform(0.01, 1, 0.01),
        "d": randint(2, 9),
        "e": lograndint(16, 513),
        "f": qrandint(8, 64, 8),
        "g": qlograndint(8, 64, 8),
        "h": Choice(["gaussian", "ou"], prob=0.5),
    }
    space = {algo: dict(get_algo(algo).search_space) for algo in BUILTIN} | {"mine": ours}
    text = json.dumps(space_to_dict(space), allow_nan=False)
    assert space_from_dict(json.loads(text)) == space
    assert space_to_dict({"x": ours})["x"]["d"] == {"randint": [2, 9]}  # Tune's bounds
    assert space_to_dict({"x": ours})["x"]["h"] == {"choice": ["gaussian", "ou"], "prob": 0.5}
    plain = {"ppo": {"lr": {"loguniform": [1e-4, 1e-2]}, "epochs": {"choice": [2, 4, 8]}}}
    assert space_from_dict(plain) == {"ppo": {"lr": ours["lr"], "epochs": choice([2, 4, 8])}}
    for bad, message in [
        ([], r"search_space must be an object \{algorithm"),
        ({"ppo": [1]}, r"search_space\['ppo'\] must be an object \{hyperparameter: domain\}"),
        ({"ppo": {"lr": 0.1}}, r"search_space\['ppo'\]\['lr'\] must be a Bound, a Choice or"),
        ({"ppo": {"lr": {"normal": [0, 1]}}}, r"\['lr'\] must name one of uniform, logu"),
        ({"ppo": {"lr": {"uniform": [1, 2], "randint": [1, 2]}}}, "must name one of"),
        ({"ppo": {"lr": {"uniform": "1,2"}}}, "uniform takes a list of arguments, got '1,2'"),
        ({"ppo": {"lr": {"uniform": [1]}}}, "uniform takes 2 arguments, got 1"),
        ({"ppo": {"lr": {"uniform": [2, 1]}}}, r"\['lr'\] = \{'uniform': \[2, 1\]\}: Bound needs"),
        ({"ppo": {"lr": {"uniform": [1, 2], "prob": 0.5}}}, "'prob' goes with 'choice' only"),
        ({"ppo": {"x": {"choice": [1, 2], "prob": 2}}}, r"Choice prob must be in \[0, 1\]"),
        ({"ppo": {"x": {"choice": list(range(100))}}}, "Choice needs 1 to 64 options"),
    ]:
        with pytest.raises(ValueError, match=message):
            space_from_dict(bad)


def test_from_tune_converts_real_tune_domains_with_the_same_support():
    """The one test that imports Ray Tune (seconds): each Tune domain becomes ours, and
    every value Tune's own sampler draws is one of ours (the same set, for the discrete)."""
    import numpy as np
    from ray import tune

    from elegantpod.search.tune import from_tune

    tuned = {
        "u": tune.uniform(-1, 2),
        "lu": tune.loguniform(1e-4, 1e-2),
        "qu": tune.quniform(0.1, 0.5, 0.1),
        "qlu": tune.qloguniform(0.01, 1.0, 0.01),
        "ri": tune.randint(2, 9),
        "lri": tune.lograndint(1, 10),
        "qri": tune.qrandint(8, 64, 8),
        "qri1": tune.qrandint(1, 5),
        "qlri": tune.qlograndint(8, 64, 8),
        "c": tune.choice(["a", 2, 4.5]),
    }
    ours = from_tune(tuned)
    assert ours["lu"] == loguniform(1e-4, 1e-2) and ours["ri"] == randint(2, 9)
    assert ours["qri"] == qrandint(8, 64, 8) and ours["c"] == choice(["a", 2, 4.5])
    for key, domain in tuned.items():
        theirs = domain.sample(size=3000, random_state=np.random.default_rng(0))
        assert all(x in ours[key] for x in theirs), key
        if key in ("qu", "ri", "lri", "qri", "qri1", "c"):
            same = lambda xs: {round(x, 9) if isinstance(x, float) else x for x in xs}  # noqa: E731
            assert same(theirs) == same(draws(ours[key], 3000)), key
    assert from_tune({"ppo": {"lr": tuned["lu"]}}) == {"ppo": {"lr": ours["lu"]}}  # per algo
    for bad, message in [
        ({"x": tune.randn(0, 1)}, r"search space\['x'\] = tune Float.*randn has no bounds"),
        ({"x": tune.sample_from(lambda c: 1)}, r"\['x'\] .*sample_from runs a function"),
        ({"x": tune.grid_search([1, 2])}, r"\['x'\] .*a grid search is not a distribution"),
        ({"ppo": {"x": 0.1}}, r"\['ppo'\]\['x'\] = 0.1: not a Tune domain"),
        ({"x": tune.choice([[64, 64]])}, r"\['x'\] = tune Categorical.*strings or numbers"),
    ]:
        with pytest.raises(ValueError, match=message):
            from_tune(bad)
    # a tournament takes Tune's domains as they are, converted by the same rule
    from elegantpod.tournament.core.search_spaces import normalize

    assert normalize({"PPO": {"lr": tuned["lu"]}}) == {"ppo": {"lr": ours["lu"]}}
