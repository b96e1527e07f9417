"""The scheduler's own event stream, shared by the tournaments of one client: client side.

Why a module of its own: a ``distributed.Client`` keeps one handler per topic, so two
tournaments that share a client and each subscribed to the scheduler's ``"all"`` topic
would silence one another. :data:`SCHEDULER_EVENTS` subscribes once per client and fans
each event out to every tournament's handler. The handlers run on the client's
event-loop thread, so they must only move counters, never wait.
"""

from __future__ import annotations

import threading


class _FanOut:
    """One ``"all"`` topic handler per client, calling every tournament's own."""

    def __init__(self):
        self._lock = threading.Lock()  # the handler lists (the event loop reads them)
        self._subscribing = threading.Lock()  # (un)subscribe calls, in order
        self._handlers: dict[int, list] = {}

    def add(self, client, handler) -> None:
        key = id(client)
        with self._subscribing:
            with self._lock:
                handlers = self._handlers.setdefault(key, [])
                first = not handlers
                handlers.append(handler)
            if first:
                client.subscribe_topic("all", lambda event: self._call(key, event))

    def remove(self, client, handler) -> None:
        key = id(client)
        with self._subscribing:
            with self._lock:
                handlers = self._handlers.get(key, [])
                if handler in handlers:
                    handlers.remove(handler)
                last = not handlers
                if last:
                    self._handlers.pop(key, None)
            if last:
                client.unsubscribe_topic("all")

    def _call(self, key: int, event) -> None:
        with self._lock:
            handlers = list(self._handlers.get(key, ()))
        for handler in handlers:
            handler(event)


SCHEDULER_EVENTS = _FanOut()
"""The process's one fan-out: ``add(client, handler)`` / ``remove(client, handler)``."""
