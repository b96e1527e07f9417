"""Learner parallelism by parameter fusion (paper, section 4.3).

Instead of distributed SGD (all-reducing gradients at every step), a pod may run ``K``
learners that each train on their own shard of the pod's data and then *fuse*: their
parameters, buffers and optimizer moments are replaced by the average over learners at
the end of each update epoch. Between two fusions the learners take ``K`` independent
steps on disjoint data; after a fusion they are identical again.

Fusion points are given by :meth:`~elegantpod.agents.base.Learner.update_epochs`: PPO
yields after each pass over its data, off-policy learners after each burst of gradient
steps. A worker's time-major rollout ``(T, N, ...)`` is split along the env dimension,
so each learner sees whole trajectories (PPO's advantages stay correct) and off-policy
learners fill their own replay buffers.

The learners may live on different devices (the GPUs a pod owns): averaging gathers on
the first learner's device and copies back. They are stepped one after the other from
one Python thread; on GPUs the kernels of different devices overlap because launches are
asynchronous, on one CPU the ``K`` learners simply share it (``benchmarks/fusion.py``
measures what that costs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from elegantpod.agents.base import Learner
from elegantpod.types import Batch

Tensor = torch.Tensor


class FusedLearners:
    """``K`` learners of one algorithm that act as one, fusing after every epoch.

    Acting uses the first learner (all are equal after a fusion). Everything else that a
    worker, evaluator or pod reads (``config``, ``obs_shape``, ``default_max_steps``...)
    is the first learner's.

    Parameters
    ----------
    learners
        At least two learners of the same class and architecture, freshly built.
    """

    def __init__(self, learners: Sequence[Learner]):
        learners = list(learners)
        if len(learners) < 2:
            raise ValueError(f"fusion needs at least 2 learners, got {len(learners)}")
        kinds = {type(x) for x in learners}
        if len(kinds) != 1:
            raise ValueError(
                f"fused learners must share one algorithm, got {sorted(map(str, kinds))}"
            )
        self.learners = learners
        self._copy_lead()  # start from one set of weights: the first learner's

    # -- delegation ---------------------------------------------------------------------
    @property
    def lead(self) -> Learner:
        """The first learner: what acting, evaluation and checkpoints' metadata use."""
        return self.learners[0]

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes FusedLearners itself lacks
        if name == "learners":
            raise AttributeError(name)
        return getattr(self.learners[0], name)

    @property
    def k(self) -> int:
        """Number of fused learners."""
        return len(self.learners)

    def explore(self, obs: Tensor):
        """Exploratory actions: each learner acts on its own shard of the sub-envs."""
        return self.lead.explore(obs)

    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor:
        """Actions of the (fused, hence shared) policy for ``obs``."""
        return self.lead.act(obs, deterministic)

    def episodes_ended(self, done: Tensor | None) -> None:
        """To the lead, whose :meth:`explore` (and exploration noise) covers every sub-env."""
        self.lead.episodes_ended(done)

    @property
    def should_stop(self):
        """The stop check every fused learner polls (see ``Learner.should_stop``)."""
        return self.lead.should_stop

    @should_stop.setter
    def should_stop(self, check) -> None:
        for learner in self.learners:
            learner.should_stop = check

    def set_hparams(self, **changes: Any) -> None:
        """Apply live hyperparameter changes to every fused learner alike."""
        for learner in self.learners:
            learner.set_hparams(**changes)

    # -- learning -------------------------------------------------------------------------
    def shard(self, batch: Batch) -> list[Batch]:
        """Split a time-major batch ``(T, N, ...)`` into ``K`` batches of whole sub-envs."""
        n = batch.reward.shape[1]
        if n < self.k:
            raise ValueError(
                f"{self.k} fused learners need at least {self.k} sub-envs per rollout, got {n}"
            )
        pieces = [torch.tensor_split(getattr(batch, f), self.k, dim=1) for f in _FIELDS]
        return [
            Batch(**{f: p[i].to(x.device) for f, p in zip(_FIELDS, pieces, strict=True)})
            for i, x in enumerate(self.learners)
        ]

    def update(self, batch: Batch) -> dict[str, float]:
        """Each learner updates on its shard; they fuse at the end of every epoch.

        Step clocks (an off-policy learner's warm-up and exploration schedule) count the
        pod's env steps, the whole ``batch``, not a shard's.
        """
        for learner in self.learners:
            if hasattr(learner, "rollout_env_steps"):
                learner.rollout_env_steps = len(batch)
        runs = [x.update_epochs(s) for x, s in zip(self.learners, self.shard(batch), strict=True)]
        last: list[dict[str, float]] = [{} for _ in runs]
        active = list(range(len(runs)))
        while active:
            still = []
            for i in active:
                try:
                    last[i] = next(runs[i])
                    still.append(i)
                except StopIteration:
                    pass
            if still:
                self.fuse()
            active = still
        keys = set().union(*last)
        return {k: sum(s[k] for s in last if k in s) / sum(k in s for s in last) for k in keys}

    @torch.no_grad()
    def _copy_lead(self) -> None:
        """Give every learner the first one's modules (target networks and running
        statistics included): averaging independent random initialisations instead
        would start from a network no learner had, shrunk towards zero."""
        for name, module in self.lead.modules.items():
            state = module.state_dict()
            for other in self.learners[1:]:
                other.modules[name].load_state_dict(state)

    @torch.no_grad()
    def fuse(self) -> None:
        """Average every floating tensor of the learners' modules and optimizer states."""
        for name in self.lead.modules:
            states = [x.modules[name].state_dict() for x in self.learners]
            for key, value in states[0].items():
                if value.is_floating_point():
                    _average_into([s[key] for s in states])
        for name in self.lead.optimizers:
            per_learner = [x.optimizers[name].state for x in self.learners]
            params = [list(_params(x.optimizers[name])) for x in self.learners]
            for j in range(len(params[0])):
                states = [per_learner[i].get(params[i][j]) for i in range(self.k)]
                if any(s is None for s in states):
                    continue  # a parameter no learner has stepped yet
                for key, value in states[0].items():
                    if torch.is_tensor(value) and value.is_floating_point():
                        _average_into([s[key] for s in states])

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The first learner's state (weights are shared), plus each learner's extras
        (its replay buffer, say) under ``"fused"``."""
        states = [x.state_dict() for x in self.learners]
        lead = dict(states[0])
        lead["fused"] = [
            {k: v for k, v in s.items() if k not in ("modules", "optimizers")} for s in states[1:]
        ]
        return lead

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a fused or a single learner's state: weights and optimizers into every
        learner, each learner's extras where the state has them (else the first's)."""
        extras = list(state.get("fused", []))
        plain = {k: v for k, v in state.items() if k != "fused"}
        for i, learner in enumerate(self.learners):
            mine = dict(plain)
            if 1 <= i <= len(extras):
                mine.update(extras[i - 1])
            learner.load_state_dict(mine)


_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


def _params(optimizer: torch.optim.Optimizer):
    for group in optimizer.param_groups:
        yield from group["params"]


def _average_into(tensors: list[Tensor]) -> None:
    """Replace each tensor's values by the mean over all of them (in place)."""
    home = tensors[0]
    mean = torch.stack([t.to(home.device, home.dtype) for t in tensors]).mean(0)
    for t in tensors:
        t.copy_(mean.to(t.device, t.dtype))


# -- the saved layout ---------------------------------------------------------------------
# A fused pod saves one state: the first learner's whole state, and under "fused" the
# extras (replay, generator, noise...) of learners 2..K. Only this module knows that.


def strip(state: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A learner state (fused or single) without ``keys``, in every learner's part.

    Pure: the dicts on the way are copied, tensors shared; a state holding none of the
    keys comes back as it is (the same object), so a caller can tell nothing changed.
    """
    fused = state.get("fused")
    parts = fused if isinstance(fused, list) else []
    in_parts = any(isinstance(x, dict) and any(k in x for k in keys) for x in parts)
    if not any(k in state for k in keys) and not in_parts:
        return state
    out = {k: v for k, v in state.items() if k not in keys}
    if in_parts:
        out["fused"] = [
            {k: v for k, v in x.items() if k not in keys} if isinstance(x, dict) else x
            for x in parts
        ]
    return out


def part_of(state: dict[str, Any], i: int) -> tuple[dict[str, Any], str]:
    """Where learner ``i``'s extras are in a saved state, and that place's name for
    error messages: ``fused[i - 1]`` where the state has it (a dict), else the first
    learner's (as :meth:`FusedLearners.load_state_dict` loads them)."""
    fused = state.get("fused")
    parts = fused if isinstance(fused, list) else []
    if 1 <= i <= len(parts) and isinstance(parts[i - 1], dict):
        return parts[i - 1], f"fused[{i - 1}]"
    return state, ""
