"""The tournament: an asynchronous population of pods on Dask, and its facade.

Arrows point one way, down this list:

- ``core/``: the pure state machine (population, leaderboard, selection rules, spec,
  protocol, views): no Dask, no I/O.
- ``store/``: the store's files, snapshots, lease and saver.
- ``worker/``: what runs on a Dask worker (a segment, resident pods, their channels).
- ``client/``: the engine's loop and the runner, the only Dask glue.
- ``assembly``: a tournament put together from its spec or its store.
- ``progress``: a running tournament's progress lines on a terminal (``wait()``, the
  command line and ``make demo`` print the same).
- ``orchestrator``: :class:`Tournament`, the facade users and the dashboard call, and
  how it shows itself (an escaped HTML table, a one-line repr).
- ``best_agent``: the best agent of a tournament, loaded and checked, as a pod.
- ``deployment``: any source of an agent (a pod, a tournament, a store, a run folder,
  a checkpoint) resolved to its policy, spec and selection (``Deployment.of``).

The names below are the part's public face (``from elegantpod.tournament import Store``).
"""

from elegantpod.search.space import Bound
from elegantpod.tournament.core.generator import GeneratorConfig, mutate, search_space
from elegantpod.tournament.core.leaderboard import Entry
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.rules import Replacement, SelectionRule, register_rule
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.orchestrator import Tournament, TournamentFailed
from elegantpod.tournament.store.lease import Lease, LeaseError, LeaseLost
from elegantpod.tournament.store.store import Store

__all__ = [
    "Bound",
    "Entry",
    "GeneratorConfig",
    "Lease",
    "LeaseError",
    "LeaseLost",
    "PodRecord",
    "Replacement",
    "SelectionRule",
    "Store",
    "Tournament",
    "TournamentFailed",
    "TournamentSpec",
    "mutate",
    "register_rule",
    "search_space",
]
