"""What a worker runs next for a pod: its segment task, built from the spec and record.

Pure data: a :class:`~elegantpod.tournament.worker.segment.SegmentTask` carries everything a
worker needs (the pod's spec as JSON, where to resume and checkpoint, the budgets and
the channels), so the runner only submits it.
"""

from __future__ import annotations

from elegantpod.agents import BUILTIN, get_algo, register_algo
from elegantpod.pod.memory import estimate_pod_bytes
from elegantpod.tournament.core.hparam_checks import learner_config
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.spec import TournamentSpec
from elegantpod.tournament.worker.segment import SegmentTask


def segment_steps(spec: TournamentSpec, algo: str) -> int | None:
    """Env steps of one segment: the spec's, or the algorithm's default."""
    if spec.segment_steps is None and spec.segment_seconds is None:
        return get_algo(algo).default_segment_steps
    return spec.segment_steps


SCORES_PER_POD = 6
"""Scores each pod should get within a time budget when the tournament sets no segment
size: the default segment is capped at ``1 / SCORES_PER_POD`` of a pod's share of it."""
MIN_SEGMENT_SECONDS = 1.0
"""The shortest default segment: a segment's switch (checkpoint, evaluation) costs time."""


def segment_seconds(spec: TournamentSpec, slots: int) -> float | None:
    """Wall seconds of one segment: the spec's, or, when the tournament has a time
    budget and names no segment size at all, a cap that lets every pod be scored about
    :data:`SCORES_PER_POD` times within it.

    Why: an algorithm's default segment is a number of env steps sized for a fast env
    (32,768 for PPO: a few seconds on a native env). On a slow env (a gymnasium env of
    small images) one such segment took longer than a 75 s budget, so each pod was
    scored once, at the end, and no pod was ever replaced. A pod's share of the budget
    is ``max_seconds * slots / pods`` (pods take turns on the slots); the cap is that
    share over :data:`SCORES_PER_POD`, at least :data:`MIN_SEGMENT_SECONDS`. The
    segment ends at whichever comes first, its steps or its seconds, so on a fast env
    nothing changes.
    """
    if spec.segment_seconds is not None or spec.segment_steps is not None:
        return spec.segment_seconds
    if spec.max_seconds is None:
        return None
    share = float(spec.max_seconds) * max(1, int(slots)) / max(1, int(spec.pods))
    return max(MIN_SEGMENT_SECONDS, share / SCORES_PER_POD)


def segment_task(
    spec: TournamentSpec,
    rec: PodRecord,
    store,
    runner,
    tournament_id: str,
    uses_gpu: bool,
    uid: str | None = None,
    lease=None,
) -> SegmentTask:
    """The next segment of ``rec``: resume from its latest checkpoint, or (a new child)
    from its parent's; paths resolved in ``store``; channels and slots from ``runner``;
    ``uid`` (the tournament's identity) and ``lease`` (its token fences the writes) make
    the segment check what it loads and write only while this tournament holds the store."""
    resolve = store.resolve
    seg = rec.segment + 1
    # the spec a worker builds the pod from, its current hyperparameters included
    pod = spec.pod_spec(rec.algo, learner_config(rec.algo, rec.hparams), seed=rec.seed)
    return SegmentTask(
        tournament_id=tournament_id,
        pod_id=rec.pod_id,
        segment=seg,
        spec_json=pod.to_json(),
        checkpoint=store.checkpoint(rec.pod_id, seg),
        resume_from=resolve(rec.latest_checkpoint) if rec.latest_checkpoint else None,
        parent_checkpoint=(
            resolve(rec.parent_checkpoint)
            if rec.latest_checkpoint is None and rec.parent_checkpoint
            else None
        ),
        segment_steps=segment_steps(spec, rec.algo),
        segment_seconds=segment_seconds(spec, runner.capacity()[0]),
        control=runner.control_name(rec.pod_id),
        topic=runner.topic,
        uses_gpu=uses_gpu,
        resident_slots=runner.resident_slots,
        tournament_uid=uid,
        store=store.url if lease is not None else None,
        writer=lease.token if lease is not None else None,
        confirm_target=spec.confirm_target,
    )


def largest_pod_bytes(spec: TournamentSpec, base_hparams) -> int:
    """The largest pod's estimated size (GPU packing, resident pods per worker);
    ``base_hparams(algo)`` gives each algorithm's hyperparameters."""
    # env_kwargs included: MJX worlds count (see estimate_pod_bytes)
    sizes = [
        estimate_pod_bytes(spec.pod_spec(algo, learner_config(algo, base_hparams(algo))))
        for algo in spec.algos
    ]
    return max(sizes, default=1)


def shipping(env_id: str, algo: str) -> list:
    """Registrations a worker needs to rebuild this pod (custom algorithms and envs).

    Pods are rebuilt on workers from names, so a learner or env registered only in this
    process (with :func:`~elegantpod.envs.register_env`, or a gymnasium id registered
    here: :mod:`elegantpod.envs.user_gym`) is registered there too, through a worker
    plugin (once per name; workers that join later run it as they start).
    """
    from elegantpod.envs.registry import CUSTOM_ENVS, register_env

    wanted = []
    if algo not in BUILTIN:
        wanted.append((f"elegantpod-algo-{algo}", register_algo, (get_algo(algo),)))
    if env_id in CUSTOM_ENVS:
        wanted.append((f"elegantpod-env-{env_id}", register_env, (env_id, CUSTOM_ENVS[env_id])))
    else:
        from elegantpod.envs.user_gym import register_shipped, shipped_registration

        registration = shipped_registration(env_id)
        if registration is not None:  # a gymnasium id registered in this process
            wanted.append((f"elegantpod-gym-{env_id}", register_shipped, (registration,)))
    return wanted


def build_env(env_id: str, env_kwargs: dict) -> None:
    """Build (and close) one sub-env of ``env_id``: run on a worker before a tournament's
    pods start (:meth:`~elegantpod.tournament.client.engine.Engine.start`)."""
    from elegantpod.envs.registry import make_env

    make_env(env_id, num_envs=1, device="cpu", seed=0, **env_kwargs).close()
