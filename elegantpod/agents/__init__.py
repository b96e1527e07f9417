"""Learners, one algorithm per module, all on the ``Learner`` protocol."""

from elegantpod.agents.base import Learner
from elegantpod.agents.ddpg import DDPG, DDPGConfig
from elegantpod.agents.dqn import DQN, DQNConfig
from elegantpod.agents.ppo import PPO, PPOConfig
from elegantpod.agents.sac import SAC, SACConfig
from elegantpod.agents.td3 import TD3, TD3Config

ALGOS: dict[str, type[Learner]] = {"ppo": PPO, "sac": SAC, "td3": TD3, "ddpg": DDPG, "dqn": DQN}


def get_algo(name: str) -> type[Learner]:
    """The learner class for ``name``; raises ``ValueError`` naming an unknown one."""
    try:
        return ALGOS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; choose one of {', '.join(sorted(ALGOS))}"
        ) from None


__all__ = [
    "ALGOS",
    "DDPG",
    "DQN",
    "PPO",
    "SAC",
    "TD3",
    "DDPGConfig",
    "DQNConfig",
    "Learner",
    "PPOConfig",
    "SACConfig",
    "TD3Config",
    "get_algo",
]
