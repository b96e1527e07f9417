"""A tournament read back from its store, checked as untrusted input, to resume it.

Everything in a store may come from someone else: the spec is checked like user input,
data files or URLs it names are used only if the user gives them again (or allows
remote sources), and the saved records, leaderboard and counters go through
:mod:`~elegantpod.tournament.store.state`'s checks before any of it reaches a population.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from elegantpod.tournament.core.field_checks import POD_ID, mapping
from elegantpod.tournament.core.hparam_checks import learner_config
from elegantpod.tournament.core.protocol import RESUMABLE
from elegantpod.tournament.core.spec import (
    TournamentSpec,
    check_pod,
    check_sources,
    check_spec,
    make_spec,
    resume_changes,
    spec_names,
)
from elegantpod.tournament.store import state as stored_state
from elegantpod.tournament.store.files import StoreError
from elegantpod.tournament.store.store import Store


@dataclass(frozen=True)
class SavedTournament:
    """What :meth:`Tournament.resume <elegantpod.tournament.Tournament.resume>` continues.

    Attributes
    ----------
    spec
        The store's spec with the resume's overrides applied (checked).
    changes
        ``{field: [old, new]}`` for the fields the overrides changed.
    records, entries, counters
        The population's pod records, leaderboard entries and counters (checked).
    pod_ids
        Every pod id that has a checkpoint folder in the store (never reused).
    """

    spec: TournamentSpec
    changes: dict[str, list]
    records: list
    entries: list
    counters: dict[str, Any]
    pod_ids: frozenset[str]

    @classmethod
    def read(
        cls, store: Store, overrides: dict[str, Any], allow_remote: bool, given: str = ""
    ) -> SavedTournament:
        """Read and check ``store``'s tournament; ``ValueError`` (a
        :class:`~elegantpod.tournament.store.store.StoreError` for a malformed store) names
        what is wrong before anything is built from it. ``given``: the store as the
        user wrote it (a pod id there means they meant ``unpause``)."""
        saved = store.read_json("tournament.json")
        if saved is None:
            hint = ""
            if POD_ID.match(given):
                hint = f"; to let a paused pod go on, call t.unpause({given!r})"
            raise ValueError(f"store {store.url!r} holds no tournament (no tournament.json){hint}")
        overrides = spec_names(overrides)
        where = f"{store.path('tournament.json')!r} is not a tournament spec"
        try:
            spec = TournamentSpec.from_dict(mapping(saved, "tournament.json"))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {exc}") from None
        try:  # before anything reads them
            check_sources(store.path("tournament.json"), spec, overrides, allow_remote)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        try:
            check_spec(spec)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {exc}") from None
        changes = resume_changes(spec, overrides, f"store {store.url!r}")
        spec = make_spec(**{**spec.to_dict(), **{k: v[1] for k, v in changes.items()}})
        raw = store.load_state()
        where = store.loaded_from or store.path("state")
        records, entries, counters = stored_state.load(raw or {}, where)
        check_pods(spec, records, entries, where)
        return cls(spec, changes, records, entries, counters, frozenset(store.pod_ids()))

    def restore(self, population) -> dict[str, Any]:
        """Load the saved records, leaderboard and counters into a new ``population``;
        return the counters (the tournament's identity, seconds, worker deaths)."""
        population.load(self.records, self.entries, self.counters)
        # A solved tournament stays solved unless the resume changes what ends it.
        if any(k in self.changes for k in ("target_reward", "max_seconds", "max_steps")):
            population.solved = False
        # Saves are at most a second apart: a pod created after the last one may have
        # left checkpoints. Never reuse an id that a record or a checkpoint folder holds.
        population.reseed(set(self.pod_ids))
        return self.counters


def check_pods(spec: TournamentSpec, records: dict, entries: list, where: str) -> None:
    """Every pod a resume may run again (a resumable record) and every parent a child may
    copy (a usable leaderboard entry) checked whole with the (resumed) spec
    (:func:`~elegantpod.tournament.core.spec.check_pod`): sizes that each pass alone
    but not together, too few sub-envs for the fused learners, or more memory than the
    device has, as a :class:`StoreError` naming ``where``, the pod and the values,
    before any cluster work. Each distinct setting is checked once."""
    pods = [
        (f"pod {r.pod_id}", r.algo, r.hparams) for r in records.values() if r.status in RESUMABLE
    ]
    pods += [(f"leaderboard entry {e.pod_id}", e.algo, e.hparams) for e in entries if e.usable]
    seen = set()
    for name, algo, hparams in pods:
        key = (algo, json.dumps(hparams, sort_keys=True, default=str))
        if key in seen:
            continue
        seen.add(key)
        try:
            check_pod(spec, algo, learner_config(algo, hparams))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {name}: {exc}") from None
