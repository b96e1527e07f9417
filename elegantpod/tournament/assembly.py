"""How a tournament's parts are put together: a new one on an empty store, or a saved
one continued from its store.

A :class:`~elegantpod.tournament.Tournament` is a facade over one
:class:`~elegantpod.tournament.client.engine.Engine`, which owns the pure
:class:`~elegantpod.tournament.core.population.Population` and the run's state. Both ways of
making one end here, so a resumed tournament is built exactly as a new one is, with the
saved state loaded into its population before anything runs.
"""

from __future__ import annotations

from elegantpod.tournament.client.engine import Engine
from elegantpod.tournament.core.population import Population
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.store.lease import Lease
from elegantpod.tournament.store.saved import SavedTournament
from elegantpod.tournament.store.store import Store
from elegantpod.tracking.tracker import Tracker


def empty_store(store, env: str, overwrite: bool = False) -> Store:
    """``store`` as a :class:`~elegantpod.tournament.store.store.Store`; ``ValueError`` if it
    already holds a tournament (saying how to continue that one, or replace it, instead).

    ``overwrite=True`` accepts a store that holds a tournament: :func:`replace_tournament`
    deletes it once every other argument has been checked.
    """
    s = Store(store)
    existing = s.read_json("tournament.json")
    if existing is not None and not overwrite:
        where = f"store {s.url!r}"
        if isinstance(existing, dict) and existing.get("env_id") != env:
            raise ValueError(
                f"{where} belongs to a tournament on {existing.get('env_id')!r}, not {env!r}; "
                "replace it with overwrite=True (--overwrite) or choose a new store"
            )
        raise ValueError(
            f"{where} already holds a tournament; continue it with "
            "Tournament.resume(store) (--resume on the command line), replace it with "
            "overwrite=True (--overwrite), or choose a new store"
        )
    return s


def replace_tournament(store: Store) -> list[str]:
    """Delete the tournament ``store`` holds (:meth:`Store.clear
    <elegantpod.tournament.store.store.Store.clear>`: its spec, state, leaderboard and
    checkpoints; other files stay) under the store's lease, and return what went. A store
    that a running tournament writes is refused (a
    :class:`~elegantpod.tournament.store.lease.LeaseError`, a ``ValueError`` naming the
    writer), never cleared under it; a writer that is gone (its process ended on this
    machine) holds nothing."""
    if store.read_json("tournament.json") is None:
        return []
    with Lease(store).acquire():  # released after: lease.json goes with the tournament
        return store.clear()


def assemble(
    spec: TournamentSpec,
    store: Store,
    client,
    mutation_policy,
    saved: SavedTournament | None = None,
    force: bool = False,
    loggers=None,
) -> Engine:
    """The engine of a tournament (holding its population), new or ``saved``.

    ``force`` takes over the store's lease from a writer that is gone; ``loggers`` are
    the experiment-tracking backends the engine feeds (checked here, before any work).
    """
    tracker = Tracker(loggers)
    if mutation_policy is not None and not callable(mutation_policy):
        raise ValueError(f"mutation_policy must be a function, got {mutation_policy!r}")
    population = Population(spec, mutation_policy)
    counters = saved.restore(population) if saved is not None else {}
    return Engine(
        spec,
        store,
        population,
        client,
        uid=counters.get("tournament_uid"),  # older stores: a new one from now on
        elapsed_seconds=counters.get("elapsed_seconds", 0.0),
        worker_deaths=counters.get("worker_deaths_survived", 0),
        force=force,
        tracker=tracker,
    )
