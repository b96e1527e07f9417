"""Search spaces belong to the learners: ``agents/`` knows nothing of tournaments."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import elegantpod.agents
from elegantpod.agents import ALGOS, BUILTIN, PPO, Bound, get_algo, register_algo
from elegantpod.agents.space import Bound as SpaceBound
from elegantpod.tournament import generator

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
        from elegantpod.agents import PPO, Bound, register_algo
        from elegantpod.agents.fusion import FusedLearners

        @dataclass(frozen=True, kw_only=True)
        class Config:
            lr: float = 1e-3

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
    assert generator.Bound is Bound is SpaceBound  # the old import path still works
    for algo in BUILTIN:
        cls = get_algo(algo)
        assert "search_space" in vars(cls) and cls.search_space, algo
        fields = cls.config_cls.__dataclass_fields__
        assert set(cls.search_space) <= set(fields), algo
        assert generator.search_space(algo) == cls.search_space
        assert dict(generator.SEARCH_SPACES[algo]) == cls.search_space
    assert generator.search_space("td3")["policy_delay"] == Bound(1, 4, integer=True)
    assert "policy_delay" not in generator.search_space("ddpg")


def test_register_algo_sets_the_class_space_and_search_spaces_is_read_only():
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
        assert dict(generator.SEARCH_SPACES["clipless"]) == space  # a live view
        with pytest.raises(TypeError):
            generator.SEARCH_SPACES["clipless"] = {}  # type: ignore[index]
        with pytest.raises(TypeError):
            generator.SEARCH_SPACES["ppo"]["lr"] = Bound(0.1, 0.2)  # type: ignore[index]
        with pytest.raises(ValueError, match="must be Bound"):
            register_algo(Clipless, search_space={"lr": (1e-4, 1e-3)})
        with pytest.raises(ValueError, match=r"unknown Clipless hyperparameters \['nope'\]"):
            register_algo(Clipless, search_space={"nope": Bound(0, 1)})
        assert Clipless.search_space == space  # a refused space changes nothing
    finally:
        ALGOS.pop("clipless", None)
    assert "clipless" not in generator.SEARCH_SPACES
    with pytest.raises(ValueError, match="unknown algorithm"):
        generator.search_space("clipless")
