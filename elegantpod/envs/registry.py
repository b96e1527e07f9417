"""``make_env``: the one way to get a batched env, native where we have one."""

from __future__ import annotations

import difflib

import gymnasium
import torch

from elegantpod.envs.base import VecEnv
from elegantpod.envs.classic import NATIVE_ENVS
from elegantpod.envs.gym import GymVecEnv


def available_envs() -> list[str]:
    """Ids with a native torch implementation (any gymnasium id works too)."""
    return sorted(NATIVE_ENVS)


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` naming ``env_id`` when neither we nor gymnasium know it."""
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    if env_id in NATIVE_ENVS or env_id in gymnasium.registry:
        return
    known = list(NATIVE_ENVS) + list(gymnasium.registry)
    close = difflib.get_close_matches(env_id, known, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown env id {env_id!r}: not a native env ({', '.join(available_envs())}) "
        f"nor a registered gymnasium env{hint}"
    )


def make_env(
    env_id: str,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    *,
    native: bool | None = None,
    **kwargs,
) -> VecEnv:
    """Build a batched env of ``num_envs`` sub-envs returning tensors on ``device``.

    Parameters
    ----------
    env_id
        A native id (see :func:`available_envs`) or any registered gymnasium id.
    num_envs
        Sub-envs stepped together; native envs handle hundreds of thousands per device.
    device
        Torch device for state (native) or returned tensors (adapter).
    seed
        Seed for reset noise; the same seed gives the same episodes.
    native
        ``None`` picks the native env when one exists; ``False`` forces the gymnasium
        adapter (useful for parity checks); ``True`` requires a native env.
    **kwargs
        Forwarded to the env class (native: ``max_episode_steps``; adapter:
        ``vectorization_mode`` and ``gymnasium.make_vec`` keywords).
    """
    check_env_id(env_id)
    if int(num_envs) < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs!r}")
    torch.device(device)  # raises on a malformed device string before any work
    use_native = env_id in NATIVE_ENVS if native is None else native
    if use_native:
        if env_id not in NATIVE_ENVS:
            raise ValueError(f"no native env for {env_id!r}; native ids: {available_envs()}")
        return NATIVE_ENVS[env_id](num_envs=num_envs, device=device, seed=seed, **kwargs)
    return GymVecEnv(env_id, num_envs=num_envs, device=device, seed=seed, **kwargs)
