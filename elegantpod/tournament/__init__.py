"""The tournament-based ensemble: leaderboard, generator, store and the Dask orchestrator."""

from elegantpod.tournament.generator import SEARCH_SPACES, Bound, GeneratorConfig
from elegantpod.tournament.leaderboard import Entry
from elegantpod.tournament.orchestrator import Tournament
from elegantpod.tournament.spec import PodRecord, TournamentSpec
from elegantpod.tournament.store import Store

__all__ = [
    "SEARCH_SPACES",
    "Bound",
    "Entry",
    "GeneratorConfig",
    "PodRecord",
    "Store",
    "Tournament",
    "TournamentSpec",
]
