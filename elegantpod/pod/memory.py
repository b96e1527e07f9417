"""How much memory a pod will allocate, and a refusal when its device lacks it.

Why: a pod preallocates its rollouts, replay and networks as device tensors; past the
device's memory that allocation ends the process with a raw error, or swaps the machine
to a halt. A spec is checked against :func:`estimate_pod_bytes` before the pod is built,
and a tournament sizes its GPU workers by its largest pod's estimate.
"""

from __future__ import annotations

from typing import Any

from elegantpod.agents import get_algo
from elegantpod.agents.noise import SEQ_LEN
from elegantpod.config import PodSpec
from elegantpod.devices import available_bytes
from elegantpod.pod.capture import STATIC_UPDATE


def estimate_pod_bytes(
    spec: PodSpec, obs_dim: int = 1, act_dim: int = 1, *, pixels: bool = False
) -> int:
    """About how many bytes a pod of ``spec`` allocates, for ``obs_dim`` observation
    dimensions and ``act_dim`` action dimensions (or discrete choices); ``pixels``:
    the observations are images, which a replay keeps as one byte a value.

    Why: rollouts (``horizon * num_envs`` transitions), replays (``buffer_size``) and
    networks (``hidden``) are preallocated tensors; past the device's memory their
    allocation ends the process with a raw error, or swaps the machine to a halt. The
    estimate counts rollout and replay storage (float32, two observations per
    transition), the state of the training and evaluation envs, the networks with their
    gradients and Adam moments, and the largest activations of an update, per fused
    learner, colored exploration noise's sequences (``SEQ_LEN`` steps per sub-env and
    action dimension), the worlds a simulator outside torch keeps per sub-env (MJX's,
    see :func:`~elegantpod.envs.mjx.memory.bytes_per_world`), and, for a pod that may
    replay its iterations as CUDA graphs (:func:`may_capture`), the graphs' private
    memory pool: everything an iteration allocates while it is captured stays reserved
    for the replays, a second copy of the rollout's and the update's working memory.
    With the default dimensions of 1 it is a lower bound, usable before an env exists
    to tell them.
    """
    hp = spec.hparams if spec.hparams is not None else _default_hparams(spec.algo)
    num_envs, horizon = int(getattr(hp, "num_envs", 1)), int(getattr(hp, "horizon", 1))
    hidden = tuple(int(h) for h in getattr(hp, "hidden", ()) or ())
    buffer_size = int(getattr(hp, "buffer_size", 0) or 0)
    transition = 4 * (2 * obs_dim + act_dim + 3)
    stored = transition - (6 * obs_dim if pixels else 0)  # a replay's frames: uint8
    rollout = horizon * num_envs * transition
    envs = (num_envs + int(spec.eval_episodes)) * (16 * obs_dim + _world_bytes(spec))
    widths = (obs_dim, *hidden, act_dim)
    params = network_params(spec, obs_dim, act_dim)
    if buffer_size:  # off-policy: actor, twin critics and target copies
        rows = int(getattr(hp, "batch_size", 1))
        learner = buffer_size * stored + 6 * (16 * params + 8 * rows * sum(widths))
    else:  # on-policy: actor and critic, and one pass over the whole rollout
        rows = min(int(getattr(hp, "minibatch_size", 1)), horizon * num_envs)
        whole = 8 * horizon * num_envs * max(widths)
        learner = rollout + whole + 2 * (16 * params + 8 * rows * sum(widths))
        if may_capture(spec):  # the graphs' pool: the captured iteration's working memory
            learner += rollout + whole + 2 * 8 * rows * sum(widths)
    if getattr(hp, "noise", None) == "colored":  # one sequence per sub-env and action
        learner += 4 * num_envs * act_dim * SEQ_LEN
    return rollout + envs + int(spec.learners) * learner


def may_capture(spec: PodSpec) -> bool:
    """Whether a pod of ``spec`` may hold CUDA graphs: capture not turned off, a device
    that is or may resolve to CUDA, and a learner with a static update (PPO's)."""
    if spec.capture is False or str(spec.device).split(":")[0] not in ("cuda", "auto"):
        return False
    learner = get_algo(spec.algo)
    return all(hasattr(learner, name) for name in STATIC_UPDATE)


def network_params(spec: PodSpec, obs_dim: int = 1, act_dim: int = 1) -> int:
    """Weights and biases of one network of ``spec`` (its ``hidden`` widths between
    ``obs_dim`` inputs and ``act_dim`` outputs): a lower bound on what a checkpoint of
    such a pod holds, which holds at least its actor."""
    hp = spec.hparams if spec.hparams is not None else _default_hparams(spec.algo)
    widths = (int(obs_dim), *(int(h) for h in getattr(hp, "hidden", ()) or ()), int(act_dim))
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))


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
