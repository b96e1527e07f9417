"""A tournament's store read from outside, without its lease: which folder is a store,
which store a checkpoint lies in, and the store's best agent.

Why: a backtest, ``Deployment.of`` and ``elegantpod export`` take a store wherever they
take a checkpoint, and mean its best agent, as ``t.best()`` does. They read the store's
spec and newest snapshot, checked as untrusted input, and never take its lease or write:
they may run while the tournament does. (:mod:`elegantpod.tournament.deployment` turns
what is read into the policy and its selection.)
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
        from elegantpod.tournament.store.store import Store

        try:
            return Store(path).exists(SPEC)
        except (OSError, ValueError):
            return False
    return Path(path).is_dir() and (Path(path) / SPEC).is_file()


def store_of_checkpoint(path: str | os.PathLike) -> str | None:
    """The store that holds checkpoint ``path`` (``<store>/pods/pNNN/seg-NNNNN.pt``), or
    ``None`` when it lies in no store."""
    from elegantpod.tournament.core.field_checks import CHECKPOINT_NAME

    text = os.fspath(path).replace("\\", "/") if not _is_url(path) else os.fspath(path)
    parts = text.rsplit("/", 3)
    if len(parts) != 4 or not CHECKPOINT_NAME.match("/".join(parts[1:])):
        return None
    root = parts[0] or "/"
    return root if is_store(root) else None


def read_store(root: str):
    """``(store, spec dict, records, leaderboard entries, tournament uid)``, all checked;
    read only."""
    from elegantpod.tournament.core import field_checks
    from elegantpod.tournament.store import state as stored_state
    from elegantpod.tournament.store.store import Store

    store = Store(root)
    spec = field_checks.mapping(store.read_json(SPEC, default={}), store.path(SPEC))
    raw = store.load_state()
    records, entries, counters = stored_state.load(
        raw or {}, store.loaded_from or store.path("state")
    )
    return store, spec, records, entries, counters["tournament_uid"]


def expected_origin(spec: dict, uid: str | None, algo: str, pod: str) -> dict[str, Any]:
    """What the checkpoint of ``pod`` must say of itself: keywords of
    :func:`~elegantpod.pod.checkpoint.check_origin`."""
    return {"tournament": uid, "env_id": spec.get("env_id"), "algo": algo, "pod": pod}


def best_entry(root: str | os.PathLike):
    """``(store, spec dict, records, best entry, uid)``: the store's best usable
    leaderboard entry; ``ValueError`` when it has none yet."""
    from elegantpod.tournament.core import leaderboard as lb

    store, spec, records, entries, uid = read_store(os.fspath(root))
    usable = lb.rank([e for e in entries if e.usable])
    if not usable:
        raise ValueError(
            f"store {store.url!r} has no agent on its leaderboard yet: no segment has finished"
        )
    return store, spec, records, usable[0], uid
