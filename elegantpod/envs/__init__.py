"""Batched environments: native torch envs, the gymnasium and Isaac Gym adapters, MJX
locomotion, ``make_env``."""

from elegantpod.envs.base import TorchVecEnv, VecEnv
from elegantpod.envs.classic import Acrobot, CartPole, MountainCarContinuous, Pendulum
from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.isaac import IsaacVecEnv, make_isaac_env
from elegantpod.envs.mjx import MjxVecEnv
from elegantpod.envs.registry import (
    available_envs,
    check_env_id,
    check_eval_env,
    make_env,
    register_env,
)

__all__ = [
    "Acrobot",
    "CartPole",
    "GymVecEnv",
    "IsaacVecEnv",
    "MjxVecEnv",
    "MountainCarContinuous",
    "Pendulum",
    "TorchVecEnv",
    "VecEnv",
    "available_envs",
    "check_eval_env",
    "check_env_id",
    "make_env",
    "make_isaac_env",
    "register_env",
]
