"""The checks of a store's state, by their former module name: kept for code written
against it (``from elegantpod.tournament.state import StateError`` still works).

The checks live in modules named after what they hold, which is what new code imports:

- :mod:`elegantpod.tournament.field_checks`: one value read from a store (pod ids,
  checkpoint names, bounded numbers, text) and :class:`StateError`;
- :mod:`elegantpod.tournament.hparam_checks`: hyperparameters and mutation lineage,
  from a store or from a mutation policy;
- :mod:`elegantpod.tournament.stored_state`: a whole snapshot, :func:`load`.

Its importers renamed it (``state as checked``): ``state`` is also what the engine
calls the dict it saves. The modules above need no renaming on import.
"""

from __future__ import annotations

from elegantpod.tournament.field_checks import (
    CHECKPOINT_NAME,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_HISTORY,
    MAX_INDEX,
    MAX_SECONDS,
    MAX_TEXT,
    POD_ID,
    TOURNAMENT_UID,
    StateError,
    check_checkpoint,
    check_depth,
    check_pod_id,
    checkpoint_name,
    count,
    items,
    mapping,
    score,
    seconds,
    text,
)
from elegantpod.tournament.hparam_checks import (
    MAX_LIST,
    algo_name,
    hparams,
    learner_config,
    mutation,
    policy_output,
)
from elegantpod.tournament.stored_state import (
    ORIGIN_KINDS,
    STATUSES,
    counters,
    entry,
    history,
    load,
    origin,
    record,
)

__all__ = [
    "CHECKPOINT_NAME",
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_HISTORY",
    "MAX_INDEX",
    "MAX_LIST",
    "MAX_SECONDS",
    "MAX_TEXT",
    "ORIGIN_KINDS",
    "POD_ID",
    "STATUSES",
    "TOURNAMENT_UID",
    "StateError",
    "algo_name",
    "check_checkpoint",
    "check_depth",
    "check_pod_id",
    "checkpoint_name",
    "count",
    "counters",
    "entry",
    "history",
    "hparams",
    "items",
    "learner_config",
    "load",
    "mapping",
    "mutation",
    "origin",
    "policy_output",
    "record",
    "score",
    "seconds",
    "text",
]
