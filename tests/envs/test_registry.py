from pathlib import Path

import gymnasium
import pytest
import torch

from elegantpod.envs.base import TorchVecEnv
from elegantpod.envs.classic import NATIVE_ENVS, CartPole
from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.limits import MAX_SEED
from elegantpod.envs.registry import (
    CUSTOM_ENVS,
    CUSTOM_PATH_KWARGS,
    available_envs,
    external_sources,
    make_env,
    path_kwargs,
)


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


# -- issue 29: path keywords, and numbers bounded before any work ---------------------


def test_model_files_count_as_sources_unless_gymnasium_ships_them():
    kwargs = {"xml_file": "/srv/shared/model.xml", "ctrl_cost_weight": 0.1}
    assert external_sources(kwargs, "Hopper-v5") == {"xml_file": "/srv/shared/model.xml"}
    assert external_sources(kwargs) == {"xml_file": "/srv/shared/model.xml"}  # any env
    for escaping in ("../hopper.xml", "./hopper.xml", "~/hopper.xml", "assets/hopper.xml"):
        assert external_sources({"xml_file": escaping}, "Hopper-v5") == {"xml_file": escaping}
    assert external_sources({"xml_file": "hopper.xml", "data": "sp500"}, "Hopper-v5") == {}
    assert external_sources({"xml_file": None}, "Hopper-v5") == {}


def test_a_model_file_error_never_quotes_the_file(tmp_path):
    """The XML parser's error quoted the file (``Element 'secret_token_ABC123'``)."""
    secret = tmp_path / "model.xml"
    secret.write_text("<secret_token_ABC123/>")
    with pytest.raises(ValueError, match=r"'Hopper-v5' with xml_file=.*model\.xml") as e:
        make_env("Hopper-v5", xml_file=str(secret))
    assert "secret_token" not in str(e.value) and e.value.__suppress_context__


class _MapEnv(TorchVecEnv):
    """A custom env that reads a file named by a keyword, and quotes it on error."""

    env_id = "MapFile-v0"
    path_kwargs = ("map_file",)

    def __init__(self, num_envs=1, device="cpu", seed=None, map_file=None, level=None):
        if map_file is not None:
            raise ValueError(f"bad map: {Path(map_file).read_text()}")
        super().__init__(num_envs, device, seed)


def test_custom_envs_declare_their_path_keywords(tmp_path):
    from elegantpod.envs.registry import register_env

    register_env("MapFile-v0", _MapEnv)
    register_env("MapLevel-v0", _MapEnv, path_kwargs=["level"])
    try:
        assert {"data", "xml_file", "map_file"} <= path_kwargs("MapFile-v0")
        assert "level" not in path_kwargs("MapFile-v0")
        assert {"map_file", "level"} <= path_kwargs("MapLevel-v0") <= path_kwargs()
        assert external_sources({"level": "/x", "map_file": "/y"}, "MapLevel-v0").keys() == {
            "level",
            "map_file",
        }
        secret = tmp_path / "map.txt"
        secret.write_text("secret_token_ABC123")
        with pytest.raises(ValueError, match=r"'MapFile-v0' with map_file=.*map\.txt") as e:
            make_env("MapFile-v0", map_file=str(secret))
        assert "secret_token" not in str(e.value)
        with pytest.raises(ValueError, match="path_kwargs must be a list"):
            register_env("MapBad-v0", _MapEnv, path_kwargs="level")
    finally:
        for env_id in ("MapFile-v0", "MapLevel-v0", "MapBad-v0"):
            NATIVE_ENVS.pop(env_id, None)
            CUSTOM_ENVS.pop(env_id, None)
            CUSTOM_PATH_KWARGS.pop(env_id, None)


def test_a_store_naming_a_model_file_is_refused_unless_the_user_passes_it():
    from elegantpod.tournament.core.spec import TournamentSpec, check_sources

    spec = TournamentSpec(env_id="Hopper-v5", algos=("sac",), env_kwargs={"xml_file": "/m.xml"})
    with pytest.raises(ValueError, match="names data to read in env_kwargs.*xml_file"):
        check_sources("store", spec, {}, False)
    check_sources("store", spec, {"env_kwargs": {"xml_file": "/m.xml"}}, False)
    check_sources("store", spec, {}, True)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "MountainCar-v0"])  # native, adapter
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(num_envs=10**9), "num_envs must be <= 16,777,216, got 1000000000"),
        (dict(num_envs=True), "num_envs must be an integer, got True"),
        (dict(num_envs=2.5), "num_envs must be an integer, got 2.5"),
        (dict(seed=2**64), "seed must be <= 4,611,686,018,427,387,904, got 18446744073709551616"),
        (dict(seed=-(2**64)), "seed must be >= -4,611,686,018,427,387,904"),
        (dict(seed=10**5000), "seed must be <= .*, got a 16610-bit number"),
        (dict(max_episode_steps=-1), "max_episode_steps must be >= 1, got -1"),
        (dict(max_episode_steps=10**18), "max_episode_steps must be <= 1,000,000,000"),
        (dict(max_episode_steps="5"), "max_episode_steps must be an integer, got '5'"),
    ],
)
def test_numbers_are_bounded_before_any_env_is_built(env_id, kwargs, message, monkeypatch):
    """Issue 29, item 10: seed=2**64 and max_episode_steps=10**18 failed late with
    OverflowError, max_episode_steps=-1 was taken, num_envs had no bound."""
    monkeypatch.setattr(gymnasium, "make_vec", None)  # nothing may be built
    monkeypatch.setattr(TorchVecEnv, "__init__", None)
    with pytest.raises(ValueError, match=message):
        make_env(env_id, **kwargs)


def test_seeds_in_bounds_work_and_gymnasium_ones_are_non_negative():
    env = make_env("CartPole-v1", 2, seed=MAX_SEED)
    env.reset(seed=-MAX_SEED)
    env.step(torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="gymnasium's envs take seeds >= 0, got -3"):
        make_env("MountainCar-v0", seed=-3)
    assert make_env("MountainCar-v0", seed=MAX_SEED, max_episode_steps=10**9).reset().shape == (
        1,
        2,
    )


def test_packaged_envs_come_from_the_entry_point_group_not_from_a_name_in_the_registry():
    """The trading env is found as any package's env would be: through the
    ``elegantpod.envs`` entry points of the installed metadata, imported when used. The
    generic registry names no domain (issue 43)."""
    import ast
    import importlib.metadata
    from pathlib import Path

    from elegantpod.envs import registry

    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="elegantpod.envs")}
    assert points["StockTrading-v0"] == "elegantpod.finance.trading.env:StockTradingEnv"
    assert set(registry.packaged_envs()) == set(points)
    assert "StockTrading-v0" in registry.available_envs()
    assert registry.env_hooks("StockTrading-v0").fitness_advice().startswith("evaluate over")
    assert registry.env_hooks("CartPole-v1").fitness_advice() is None
    with pytest.raises(ValueError, match="'StockTrading-v0' is a built-in env"):
        registry.register_env("StockTrading-v0", type("Mine", (), {}))
    # code, not docstrings: no string of the registry names the finance part or its env
    tree = ast.parse(Path(registry.__file__).read_text())
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docs
    strings = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]
    assert not [s for s in strings if "finance" in s or "StockTrading" in s or "trading" in s]


@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """An installed package with ``elegantpod.envs`` entry points: a ``*.dist-info`` on
    ``sys.path``, found by ``importlib.metadata`` as pip's would be."""
    from elegantpod.envs import registry

    def install(name: str, entries: dict[str, str]) -> None:
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
        (info / "entry_points.txt").write_text(f"[elegantpod.envs]\n{lines}")
        monkeypatch.syspath_prepend(str(tmp_path))
        registry.declared_envs.cache_clear()

    yield install
    monkeypatch.undo()
    registry.declared_envs.cache_clear()


def test_a_plugin_cannot_take_over_an_id_that_is_already_registered(plugin_dist):
    """A package's entry point named ``CartPole-v1`` took the id over from elegantpod's
    native env (and ``MountainCar-v0`` from gymnasium): refused, the original kept."""
    import importlib.metadata
    import sys

    from elegantpod.envs import registry

    taken = ("CartPole-v1", "MountainCar-v0", "StockTrading-v0")
    plugin_dist("grabby", {**dict.fromkeys(taken, "grabby_envs:Grab"), "Fresh-v0": "grabby_envs:F"})
    found = {ep.name for ep in importlib.metadata.entry_points(group=registry.ENTRY_POINTS)}
    assert {"Fresh-v0", *taken} <= found  # the package is installed, as pip would have it
    with pytest.warns(UserWarning) as caught:
        envs = registry.packaged_envs()
    messages = " ".join(str(w.message) for w in caught)
    for env_id in taken:
        assert f"'grabby_envs:Grab' of the package 'grabby' names the env {env_id!r}" in messages
    assert "already a native env" in messages and "already a gymnasium env" in messages
    assert envs["Fresh-v0"].value == "grabby_envs:F"  # a new id is fine
    assert envs["StockTrading-v0"].value == "elegantpod.finance.trading.env:StockTradingEnv"
    assert isinstance(make_env("CartPole-v1", 2), CartPole)
    assert isinstance(make_env("MountainCar-v0", 2), GymVecEnv)
    assert "grabby_envs" not in sys.modules  # nothing of the package was imported
