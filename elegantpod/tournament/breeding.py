"""Breeding: how a tournament's new pods are made (a part of the population, pure).

Fresh pods take the spec's base hyperparameters; later pods of an algorithm explore
around them; children copy a live pod's latest networks and optimizer state (the top of
the population, see :mod:`~elegantpod.tournament.population`) and perturb its
hyperparameters through the mutation policy, whose output is checked like user input;
users add pods of their own (fresh, or cloned from a leaderboard entry or a pod).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from elegantpod.agents import get_algo
from elegantpod.agents.space import Choice
from elegantpod.checks import replace_checked
from elegantpod.tournament import hparam_checks
from elegantpod.tournament import leaderboard as lb
from elegantpod.tournament.generator import (
    choose_algo,
    choose_parent,
    mutate,
    sample_space,
    search_space,
)
from elegantpod.tournament.hparam_checks import learner_config
from elegantpod.tournament.protocol import RESUMABLE
from elegantpod.tournament.record import PodRecord


class Breeding:
    """New pods for a :class:`~elegantpod.tournament.population.Population` (a mixin: the
    population owns ``spec``, ``records``, ``entries``, ``rng``, ``mutation_policy``)."""

    # ------------------------------------------------------------------ new pods
    def _new_record(
        self, algo, hparams, parent: lb.Entry | None, mutation, origin=None
    ) -> PodRecord:
        pod_id = f"p{self.next_index:03d}"
        seed = self.spec.seed * 1_000_003 + self.next_index
        self.next_index += 1
        rec = PodRecord(
            pod_id=pod_id,
            algo=algo,
            hparams=hparams,
            seed=seed,
            parent=parent.pod_id if parent else None,
            mutation=mutation,
            parent_checkpoint=parent.checkpoint if parent else None,
            env_steps=parent.env_steps if parent else 0,
            origin=dict(origin or {"kind": "child" if parent else "start"}),
        )
        self.records[pod_id] = rec
        return rec

    def new_pod(self, strict: bool = False, origin: dict | None = None) -> PodRecord:
        """The generator at work: a fresh pod, or a mutated child of a top live pod.

        The algorithm is the least represented among the pods alive; the parent comes
        from the top ``truncation`` fraction of its live pods (leaderboard entries when
        none of them has a score yet). ``origin``: why it is made (``PodRecord.origin``).
        """
        active = Counter(r.algo for r in self.alive())
        algo = choose_algo(list(self.spec.algos), active, self.rng)
        space = search_space(algo)
        parents = self._live_entries(algo) or [
            e for e in self.entries if e.algo == algo and e.usable
        ]
        if parents:
            parent = choose_parent(parents, self.rng, self.spec.generator)
            hparams, mutation = self._mutate(algo, parent.hparams, space, True, strict)
            return self._new_record(algo, hparams, parent, mutation, origin)
        base = self.base_hparams(algo)
        if any(r.algo == algo for r in self.records.values()):
            # Not the first of its algorithm: explore around the base instead of cloning it;
            # its categorical choices (a noise kind) stay the user's: the starting pods are
            # variations of one configuration, and children and restarts search the rest.
            numeric = {k: v for k, v in space.items() if not isinstance(v, Choice)}
            hparams, mutation = self._mutate(algo, base, numeric, False, strict)
        else:
            hparams, mutation = base, {}
        return self._new_record(algo, hparams, None, mutation, origin)

    def fresh_pod(self, algo: str, origin: dict) -> PodRecord:
        """A restart: a pod of ``algo`` with fresh networks and hyperparameters drawn
        anew from the whole search space (not a copy of anyone), so a population stuck
        on a plateau explores settings its members' mutations would take long to reach
        (a noise kind, a far learning rate)."""
        base = self.base_hparams(algo)
        new, change = sample_space(base, search_space(algo), self.rng)
        hparams, mutation = hparam_checks.policy_output(algo, base, new, change, False)
        return self._new_record(algo, hparams, None, mutation, origin)

    def fill(self) -> list[PodRecord]:
        """New pods until the population has ``spec.pods`` (at the first start)."""
        # strict: a broken mutation policy fails start() at once, not hours later
        return [self.new_pod(strict=True) for _ in range(self.spec.pods - len(self.records))]

    def _live_entries(self, algo: str) -> list[lb.Entry]:
        """Live pods of ``algo`` with a checkpoint and a score, as would-be parents."""
        unusable = {e.checkpoint for e in self.entries if not e.usable}
        return [
            self._as_entry(r)
            for r in self.alive()
            if r.algo == algo
            and r.latest_checkpoint
            and r.latest_checkpoint not in unusable
            and r.recent_scores
        ]

    def _as_entry(self, r: PodRecord) -> lb.Entry:
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

    def _mutate(self, algo: str, hparams: dict, space: dict, structural: bool, strict: bool):
        """The mutation policy, its output checked like user input.

        A policy that raises or returns something bad mid-run must not end a tournament
        of many hours nor leave a replaced pod without its child: unless ``strict`` (the
        first pods, made when the tournament starts), this mutation falls back to the
        default :func:`~elegantpod.tournament.generator.mutate`, and ``warning`` says why.
        """
        try:
            new, change = self.mutation_policy(dict(hparams), space, self.rng, self.spec.generator)
            return hparam_checks.policy_output(algo, hparams, new, change, structural)
        except Exception as exc:
            if strict or self.mutation_policy is mutate:
                raise
            self.warning = f"mutation_policy failed, the default mutation was used: {exc}"
            new, change = mutate(dict(hparams), space, self.rng, self.spec.generator)
            return hparam_checks.policy_output(algo, hparams, new, change, structural)

    def add_pod(self, algo: str | None = None, parent: str | None = None, **hparams) -> PodRecord:
        """A pod added by the user: fresh, or cloned from a leaderboard entry or a pod.

        Raises ``ValueError`` for an algorithm the env cannot take, an unknown or
        unusable parent, a bad hyperparameter or a structural change from the parent.
        """
        parent_entry = None
        if parent is not None:
            matches = [e for e in self.entries if e.pod_id == parent]
            if matches and not matches[0].usable:
                raise ValueError(
                    f"parent {parent!r}: its checkpoint failed to load; choose another parent"
                )
            if matches:
                parent_entry = matches[0]
            elif (
                parent in self.records
                and self.records[parent].latest_checkpoint
                and self.records[parent].status in RESUMABLE
            ):  # a replaced or failed pod's checkpoints may be pruned already
                parent_entry = self._as_entry(self.records[parent])
                if not self.records[parent].recent_scores:
                    parent_entry = dataclasses.replace(parent_entry, score_mean=math.nan)
            else:
                raise ValueError(
                    f"unknown parent {parent!r}: not on the leaderboard and no checkpoint yet"
                )
        algo = algo or (parent_entry.algo if parent_entry else self.spec.algos[0])
        learner = get_algo(algo)  # the facade checked the env takes it, outside the lock
        if parent_entry is not None and parent_entry.algo != learner.name:
            raise ValueError(
                f"parent {parent_entry.pod_id!r} is a {parent_entry.algo!r} "
                f"agent, not {learner.name!r}"
            )
        base = dict(parent_entry.hparams) if parent_entry else self.base_hparams(learner.name)
        base_cfg = learner_config(learner.name, base)
        cfg = replace_checked(base_cfg, hparams)
        if parent_entry is not None:
            for key in learner.structural_hparams:
                if getattr(cfg, key) != getattr(base_cfg, key):
                    raise ValueError(f"{key!r} must equal the parent's to copy its networks")
        before = dataclasses.asdict(base_cfg)  # tuples restored: JSON lists are no change
        mutation = {k: [before[k], v] for k, v in dataclasses.asdict(cfg).items() if before[k] != v}
        return self._new_record(
            learner.name, dataclasses.asdict(cfg), parent_entry, mutation, {"kind": "user"}
        )


def recent_score(rec: PodRecord) -> float:
    """Mean of a pod's last scores (the exploit rule's smoothing); NaN with none."""
    scores = rec.recent_scores
    return sum(scores) / len(scores) if scores else math.nan
