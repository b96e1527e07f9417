"""Learners, one algorithm per module, all on the ``Learner`` protocol."""

from elegantpod.agents.base import Learner
from elegantpod.agents.ppo import PPO, PPOConfig
from elegantpod.agents.sac import SAC, SACConfig

ALGOS: dict[str, type[Learner]] = {"ppo": PPO, "sac": SAC}


def get_algo(name: str) -> type[Learner]:
    """The learner class for ``name``; raises ``ValueError`` naming an unknown one."""
    try:
        return ALGOS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; choose one of {', '.join(sorted(ALGOS))}"
        ) from None


__all__ = ["ALGOS", "PPO", "SAC", "Learner", "PPOConfig", "SACConfig", "get_algo"]
