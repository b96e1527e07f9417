"""Batched environments: native torch envs, the gymnasium adapter and ``make_env``."""

from elegantpod.envs.base import TorchVecEnv, VecEnv
from elegantpod.envs.classic import Acrobot, CartPole, MountainCarContinuous, Pendulum
from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.registry import available_envs, check_env_id, check_eval_env, make_env

__all__ = [
    "Acrobot",
    "CartPole",
    "GymVecEnv",
    "MountainCarContinuous",
    "Pendulum",
    "TorchVecEnv",
    "VecEnv",
    "available_envs",
    "check_eval_env",
    "check_env_id",
    "make_env",
]
