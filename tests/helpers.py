"""Polling helpers shared by the tests that watch a live tournament."""

import time


def wait_until(cond, timeout=30.0, every=0.05):
    """True as soon as ``cond()`` holds, False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return False


def latest_steps(t, pod):
    """A pod's env-step count from its latest progress event (None before the first)."""
    events = [m for m in t.curves(pod) if "env_steps" in m]
    return events[-1]["env_steps"] if events else None
