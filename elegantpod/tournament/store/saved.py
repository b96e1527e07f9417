"""A tournament read back from its store, checked as untrusted input, to resume it.

Everything in a store may come from someone else: the spec is checked like user input,
data files or URLs it names are used only if the user gives them again (or allows
remote sources), and the saved records, leaderboard and counters go through
:mod:`~elegantpod.tournament.store.state`'s checks before any of it reaches a population.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elegantpod.tournament.core.field_checks import POD_ID, mapping
from elegantpod.tournament.core.spec import (
    TournamentSpec,
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
