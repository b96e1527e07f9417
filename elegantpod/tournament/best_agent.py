"""The best agent of a tournament, loaded from the store and checked before it is trusted.

A leaderboard entry names a checkpoint, and a store may hold files from someone else:
the checkpoint is loaded from the store's own path (an entry can name nothing outside
it), with ``weights_only``, and its origin is checked against the entry (env,
algorithm, this tournament, the entry's pod) before a pod is built from it. An entry
whose checkpoint fails is marked unusable (never best, never a parent again).
"""

from __future__ import annotations

from elegantpod.envs.registry import external_sources
from elegantpod.pod.checkpoint import CheckpointError, check_origin, load_checkpoint


def load_best(engine, device: str | None = None):
    """The best usable leaderboard entry of ``engine``'s tournament as a
    :class:`~elegantpod.pod.pod.Pod`; ``ValueError`` when no entry is left.

    Entries that fail their checks are marked unusable on the way, and the engine's
    ``warning`` says which and why.
    """
    from elegantpod.pod.pod import Pod

    spec, refused = engine.spec, []
    while True:
        with engine.lock:
            best = engine.population.best()
        if best is None:
            why = "; ".join(refused) or "no segment has finished yet"
            raise ValueError(f"the leaderboard has no usable entry: {why}")
        path = engine.store.resolve(best.checkpoint)
        try:
            check_origin(
                load_checkpoint(path),
                path,
                tournament=engine.uid,
                env_id=spec.env_id,
                algo=best.algo,
                pod=best.pod_id,
            )
            # the data this tournament was given, not what the checkpoint names
            given = external_sources(spec.env_kwargs) or None
            return Pod.from_checkpoint(path, device=device, env_kwargs=given)
        except CheckpointError as exc:
            with engine.lock:
                engine.population.mark_unusable(best.checkpoint)
                engine.changed()
            refused.append(str(exc))
            engine.warning = f"leaderboard entry of pod {best.pod_id} is unusable: {exc}"
