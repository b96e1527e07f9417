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
from pathlib import Path
from typing import Any

SPEC = "tournament.json"


def _is_url(path: Any) -> bool:
    return "://" in os.fspath(path) and not os.fspath(path).startswith("file://")


def is_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a tournament's store: a folder (or URL) holding ``tournament.json``."""
    if _is_url(path):
        from elegantpod.tournament.store import Store

        try:
            return Store(path).exists(SPEC)
        except (OSError, ValueError):
            return False
    return Path(path).is_dir() and (Path(path) / SPEC).is_file()


def store_of_checkpoint(path: str | os.PathLike) -> str | None:
    """The store that holds checkpoint ``path`` (``<store>/pods/pNNN/seg-NNNNN.pt``), or
    ``None`` when it lies in no store."""
    from elegantpod.tournament.field_checks import CHECKPOINT_NAME

    text = os.fspath(path).replace("\\", "/") if not _is_url(path) else os.fspath(path)
    parts = text.rsplit("/", 3)
    if len(parts) != 4 or not CHECKPOINT_NAME.match("/".join(parts[1:])):
        return None
    root = parts[0] or "/"
    return root if is_store(root) else None


def _read(root: str):
    """``(store, spec dict, records, leaderboard entries, tournament uid)``, all checked;
    read only."""
    from elegantpod.tournament import field_checks, stored_state
    from elegantpod.tournament.store import Store

    store = Store(root)
    spec = field_checks.mapping(store.read_json(SPEC, default={}), store.path(SPEC))
    raw = store.load_state()
    records, entries, counters = stored_state.load(
        raw or {}, store.loaded_from or store.path("state")
    )
    return store, spec, records, entries, counters["tournament_uid"]


def _expected(spec: dict, uid: str | None, algo: str, pod: str) -> dict[str, Any]:
    """What the checkpoint of ``pod`` must say of itself: keywords of
    :func:`~elegantpod.checkpoint.check_origin`."""
    return {"tournament": uid, "env_id": spec.get("env_id"), "algo": algo, "pod": pod}


def _selection(store, spec: dict, records: dict) -> dict[str, Any]:
    """Trials as :func:`~elegantpod.finance.backtest._tournament_info` counts them: every
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
    store, spec, records, _, uid = _read(root)
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
    from elegantpod.tournament import leaderboard as lb

    store, spec, records, entries, uid = _read(os.fspath(root))
    usable = lb.rank([e for e in entries if e.usable])
    if not usable:
        raise ValueError(
            f"store {store.url!r} has no agent on its leaderboard yet: no segment has finished"
        )
    best = usable[0]
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
