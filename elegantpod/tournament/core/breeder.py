"""The breeder: how a tournament's new pods are made (pure: no Dask, no I/O).

The first fresh pod of an algorithm takes the spec's base hyperparameters; later fresh
pods explore around them (with ``init="sample"``, they draw their hyperparameters from
the tournament's search space instead); children copy a live pod's latest networks and
optimizer state (the top of the population, see
:mod:`~elegantpod.tournament.core.population`) and perturb its hyperparameters through the
mutation policy, whose output is checked like user input; restarts draw fresh
hyperparameters from the whole search space; users add pods of their own (fresh, or
cloned from a leaderboard entry or a pod). The search space is the learner's own with
the tournament's ``search_space`` over it
(:func:`~elegantpod.tournament.core.generator.search_space`).

A :class:`~elegantpod.tournament.core.population.Population` holds a :class:`Breeder`, as
dask's ``Adaptive`` holds a cluster, and hands it at each call the :class:`Pool` to breed
from (the spec, the records, the leaderboard); the breeder returns the new record and the
population registers it. The breeder owns only what making pods consumes: the pod-id
counter, the random stream and the mutation policy (with the warning of its last
failure). Neither reads the other's private state, so each is read and tested alone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks.overrides import replace_checked
from elegantpod.search.space import Choice
from elegantpod.tournament.core import leaderboard as lb
from elegantpod.tournament.core.bandit import bandit_explore
from elegantpod.tournament.core.generator import (
    choose_algo,
    choose_parent,
    mutate,
    sample_space,
    search_space,
)
from elegantpod.tournament.core.history import recent_score
from elegantpod.tournament.core.hparam_checks import keep_consistent, learner_config, policy_output
from elegantpod.tournament.core.protocol import ACTIVE, RESUMABLE
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.spec import TournamentSpec


@dataclasses.dataclass(frozen=True)
class Pool:
    """What the breeder and the population's rules read of it, handed over at each call
    (they keep none). A view, not a copy: the records and entries are the population's."""

    spec: TournamentSpec
    """The algorithms, the base hyperparameters, the generator's config."""
    records: Mapping[str, PodRecord]
    """Every pod made so far: the live ones are would-be parents."""
    entries: Sequence[lb.Entry]
    """The leaderboard: parents when no live pod has a score, and the unusable checkpoints."""

    def alive(self) -> list[PodRecord]:
        """Pods that take part now (queued, running or paused)."""
        return [r for r in self.records.values() if r.status in ACTIVE]


def base_hparams(spec: TournamentSpec, algo: str) -> dict[str, Any]:
    """The spec's base hyperparameters of ``algo`` over the learner's defaults."""
    learner = get_algo(algo)
    cfg = replace_checked(learner.config_cls(), spec.hparams.get(algo, {}))
    return dataclasses.asdict(cfg)


def as_entry(r: PodRecord) -> lb.Entry:
    """Pod ``r`` as a would-be parent: its latest checkpoint, scored by its recent score."""
    return lb.Entry(
        pod_id=r.pod_id,
        algo=r.algo,
        hparams=r.hparams,
        score_mean=recent_score(r),
        score_std=math.nan if r.score_std is None else r.score_std,
        env_steps=r.env_steps,
        wall_seconds=r.wall_seconds,
        checkpoint=r.latest_checkpoint,
        segment=r.segment,
        parent=r.parent,
        mutation=r.mutation,
    )


class Breeder:
    """Makes the new pods of a tournament, from the :class:`Pool` it is handed.

    Parameters
    ----------
    seed
        The tournament's seed: it seeds the random stream and, with a pod's index, the pod.
    mutation_policy
        ``(hparams, space, rng, config) -> (new_hparams, mutation)``; see
        :func:`elegantpod.tournament.core.generator.mutate` (the default). Its output is checked.
    """

    def __init__(self, seed: int, mutation_policy=None):
        self.seed = seed
        self.mutation_policy = mutation_policy or mutate
        self.rng = random.Random(seed)
        self.next_index = 0
        """The index of the next pod's id (saved with the state: ids are never reused)."""
        self.warning: str | None = None
        """The last mutation policy failure (the default mutation stood in), if any."""

    # ------------------------------------------------------------------ new pods
    def new_pod(
        self,
        pool: Pool,
        *,
        strict: bool = False,
        origin: dict | None = None,
        keep_hparams: bool = False,
    ) -> PodRecord:
        """The generator at work: a fresh pod, or a mutated child of a top live pod.

        The algorithm is the least represented among the pods alive; the parent comes
        from the top ``truncation`` fraction of its live pods (leaderboard entries when
        none of them has a score yet). Without a parent: the base hyperparameters (the
        first pod of an algorithm), then variations of them, or with ``spec.init ==
        "sample"`` draws of every hyperparameter of the tournament's search space.
        ``strict``: a failing mutation policy raises instead of falling back to the
        default. ``origin``: why it is made (``PodRecord.origin``). ``keep_hparams``: a
        child keeps its parent's hyperparameters (the ``"copy"`` rule's control).
        """
        spec = pool.spec
        active = Counter(r.algo for r in pool.alive())
        algo = choose_algo(list(spec.algos), active, self.rng)
        space = search_space(algo, spec.search_space)
        parents = self._live_entries(pool, algo) or [
            e for e in pool.entries if e.algo == algo and e.usable
        ]
        if parents:
            parent = choose_parent(parents, self.rng, spec.generator)
            if keep_hparams:
                return self._record(algo, dict(parent.hparams), parent, {}, origin)
            explore = None
            if spec.generator.explore == "bandit":  # reads every pod's past, not the parent's
                explore = functools.partial(bandit_explore, records=pool.records, algo=algo)
            hparams, mutation = self._mutate(
                spec, algo, parent.hparams, space, True, strict, explore
            )
            return self._record(algo, hparams, parent, mutation, origin)
        base = base_hparams(spec, algo)
        if not any(r.algo == algo for r in pool.records.values()):
            hparams, mutation = base, {}  # the user's own settings always take part
        elif spec.init == "sample":  # a fresh draw of the whole space, seeded
            new, change = keep_consistent(algo, base, *sample_space(base, space, self.rng))
            hparams, mutation = policy_output(algo, base, new, change, False)
        else:
            # Not the first of its algorithm: explore around the base instead of cloning it;
            # its categorical choices (a noise kind) stay the user's: the starting pods are
            # variations of one configuration, and children and restarts search the rest.
            numeric = {k: v for k, v in space.items() if not isinstance(v, Choice)}
            hparams, mutation = self._mutate(spec, algo, base, numeric, False, strict)
        return self._record(algo, hparams, None, mutation, origin)

    def fresh_pod(self, pool: Pool, algo: str, origin: dict) -> PodRecord:
        """A restart: a pod of ``algo`` with fresh networks and hyperparameters drawn
        anew from the whole search space (not a copy of anyone), so a population stuck
        on a plateau explores settings its members' mutations would take long to reach
        (a noise kind, a far learning rate)."""
        base = base_hparams(pool.spec, algo)
        space = search_space(algo, pool.spec.search_space)
        new, change = keep_consistent(algo, base, *sample_space(base, space, self.rng))
        hparams, mutation = policy_output(algo, base, new, change, False)
        return self._record(algo, hparams, None, mutation, origin)

    def user_pod(
        self,
        pool: Pool,
        algo: str | None = None,
        parent: str | None = None,
        hparams: Mapping[str, Any] | None = None,
    ) -> PodRecord:
        """A pod asked for by the user: fresh, or cloned from a leaderboard entry or a pod,
        with ``hparams`` over the base's or the parent's.

        Raises ``ValueError`` for an algorithm the env cannot take, an unknown or
        unusable parent, a bad hyperparameter or a structural change from the parent.
        """
        parent_entry = None
        if parent is not None:
            matches = [e for e in pool.entries if e.pod_id == parent]
            if matches and not matches[0].usable:
                raise ValueError(
                    f"parent {parent!r}: its checkpoint failed to load; choose another parent"
                )
            rec = pool.records.get(parent)
            if matches:
                parent_entry = matches[0]
            elif rec is not None and rec.latest_checkpoint and rec.status in RESUMABLE:
                # (a replaced or failed pod's checkpoints may be pruned already)
                parent_entry = as_entry(rec)
                if not rec.recent_scores:
                    parent_entry = dataclasses.replace(parent_entry, score_mean=math.nan)
            else:
                raise ValueError(
                    f"unknown parent {parent!r}: not on the leaderboard and no checkpoint yet"
                )
        algo = algo or (parent_entry.algo if parent_entry else pool.spec.algos[0])
        learner = get_algo(algo)  # the facade checked the env takes it, outside the lock
        if parent_entry is not None and parent_entry.algo != learner.name:
            raise ValueError(
                f"parent {parent_entry.pod_id!r} is a {parent_entry.algo!r} "
                f"agent, not {learner.name!r}"
            )
        base = dict(parent_entry.hparams) if parent_entry else base_hparams(pool.spec, learner.name)
        base_cfg = learner_config(learner.name, base)
        cfg = replace_checked(base_cfg, dict(hparams or {}))
        if parent_entry is not None:
            for key in learner.structural_hparams:
                if getattr(cfg, key) != getattr(base_cfg, key):
                    raise ValueError(f"{key!r} must equal the parent's to copy its networks")
        before = dataclasses.asdict(base_cfg)  # tuples restored: JSON lists are no change
        mutation = {k: [before[k], v] for k, v in dataclasses.asdict(cfg).items() if before[k] != v}
        return self._record(
            learner.name, dataclasses.asdict(cfg), parent_entry, mutation, {"kind": "user"}
        )

    # ------------------------------------------------------------------ a resume
    def resume_at(self, next_index: int) -> None:
        """Continue the pod ids of a saved tournament at ``next_index``."""
        self.next_index = next_index

    def reseed(self, known_ids: Iterable[str]) -> None:
        """After a resume: never reuse a pod id of ``known_ids`` (the records' and the
        store's checkpoint folders'), and draw a fresh generator stream."""
        highest = max((int(p[1:]) for p in known_ids), default=-1)
        self.next_index = max(self.next_index, highest + 1)
        self.rng.seed(f"{self.seed}-{self.next_index}")

    # ------------------------------------------------------------------ parts
    def _record(self, algo, hparams, parent: lb.Entry | None, mutation, origin) -> PodRecord:
        """The new pod's record, with the next id and its own seed."""
        pod_id = f"p{self.next_index:03d}"
        seed = self.seed * 1_000_003 + self.next_index
        self.next_index += 1
        return PodRecord(
            pod_id=pod_id,
            algo=algo,
            hparams=hparams,
            seed=seed,
            parent=parent.pod_id if parent else None,
            mutation=mutation,
            parent_checkpoint=parent.checkpoint if parent else None,
            # both over the agent's whole training, its ancestors' segments included: a
            # child goes on from its parent's networks (and step clocks)
            env_steps=parent.env_steps if parent else 0,
            wall_seconds=parent.wall_seconds if parent else 0.0,
            origin=dict(origin or {"kind": "child" if parent else "start"}),
        )

    def _live_entries(self, pool: Pool, algo: str) -> list[lb.Entry]:
        """Live pods of ``algo`` with a checkpoint and a score, as would-be parents."""
        unusable = {e.checkpoint for e in pool.entries if not e.usable}
        return [
            as_entry(r)
            for r in pool.alive()
            if r.algo == algo
            and r.latest_checkpoint
            and r.latest_checkpoint not in unusable
            and r.recent_scores
        ]

    def _mutate(
        self, spec, algo: str, hparams: dict, space: dict, structural: bool, strict, explore=None
    ):
        """The mutation policy, its output checked like user input.

        ``explore``: a built-in policy that stands in for the default one
        (``GeneratorConfig.explore="bandit"``); a policy of the user's still wins.

        A policy that raises or returns something bad mid-run must not end a tournament
        of many hours nor leave a replaced pod without its child: unless ``strict`` (the
        first pods, made when the tournament starts), this mutation falls back to the
        default :func:`~elegantpod.tournament.core.generator.mutate`, and ``warning`` says why.
        The default's changes that break a rule between hyperparameters are dropped
        (:func:`~elegantpod.tournament.core.hparam_checks.keep_consistent`); a policy of
        the user's is refused for them, as for any other bad output.
        """
        builtin = self.mutation_policy is mutate
        policy = explore if builtin and explore is not None else self.mutation_policy
        try:
            new, change = policy(dict(hparams), space, self.rng, spec.generator)
            if builtin:
                new, change = keep_consistent(algo, hparams, new, change)
            return policy_output(algo, hparams, new, change, structural)
        except Exception as exc:
            if strict or builtin:
                raise
            self.warning = f"mutation_policy failed, the default mutation was used: {exc}"
            new, change = mutate(dict(hparams), space, self.rng, spec.generator)
            new, change = keep_consistent(algo, hparams, new, change)
            return policy_output(algo, hparams, new, change, structural)
