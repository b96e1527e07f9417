"""Resident pods: a worker process keeps its pods alive between their segments.

Building a pod (env, networks, optimizers, a compiled env step on CUDA) and loading its
checkpoint costs more than a short segment trains, and it is repeated at every segment
if each one starts from scratch. So each worker process keeps the pods it ran, keyed by
tournament and pod id, with the name of the checkpoint that holds their state. The next
segment of the same pod reuses the pod only when it resumes from exactly that checkpoint
(so a pod that moved to another worker and back, or whose checkpoint is newer elsewhere,
is rebuilt from its checkpoint), and when nothing structural changed. Reuse puts the
pod's envs where a rebuilt pod would start (:meth:`~elegantpod.pod.pod.Pod.restart_episodes`),
so a resident pod continues exactly as a rebuilt one: the checkpoint stays the unit of
fault tolerance, residency only saves the rebuild.

At most ``slots`` pods stay per process (least recently used go first, closed); a
tournament drops its pods from every worker when it ends (:func:`drop`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_SLOTS = 8
"""Pods kept per worker process when the task does not say (a tournament says: the
worker's pod slots, so that a GPU's memory holds what its packing planned)."""

_lock = threading.Lock()
_pods: OrderedDict[tuple[str, str], _Resident] = OrderedDict()
_in_use = 0  # pods taken out for a segment: they count against the slots too
_closed: set[str] = set()  # tournaments that dropped their pods: a late segment keeps none


@dataclass
class _Resident:
    pod: Any
    checkpoint: str
    """The checkpoint that holds exactly this pod's state."""
    structure: str
    """Everything a pod is built from except live hyperparameters and budgets."""


def structure_key(spec) -> str:
    """What must be equal for a built pod to serve a spec: all but live hyperparameters."""
    import dataclasses
    import json

    from elegantpod.agents import get_algo

    learner = get_algo(spec.algo)
    d = spec.to_dict()
    hp = dataclasses.asdict(spec.hparams) if spec.hparams is not None else {}
    # what the pod's envs and rollout buffer were built with, besides the networks
    built = {*learner.structural_hparams, "num_envs", "horizon"}
    d["hparams"] = {k: hp[k] for k in sorted(hp) if k in built}
    for budget in ("max_steps", "max_seconds", "target_reward", "eval_every_steps"):
        d.pop(budget, None)
    return json.dumps(d, sort_keys=True, default=str)


def take(tournament_id: str, pod_id: str, resume_from: str | None, spec):
    """The resident pod that holds exactly ``resume_from``'s state, else ``None``.

    The pod leaves the cache while a segment uses it. A stale entry (another checkpoint,
    another structure) is closed: the segment rebuilds the pod from its checkpoint.
    """
    global _in_use
    with _lock:
        entry = _pods.pop((tournament_id, pod_id), None)
    if entry is None:
        return None
    if (
        resume_from is None
        or entry.checkpoint != resume_from
        or entry.structure != structure_key(spec)
    ):
        entry.pod.close()
        return None
    with _lock:
        _in_use += 1
    return entry.pod


def release(pod) -> None:
    """A pod :func:`take` gave out will not come back (its segment failed): close it."""
    global _in_use
    with _lock:
        _in_use -= 1
    pod.close()


def keep(
    tournament_id: str,
    pod_id: str,
    pod,
    checkpoint: str,
    spec,
    slots: int | None,
    taken: bool = False,
) -> None:
    """Keep ``pod`` (whose state ``checkpoint`` holds) for its next segment.

    ``taken``: the pod came from :func:`take` (it stops counting as in use). Running and
    kept pods together stay within ``slots`` (least recently used go first).
    """
    global _in_use
    evicted = []
    structure = structure_key(spec)
    with _lock:
        if taken:
            _in_use -= 1
        if tournament_id in _closed:  # the tournament ended while this segment ran
            evicted.append(pod)
        else:
            old = _pods.pop((tournament_id, pod_id), None)
            if old is not None:
                evicted.append(old.pod)
            _pods[(tournament_id, pod_id)] = _Resident(pod, checkpoint, structure)
            # running pods hold memory too: they count against the slots
            while _pods and len(_pods) + _in_use > max(1, slots or DEFAULT_SLOTS):
                evicted.append(_pods.popitem(last=False)[1].pod)
    for old_pod in evicted:
        old_pod.close()


def drop(tournament_id: str | None = None) -> int:
    """Close and forget the resident pods of one tournament (or all); return how many.

    A tournament calls it on every worker (``client.run``) when it ends.
    """
    with _lock:
        if tournament_id is not None:
            _closed.add(tournament_id)
        else:
            _closed.clear()  # a clean slate (tests, a worker being reused)
        keys = [k for k in _pods if tournament_id is None or k[0] == tournament_id]
        gone = [_pods.pop(k).pod for k in keys]
    for pod in gone:
        pod.close()
    return len(gone)


def resident(tournament_id: str | None = None) -> list[tuple[str, str, str]]:
    """``(tournament, pod, checkpoint)`` of the pods this process keeps (for tests, views)."""
    with _lock:
        return [
            (t, p, e.checkpoint)
            for (t, p), e in _pods.items()
            if tournament_id is None or t == tournament_id
        ]
