"""Policies to deploy: a trained actor with its observation normalisation and action
scaling, and nothing else (no env, no optimizer, no replay): :class:`Policy`.

Why apart from the pod: a deployed agent needs only ``obs -> action``. A pod carries
envs, critics, optimizer moments and a replay; a :class:`Policy` is the actor network,
the normalisation statistics and the action bounds, built from a checkpoint that may
come from anyone (read with ``weights_only``, every field checked before use), and it
exports to ONNX or ``torch.export`` with the normalisation and scaling inside the graph
(:mod:`elegantpod.policy_export`).

``predict`` follows Stable-Baselines3's convention, ``(actions, None)`` (the ``None``
stands where a recurrent policy returns its state), so code written for SB3 runs as is.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch
from torch import nn

from elegantpod.agents.ppo import actor_network, observation_norm
from elegantpod.checkpoint import CheckpointError, resolve_checkpoint
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.saved_pod import SavedPod

Tensor = torch.Tensor

ALGOS = ("ppo", "sac", "td3", "ddpg", "dqn")
"""The algorithms whose actor a :class:`Policy` can hold."""
MAX_ACTIONS = 1_000_000
"""Most discrete actions, or action dimensions, a saved action space may declare."""
IMAGE_ALGOS = ("ppo", "dqn")
"""The algorithms whose actor reads images (``takes_images``)."""
MAX_PIXELS = 4096 * 4096 * 4
"""Most values one saved image observation may hold (a 4K RGBA frame): an encoder for
a larger one is refused before it is built."""


def spaces_payload(observation_space, action_space) -> dict[str, Any]:
    """What a checkpoint records of an env's spaces (field ``spaces``): the observation
    shape and the action space (``n`` choices, or the Box's ``low`` and ``high``), so a
    :class:`Policy` loads without building the env."""
    out: dict[str, Any] = {"observation_shape": [int(d) for d in observation_space.shape]}
    if hasattr(action_space, "n"):
        out["action_n"] = int(action_space.n)
    else:
        out["action_low"] = torch.as_tensor(action_space.low, dtype=torch.float32).cpu()
        out["action_high"] = torch.as_tensor(action_space.high, dtype=torch.float32).cpu()
    return out


class PolicyNet(nn.Module):
    """``(B, obs_dim)`` float32 observations -> the deterministic env actions: ``(B,)``
    int64 (discrete: argmax) or ``(B, act_dim)`` float32 within the env's bounds.

    The observation normalisation and the action scaling are inside, so an exported
    graph takes raw observations and gives env-ready actions.
    """

    def __init__(self, algo: str, body: nn.Module, norm, low: Tensor, high: Tensor, log_std):
        super().__init__()
        self.algo, self.body, self.norm = algo, body, norm
        self.is_discrete = low.numel() == 0
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self.register_buffer("log_std", log_std)  # PPO's Gaussian, for sampling only

    def features(self, obs: Tensor) -> Tensor:
        """Observations as the actor sees them: normalised where the pod normalised."""
        return obs if self.norm is None else self.norm(obs)

    def raw(self, obs: Tensor) -> Tensor:
        """The actor's output before the action head: logits, Q-values, a Gaussian's
        mean (PPO), or SAC's mean and log-std."""
        x = self.features(obs)
        return self.body.net(x) if self.algo in ("sac", "td3", "ddpg") else self.body(x)

    def scale(self, a: Tensor) -> Tensor:
        """A point of ``[-1, 1]^d`` in the env's bounds (as the learners' ``to_env``)."""
        return self.low + (a + 1.0) * 0.5 * (self.high - self.low)

    def forward(self, obs: Tensor) -> Tensor:
        out = self.raw(obs)
        if self.is_discrete:
            return out.argmax(-1)
        if self.algo == "ppo":
            return torch.maximum(torch.minimum(out, self.high), self.low)
        if self.algo == "sac":
            out = out.chunk(2, -1)[0]
        return self.scale(torch.tanh(out))


class Policy:
    """A trained policy that acts on raw observations: normalised, scaled, no env.

    Build one with :meth:`load` (a checkpoint file or a run folder), ``pod.policy()``
    or ``Tournament.best().policy()``; act with :meth:`predict`; deploy with
    :meth:`export`; watch it with :meth:`record`.

    Attributes
    ----------
    net
        The :class:`PolicyNet` (deterministic actions), on :attr:`device`, in eval mode.
    spec
        The pod spec it was trained with (algorithm, env id, hyperparameters).
    obs_shape, action_shape
        One observation's shape; one action's (``()`` for a discrete action).
    n_actions
        Discrete actions' count (``None`` for a Box).
    low, high
        The Box's bounds as float32 arrays (``None`` for a discrete action).
    """

    def __init__(
        self,
        spec: PodSpec,
        modules: dict[str, Any],
        spaces: dict[str, Any],
        *,
        device: str = "cpu",
        where: str = "policy",
    ):
        algo = spec.algo
        if algo not in ALGOS:
            raise CheckpointError(
                f"{where}: a Policy holds the actor of {', '.join(ALGOS)}, not {algo!r}"
            )
        self.spec, self.algo, self.env_id = spec, algo, spec.env_id
        self.device = torch.device(resolve_device(device))
        obs_shape, n, low, high = _checked_spaces(spaces, algo, where)
        self.obs_shape, self.n_actions = obs_shape, n
        self.action_shape: tuple[int, ...] = () if n is not None else tuple(low.shape)
        self.low = None if low is None else low.numpy()
        self.high = None if high is None else high.numpy()
        body, norm, log_std = _actor(spec, modules, obs_shape, n or low.shape[0], where)
        # two tensors, not one twice: a traced module refuses a shared buffer
        low_t, high_t = (torch.zeros(0), torch.zeros(0)) if low is None else (low, high)
        net = PolicyNet(algo, body, norm, low_t, high_t, log_std)
        self.net = net.to(self.device).eval().requires_grad_(False)

    def __repr__(self) -> str:
        act = (
            f"{self.n_actions} actions" if self.n_actions is not None else f"Box{self.action_shape}"
        )
        return f"Policy({self.algo} on {self.env_id}, obs {self.obs_shape}, {act}, {self.device})"

    # -- building ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike, device: str = "cpu") -> Policy:
        """The policy of a checkpoint: a file, a run folder (its ``best.pt``, else its
        ``checkpoint.pt``) or a tournament's store (its best agent, checked to be what
        the store's record says, as ``backtest`` takes it), read with ``weights_only``
        and checked field by field.

        Raises
        ------
        CheckpointError
            Naming the file and the field: missing, corrupt, foreign, of an algorithm
            without a Policy, with weights that do not fit, or saved before checkpoints
            recorded their spaces (``Pod.from_checkpoint(path).policy()`` reads those).
        """
        from elegantpod.tournament.store_reading import best_checkpoint

        file = resolve_checkpoint(best_checkpoint(path))
        saved = SavedPod.read(file, "cpu")
        where = f"checkpoint {str(file)!r}"
        if "spaces" not in saved.data:
            raise CheckpointError(
                f"{where} has no field 'spaces' (saved by an older elegantpod): build the "
                "pod to read its env's spaces, Pod.from_checkpoint(path).policy()"
            )
        modules = saved.learner.get("modules")
        return cls(saved.spec, modules, saved.data["spaces"], device=device, where=where)

    @classmethod
    def from_learner(cls, spec: PodSpec, learner, env, device: str | None = None) -> Policy:
        """The current policy of a live learner (fused ones: the lead's, which all share)
        on ``env``'s spaces; what ``Pod.policy()`` returns."""
        modules = {k: m.state_dict() for k, m in learner.modules.items()}
        spaces = spaces_payload(env.observation_space, env.action_space)
        return cls(spec, modules, spaces, device=device or "cpu", where=f"{spec.algo} learner")

    # -- acting ------------------------------------------------------------------------
    def predict(
        self,
        obs,
        deterministic: bool = True,
        *,
        generator: torch.Generator | None = None,
    ) -> tuple[Any, None]:
        """Actions for one observation or a batch, as Stable-Baselines3's ``predict``.

        Parameters
        ----------
        obs
            A numpy array (or what ``np.asarray`` takes) or a torch tensor: one
            observation of shape :attr:`obs_shape`, or a batch ``(B, *obs_shape)``.
        deterministic
            ``True``: the policy's own action (what evaluation uses, and what an export
            computes). ``False``: a sample, as in training: PPO's distribution, SAC's
            squashed Gaussian, DDPG/TD3's Gaussian noise, DQN's ``epsilon_end``-greedy.
        generator
            Draws the samples of ``deterministic=False`` (on :attr:`device`); ``None``:
            torch's global generator.

        Returns
        -------
        tuple
            ``(actions, None)``: numpy in, numpy out; torch in, torch out (on the
            input's device). One observation gives one action (shape
            :attr:`action_shape`), a batch a batch. Discrete actions are int64.

        Raises
        ------
        ValueError
            For an observation of another shape (naming the shape expected) or of a
            non-numeric type.
        """
        is_torch = torch.is_tensor(obs)
        x = obs if is_torch else _as_array(obs)
        shape = tuple(x.shape)
        single = shape == self.obs_shape
        if not single and (len(shape) != len(self.obs_shape) + 1 or shape[1:] != self.obs_shape):
            raise ValueError(
                f"observations must have shape {self.obs_shape} (one) or "
                f"(batch, {', '.join(map(str, self.obs_shape))}) for this policy, got {shape}"
            )
        if is_torch and (x.dtype == torch.bool or x.is_complex()):
            raise ValueError(f"observations must be real numbers, got dtype {x.dtype}")
        t = (x if is_torch else torch.from_numpy(x)).to(self.device, torch.float32)
        t = t.unsqueeze(0) if single else t
        with torch.no_grad():
            action = self.net(t) if deterministic else self._sample(t, generator)
        action = action[0] if single else action
        if is_torch:
            return action.to(obs.device), None
        return action.cpu().numpy(), None

    def _sample(self, obs: Tensor, g: torch.Generator | None) -> Tensor:
        net, c = self.net, self.spec.hparams
        out = net.raw(obs)
        kw = {"device": obs.device, "generator": g}
        if self.algo == "dqn":
            is_random = torch.rand(obs.shape[0], **kw) < c.epsilon_end
            uniform = torch.randint(0, out.shape[-1], (obs.shape[0],), **kw)
            return torch.where(is_random, uniform, out.argmax(-1))
        if self.algo == "ppo" and net.is_discrete:
            return torch.multinomial(torch.softmax(out, -1), 1, generator=g).squeeze(-1)
        if self.algo == "ppo":
            a = out + torch.randn(out.shape, **kw) * net.log_std.exp()
            return torch.maximum(torch.minimum(a, net.high), net.low)
        if self.algo == "sac":
            mean, log_std = out.chunk(2, -1)
            eps = torch.randn(mean.shape, **kw)
            return net.scale(torch.tanh(mean + eps * log_std.clamp(-5.0, 2.0).exp()))
        eps = torch.randn(out.shape, **kw)
        return net.scale((torch.tanh(out) + c.exploration_noise * eps).clamp(-1.0, 1.0))

    # -- deploying and watching ----------------------------------------------------------
    def export(self, path: str | os.PathLike, format: str | None = None) -> str:
        """Write the deterministic policy as a file that runs without elegantpod.

        See :func:`~elegantpod.policy_export.export_policy_net` (``.onnx``: ONNX;
        ``.pt2``: ``torch.export``; ``.pt``/``.ts``: TorchScript), with the input
        ``obs`` of shape ``(batch, *obs_shape)`` float32 and the output ``action``.
        Returns the path written.
        """
        from elegantpod.policy_export import export_policy_net

        return export_policy_net(self.net, self.obs_shape, path, format)

    def record(self, env_id: str | None = None, episodes: int = 1, **kwargs: Any):
        """A :class:`~elegantpod.recording.Video` of deterministic episodes on
        ``env_id`` (default: the env it was trained on); keywords of
        :func:`~elegantpod.recording.record`."""
        from elegantpod.recording import record

        return record(self, env_id or self.env_id, episodes=episodes, **kwargs)


def _as_array(obs) -> np.ndarray:
    try:
        x = np.asarray(obs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"observations must be an array of numbers: {exc}") from None
    if x.dtype.kind not in "fiu":
        raise ValueError(f"observations must be real numbers, got dtype {x.dtype}")
    return x


def _checked_spaces(spaces, algo: str, where: str):
    """``(obs_shape, n, low, high)`` from a checkpoint's ``spaces``, each part checked."""
    if not isinstance(spaces, dict):
        raise CheckpointError(
            f"{where}: field 'spaces' must be a dict, got {type(spaces).__name__}"
        )
    shape = spaces.get("observation_shape")
    image = isinstance(shape, list | tuple) and len(shape) == 3 and algo in IMAGE_ALGOS
    if (
        not isinstance(shape, list | tuple)
        or len(shape) not in ((1, 3) if image else (1,))
        or not all(type(d) is int and 1 <= d <= MAX_ACTIONS for d in shape)
        or (image and math.prod(shape) > MAX_PIXELS)
    ):
        raise CheckpointError(
            f"{where}: field 'spaces.observation_shape' must be [n] with 1 <= n <= "
            f"{MAX_ACTIONS} (or [height, width, channels] of at most {MAX_PIXELS:,} "
            f"values for {', '.join(IMAGE_ALGOS)}), got {str(shape)[:200]}"
        )
    n = spaces.get("action_n")
    if n is not None:
        if type(n) is not int or not 1 <= n <= MAX_ACTIONS:
            raise CheckpointError(
                f"{where}: field 'spaces.action_n' must be an integer in 1..{MAX_ACTIONS}, "
                f"got {str(n)[:200]}"
            )
        if algo not in ("ppo", "dqn"):
            raise CheckpointError(f"{where}: {algo!r} acts in a Box, but 'spaces' is discrete")
        return tuple(shape), n, None, None
    if algo == "dqn":
        raise CheckpointError(f"{where}: 'dqn' acts on discrete actions, but 'spaces' is a Box")
    bounds = [spaces.get("action_low"), spaces.get("action_high")]
    for name, b in zip(("action_low", "action_high"), bounds, strict=True):
        if (
            not torch.is_tensor(b)
            or b.dtype != torch.float32
            or b.dim() != 1
            or not 1 <= b.numel() <= MAX_ACTIONS
            or b.isnan().any()
            or (algo != "ppo" and not b.isfinite().all())
        ):
            raise CheckpointError(
                f"{where}: field 'spaces.{name}' must be a 1-d float32 tensor of 1 to "
                f"{MAX_ACTIONS} numbers (finite for {algo!r}), got {str(b)[:200]}"
            )
    low, high = bounds
    if low.shape != high.shape or not (low <= high).all():
        raise CheckpointError(
            f"{where}: fields 'spaces.action_low' and 'action_high' must have one shape "
            "and low <= high"
        )
    return tuple(shape), None, low.clone(), high.clone()


def _actor(spec: PodSpec, modules, obs_shape: tuple[int, ...], act_dim: int, where: str):
    """The actor module of ``spec.algo`` with the saved weights, its observation
    normaliser (PPO's, when enabled) and PPO's log-std, each checked."""
    if not isinstance(modules, dict):
        raise CheckpointError(f"{where}: field 'learner.modules' is missing or not a dict")
    c, algo = spec.hparams, spec.algo
    obs_dim = obs_shape[0]
    rng = {"device": "cpu", "generator": torch.Generator().manual_seed(0)}  # overwritten
    if algo == "ppo":
        body, name = actor_network(obs_shape, act_dim, c.hidden, **rng), "actor"
    elif algo == "sac":
        from elegantpod.agents.sac import SquashedGaussianActor

        body, name = SquashedGaussianActor(obs_dim, act_dim, c.hidden, **rng), "actor"
    elif algo == "dqn":
        from elegantpod.agents.dqn import QNetwork

        body, name = QNetwork(obs_shape, act_dim, c.hidden, c.dueling, **rng), "q"
    else:
        from elegantpod.agents.ddpg import DeterministicActor

        body, name = DeterministicActor(obs_dim, act_dim, c.hidden, **rng), "actor"
    _load(body, modules.get(name), f"learner.modules.{name}", where)
    norm, log_std = None, torch.zeros(0)
    if algo == "ppo":
        norm = observation_norm(obs_shape, c.normalize_obs)
        _load(norm, modules.get("obs_norm"), "learner.modules.obs_norm", where)
        if (norm.var < 0).any() or not norm.count > 0:
            raise CheckpointError(
                f"{where}: field 'learner.modules.obs_norm' has a negative variance or count"
            )
        norm = norm if norm.enabled else None
        if "log_std" in modules:
            holder = nn.Module()
            holder.param = nn.Parameter(torch.zeros(act_dim))
            _load(holder, modules["log_std"], "learner.modules.log_std", where)
            log_std = holder.param.detach().clone()
    return body, norm, log_std


def _load(module: nn.Module, state, field: str, where: str) -> None:
    """``module.load_state_dict(state)``, refusing what is not a dict of finite float
    tensors of the module's own names and shapes."""
    if not isinstance(state, dict) or not all(
        torch.is_tensor(v) and v.is_floating_point() and bool(v.isfinite().all())
        for v in state.values()
    ):
        raise CheckpointError(f"{where}: field {field!r} must be a dict of finite float tensors")
    try:
        module.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()
        raise CheckpointError(
            f"{where}: field {field!r} does not fit the network its spec describes: "
            f"{' '.join(reason[1:3] or reason)[:300]}"
        ) from None
