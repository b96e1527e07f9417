"""Progress lines for a running tournament (the CLI and ``make demo`` print the same)."""

from __future__ import annotations

import sys
import time


def follow(t, every: float | None = 2.0) -> None:
    """Block while ``t`` runs, printing its progress to stderr every ``every`` seconds.

    ``every=None`` prints nothing and only waits. A store that cannot be written right
    now is said once per line (the tournament keeps training and retries).
    """
    last = 0.0
    while t.status == "running":
        time.sleep(0.5)
        if every is not None and time.monotonic() - last > every:
            last = time.monotonic()
            s = t.summary()
            best = "-" if s["best_score"] is None else f"{s['best_score']:.1f} ({s['best_pod']})"
            warning = f"; warning: {s['warning']}" if s.get("warning") else ""
            print(
                f"[{s['wall_seconds']:6.1f}s] best {best}, pods in flight {t.pods_in_flight}, "
                f"env steps {s['env_steps_total']}{warning}",
                file=sys.stderr,
                flush=True,
            )
