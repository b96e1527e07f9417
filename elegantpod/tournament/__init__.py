"""The tournament-based ensemble: population (pure), runner (Dask), store, and the facade."""

from elegantpod.tournament.generator import SEARCH_SPACES, Bound, GeneratorConfig
from elegantpod.tournament.leaderboard import Entry
from elegantpod.tournament.lease import Lease, LeaseError, LeaseLost
from elegantpod.tournament.orchestrator import Tournament, TournamentFailed
from elegantpod.tournament.record import PodRecord
from elegantpod.tournament.spec import TournamentSpec
from elegantpod.tournament.store import Store

__all__ = [
    "SEARCH_SPACES",
    "Bound",
    "Entry",
    "GeneratorConfig",
    "Lease",
    "LeaseError",
    "LeaseLost",
    "PodRecord",
    "Store",
    "Tournament",
    "TournamentFailed",
    "TournamentSpec",
]
