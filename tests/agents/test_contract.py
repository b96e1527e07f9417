"""The learner contract checked at ``register_algo`` (issue 59, item 1): a learner of
your own missing any required piece gets one clear error naming it, and a config whose
fields share names with the built-ins' but mean other things is never read by name."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from elegantpod.agents import ALGOS, register_algo
from elegantpod.agents.base import Learner
from elegantpod.config import PodSpec
from elegantpod.pod.memory import estimate_pod_bytes, network_params


@dataclasses.dataclass(frozen=True)
class WalkConfig:
    num_envs: int = 4
    horizon: int = 8
    hidden: int = 64  # an int, where the built-ins hold a tuple of widths
    buffer_size: str = "none"  # a built-in's field name, meaning something else

    def validate(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden!r}")


class Walk(Learner):
    name = "walk"
    config_cls = WalkConfig
    is_on_policy = True

    def explore(self, obs):
        a = torch.zeros(obs.shape[0], dtype=torch.int64)
        return a, a

    def act(self, obs, deterministic=True):
        return torch.zeros(obs.shape[0], dtype=torch.int64)

    def update(self, batch):
        return {"walk/loss": 0.0}


def _variant(**changes):
    return type("Variant", (Walk,), {"name": "variant", **changes})


def _config(**fields):
    """WalkConfig with ``fields`` replaced (name: (type, default)) or removed (None)."""
    keep = {f.name: (f.type, f.default) for f in dataclasses.fields(WalkConfig)}
    keep.update(fields)
    spec = [(k, t, dataclasses.field(default=d)) for k, v in keep.items() if v for t, d in [v]]
    return dataclasses.make_dataclass(
        "Cfg", spec, frozen=True, namespace={"validate": WalkConfig.validate}
    )


@pytest.fixture
def registered():
    yield
    for name in ("walk", "variant"):
        ALGOS.pop(name, None)


def test_a_learner_that_keeps_the_contract_registers_and_its_fields_are_its_own(registered):
    register_algo(Walk)
    spec = PodSpec(env_id="CartPole-v1", algo="walk", hparams=WalkConfig())
    # the pod reads num_envs and horizon; hidden (an int) and buffer_size are the learner's
    assert estimate_pod_bytes(spec, 4, 2) == 4 * 8 * 4 * (2 * 4 + 2 + 3) + (4 + 10) * 16 * 4
    assert network_params(spec, 4, 2) == 0


def _no_update():
    cls = type("NoUpdate", (Learner,), {"name": "variant", "config_cls": WalkConfig,
                                         "is_on_policy": True, "explore": Walk.explore,
                                         "act": Walk.act})  # fmt: skip
    return cls


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (_no_update, "NoUpdate does not define update"),
        (lambda: _variant(is_on_policy=None), "needs a class attribute is_on_policy"),
        (
            lambda: _variant(config_cls=dataclasses.dataclass(type("C", (), {}))),
            "must be a frozen dataclass",
        ),
        (
            lambda: _variant(
                config_cls=dataclasses.make_dataclass("C", [("num_envs", int)], frozen=True)
            ),
            "must build the default config with no arguments",
        ),
        (lambda: _variant(config_cls=_config(horizon=None)), "integer field 'horizon'"),
        (lambda: _variant(config_cls=_config(num_envs=(float, 4.0))), "integer field 'num_envs'"),
        (
            lambda: _variant(
                config_cls=dataclasses.make_dataclass(
                    "C", [("num_envs", int, 4), ("horizon", int, 8)], frozen=True
                )
            ),
            "needs a validate\\(\\) method",
        ),
        (lambda: _variant(config_cls=_config(hidden=(int, 0))), "fails its own validate"),
        (
            lambda: _variant(memory_bytes=classmethod(lambda c, cfg, o, a, **k: sum(cfg.hidden))),
            "memory_bytes\\(config, obs_dim=4, act_dim=2\\) raised TypeError",
        ),
        (lambda: _variant(actor_params=classmethod(lambda c, cfg, o, a: -1)), "whole number"),
        (lambda: _variant(deployed=lambda *a: None), "deployed must be a classmethod"),
    ],
)
def test_each_missing_piece_gets_its_one_clear_error_at_register_algo(make, named, registered):
    cls = make()
    with pytest.raises(ValueError, match=named):
        register_algo(cls)
    assert "variant" not in ALGOS
