"""elegantpod: Jupyter-first, cloud-native deep reinforcement learning.

Batched torch environments, PPO, SAC, TD3, DDPG and DQN learners, and pods (worker + learner +
evaluator) that train, evaluate and checkpoint themselves.

>>> import elegantpod
>>> result = elegantpod.train("CartPole-v1", "ppo", target_reward=475)  # doctest: +SKIP
"""

from elegantpod import finance
from elegantpod.agents import (
    ALGOS,
    DDPG,
    DQN,
    PPO,
    SAC,
    TD3,
    DDPGConfig,
    DQNConfig,
    PPOConfig,
    SACConfig,
    TD3Config,
    get_algo,
)
from elegantpod.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from elegantpod.cluster import cluster, gateway_cluster, shutdown
from elegantpod.config import PodSpec
from elegantpod.envs import available_envs, make_env, register_env
from elegantpod.pod import Evaluator, Pod, Worker
from elegantpod.tournament import Tournament, TournamentSpec
from elegantpod.training import train
from elegantpod.types import Batch, EvalResult, Progress, TrainResult

__version__ = "0.1.0"

__all__ = [
    "ALGOS",
    "DDPG",
    "DQN",
    "PPO",
    "SAC",
    "TD3",
    "DDPGConfig",
    "DQNConfig",
    "TD3Config",
    "Batch",
    "CheckpointError",
    "EvalResult",
    "Evaluator",
    "Pod",
    "PPOConfig",
    "PodSpec",
    "Progress",
    "SACConfig",
    "TrainResult",
    "Worker",
    "Tournament",
    "TournamentSpec",
    "available_envs",
    "cluster",
    "gateway_cluster",
    "shutdown",
    "finance",
    "get_algo",
    "load_checkpoint",
    "make_env",
    "register_env",
    "save_checkpoint",
    "train",
]
