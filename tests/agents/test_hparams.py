"""A hyperparameter is declared once, in its config field (issue 43): the learner's search
space, its structural hyperparameters, the key columns and the hard limits are all read
from there, and a subclass that changes a default keeps the rest."""

import dataclasses

import pytest

from elegantpod.agents import ALGOS, BUILTIN
from elegantpod.agents.dqn import DQNConfig
from elegantpod.agents.hparams import (
    HPARAM,
    declared,
    hparam,
    inherit,
    key_names,
    limits,
    search_space,
    structural,
)
from elegantpod.agents.offpolicy import OffPolicyConfig
from elegantpod.agents.ppo import PPOConfig
from elegantpod.checks.limits import Limit
from elegantpod.search.space import Bound
from elegantpod.widgets.html import key_hparams


@pytest.mark.parametrize("algo", sorted(BUILTIN))
def test_a_learner_reads_everything_from_its_config_fields(algo):
    learner = ALGOS[algo]
    config = learner.config_cls
    assert learner.search_space == search_space(config) and "lr" in learner.search_space
    assert learner.structural_hparams == structural(config)
    assert learner.key_hparams == key_names(config) and "lr" in learner.key_hparams
    # every field is declared (no plain default left behind without its limit or role)
    assert set(declared(config)) == {f.name for f in dataclasses.fields(config)}
    # a domain never reaches past its hard limit
    for name, domain in learner.search_space.items():
        limit = limits(config).get(name)
        if isinstance(domain, Bound):
            assert limit is not None and limit.low <= domain.low <= domain.high <= limit.high


def test_structural_and_key_columns_are_what_the_learners_said_before():
    assert ALGOS["ppo"].structural_hparams == ("num_envs", "horizon", "normalize_obs", "hidden")
    assert ALGOS["sac"].structural_hparams == ("num_envs", "buffer_size", "hidden")
    assert ALGOS["dqn"].structural_hparams == ("num_envs", "buffer_size", "hidden", "dueling")
    assert ALGOS["ppo"].key_hparams == ("lr", "clip_coef", "epochs")
    assert ALGOS["td3"].key_hparams == ("lr", "tau", "policy_delay")
    assert ALGOS["dqn"].key_hparams == ("lr", "batch_size", "target_update_every")
    # the dashboard's and the static table's key columns are the learner's
    text = key_hparams("ppo", {"lr": 0.003, "clip_coef": 0.2, "epochs": 4, "gamma": 0.9})
    assert str(text) == "lr=0.003 clip_coef=0.2 epochs=4"
    assert str(key_hparams("from-elsewhere", {"lr": 0.1, "tau": 1})) == "lr=0.1"


def test_a_learner_derives_its_three_lists_from_the_config_it_names():
    """``Learner.__init_subclass__``: the config's fields are the one home; a value in the
    class body wins; a config of plain fields leaves what the class inherits."""
    from elegantpod.agents.base import Learner
    from elegantpod.agents.ppo import PPO

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class MineConfig:
        width: int = hparam(8, limit=Limit(1, 64, integer=True), structural=True)
        rate: float = hparam(0.1, search=Bound(0.01, 1.0), key=True)

    class Mine(Learner):
        config_cls = MineConfig

    assert Mine.search_space == {"rate": Bound(0.01, 1.0)}
    assert Mine.structural_hparams == ("width",) and Mine.key_hparams == ("rate",)

    class Narrower(Learner):
        config_cls = MineConfig
        search_space = {"rate": Bound(0.05, 0.5)}

    assert Narrower.search_space == {"rate": Bound(0.05, 0.5)}
    assert Narrower.structural_hparams == ("width",)

    @dataclasses.dataclass(frozen=True)
    class Plain(PPOConfig):
        extra: int = 3

    class PlainPPO(PPO):
        config_cls = Plain  # inherits PPO's declared fields: derived from them

    assert PlainPPO.search_space == PPO.search_space

    @dataclasses.dataclass(frozen=True)
    class Undeclared:
        lr: float = 1e-3

    class Bare(PPO):
        config_cls = Undeclared  # declares nothing: PPO's lists stay

    assert Bare.search_space == PPO.search_space and Bare.key_hparams == PPO.key_hparams


def test_inherit_changes_the_default_and_keeps_the_declaration():
    base = {f.name: f for f in dataclasses.fields(OffPolicyConfig)}
    mine = {f.name: f for f in dataclasses.fields(DQNConfig)}
    assert mine["lr"].default == 2e-3 and base["lr"].default == 1e-3
    assert mine["lr"].metadata[HPARAM] == base["lr"].metadata[HPARAM]
    assert mine["tau"].metadata[HPARAM].search is None  # DQN copies its target, no search
    assert mine["tau"].metadata[HPARAM].limit == base["tau"].metadata[HPARAM].limit
    with pytest.raises(ValueError, match="OffPolicyConfig declares no hyperparameter 'clip'"):
        inherit(OffPolicyConfig, "clip", 0.1)


def test_a_limit_declared_in_a_field_is_enforced_by_validate():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Mine:
        width: int = hparam(8, limit=Limit(1, 64, integer=True), structural=True)
        rate: float = hparam(0.1, search=Bound(0.01, 1.0), key=True)

        def validate(self):
            from elegantpod.checks.limits import check_limits

            check_limits(self, limits(Mine))

    Mine().validate()
    with pytest.raises(ValueError, match="width must be <= 64"):
        Mine(width=65).validate()
    assert search_space(Mine) == {"rate": Bound(0.01, 1.0)}
    assert structural(Mine) == ("width",) and key_names(Mine) == ("rate",)
    assert limits(PPOConfig)["lr"] == Limit(0.0, 1.0, open_low=True)
