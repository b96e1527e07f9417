"""Progress lines for a running tournament, and how a printed leaderboard shows its step
counts and statuses (``Tournament.wait(progress=True)``, the CLI and ``make demo`` print
the same). Here, beside the facade, and not in ``cli/``: the facade prints them too, and
arrows point down from the command line, never up into it."""

from __future__ import annotations

import sys
import time

from elegantpod.number_text import number


def leaderboard_note(statuses) -> str | None:
    """The line under a printed leaderboard that explains a ``replaced`` (or stopped,
    failed) status: the leaderboard keeps each pod's best evaluation ever, so its entry,
    and checkpoint, outlive the pod. ``None`` when every pod listed is still around."""
    gone = sorted({s for s in statuses if s in ("replaced", "stopped", "failed")})
    if not gone:
        return None
    return (
        "The leaderboard keeps each pod's best evaluation ever, with its checkpoint: a pod "
        f"{' or '.join(gone)} since keeps its entry (replaced: later on it ranked low among "
        "the live pods, and a new pod took its place)"
    )


def follow(t, every: float | None = 2.0, until: float | None = None) -> None:
    """Block while ``t`` runs, printing its progress to stderr at most every ``every``
    seconds, and only when something changed (the best score, the pods in flight, the
    env steps or a warning). The score is labelled with the tournament's fitness.

    ``every=None`` prints nothing and only waits; ``until`` (a ``time.monotonic()``
    time) returns then at the latest. A store that cannot be written right now is said
    once per line (the tournament keeps training and retries).
    """
    last, shown = 0.0, None
    fitness = t.spec.fitness
    while t.status == "running" and (until is None or time.monotonic() < until):
        time.sleep(0.5)
        if every is None or time.monotonic() - last <= every:
            continue
        last = time.monotonic()
        s = t.summary()
        state = (s["best_score"], s["best_pod"], t.pods_in_flight, s["env_steps_total"])
        state += (s.get("warning"),)
        if state == shown:
            continue
        shown = state
        best = "-" if s["best_score"] is None else f"{number(s['best_score'])} ({s['best_pod']})"
        warning = f"; warning: {s['warning']}" if s.get("warning") else ""
        print(
            f"[{s['wall_seconds']:6.1f}s] best {fitness} {best}, pods in flight "
            f"{t.pods_in_flight}, env steps {s['env_steps_total']:,}{warning}",
            file=sys.stderr,
            flush=True,
        )
