"""The progress events a tournament received from its running segments, per pod.

Segments send progress events as they train (a Dask topic); the runner queues them in
its inbox and the engine folds them in here, under the tournament's lock, before any
view reads them. Memory stays bounded: each pod keeps its newest :data:`CURVE_EVENTS`.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque

from elegantpod.tournament.core.protocol import EventKind

CURVE_EVENTS = 20_000
"""Progress events kept per pod (the oldest go first): memory stays bounded in long runs."""


class ProgressLog:
    """Progress events by pod, and how many were received and reported sent.

    ``events_sent`` is what finished segments report having sent and
    ``events_received`` what arrived, by pod: a test (and a suspicious user) can audit
    that none was lost.
    """

    def __init__(self) -> None:
        self._curves: dict[str, deque] = defaultdict(lambda: deque(maxlen=CURVE_EVENTS))
        self.events_received: Counter = Counter()
        self.events_sent = 0
        self.latest: dict[str, dict] = {}
        """Each pod's newest progress or segment-end event (what tracking logs)."""

    def fold(self, inbox: deque, records: dict) -> None:
        """Move every queued ``(time, event)`` of ``inbox`` into the curves (a malformed
        event is dropped) and update each pod record's steps per second."""
        while inbox:
            _, msg = inbox.popleft()
            if not isinstance(msg, dict) or "pod" not in msg:
                continue
            pod = msg["pod"]
            self.events_received[pod] += 1
            self._curves[pod].append(msg)
            rec = records.get(pod)
            if msg.get("type") in (EventKind.PROGRESS, EventKind.SEGMENT_END):
                self.latest[pod] = msg
            if rec is not None and msg.get("type") == EventKind.PROGRESS:
                rec.steps_per_second = msg.get("steps_per_second", rec.steps_per_second)

    def curves(self, pod: str | None = None) -> list[dict]:
        """The events of one pod (or all pods, by pod), oldest first."""
        if pod is not None:
            return list(self._curves.get(pod, []))
        return [m for msgs in self._curves.values() for m in msgs]
