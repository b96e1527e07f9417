"""``gc_paused()``: start Dask clients and gateways with no finalizer able to deadlock them.

Why this exists. distributed's ``LoopRunner`` (the IO-loop thread behind every
synchronous ``Client``, ``LocalCluster``, ``dask_gateway.Gateway`` and
``GatewayCluster``) starts and stops under one class-wide, non-reentrant
``threading.Lock``. Starting allocates (a thread object, an event loop); any allocation
may run Python's cyclic garbage collector, and the collector runs the ``__del__`` of
whatever garbage it finds, on the thread that allocated. ``Client.__del__``,
``Gateway.__del__`` and ``GatewayCluster.__del__`` all close their loop runner, which
takes that same lock. So a client or gateway that a notebook dropped without closing,
still waiting in a reference cycle for the collector, deadlocks the next one that
starts: the starting thread holds the lock and waits for it again inside the
finalizer. (If the collection happens on the new IO-loop thread instead, the starting
thread gives up after 10 s with a bare ``AssertionError``.) Seen in a fresh-clone test
run inside ``cluster(gateway=...)``; a user calling ``cluster(gateway=...)`` twice in
one kernel could hit it too. distributed 2026.7 and dask-gateway 2026.3 both have the
pattern, and no upstream issue reports it yet.

What this does about it: before a start, one full collection on the caller's thread,
with no lock held, runs every pending finalizer where it is harmless; then the
automatic collector is paused until the start is over, so no finalizer can run inside
it. Objects that become garbage meanwhile wait for the next collection. Pauses nest and
may overlap across threads; the collector comes back on when the last one ends, and
stays off if the user had switched it off.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused():
    """Collect garbage now, then keep the automatic collector off inside the block.

    Use it around anything that starts or stops a distributed ``LoopRunner``:
    ``Client(...)``, ``LocalCluster(...)``, ``dask_gateway.Gateway(...)``,
    ``Gateway.new_cluster`` / ``connect`` and ``GatewayCluster.get_client``.
    """
    global _depth, _was_enabled
    gc.collect()  # pending finalizers run here, where no LoopRunner lock is held
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
