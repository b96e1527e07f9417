"""An env class adds baselines, leaderboard columns and shipped values through the hooks
of ``EnvHooks``, found by env id; the generic layers know nothing else of it."""

from __future__ import annotations

import pytest

from elegantpod.envs.classic import NATIVE_ENVS, CartPole
from elegantpod.envs.hooks import EnvHooks
from elegantpod.envs.registry import (
    CUSTOM_ENVS,
    CUSTOM_PATH_KWARGS,
    env_hooks,
    external_sources,
    register_env,
)


class Scored(CartPole):
    """CartPole with something to add to a tournament."""

    env_id = "Scored-v0"
    path_kwargs = ("level_file",)
    asked = 0

    def __init__(self, num_envs=1, device="cpu", seed=None, level_file=None, **kwargs):
        super().__init__(num_envs, device, seed, **kwargs)

    @classmethod
    def shipped_values(cls, key):
        return frozenset({"level-1"}) if key == "level_file" else frozenset()

    @classmethod
    def baselines(cls, env_kwargs, eval_env_kwargs, fitness):
        cls.asked += 1
        return {"random policy": 22.0, "level": len(eval_env_kwargs.get("level_file", ""))}

    @classmethod
    def leaderboard_columns(cls, board, trials, spec):
        board.attrs["trials"] = trials
        return {"doubled": [2 * s for s in board["score_mean"]]}

    @classmethod
    def leaderboard_notes(cls, board):
        return [f"doubled: twice the score, over {board.attrs['trials']} trials"]


@pytest.fixture
def scored():
    register_env("Scored-v0", Scored)
    Scored.asked = 0
    yield Scored
    NATIVE_ENVS.pop("Scored-v0", None)
    CUSTOM_ENVS.pop("Scored-v0", None)
    CUSTOM_PATH_KWARGS.pop("Scored-v0", None)


def test_envs_without_hooks_get_the_defaults_that_add_nothing():
    for env_id in ("CartPole-v1", "LunarLander-v3", "Hopper-v5"):
        hooks = env_hooks(env_id)
        assert issubclass(hooks, EnvHooks)
        assert hooks.baselines({}, {}, "return") == {}
        assert hooks.leaderboard_columns(None, 3, None) == {}
        assert hooks.leaderboard_notes(None) == []
        assert hooks.shipped_values("data") == frozenset()
    assert env_hooks("CartPole-v1") is CartPole and env_hooks("Hopper-v5") is EnvHooks


def test_the_trading_env_is_found_by_id_and_names_its_samples():
    hooks = env_hooks("StockTrading-v0")
    assert hooks.__name__ == "StockTradingEnv"
    assert "sp500" in hooks.shipped_values("data") and not hooks.shipped_values("tickers")


def test_a_registered_env_names_its_shipped_values(scored):
    assert external_sources({"level_file": "level-1"}, "Scored-v0") == {}
    assert external_sources({"level_file": "/srv/level-2"}, "Scored-v0") == {
        "level_file": "/srv/level-2"
    }


def test_a_tournament_asks_the_env_class_once_and_adds_its_columns(scored, tmp_path):
    from elegantpod import Tournament

    t = Tournament(
        env="Scored-v0",
        pods=2,
        max_steps=10,
        store=tmp_path / "s",
        eval_env_kwargs={"level_file": "level-1"},
    )
    assert t.baselines() == {"random policy": 22.0, "level": 7}
    assert t.baselines() == {"random policy": 22.0, "level": 7} and Scored.asked == 1
    board = t.leaderboard
    assert list(board.columns[-1:]) == ["doubled"] and board.attrs == {
        "trials": 0,
        "env_columns": ["doubled"],
    }
    assert env_hooks("Scored-v0").leaderboard_notes(board) == [
        "doubled: twice the score, over 0 trials"
    ]
    assert "Baselines" in t._repr_html_() and "random policy" in t._repr_html_()
