"""``gc_paused()``: the collector off inside, restored after, nested across threads."""

from __future__ import annotations

import gc
import threading

from elegantpod.clusters.gc_pause import gc_paused


class Finalised:
    """A cycle with a finaliser: only the cyclic collector can end it."""

    log: list[str] = []

    def __init__(self, name):
        self.name, self.me = name, self

    def __del__(self):
        Finalised.log.append(self.name)


def test_no_collection_runs_inside_the_block_and_garbage_waits_for_the_next():
    Finalised.log.clear()
    was = gc.isenabled()
    try:
        gc.enable()
        gc.collect()
        with gc_paused():
            assert not gc.isenabled()
            Finalised("inside")
            kept = [[] for _ in range(10_000)]  # far past the collector's thresholds
            assert Finalised.log == [] and kept  # no automatic collection ran
        assert gc.isenabled()
        gc.collect()
        assert Finalised.log == ["inside"]
    finally:
        (gc.enable if was else gc.disable)()


def test_pauses_nest_across_threads_and_a_disabled_collector_stays_disabled():
    was = gc.isenabled()
    try:
        gc.enable()
        inner_in, inner_out = threading.Event(), threading.Event()

        def other():
            with gc_paused():
                inner_in.set()
                inner_out.wait(30)

        with gc_paused():
            thread = threading.Thread(target=other)
            thread.start()
            assert inner_in.wait(30)
        assert not gc.isenabled()  # the other thread's pause still holds
        inner_out.set()
        thread.join(30)
        assert gc.isenabled()

        gc.disable()  # the user's own choice outlives a pause
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
