"""Fill JAX's persistent compilation cache with ``tests/envs/test_mjx.py``'s programs, in
the background, on the CPU time the rest of the suite leaves idle.

Why: compiling MJX's step on a CPU takes 10-40 s a program (Humanoid: 40 s of XLA, 9 s
of tracing), about 150 s for the five programs the MJX tests use, which was a sixth of
the suite's work on a cold cache (a fresh CI machine). Yet a two-process run leaves
about a fifth of its CPU time idle (tests waiting on servers, browsers, kernels and
worker processes). ``tests/conftest.py`` starts this script once per run, at the lowest
priority (:func:`lowest_priority`), when the run includes the MJX tests: it compiles the same
programs the tests will (the same envs, sizes, physics and XLA flags, so the same cache
keys) into the same cache, and the MJX tests, scheduled late in the run, load them
instead of compiling. The tests wait for it to end (:func:`wait_for_warmup`), so a
warm-up that is still running costs nothing but the wait; one that fails costs nothing
but its CPU time: the tests compile what they miss themselves.

Run it by hand as ``python -m tests.mjx_warmup DONE_FILE``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

WARMUP = "ELEGANTPOD_MJX_WARMUP"
"""The environment variable that names the warm-up's done file, for the test processes."""

PROGRAMS = [
    ("HalfCheetah-v5", "exact"),
    ("Hopper-v5", "exact"),
    ("Ant-v5", "exact"),
    ("Humanoid-v5", "exact"),
    ("Ant-v5", "fast"),
]
"""What ``tests/envs/test_mjx.py`` steps (at its ``N`` worlds on the CPU): the parity
test's four envs and the fast physics' drift test. The pod and tournament tests use
HalfCheetah at the same size, so they load its program too."""


def warm(num_envs: int) -> list[str]:
    """Build, reset and step each of :data:`PROGRAMS` once. Returns what it did."""
    import torch

    from elegantpod.envs.registry import make_env

    done = []
    for env_id, physics in PROGRAMS:
        start = time.perf_counter()
        env = make_env(
            env_id, num_envs=num_envs, device="cpu", seed=0, backend="mjx", physics=physics
        )
        env.reset()
        env.step(torch.zeros(num_envs, *env.action_space.shape))
        done.append(f"{env_id} {physics}: {time.perf_counter() - start:.1f} s")
    return done


def wait_for_warmup(timeout: float = 240.0) -> str:
    """Block until the warm-up this run started has ended (or ``timeout`` seconds).

    Returns what it wrote, or why there is nothing to wait for. A test process that
    waits leaves its core to the warm-up, which then compiles at full speed."""
    done = os.environ.get(WARMUP)
    if not done:
        return "no warm-up in this run"
    done = Path(done)
    deadline = time.monotonic() + timeout
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return done.read_text() if done.exists() else f"still running after {timeout:.0f} s"


def lowest_priority() -> None:
    """Run only on CPU time the tests leave idle: Linux's ``SCHED_IDLE`` policy where it
    exists (a weight of 3 against a normal process's 1,024), else ``nice 19``."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(19)


def main(argv: list[str]) -> int:
    """Warm the cache; write what it did (or the error) to the done file ``argv[0]``."""
    done = Path(argv[0])
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the test processes
    lowest_priority()
    try:
        import torch

        torch.set_num_threads(1)
        from tests.envs.test_mjx import N

        text = "\n".join(warm(N))
    except BaseException as exc:  # any failure: the tests compile for themselves
        text = f"warm-up failed: {type(exc).__name__}: {exc}"
    partial = done.with_suffix(".partial")
    partial.write_text(text + "\n")
    partial.replace(done)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
