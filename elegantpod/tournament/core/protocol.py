"""The tournament's protocol: the statuses, messages and kinds its parts exchange, typed.

Why one module: each of these is written in one module and read in another (the runner
writes the control message a segment reads on a worker; a segment publishes the events
the engine folds in; the runner tells outcomes apart that the engine acts on; the
population sets the statuses every view counts). Spelled as string literals in each, a
typo is a message nobody reads and no error anywhere; here each value is an enum member
and the control message a dataclass that refuses what it does not know.

The enums are strings: ``PodStatus.PAUSED == "paused"``, with the same hash, ``str()``,
f-string and JSON, so they compare equal to the plain strings that stores, DataFrames
and JSON output hold. What crosses a process (a control Variable, a progress event) is
plain data: :meth:`ControlMessage.to_dict` and :func:`event` give plain strings, dicts
and numbers.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.text import short


class TextEnum(str, enum.Enum):
    """A string-valued enum whose members are their values wherever a string goes."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def _missing_(cls, value: object):
        choices = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"unknown {cls.__name__} {short(value)}; one of {choices}")


class PodStatus(TextEnum):
    """Where a pod is in its life (``PodRecord.status``)."""

    QUEUED = "queued"
    """Alive, waiting for a worker slot."""
    RUNNING = "running"
    """Alive, a segment of it on the cluster."""
    PAUSED = "paused"
    """Alive, not stepping until resumed (a running segment holds its slot)."""
    IDLE = "idle"
    """Alive when the tournament ended: a resume continues it."""
    STOPPED = "stopped"
    """Stopped by the user: checkpointed, never resubmitted (a parent still)."""
    REPLACED = "replaced"
    """Replaced by a child (exploit) or a fresh pod (restart)."""
    FAILED = "failed"
    """Its segments failed past the retries (``PodRecord.error`` says why)."""


SCHEDULED = frozenset({PodStatus.QUEUED, PodStatus.RUNNING})
"""Statuses of pods that are alive and not paused: waiting for a slot, or training."""
ACTIVE = SCHEDULED | {PodStatus.PAUSED}
"""Statuses of pods that are alive and take part in the tournament."""
RESUMABLE = ACTIVE | {PodStatus.IDLE, PodStatus.STOPPED}
"""Statuses of pods whose latest checkpoint the store keeps: a resume continues them and
``add_pod(parent=...)`` clones them (a replaced or failed pod's may be pruned)."""


class TournamentStatus(TextEnum):
    """Where a tournament is (``Tournament.status``)."""

    CREATED = "created"
    """Not started yet (or resumed from a store and not started again)."""
    RUNNING = "running"
    FINISHED = "finished"
    """Its budget or target was reached."""
    STOPPED = "stopped"
    """``stop()`` (or Ctrl-C) ended it first."""
    FAILED = "failed"
    """It could not go on (``summary()["error"]`` says why)."""


class EventKind(TextEnum):
    """What a progress event from a running segment says (its ``type``)."""

    PROGRESS = "progress"
    """After an update: steps, steps/s, returns, losses (``status``: running)."""
    STATUS = "status"
    """The pod holds, paused (``status``: paused)."""
    SEGMENT_END = "segment_end"
    """The segment ended (``status``: a :class:`SegmentEnd`)."""


class SegmentEnd(TextEnum):
    """How a segment ended (a ``segment_end`` event's ``status``)."""

    FINISHED = "finished"
    """Its budget was spent."""
    STOPPED = "stopped"
    """A stop (the pod's or the tournament's) arrived first."""


def event(kind: EventKind, status: str, **fields: Any) -> dict[str, Any]:
    """A progress event as the plain dict a segment publishes (``type``, ``status``, then
    ``fields``); ``ValueError`` for an unknown ``kind``."""
    return {"type": EventKind(kind).value, "status": str(status), **fields}


class OutcomeKind(TextEnum):
    """What became of one submitted segment (``runner.Outcome.kind``)."""

    RESULT = "result"
    """It finished: a :class:`~elegantpod.tournament.worker.segment.SegmentResult`."""
    KILLED = "killed"
    """Dask gave up on it after worker deaths (retried while the pod has retries)."""
    ERROR = "error"
    """It raised: the pod failed."""
    UNSUBMITTED = "unsubmitted"
    """Submitting it failed (a plugin, the scheduler): retried like a worker death."""
    LOST = "lost"
    """Cancelled, lost or unreadable: run it again (a segment is idempotent)."""
    STORE = "store"
    """The store refused its checkpoint (full, read-only, gone): the tournament stops."""
    FENCED = "fenced"
    """Another writer holds the store's lease: the tournament stops, failed."""


CONTROL_STATES = (PodStatus.RUNNING, PodStatus.PAUSED, PodStatus.STOPPED)
"""The pod states a control message may carry."""
CONTROL_TOURNAMENTS = (TournamentStatus.RUNNING, TournamentStatus.STOPPED)
"""The tournament states a control message may carry."""


def _one_of(kind: type[TextEnum], allowed: tuple, value: Any, name: str) -> Any:
    """``value`` as a member of ``kind`` if it is one of ``allowed``, else ``ValueError``."""
    if isinstance(value, str) and value in allowed:
        return kind(value)
    choices = ", ".join(repr(m.value) for m in allowed)
    raise ValueError(f"control message: {name} must be one of {choices}, got {short(value)}")


@dataclass(frozen=True, kw_only=True)
class ControlMessage:
    """What a running segment reads from its pod's control Variable.

    The runner builds it (:func:`~elegantpod.tournament.client.runner.control_message`), numbers
    it and sets :meth:`to_dict` on the Variable; the segment's poller reads it back with
    :meth:`from_dict`. Every field is checked, so a message of another shape is refused
    with a ``ValueError`` naming the field rather than read as "keep running".
    """

    state: PodStatus = PodStatus.RUNNING
    """The pod's: running, paused (hold, publishing a status event) or stopped (end the
    segment with a checkpoint)."""
    hparams: dict[str, Any] = field(default_factory=dict)
    """The pod's live (non-structural) hyperparameters, applied once per ``version``."""
    tournament: TournamentStatus = TournamentStatus.RUNNING
    """The tournament's: running, or stopped (every segment ends with a checkpoint)."""
    version: int = -1
    """The runner's count of the pod's messages (-1: not numbered yet)."""

    def __post_init__(self) -> None:
        where = "control message"
        state = _one_of(PodStatus, CONTROL_STATES, self.state, "state")
        tour = _one_of(TournamentStatus, CONTROL_TOURNAMENTS, self.tournament, "tournament")
        if not isinstance(self.hparams, dict):
            raise ValueError(f"{where}: hparams must be a dict, got {short(self.hparams)}")
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise ValueError(f"{where}: version must be an integer, got {short(self.version)}")
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "tournament", tour)

    @property
    def stops(self) -> bool:
        """Whether the segment must end now (the pod or the tournament stopped)."""
        return self.state == PodStatus.STOPPED or self.tournament == TournamentStatus.STOPPED

    @property
    def is_paused(self) -> bool:
        """Whether the pod holds without stepping."""
        return self.state == PodStatus.PAUSED

    def to_dict(self) -> dict[str, Any]:
        """The message as plain data (strings, a dict, an integer): what the Variable holds."""
        return {
            "state": self.state.value,
            "hparams": dict(self.hparams),
            "tournament": self.tournament.value,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ControlMessage:
        """A message from :meth:`to_dict`'s output (a missing field takes its default);
        ``ValueError`` naming an unknown key or a bad value."""
        if not isinstance(d, dict):
            raise ValueError(f"a control message must be a dict, got {short(d)}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in d if k not in names)
        if unknown:
            known = ", ".join(sorted(names))
            raise ValueError(f"control message: unknown key(s) {short(unknown)}; keys: {known}")
        return cls(**d)
