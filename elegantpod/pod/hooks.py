"""The one way to watch and stop a running pod: a :class:`PodHooks` object.

Stable-Baselines3's ``BaseCallback`` is the model: one object, handed to
:meth:`Pod.run <elegantpod.pod.pod.Pod.run>`, whose methods the run calls at fixed points.
Subclass it and override what you need, or pass plain functions to its constructor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from elegantpod.types import Progress

Pod = Any
"""The :class:`~elegantpod.pod.pod.Pod` a hook is called with (not imported: the pod module
imports this one)."""


class PodHooks:
    """What a run calls, and how it is asked to stop.

    Either ``on_*`` returning ``False`` ends the run (``None`` or ``True`` go on); so
    does :meth:`request_stop`, from any thread (a signal handler, a widget, a timer).
    A run that ends early ends as a finished one does: checkpointed, with its result.

    Parameters
    ----------
    on_update
        ``on_update(pod, stats)`` after each learner update (``stats``: its losses).
    on_evaluation
        ``on_evaluation(pod, progress)`` after each evaluation (the :class:`Progress`
        that joins ``pod.curve``).
    should_stop
        ``should_stop()``, polled between gradient steps inside an update (so a stop
        ends even a long update within one step) and after each update. Must be cheap.
    """

    def __init__(
        self,
        on_update: Callable[[Pod, dict[str, float]], bool | None] | None = None,
        on_evaluation: Callable[[Pod, Progress], bool | None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self._on_update, self._on_evaluation = on_update, on_evaluation
        self._should_stop = should_stop
        self._stop = threading.Event()

    def on_update(self, pod: Pod, stats: dict[str, float]) -> bool | None:
        """Called after each update; return ``False`` to stop."""
        return None if self._on_update is None else self._on_update(pod, stats)

    def on_evaluation(self, pod: Pod, progress: Progress) -> bool | None:
        """Called after each evaluation; return ``False`` to stop."""
        return None if self._on_evaluation is None else self._on_evaluation(pod, progress)

    def should_stop(self) -> bool:
        """Whether the run should end now (a requested stop, or the ``should_stop``
        given). Subclasses that override it should include ``super().should_stop()``."""
        if self._stop.is_set():
            return True
        return self._should_stop is not None and bool(self._should_stop())

    def request_stop(self) -> None:
        """Ask the run to end within one gradient step; safe from any thread."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called."""
        return self._stop.is_set()


def continues(answer: Any) -> bool:
    """A hook's answer: anything but ``False`` goes on."""
    return answer is not False
