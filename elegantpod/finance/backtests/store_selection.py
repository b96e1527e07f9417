"""The selection a tournament's store records, read without touching the store.

A checkpoint that a tournament chose is the best of every pod it scored; its deflated
Sharpe ratio must count them all, whether the backtest is given the tournament, its
store, or one checkpoint file inside it (``<store>/pods/p020/seg-00002.pt``). These
functions read the store's spec and newest state snapshot, checked as untrusted input,
and never take the store's lease or write anything: a backtest may run while the
tournament does.
"""

from __future__ import annotations

import os
from typing import Any

from elegantpod.tournament.store.reading import best_entry, read_store, store_of_checkpoint
from elegantpod.tournament.store.reading import expected_origin as _expected


def _selection(store, spec: dict, records: dict) -> dict[str, Any]:
    """Trials as :func:`~elegantpod.finance.backtests.backtest._tournament_info` counts them: every
    scored evaluation of every pod (each was compared), with its score."""
    scores = []
    for rec in records.values():
        found = [h.get("score") for h in rec.history if isinstance(h, dict)]
        scores += [float(x) for x in found if x is not None]
    fitness = spec.get("fitness")
    return {
        "trials": len(scores) or None,
        "trial_scores": scores,
        "fitness": fitness if isinstance(fitness, str) else None,
        "tournament_store": store.url,
    }


def of_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The selection of the store that ``path`` lies in; ``{}`` for a checkpoint in none.

    ``expected`` (when the store records the pod): what the checkpoint must say of itself.
    """
    root = store_of_checkpoint(path)
    if root is None:
        return {}
    store, spec, records, _, uid = read_store(root)
    out = _selection(store, spec, records)
    pod = os.fspath(path).replace("\\", "/").rsplit("/", 2)[-2]
    rec = records.get(pod)
    if rec is not None:
        out.update(
            pod=pod, name=f"{rec.algo.upper()} {pod}", expected=_expected(spec, uid, rec.algo, pod)
        )
    return out


def best_of_store(root: str | os.PathLike) -> dict[str, Any]:
    """The store's best agent (its checkpoint path), its selection and lineage, and
    ``expected``: the env and algorithm its checkpoint must hold."""
    store, spec, records, best, uid = best_entry(root)
    chain, pod = [], best.pod_id
    while pod is not None and pod in records and len(chain) < 100:
        r = records[pod]
        chain.append({"pod": pod, "parent": r.parent, "algo": r.algo, "mutation": r.mutation})
        pod = r.parent
    out = _selection(store, spec, records)
    out.update(
        name=f"{best.algo.upper()} {best.pod_id}",
        pod=best.pod_id,
        score=best.score_mean,
        checkpoint=store.resolve(best.checkpoint),
        lineage=chain,
        expected=_expected(spec, uid, best.algo, best.pod_id),
    )
    return out
