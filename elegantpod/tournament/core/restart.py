"""The restart rule: a population stuck on a plateau replaces its bottom with fresh draws.

Exploit and explore move a population only around what its members already do: in an
exploration trap every pod scores about zero until one finds the reward, and a child of
the leader is one more pod that has not found it. So when no segment result improved on
the last improvement by ``GeneratorConfig.stuck_tolerance`` of the way to the target for
``restart_after`` results per live pod (or ``restart_after_seconds``), the bottom
``restart_fraction`` of the ready live pods (never the leader, never a paused or
stopping pod) is marked for replacement by pods with fresh networks and hyperparameters
drawn from the whole search space
(:meth:`~elegantpod.tournament.core.breeder.Breeder.fresh_pod`). Each round doubles the wait
for the next until a result improves: a long plateau is not churned through, a trap
still gets its first restart soon. Without a target no restart happens: a plateau may be
the best there is (500 on CartPole).

The rule keeps its own counters and is handed the population's
:class:`~elegantpod.tournament.core.breeder.Pool` at each call, so the
:class:`~elegantpod.tournament.core.population.Population` that holds it only asks, at the
end of a segment, whether its pod is due.
"""

from __future__ import annotations

import math
from typing import Any

from elegantpod.tournament.core.breeder import Pool
from elegantpod.tournament.core.history import recent_score
from elegantpod.tournament.core.protocol import SCHEDULED, PodStatus
from elegantpod.tournament.core.record import PodRecord


class RestartRule:
    """The restart rule's counters for one population, and its decisions.

    Counted over the segment results of this run (not saved: a resume judges afresh).
    """

    def __init__(self) -> None:
        self.plateau = -math.inf
        """The score of the last improvement (the rule's reference)."""
        self.stale = 0
        """Segment results since the last improvement."""
        self.improved_at = 0.0
        """Tournament seconds of the last improvement (or restart)."""
        self.due: dict[str, dict[str, Any]] = {}
        """Pods a restart will replace at their next segment end, with the origin their
        fresh successor gets."""
        self.rounds = 0
        """Restart rounds since the last improvement: each doubles the wait for the next."""

    def observe(self, pool: Pool, score: float, now: float, solved: bool = False) -> None:
        """Count a segment result that scored ``score`` at ``now`` tournament seconds and,
        if the population is stuck, mark the pods the next restart replaces."""
        self._track(pool, score, now)
        if self._stuck(pool, now, solved):
            self._plan(pool, now)

    def take(self, pod: str) -> dict[str, Any] | None:
        """The origin of the fresh pod that replaces ``pod`` if a restart is due for it
        (then no longer due); ``None`` otherwise."""
        return self.due.pop(pod, None)

    def _track(self, pool: Pool, score: float, now: float) -> None:
        """An improvement (a score above the last one by ``stuck_tolerance`` of the way
        to go) resets the count."""
        if not math.isfinite(score):
            self.stale += 1
            return
        g, target = pool.spec.generator, pool.spec.target_reward
        ref = self.plateau
        if math.isfinite(ref):
            scale = abs(target - ref) if target is not None else abs(ref)
            improved = score > ref + g.stuck_tolerance * scale
        else:
            improved = True
        if improved:
            self.plateau, self.stale, self.improved_at = score, 0, now
            self.rounds = 0
        else:
            self.stale += 1

    def _stuck(self, pool: Pool, now: float, solved: bool) -> bool:
        """Whether no segment improved for ``restart_after`` segments per live pod (or
        ``restart_after_seconds``), with the target still to reach and no restart pending."""
        g, records = pool.spec.generator, pool.records
        self.due = {  # a pod paused, stopped or failed meanwhile is not waited for
            p: o
            for p, o in self.due.items()
            if records[p].status in SCHEDULED and not records[p].stop_requested
        }
        if solved or self.due or pool.spec.target_reward is None:
            return False
        backoff = 2**self.rounds
        by_segments = g.restart_after > 0 and self.stale >= backoff * g.restart_after * max(
            1, len(pool.alive())
        )
        wait = g.restart_after_seconds
        by_time = wait is not None and now - self.improved_at >= backoff * wait
        return by_segments or by_time

    def _plan(self, pool: Pool, now: float) -> None:
        """Mark the bottom ``restart_fraction`` of the ready live pods for replacement."""
        g = pool.spec.generator
        live = [r for r in pool.alive() if r.status != PodStatus.PAUSED and not r.stop_requested]

        def key(r: PodRecord) -> float:
            x = recent_score(r)
            return x if math.isfinite(x) else -math.inf

        ranked = sorted(live, key=key, reverse=True)
        # a pod is judged stuck only after it had the time the rule gives everyone
        old_enough = max(g.ready_segments, g.restart_after)
        ready = [r for r in ranked[1:] if r.segment >= old_enough]
        k = min(len(ready), max(1, math.floor(len(live) * g.restart_fraction)))
        if not k:  # nobody old enough yet: the count stands, the next result tries again
            return
        stale, best = self.stale, self.plateau
        for r in ready[len(ready) - k :]:
            self.due[r.pod_id] = {
                "kind": "restart",
                "replaced": r.pod_id,
                "stale": stale,
                "best": best if math.isfinite(best) else None,
            }
        self.stale, self.improved_at = 0, now  # the restarted pods get their time
        self.rounds += 1
