"""How much memory a pod will allocate, and a refusal when its device lacks it.

Why: a pod preallocates its rollouts, replay and networks as device tensors; past the
device's memory that allocation ends the process with a raw error, or swaps the machine
to a halt. A spec is checked against :func:`estimate_pod_bytes` before the pod is built,
and a tournament sizes its GPU workers by its largest pod's estimate.
"""

from __future__ import annotations

from typing import Any

from elegantpod.agents import get_algo
from elegantpod.config import PodSpec
from elegantpod.devices import available_bytes
from elegantpod.pod.capture import STATIC_UPDATE


def estimate_pod_bytes(
    spec: PodSpec, obs_dim: int = 1, act_dim: int = 1, *, pixels: bool = False
) -> int:
    """About how many bytes a pod of ``spec`` allocates, for ``obs_dim`` observation
    dimensions and ``act_dim`` action dimensions (or discrete choices); ``pixels``:
    the observations are images, which a replay keeps as one byte a value.

    Why: rollouts, replays and networks are preallocated tensors; past the device's
    memory their allocation ends the process with a raw error, or swaps the machine to
    a halt. With the default dimensions of 1 it is a lower bound, usable before an env exists
    to tell them.

    The pod counts what it allocates itself (the rollout's ``horizon * num_envs``
    transitions, float32, two observations each; the training and evaluation envs'
    state and the worlds a simulator outside torch keeps per sub-env, MJX's: see
    :func:`~elegantpod.envs.mjx.memory.bytes_per_world`), and asks the learner for the
    rest, once per fused learner (:meth:`~elegantpod.agents.base.Learner.memory_bytes`:
    a replay, networks with gradients and Adam moments, an update's activations,
    exploration noise, and for a pod that may replay its iterations as CUDA graphs,
    :func:`may_capture`, the graphs' private pool). Only the learner knows what its
    config's fields mean: none is read here by name but the contract's ``num_envs`` and
    ``horizon``.
    """
    hp = spec.hparams if spec.hparams is not None else _default_hparams(spec.algo)
    num_envs, horizon = int(hp.num_envs), int(hp.horizon)  # the Learner contract's fields
    rollout = horizon * num_envs * 4 * (2 * obs_dim + act_dim + 3)
    envs = (num_envs + int(spec.eval_episodes)) * (16 * obs_dim + _world_bytes(spec))
    learner = get_algo(spec.algo).memory_bytes(
        hp, obs_dim, act_dim, pixels=pixels, captured=may_capture(spec)
    )
    return rollout + envs + int(spec.learners) * int(learner)


def may_capture(spec: PodSpec) -> bool:
    """Whether a pod of ``spec`` may hold CUDA graphs: capture not turned off, a device
    that is or may resolve to CUDA, and a learner with a static update (PPO's)."""
    if spec.capture is False or str(spec.device).split(":")[0] not in ("cuda", "auto"):
        return False
    learner = get_algo(spec.algo)
    return all(hasattr(learner, name) for name in STATIC_UPDATE)


def network_params(spec: PodSpec, obs_dim: int = 1, act_dim: int = 1) -> int:
    """Weights and biases of the deployed actor of ``spec`` for ``obs_dim`` inputs and
    ``act_dim`` outputs, as its learner counts them
    (:meth:`~elegantpod.agents.base.Learner.actor_params`): a lower bound on what a
    checkpoint of such a pod holds, which holds at least its actor."""
    hp = spec.hparams if spec.hparams is not None else _default_hparams(spec.algo)
    return int(get_algo(spec.algo).actor_params(hp, int(obs_dim), int(act_dim)))


GYM_SUB_ENV_BYTES = 64 * 2**10
"""Bytes per sub-env of the gymnasium adapter: one Python env object and its numpy state
each (measured: 41 KiB for CartPole-v1), so 2**22 of them are refused before any is made."""


def _world_bytes(spec: PodSpec) -> int:
    """Bytes per sub-env kept beside torch: MJX's worlds, or one gymnasium env object per
    sub-env behind the adapter; 0 for a native env (its state is the torch tensors)."""
    kwargs = spec.env_kwargs or {}
    if kwargs.get("backend") != "mjx":
        from elegantpod.envs.classic import NATIVE_ENVS
        from elegantpod.envs.registry import packaged_envs

        native = spec.env_id in NATIVE_ENVS or spec.env_id in packaged_envs()
        return 0 if native and kwargs.get("backend") != "gymnasium" else GYM_SUB_ENV_BYTES
    try:
        from elegantpod.envs.mjx.memory import bytes_per_world
        from elegantpod.envs.mjx.physics import PHYSICS
        from elegantpod.envs.mjx.tasks import TASKS
    except ImportError:  # no MuJoCo: the pod cannot be built either
        return 0
    if spec.env_id not in TASKS:
        return 0
    physics = kwargs.get("physics")
    if physics in PHYSICS:
        return bytes_per_world(spec.env_id, physics)
    # None: "fast" on a GPU, "exact" on a CPU, decided where the pod is built
    return max(bytes_per_world(spec.env_id, p) for p in PHYSICS)


def check_memory(
    spec: PodSpec, obs_dim: int = 1, act_dim: int = 1, *, pixels: bool = False
) -> None:
    """Raise ``ValueError`` naming the sizes when a pod of ``spec`` would not fit the
    memory its device has free now (see :func:`estimate_pod_bytes`)."""
    need = estimate_pod_bytes(spec, obs_dim, act_dim, pixels=pixels)
    have = available_bytes(spec.device)
    if have is None or need <= have:
        return
    hp = spec.hparams if spec.hparams is not None else _default_hparams(spec.algo)
    keys = ("num_envs", "horizon", "hidden", "buffer_size", "batch_size", "minibatch_size")
    sizes = [f"{k}={getattr(hp, k)!r}" for k in keys if hasattr(hp, k)]
    sizes += [f"eval_episodes={spec.eval_episodes}", f"learners={spec.learners}"]
    raise ValueError(
        f"this {spec.algo} pod would need about {_gib(need)} of memory "
        f"({', '.join(sizes)}, obs_dim={obs_dim}) but {spec.device} has {_gib(have)} "
        "free: lower those sizes"
    )


def _default_hparams(algo: str) -> Any:
    return get_algo(algo).config_cls()


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
