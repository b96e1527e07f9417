"""Batched environments: native torch envs, the gymnasium and Isaac Gym adapters, MJX
locomotion, ``make_env``.

- ``base``: the VecEnv protocol (same-step auto-reset, ``info["final_obs"]``) and
  ``TorchVecEnv``, the base of native envs; ``limits``: sizes, seeds and time limits.
- ``classic``: native torch envs (CartPole, Pendulum, MountainCar...); ``fused_step``:
  a native step as one compiled region; ``noise``: counter-based reset draws.
- ``gym``: any gymnasium env or vector env, flattened or as images, held to the
  observation space it declares; ``spaces``: the env's own observation space as a
  checkpoint records it, and its observations flattened for a deployed policy.
- ``user_gym``: your own gymnasium env, shipped to the workers.
- ``isaac``: Isaac Gym's VecTask adapter; ``mjx/``: MuJoCo locomotion on MJX.
- ``registry``: ``make_env``, ``register_env``; ``hooks``: what an env class adds to
  tournaments (baselines, leaderboard columns, the layout checkpoints record).
"""

from elegantpod.envs.base import TorchVecEnv, VecEnv
from elegantpod.envs.classic import Acrobot, CartPole, MountainCarContinuous, Pendulum
from elegantpod.envs.gym import GymVecEnv
from elegantpod.envs.isaac import IsaacVecEnv, make_isaac_env
from elegantpod.envs.mjx.env import MjxVecEnv
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
