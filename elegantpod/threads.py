"""Torch's intra-op thread count for a run: one on a CPU unless the user says otherwise.

Why one: a pod's batched envs and small networks gain little from intra-op threads, and
on a busy machine torch's default of one thread per core stalls each op on a
descheduled thread (measured by ``benchmarks/threads.py``; figures in
``benchmarks/README.md``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch

from elegantpod.devices import resolve_device


def default_threads(device: str) -> int | None:
    """Torch threads a run on ``device`` uses when the caller names none.

    On a CPU: ``OMP_NUM_THREADS`` where the environment sets it, else one. Why: the
    batched envs and small networks of a pod gain little from intra-op threads, and on a
    busy machine (two cores shared with other processes) torch's default of one thread
    per core stalls each op on a descheduled thread, which made solving CartPole an
    order of magnitude slower (``benchmarks/README.md``, ``threads.py``). Elsewhere (a
    GPU): ``None``, torch's own setting.
    """
    if torch.device(resolve_device(device)).type != "cpu":
        return None
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else 1


def check_threads(threads: Any) -> None:
    """Raise ``ValueError`` unless ``threads`` is ``None`` or an integer >= 0."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(
            f"threads must be an integer >= 1 (0: torch's own setting), got {threads!r}"
        )


@contextlib.contextmanager
def torch_threads(threads: int | None, device: str) -> Iterator[int]:
    """Run the block with ``threads`` torch intra-op threads, then restore the count.

    ``None``: :func:`default_threads` of ``device``; ``0``: leave torch's setting alone.
    Yields the count in effect. The count is process-wide: pods running in threads of one
    process (a Dask worker's) should all ask for the same.
    """
    check_threads(threads)
    want = default_threads(device) if threads is None else threads or None
    before = torch.get_num_threads()
    if want is None or want == before:
        yield before
        return
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(before)
