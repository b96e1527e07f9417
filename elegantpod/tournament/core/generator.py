"""The generator: choose a parent, mutate its hyperparameters, keep algorithms mixed.

Whom a new pod replaces is :mod:`~elegantpod.tournament.core.exploit`'s rule; a restart's
fresh draws are :func:`sample_space`'s, applied by :mod:`~elegantpod.tournament.core.restart`.

Exploit/explore as in population-based training: a new pod copies the networks and
optimizer state of a leaderboard entry (the parent) and perturbs its hyperparameters,
either by a factor (x0.8 / x1.2) or by a fresh draw within declared bounds. All functions
are pure given a seeded :class:`random.Random`, so they are tested exactly. Each
learner declares its own search space (``Learner.search_space``, of
:class:`~elegantpod.search.space.Bound`); :func:`search_space` reads it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elegantpod.agents import NAME as ALGO_NAME
from elegantpod.agents import get_algo
from elegantpod.checks.limits import in_range
from elegantpod.search.space import Bound, Choice
from elegantpod.tournament.core.leaderboard import Entry, rank

RULE_NAME = ALGO_NAME
"""What a selection rule's name may be: an algorithm's (:data:`elegantpod.agents.NAME`:
ASCII lower-case letters, digits and underscores, a letter first, at most 32
characters), for the same reasons: it is saved in every store's spec and in each
replacement's ``origin``, and shown in lineage views."""


def check_rule_names(names: object) -> tuple[str, ...]:
    """``names`` as a tuple of rule names, each well formed and named once; ``ValueError``
    naming the first bad one (escaped, so an invisible character shows). Whether each is
    registered is :func:`~elegantpod.tournament.core.rules.check_rules`'s question."""
    if isinstance(names, str) or not isinstance(names, list | tuple):
        raise ValueError(
            f"rules must be a list of selection rule names, e.g. ['restart', 'exploit'], "
            f"got {ascii(names)[:100]}"
        )
    out = []
    for name in names:
        if not isinstance(name, str) or not RULE_NAME.fullmatch(name):
            shown = ascii(name[:100]) if isinstance(name, str) else ascii(name)[:100]
            raise ValueError(
                f"selection rule name {shown} must match [a-z][a-z0-9_]* (ASCII lower-case "
                "letters, digits and underscores, a letter first, at most 32 characters)"
            )
        if name in out:
            raise ValueError(f"selection rule {name!r} is named twice in rules")
        out.append(name)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class GeneratorConfig:
    """How the generator picks parents and mutates."""

    selection: str = "truncation"
    """``"truncation"``: uniform among the top fraction; ``"softmax"``: weights
    ``exp(z / temperature)`` over z-scored scores of the live pods."""
    truncation: float = 0.5
    """Fraction of the live pods that parents come from (the top) and that are replaced
    at the end of a segment (the bottom)."""
    temperature: float = 1.0
    """Softmax temperature (lower: greedier)."""
    perturb_factors: tuple[float, float] = (0.8, 1.2)
    """Multiplicative perturbation choices."""
    resample_prob: float = 0.25
    """Probability of redrawing a hyperparameter within its bounds instead of perturbing."""
    explore: str = "perturb"
    """How a child's hyperparameters move from its parent's: ``"perturb"`` (x0.8/x1.2 or
    a redraw, population-based training's explore) or ``"bandit"`` (the setting of
    highest upper confidence bound under a Gaussian process of every pod's improvement
    per segment, population-based bandits' explore:
    :mod:`~elegantpod.tournament.core.bandit`). A ``mutation_policy`` of your own
    replaces either."""
    ready_segments: int = 2
    """Segments a pod trains before it may be replaced (PBT's "ready" criterion): young
    pods are not judged on their first, noisiest evaluations."""
    score_window: int = 3
    """Segments whose scores the exploit rule averages per pod (smooths noisy
    evaluations); their spread is also the noise the evidence rule weighs."""
    min_gap: float = 0.1
    """With a target (``target_reward``): a pod is replaced only if the best live pod
    leads it by at least this fraction of the way the pod still has to go to the target.
    Differences small against that distance are noise for selection, and chasing them
    is harmful: in an exploration trap (MountainCarContinuous) every pod scores ~0 before
    one finds the goal, and the pod that stopped moving earliest scores best, so the
    plain rule replaced the pods still exploring with copies of the most trapped one.
    0: the plain truncation rule. Without a target it has no effect."""

    evidence_t: float = 2.0
    """Replace only on evidence: a pod in the bottom fraction is replaced only when the
    best live pod's recent mean score beats its own by at least this many standard
    errors (Welch's t statistic of the two ``score_window`` means, each standard error
    the larger of the spread of the pod's recent segment scores and of its last
    evaluation's episodes). About 2: a lead that the noise of a few evaluations
    explains is not a reason to throw a pod away. 0: no evidence asked (the plain
    truncation rule, which churned on one-episode trading fitness)."""
    restart_after: int = 2
    """Explore when stuck: when no segment score has beaten the best one seen (by
    ``stuck_tolerance``) for ``restart_after`` segments per live pod, and the target is
    not reached, the bottom ``restart_fraction`` of the live pods (never the leader) are
    replaced at their next segment end by *fresh* pods whose hyperparameters are new
    draws from the search space, with fresh networks (restarts), not copies of the
    leader. Only with a target (``target_reward``): without one a plateau may be the
    best there is (500 on CartPole), and restarts would throw it away. A pod is
    restarted only after ``restart_after`` segments of its own, and
    each restart round without an improvement since doubles the wait for the next, so a
    long plateau near the target is not churned through. 0: never."""
    restart_after_seconds: float | None = None
    """The same, measured in tournament seconds since the last improvement (``None``:
    segments only)."""
    restart_fraction: float = 0.5
    """Share of the live pods a restart replaces (the bottom ones; at least one, never
    the leader)."""
    rules: tuple[str, ...] = ("restart", "exploit")
    """The selection rules, by registered name, asked in this order at the end of each
    segment whether the pod is replaced (:mod:`~elegantpod.tournament.core.rules`):
    ``("restart", "exploit")`` is the tournament; ``("restart",)`` restart-only;
    ``("restart", "copy")`` exploits weights without exploring hyperparameters; ``()``
    never replaces a pod (a sweep with ``init="base"``, random search with
    ``init="sample"``). ``register_rule`` adds a rule of your own."""
    stuck_tolerance: float = 0.05
    """What counts as an improvement for the restart rule: a segment score above the
    best seen by this fraction of the distance still to go to the target (of the best
    score's magnitude without a target). Smaller gains are noise around a plateau."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad setting."""
        check_rule_names(self.rules)
        for name in ("evidence_t", "stuck_tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
        in_range("evidence_t", self.evidence_t, 0.0, 100.0)
        in_range("stuck_tolerance", self.stuck_tolerance, 0.0, 1.0)
        in_range("restart_fraction", self.restart_fraction, 0.0, 1.0)
        if (
            isinstance(self.restart_after, bool)
            or not isinstance(self.restart_after, int)
            or not 0 <= self.restart_after <= 10**6
        ):
            raise ValueError(
                f"restart_after must be an integer in [0, 1000000], got {self.restart_after!r}"
            )
        if self.restart_after_seconds is not None and (
            isinstance(self.restart_after_seconds, bool)
            or not isinstance(self.restart_after_seconds, int | float)
            or not 0 < self.restart_after_seconds < 1e9
        ):
            raise ValueError(
                "restart_after_seconds must be None or a number of seconds > 0, "
                f"got {self.restart_after_seconds!r}"
            )
        if self.explore not in ("perturb", "bandit"):
            raise ValueError(
                f"explore must be 'perturb' or 'bandit', got {ascii(self.explore)[:60]}"
            )
        if self.selection not in ("truncation", "softmax"):
            raise ValueError(f"selection must be 'truncation' or 'softmax', got {self.selection!r}")
        in_range("truncation", self.truncation, 1e-9, 1.0)
        in_range("resample_prob", self.resample_prob, 0.0, 1.0)
        in_range("min_gap", self.min_gap, 0.0, 1.0)
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        for name, high in (("ready_segments", 10**9), ("score_window", 64)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"{name} must be an integer in [1, {high}], got {value!r}")


def choose_parent(entries: list[Entry], rng: random.Random, cfg: GeneratorConfig) -> Entry:
    """Pick a parent from ``entries`` (at least one) by the configured selection."""
    if not entries:
        raise ValueError("cannot choose a parent from an empty leaderboard")
    ranked = rank(entries)
    if cfg.selection == "truncation":
        n_top = max(1, math.ceil(len(ranked) * cfg.truncation))
        return ranked[rng.randrange(n_top)]
    scores = [e.score_mean for e in ranked]
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    z = [(s - mean) / std if std > 0 else 0.0 for s in scores]
    top = max(z)
    weights = [math.exp((zi - top) / cfg.temperature) for zi in z]
    return rng.choices(ranked, weights=weights, k=1)[0]


def mutate(
    hparams: dict[str, Any], space: dict[str, Bound], rng: random.Random, cfg: GeneratorConfig
) -> tuple[dict[str, Any], dict[str, list]]:
    """Perturb every hyperparameter of ``space`` present in ``hparams``.

    A :class:`~elegantpod.search.space.Bound` is perturbed by a factor or redrawn with
    ``cfg.resample_prob``; a :class:`~elegantpod.search.space.Choice` switches to another
    option with its own ``prob``.

    Returns the new hyperparameters and the mutation ``{name: [old, new]}`` (only the
    names whose value changed).
    """
    new = dict(hparams)
    mutation: dict[str, list] = {}
    for name in sorted(space):
        if name not in hparams:
            continue
        bound, old = space[name], hparams[name]
        if isinstance(bound, Choice):
            value = bound.mutate(old, rng)  # categories: redraw with the Choice's own prob
        elif rng.random() < cfg.resample_prob:
            value = bound.sample(rng)
        else:
            factor = rng.choice(cfg.perturb_factors)
            value = bound.clip(old * factor) if old != 0 else bound.sample(rng)
            step = bound.step  # on a grid (integers, multiples of q) x1.2 may round back
            if step is not None and value == old:
                value = bound.clip(old + (step if factor > 1 else -step))
        if value != old:
            new[name] = value
            mutation[name] = [old, value]
    return new, mutation


def choose_algo(algos: list[str], counts: Counter | dict[str, int], rng: random.Random) -> str:
    """Keep the ensemble mixed: the least represented configured algorithm (ties at random)."""
    if not algos:
        raise ValueError("no algorithms configured")
    fewest = min(counts.get(a, 0) for a in algos)
    return rng.choice([a for a in algos if counts.get(a, 0) == fewest])


def sample_space(hparams: dict[str, Any], space: dict, rng: random.Random):
    """A restart's fresh draw: every hyperparameter of ``space`` in ``hparams`` drawn
    anew within its domain. Returns the hyperparameters and ``{name: [old, new]}``."""
    new = dict(hparams)
    change: dict[str, list] = {}
    for name in sorted(space):
        if name in hparams:
            value = space[name].sample(rng)
            if value != hparams[name]:
                new[name] = value
                change[name] = [hparams[name], value]
    return new, change


def search_space(
    algo: str, overrides: Mapping[str, Mapping[str, Bound | Choice]] | None = None
) -> dict[str, Bound | Choice]:
    """Where the generator may move each hyperparameter of ``algo``: a copy of its
    learner's ``search_space``, with a tournament's own ``overrides``
    (``TournamentSpec.search_space``, ``{algorithm: {hyperparameter: domain}}``) over it:
    an override replaces the learner's domain of that name or adds one. Raises
    ``ValueError`` for an unknown algorithm."""
    learner = get_algo(algo)
    return {**learner.search_space, **(overrides or {}).get(learner.name, {})}
