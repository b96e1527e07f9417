"""Policies to deploy: a trained actor with its observation normalisation and action
scaling, and nothing else (no env, no optimizer, no replay): :class:`Policy`.

Why apart from the pod: a deployed agent needs only ``obs -> action``. A pod carries
envs, critics, optimizer moments and a replay; a :class:`Policy` is the actor network,
the normalisation statistics and the action bounds, built from a checkpoint that may
come from anyone (read with ``weights_only``, every field checked before use), and it
exports to ONNX or ``torch.export`` with the normalisation and scaling inside the graph
(:mod:`elegantpod.policy.export`).

``predict`` follows Stable-Baselines3's convention, ``(actions, None)`` (the ``None``
stands where a recurrent policy returns its state), so code written for SB3 runs as is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch
from torch import nn

from elegantpod.agents import get_algo
from elegantpod.agents.base import DeployedActor
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.envs.spaces import (
    flat_size,
    flatten_observations,
    read_space,
    read_spaces,
    spaces_payload,
)
from elegantpod.pod.checkpoint import CheckpointError, check_module_state, resolve_checkpoint
from elegantpod.pod.saved import SavedPod

Tensor = torch.Tensor


class Policy:
    """A trained policy that acts on raw observations: normalised, scaled, no env.

    Build one with :meth:`load` (a checkpoint file or a run folder), ``Policy.from_pod(pod)``
    or ``Policy.from_pod(t.best())``; act with :meth:`predict`; deploy with
    :meth:`export`; watch it with :meth:`record`.

    Attributes
    ----------
    net
        The learner's :class:`~elegantpod.agents.base.DeployedActor` (called: the
        deterministic actions), on :attr:`device`, in eval mode.
    spec
        The pod spec it was trained with (algorithm, env id, hyperparameters).
    obs_shape, action_shape
        One observation's shape; one action's (``()`` for a discrete action).
    env_observation_space
        The env's own observation space where training flattened it (``Discrete``,
        ``MultiDiscrete``, ``MultiBinary``, ``Tuple``, ``Dict``, a Box of more than one
        dimension), so :meth:`predict` takes the env's own observations; ``None`` where
        the network reads them as they come (or the checkpoint predates this record).
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
        try:
            learner = get_algo(algo)
        except ValueError:
            raise CheckpointError(
                f"{where}: its algorithm {algo!r} is not registered in this process "
                "(register_algo it first, as for training)"
            ) from None
        self.spec, self.algo, self.env_id = spec, algo, spec.env_id
        self.device = torch.device(resolve_device(device))
        try:
            observation_space, action_space = read_spaces(spaces, where)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from None
        try:
            learner.check_spaces(observation_space, action_space)
        except ValueError as exc:
            raise CheckpointError(f"{where}: field 'spaces' does not fit {algo!r}: {exc}") from None
        self.obs_shape = tuple(observation_space.shape)
        self.env_observation_space = None
        if spaces.get("observation_space") is not None:
            try:
                raw = read_space(spaces["observation_space"], where)
            except ValueError as exc:
                raise CheckpointError(str(exc)) from None
            if (flat_size(raw),) != self.obs_shape:
                raise CheckpointError(
                    f"{where}: field 'spaces.observation_space' flattens to {flat_size(raw)} "
                    f"values, not the {self.obs_shape} the network reads"
                )
            self.env_observation_space = raw
        is_box = isinstance(action_space, gymnasium.spaces.Box)
        self.n_actions = None if is_box else int(action_space.n)
        self.action_shape: tuple[int, ...] = tuple(action_space.shape) if is_box else ()
        self.low = action_space.low.copy() if is_box else None
        self.high = action_space.high.copy() if is_box else None
        try:
            net = learner.deployed(observation_space, action_space, spec.hparams)
        except NotImplementedError as exc:
            raise CheckpointError(f"{where}: {exc}") from None
        if not isinstance(net, DeployedActor):
            raise TypeError(
                f"{learner.__name__}.deployed must return a DeployedActor, got {type(net)!r}"
            )
        if not isinstance(modules, dict):
            raise CheckpointError(f"{where}: field 'learner.modules' is missing or not a dict")
        for name in net.reads:
            _load(getattr(net, name), modules.get(name), f"learner.modules.{name}", where)
        try:
            net.check()
        except ValueError as exc:
            raise CheckpointError(f"{where}: {exc}") from None
        self.net = net.to(self.device).eval().requires_grad_(False)

    def __repr__(self) -> str:
        act = (
            f"{self.n_actions} actions" if self.n_actions is not None else f"Box{self.action_shape}"
        )
        return f"Policy({self.algo} on {self.env_id}, obs {self.obs_shape}, {act}, {self.device})"

    # -- building ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike, device: str = "cpu") -> Policy:
        """The policy of a checkpoint: a file or URL, or a run folder (its ``best.pt``,
        else its ``checkpoint.pt``), read with ``weights_only`` and checked field by
        field. A tournament's best agent, from the tournament or its store, comes
        through :meth:`elegantpod.Deployment.of <elegantpod.tournament.deployment.Deployment.of>`
        (``Deployment.of(store).policy``), which also checks it against the store's
        record.

        Raises
        ------
        CheckpointError
            Naming the file and the field: missing, corrupt, foreign, of an algorithm
            without a Policy, with weights that do not fit, or saved before checkpoints
            recorded their spaces (``Policy.from_pod(Pod.from_checkpoint(path))`` reads those).
        """
        return cls.from_saved(SavedPod.read(resolve_checkpoint(path), "cpu"), device=device)

    @classmethod
    def from_saved(cls, saved: SavedPod, device: str = "cpu") -> Policy:
        """The policy of a checkpoint already read (:class:`~elegantpod.pod.saved.SavedPod`)."""
        where = f"checkpoint {str(saved.path)!r}"
        if "spaces" not in saved.data:
            raise CheckpointError(
                f"{where} has no field 'spaces' (saved by an older elegantpod): build the "
                "pod to read its env's spaces: Policy.from_pod(Pod.from_checkpoint(path))"
            )
        modules = saved.learner.get("modules")
        return cls(saved.spec, modules, saved.data["spaces"], device=device, where=where)

    @classmethod
    def from_pod(cls, pod, device: str | None = None) -> Policy:
        """The current policy of a live pod, apart from it (a copy of its actor's
        weights) on ``device`` (``None``: the CPU): ``Policy.from_pod(t.best())`` for a
        tournament's leader, ``Policy.from_pod(pod).record()`` to watch a pod.

        Examples
        --------
        >>> import elegantpod
        >>> from elegantpod import Policy
        >>> pod = elegantpod.Pod(elegantpod.PodSpec(env_id="CartPole-v1", algo="ppo"))
        >>> policy = Policy.from_pod(pod)
        >>> actions, _ = policy.predict([[0.0, 0.1, 0.0, -0.1]])  # a batch of one
        >>> actions.shape
        (1,)
        >>> pod.close()
        """
        return cls.from_learner(pod.spec, pod.learner, pod.env, device)

    @classmethod
    def from_learner(cls, spec: PodSpec, learner, env, device: str | None = None) -> Policy:
        """The current policy of a live learner (fused ones: the lead's, which all share)
        on ``env``'s spaces; what :meth:`from_pod` returns."""
        modules = {k: m.state_dict() for k, m in learner.modules.items()}
        spaces = spaces_payload(env)
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
            Where training flattened the env's observations
            (:attr:`env_observation_space`), also the env's own: one observation as
            ``env.observation_space`` holds it (a state index, a dict of arrays, a
            tuple), or a batch as a gymnasium vector env returns them (a leading batch
            dimension on every array: a dict of such arrays for a Dict space); they
            are flattened as training did (``gymnasium.spaces.flatten``). Float arrays
            of shape :attr:`obs_shape` are read as flattened already.
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
            For an observation of another shape (naming the shape expected), of a
            non-numeric type, or a tensor that holds no values to read here (on the
            ``meta`` device; sparse or nested); for an env's own observation that its
            space does not hold (a state index out of range), naming the value.
        """
        is_torch = torch.is_tensor(obs)
        if is_torch:
            _check_usable(obs)
        elif self.env_observation_space is not None:
            flat = flatten_observations(self.env_observation_space, obs)
            if flat is not None:
                rows, single = flat
                obs = rows[0] if single else rows
            elif isinstance(obs, Mapping | tuple | int | np.integer):
                raise ValueError(
                    f"observations must be the env's own, {self.env_observation_space} "
                    f"(one, or a batch as a vector env returns them), or flattened ones of "
                    f"shape {self.obs_shape}; got {_shown(obs)}"
                )
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
            action = self.net(t) if deterministic else self.net.sample(t, generator)
        action = action[0] if single else action
        if is_torch:
            return action.to(obs.device), None
        return action.cpu().numpy(), None

    # -- deploying and watching ----------------------------------------------------------
    def export(self, path: str | os.PathLike, format: str | None = None) -> str:
        """Write the deterministic policy as a file that runs without elegantpod.

        See :func:`~elegantpod.policy.export.export_policy_net` (``.onnx``: ONNX;
        ``.pt2``: ``torch.export``; ``.pt``/``.ts``: TorchScript), with the input
        ``obs`` of shape ``(batch, *obs_shape)`` float32 and the output ``action``.
        Returns the path written.
        """
        from elegantpod.policy.export import export_policy_net

        return export_policy_net(self.net, self.obs_shape, path, format)

    def record(self, env_id: str | None = None, episodes: int = 1, **kwargs: Any):
        """A :class:`~elegantpod.policy.recording.Video` of deterministic episodes on
        ``env_id`` (default: the env it was trained on); keywords of
        :func:`~elegantpod.policy.recording.record`."""
        from elegantpod.policy.recording import record

        return record(self, env_id or self.env_id, episodes=episodes, **kwargs)


def _check_usable(obs: Tensor) -> None:
    """Raise ``ValueError`` naming what makes a tensor unusable as observations: a meta
    tensor has a shape but no values; a sparse or nested one is not the dense batch the
    network reads. A tensor on any device that holds values is used (copied to the
    policy's device, its actions copied back)."""
    if obs.is_meta:
        raise ValueError(
            f"observations are on the meta device, which holds no values (shape "
            f"{tuple(obs.shape)}): pass a tensor on a real device, or a numpy array"
        )
    if obs.is_nested or obs.layout != torch.strided:
        got = "a nested tensor" if obs.is_nested else f"layout {obs.layout}"
        raise ValueError(f"observations must be a dense tensor of numbers, got {got}")


def _shown(obs) -> str:
    """A few words on what ``obs`` is, for an error (never the whole of a large value)."""
    if isinstance(obs, Mapping):
        return f"a mapping with keys {sorted(map(str, obs))[:10]}"
    if isinstance(obs, tuple):
        return f"a tuple of {len(obs)}"
    return repr(obs)[:100]


def _as_array(obs) -> np.ndarray:
    try:
        x = np.asarray(obs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"observations must be an array of numbers: {exc}") from None
    if x.dtype.kind not in "fiu":
        raise ValueError(f"observations must be real numbers, got dtype {x.dtype}")
    return x


def _load(module: nn.Module, state, field: str, where: str) -> None:
    """``module.load_state_dict(state)``, refusing what a pod refuses (see
    :func:`~elegantpod.pod.checkpoint.check_module_state`): other names, shapes or
    dtypes, values that are not finite."""
    check_module_state(module, state, where, field, "the network its spec describes")
    module.load_state_dict(state)
