"""The worker's side of a running segment's two channels: the control it reads (pause,
resume, stop, new hyperparameters: a Dask ``Variable`` per pod) and the progress events
it sends (the worker's ``log_event``)."""

from __future__ import annotations

import threading
import time

from elegantpod.tournament.core.protocol import ControlMessage

POLL_SECONDS = 0.25
"""How often a running segment reads its control variable: well within a second, and
rare enough that the round trips cost the pod little of its steps/s
(``benchmarks/README.md``, ``dask_overhead.py``, runs with control polls on)."""
EVENT_SECONDS = 0.5
"""Minimum interval between two progress events of one pod."""


class Control:
    """A pod's control Variable, read by a background thread; the training thread only
    reads what that thread last fetched.

    Why a thread: ``Variable.get`` is a round trip to the scheduler, and waits up to its
    timeout when the scheduler is slow or the variable unset. On the thread that
    launches a pod's CUDA work every such wait leaves the GPU idle; here it costs the
    pod nothing, and a command still arrives within about ``POLL_SECONDS`` plus a round
    trip.
    """

    def __init__(self, name: str | None):
        self.name, self.var = name, None
        self.latest: ControlMessage | None = None
        """The newest message fetched (``None``: none yet, or no control)."""
        self.fetches = 0
        """Messages the poller has fetched so far."""
        self.refused: str | None = None
        """Why the last message that was not a :class:`ControlMessage` was ignored."""
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        if name is not None:
            from distributed import Variable

            self.var = Variable(name)
            # the client is found from this task's thread: the poller has no worker context
            _ = self.var.client
            self._thread = threading.Thread(
                target=self._poll_until_closed, name=f"elegantpod-control-{name}", daemon=True
            )
            self._thread.start()

    def _poll_until_closed(self) -> None:
        while not self._closed.is_set():
            try:
                msg = self.var.get(timeout=1)
            except Exception:  # unset, or scheduler briefly unreachable: keep the last
                msg = None
            if msg is not None:
                try:  # the runner's own messages always parse; anything else is kept out
                    self.latest = ControlMessage.from_dict(msg)
                    self.fetches += 1
                except ValueError as exc:
                    self.refused = str(exc)
            self._closed.wait(POLL_SECONDS)

    def close(self) -> None:
        """Stop the poller (it ends within a round trip; it is a daemon meanwhile)."""
        self._closed.set()

    def poll(self, force: bool = False) -> ControlMessage | None:
        """The newest command fetched: a local read, never a round trip (``force`` is
        kept for callers that waited for a new one)."""
        return self.latest

    def next(self) -> ControlMessage | None:
        """The newest command, to act on between iterations."""
        return self.latest

    def stop_requested(self) -> bool:
        """Polled inside a learner's update: stop now if the pod or tournament stopped."""
        msg = self.latest
        return msg is not None and msg.stops


class Events:
    """Progress events of one segment, sent with the worker's ``log_event`` (at most one
    every ``EVENT_SECONDS`` unless forced); without a topic, nothing is sent."""

    def __init__(self, topic: str | None, pod_id: str, segment: int):
        self.topic, self.pod_id, self.segment, self.sent = topic, pod_id, segment, 0
        self.last = time.monotonic()  # the first progress event after EVENT_SECONDS
        self.worker = None
        if topic is not None:
            from distributed import get_worker

            self.worker = get_worker()

    def publish(self, msg, force: bool = False) -> None:
        """Send ``msg`` (a dict, or a function making one) unless rate-limited.

        A function is called only when the event goes out, so what it drains (the
        training returns since the last event) is never drained into a dropped event.
        """
        if self.worker is None:
            return
        now = time.monotonic()
        if not force and now - self.last < EVENT_SECONDS:
            return
        self.last = now
        if callable(msg):
            msg = msg()
        self.sent += 1
        self.worker.log_event(
            self.topic,
            {
                "pod": self.pod_id,
                "segment": self.segment,
                "seq": self.sent,
                "time": time.time(),
                "worker": self.worker.address,
                **msg,
            },
        )
