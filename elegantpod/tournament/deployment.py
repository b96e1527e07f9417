"""One deployment path: whatever holds an agent, resolved to the policy to deploy, the
spec it trained with, and how it was selected.

A trained agent reaches a user in five forms: a live :class:`~elegantpod.pod.pod.Pod`, a
checkpoint file, a run folder (its ``best.pt``), a :class:`Tournament` or a tournament's
store (its best agent). :meth:`Deployment.of` takes any of them and returns the same
thing: the :class:`~elegantpod.policy.policy.Policy` (the actor alone: no learner, no
optimizer, no replay), the :class:`~elegantpod.config.PodSpec` it trained with (its
env and dates, as its checkpoint records them), the layout of its inputs, and its
:class:`Selection`: how many evaluations the tournament compared before it chose this
agent, which a deflated Sharpe ratio needs. A backtest, ``Policy``'s users and the
command line all go through it, so a store is read, and its checkpoint checked against
the store's record, one way.

Here, above the tournament, because a store and a tournament are two of the sources;
the policy, below, reads a checkpoint file or a run folder only.

Everything read from a store or a checkpoint is untrusted: the store's records are
checked as :func:`~elegantpod.tournament.store.reading.read_store` checks them, a
checkpoint's origin against the record that names it, and no lease is taken and nothing
written, so an agent may be deployed while its tournament runs.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from elegantpod.config import PodSpec
from elegantpod.pod.checkpoint import check_origin, load_checkpoint, resolve_checkpoint
from elegantpod.pod.saved import SavedPod
from elegantpod.policy.policy import Policy
from elegantpod.tournament.store.reading import (
    best_entry,
    expected_origin,
    is_store,
    read_store,
    store_of_checkpoint,
)

MAX_LINEAGE = 100
"""Most ancestors a selection's lineage lists (a store from someone else may hold a
chain of any length)."""


@dataclass(frozen=True)
class Selection:
    """How an agent was chosen: by a tournament that compared ``trials`` evaluations, or
    (``trials`` ``None``) by nobody we know of (a pod, a checkpoint from ``train()``)."""

    trials: int | None = None
    """Evaluations the tournament scored and compared: each was a chance to look lucky,
    so a deflated Sharpe ratio discounts the winner by this many."""
    trial_scores: tuple[float, ...] = ()
    """Those evaluations' scores (in the tournament's fitness)."""
    fitness: str | None = None
    """What the tournament ranked by (``"return"``, ``"sharpe"``...)."""
    store: str | None = None
    """The tournament's store."""
    pod: str | None = None
    """The pod whose checkpoint this is."""
    name: str | None = None
    """A name for tables and charts (``"PPO p007"``)."""
    score: float | None = None
    """Its leaderboard score."""
    lineage: tuple[dict[str, Any], ...] = ()
    """Its pod, then each ancestor: ``pod``, ``parent``, ``algo`` and the ``mutation`` that
    made it."""

    def as_dict(self) -> dict[str, Any]:
        """Its fields as JSON values (a report's agent section), ``store`` as
        ``tournament_store``; fields with no value left out."""
        out = {
            "trials": self.trials,
            "trial_scores": list(self.trial_scores),
            "fitness": self.fitness,
            "tournament_store": self.store,
            "pod": self.pod,
            "name": self.name,
            "score": self.score,
            "lineage": [dict(e) for e in self.lineage],
        }
        return {k: v for k, v in out.items() if v not in (None, [], ())}


@dataclass(frozen=True)
class Deployment:
    """An agent ready to deploy: its policy, what it trained with, how it was chosen.

    Examples
    --------
    >>> import elegantpod
    >>> run = elegantpod.train("CartPole-v1", "ppo", max_steps=4_096, progress=False,
    ...                        out=elegantpod.workdir("doc-deployment"))
    >>> d = elegantpod.Deployment.of(run.checkpoint)  # a store or a Tournament alike
    >>> d.spec.env_id, d.selection.trials  # no tournament chose it
    ('CartPole-v1', None)
    >>> actions, _ = d.policy.predict([[0.0, 0.1, 0.0, -0.1]])
    """

    policy: Policy
    """The actor alone, on the device asked for."""
    spec: PodSpec
    """The spec it trained with: for a checkpoint, the checkpoint's own (its env, its
    training and validation dates), whatever data stands in later."""
    env_steps: int
    """Env steps it trained for."""
    checkpoint: str | None = None
    """The checkpoint file it came from (for a tournament, its leader's; ``None``: a
    pod)."""
    live: bool = False
    """Built from a live pod or tournament: its spec's env keywords are the data it was
    given, not files a checkpoint names (which are read only when trusted)."""
    layout: dict[str, tuple[str, ...]] | None = None
    """The layout of its inputs where the env has one (a trading agent's tickers in the
    order it trades them, and its features): what other data must be put in."""
    selection: Selection = field(default_factory=Selection)
    """How it was chosen."""
    saved: SavedPod | None = field(default=None, repr=False, compare=False)
    """The checkpoint as read and checked (``None``: a live pod or tournament), so that
    what else needs it (a backtest's env keywords) does not read it again."""

    @classmethod
    def of(cls, source: Any, *, device: str = "cpu") -> Deployment:
        """The agent ``source`` holds, with its policy on ``device``.

        Parameters
        ----------
        source
            A :class:`~elegantpod.pod.pod.Pod` (its current policy), a
            :class:`~elegantpod.tournament.orchestrator.Tournament` (its best agent, with
            the tournament's selection), a tournament's store, local or a URL (its best
            agent, checked against the store's record), a run folder (its ``best.pt``) or
            a checkpoint file or URL. A checkpoint that lies in a store
            (``<store>/pods/p003/seg-00002.pt``) carries that store's selection, and is
            checked against the store's record of its pod.

        Raises
        ------
        TypeError
            For a source of another type.
        ValueError
            For a store with no agent yet, or a tournament whose leaderboard has no
            usable entry.
        CheckpointError
            For a checkpoint that is missing, corrupt, foreign, or not what the store's
            record says it is.
        """
        if _is_pod(source):
            return cls._of_pod(source, device, Selection())
        if _is_tournament(source):
            selection, checkpoint = _of_tournament(source)
            pod = source.best(device=device)
            try:
                d = cls._of_pod(pod, device, selection)
            finally:
                pod.close()
            return dataclasses.replace(d, checkpoint=checkpoint)
        if not isinstance(source, str | os.PathLike):
            raise TypeError(
                "an agent must be a Pod, a Tournament, a store, a run folder or a "
                f"checkpoint, got {type(source).__name__}"
            )
        if is_store(source):
            path, selection, expected = _of_store(source)
        else:
            path = resolve_checkpoint(source)  # a run folder: its best.pt
            selection, expected = _of_checkpoint(path)
        data = load_checkpoint(path, map_location="cpu")  # read once (a URL: fetched once)
        if expected is not None:  # a store's checkpoint: what its record says it is
            check_origin(data, path, **expected)
        saved = SavedPod.parse(data, path)
        return cls(
            policy=Policy.from_saved(saved, device=device),
            spec=saved.spec,
            env_steps=saved.env_steps,
            checkpoint=os.fspath(path),
            layout=saved.layout,
            selection=selection,
            saved=saved,
        )

    @classmethod
    def _of_pod(cls, pod, device: str, selection: Selection) -> Deployment:
        layout = pod.env.layout() if hasattr(pod.env, "layout") else None
        return cls(
            policy=Policy.from_pod(pod, device=device),
            spec=pod.spec,
            env_steps=pod.env_steps,
            layout=None if layout is None else {k: tuple(v) for k, v in layout.items()},
            selection=selection,
            live=True,
        )


def _is_pod(x: Any) -> bool:
    return all(hasattr(x, a) for a in ("learner", "spec", "env", "env_steps"))


def _is_tournament(x: Any) -> bool:
    return all(hasattr(x, a) for a in ("best", "lineage", "history", "store"))


def _of_records(store, spec: dict, records: dict) -> Selection:
    """A store's selection as its records hold it: every scored evaluation of every pod
    (each was compared), in the store's order, and what they were ranked by."""
    scores = []
    for rec in records.values():
        found = [h.get("score") for h in rec.history if isinstance(h, dict)]
        scores += [float(x) for x in found if x is not None]
    f = spec.get("fitness")
    return Selection(
        trials=len(scores) or None,
        trial_scores=tuple(scores),
        fitness=f if isinstance(f, str) else None,
        store=store.url,
    )


def _chain(start: str | None, parents: dict[str, dict[str, Any]]) -> tuple[dict, ...]:
    chain, pod = [], start
    while pod is not None and pod in parents and len(chain) < MAX_LINEAGE:
        e = parents[pod]
        chain.append(
            {"pod": pod, "parent": e["parent"], "algo": e["algo"], "mutation": e["mutation"]}
        )
        pod = e["parent"]
    return tuple(chain)


def _of_tournament(t) -> tuple[Selection, str | None]:
    """A live tournament's selection (every evaluation it scored, its leader and
    lineage) and its leader's checkpoint."""
    board = t.leaderboard
    best = board.iloc[0].to_dict() if len(board) else {}
    edges = {e["pod"]: e for e in t.lineage().to_dict("records")}
    scored = t.history().dropna(subset=["score"])["score"]
    selection = Selection(
        trials=max(int(len(scored)), 1),
        trial_scores=tuple(float(x) for x in scored.to_numpy()),
        fitness=t.spec.fitness,
        store=t.store.url,
        pod=best.get("pod"),
        name=f"{str(best.get('algo', 'agent')).upper()} {best.get('pod', '')}".strip(),
        score=best.get("score_mean"),
        lineage=_chain(best.get("pod"), edges),
    )
    checkpoint = best.get("checkpoint")
    return selection, None if checkpoint is None else str(checkpoint)


def _of_store(root: str | os.PathLike) -> tuple[str, Selection, dict[str, Any]]:
    """A store's best agent: its checkpoint, the store's selection and lineage, and what
    its checkpoint must say of itself."""
    store, spec, records, best, uid = best_entry(root)
    parents = {
        pod: {"parent": r.parent, "algo": r.algo, "mutation": r.mutation}
        for pod, r in records.items()
    }
    selection = dataclasses.replace(
        _of_records(store, spec, records),
        pod=best.pod_id,
        name=f"{best.algo.upper()} {best.pod_id}",
        score=best.score_mean,
        lineage=_chain(best.pod_id, parents),
    )
    expected = expected_origin(spec, uid, best.algo, best.pod_id)
    return store.resolve(best.checkpoint), selection, expected


def _of_checkpoint(path: str | os.PathLike) -> tuple[Selection, dict[str, Any] | None]:
    """The selection of the store that ``path`` lies in (none: an unknown selection), and
    what the checkpoint must say of itself where the store records its pod."""
    root = store_of_checkpoint(path)
    if root is None:
        return Selection(), None
    store, spec, records, _, uid = read_store(root)
    selection = _of_records(store, spec, records)
    pod = os.fspath(path).replace("\\", "/").rsplit("/", 2)[-2]
    rec = records.get(pod)
    if rec is None:
        return selection, None
    named = dataclasses.replace(selection, pod=pod, name=f"{rec.algo.upper()} {pod}")
    return named, expected_origin(spec, uid, rec.algo, pod)
