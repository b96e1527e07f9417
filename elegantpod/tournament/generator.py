"""The generator: choose a parent, mutate its hyperparameters, keep algorithms mixed.

Exploit/explore as in population-based training: a new pod copies the networks and
optimizer state of a leaderboard entry (the parent) and perturbs its hyperparameters,
either by a factor (x0.8 / x1.2) or by a fresh draw within declared bounds. All functions
are pure given a seeded :class:`random.Random`, so they are tested exactly. Each
learner declares its own search space (``Learner.search_space``, of
:class:`~elegantpod.agents.space.Bound`); :func:`search_space` reads it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from elegantpod.agents import ALGOS, get_algo
from elegantpod.agents.space import Bound, Choice
from elegantpod.checks import in_range
from elegantpod.tournament.leaderboard import Entry, rank


class _SearchSpaces(Mapping):
    """Read-only view, algorithm name -> its learner's ``search_space``, kept for
    compatibility: it reads the registry on every access, so it lists registered
    algorithms too. To declare a space, set ``search_space`` on the learner class or use
    ``register_algo(cls, search_space={...})``; this mapping cannot be written."""

    def __getitem__(self, algo: str) -> Mapping[str, Bound]:
        if algo not in ALGOS:
            raise KeyError(algo)
        return MappingProxyType(ALGOS[algo].search_space)

    def __iter__(self) -> Iterator[str]:
        return iter(list(ALGOS))

    def __len__(self) -> int:
        return len(ALGOS)

    def __repr__(self) -> str:
        return f"SEARCH_SPACES({ {k: dict(v) for k, v in self.items()}!r})"


SEARCH_SPACES: Mapping[str, Mapping[str, Bound]] = _SearchSpaces()
"""Every registered algorithm's search space (read-only; see :func:`search_space`)."""


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
    stuck_tolerance: float = 0.05
    """What counts as an improvement for the restart rule: a segment score above the
    best seen by this fraction of the distance still to go to the target (of the best
    score's magnitude without a target). Smaller gains are noise around a plateau."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad setting."""
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

    A :class:`~elegantpod.agents.space.Bound` is perturbed by a factor or redrawn with
    ``cfg.resample_prob``; a :class:`~elegantpod.agents.space.Choice` switches to another
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


def should_exploit(
    pod_id: str,
    scores: dict[str, float],
    cfg: GeneratorConfig,
    target: float | None = None,
    noise: dict[str, float] | None = None,
) -> bool:
    """PBT's truncation rule: is ``pod_id`` in the bottom fraction of the live pods, and
    (with a ``target``) does the best live pod lead it by a gap that matters, and (with
    ``noise``) by more than the noise of their scores explains?

    Parameters
    ----------
    pod_id
        The (ready) pod that just finished a segment; a key of ``scores``.
    scores
        Recent score of every live pod with one (NaN: no finite score yet).
    cfg
        ``truncation``: the bottom ``floor(n * truncation)`` pods are replaced. A pod is
        there when at least ``n - floor(n * truncation)`` pods score strictly higher, so
        ties replace nobody; a NaN score ranks last. With fewer than two pods, never.
        ``min_gap``: with a ``target``, the best live score must also exceed the pod's by
        ``min_gap * |target - score|``. ``evidence_t``: see :func:`judge`.
    target
        The tournament's ``target_reward`` (``None``: no gap is asked).
    noise
        Standard errors of the recent scores (``None``: no evidence asked).
    """
    return judge(pod_id, scores, cfg, target, noise).replace


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


@dataclass(frozen=True)
class Verdict:
    """Why the exploit rule replaces a pod, or does not (see :func:`judge`)."""

    replace: bool
    score: float
    """The pod's recent mean score."""
    leader: str | None = None
    """The best live pod (the pod the evidence is weighed against)."""
    leader_score: float = math.nan
    t: float = math.nan
    """Welch's t statistic of the leader's recent mean over the pod's (inf: no noise)."""
    reason: str = ""
    """A few words: why not, or on what evidence."""


def welch_t(a_mean: float, a_se: float, b_mean: float, b_se: float) -> float:
    """``(a_mean - b_mean) / sqrt(a_se^2 + b_se^2)``: Welch's t statistic from two means
    and their standard errors; ``inf`` (or ``-inf``, ``0``) when neither has noise."""
    denom = math.sqrt(a_se**2 + b_se**2)
    gap = a_mean - b_mean
    if denom > 0:
        return gap / denom
    return math.copysign(math.inf, gap) if gap else 0.0


def standard_error(scores: list[float], eval_std: float | None, episodes: int) -> float:
    """Standard error of the mean of a pod's recent segment ``scores``.

    The larger of two estimates: the spread between segments (``s / sqrt(n)``, which
    also holds learning's own drift) and the spread within one evaluation
    (``eval_std / sqrt(episodes * n)``), so that two or three segments whose scores
    happen to agree do not pass for noiseless ones. One score without an episode
    spread (a one-episode fitness, as trading's) has unknown noise: ``inf``, no
    evidence yet.
    """
    n = len(scores)
    if n == 0:
        return math.inf
    between = 0.0
    if n >= 2:
        mean = sum(scores) / n
        between = math.sqrt(sum((x - mean) ** 2 for x in scores) / (n - 1) / n)
    within = 0.0
    if eval_std is not None and math.isfinite(eval_std) and episodes > 0:
        within = eval_std / math.sqrt(episodes * n)
    if n == 1 and not within > 0:  # one score of one episode: its noise is unknown
        return math.inf
    return max(between, within)


def judge(
    pod_id: str,
    scores: dict[str, float],
    cfg: GeneratorConfig,
    target: float | None = None,
    noise: dict[str, float] | None = None,
) -> Verdict:
    """The exploit rule with its figures: :func:`should_exploit` is ``judge(...).replace``.

    Parameters
    ----------
    pod_id, scores, cfg, target
        As for :func:`should_exploit`.
    noise
        Standard error of every pod's recent score (:func:`standard_error`). With it and
        ``cfg.evidence_t > 0``, the best live pod must lead by at least ``evidence_t``
        standard errors of the difference (Welch). ``None``: no evidence asked.
    """
    mine = scores[pod_id]
    finite = {p: s for p, s in scores.items() if math.isfinite(s)}
    leader = max(finite, key=finite.__getitem__) if finite else None
    top = finite[leader] if leader else math.nan
    n = len(scores)
    n_bottom = math.floor(n * cfg.truncation)
    if n < 2 or n_bottom < 1:
        return Verdict(False, mine, leader, top, reason="too few live pods")
    if not math.isfinite(mine):
        ok = leader is not None
        return Verdict(ok, mine, leader, top, reason="no finite score" if ok else "no scores")
    better = sum(1 for p, s in finite.items() if p != pod_id and s > mine)
    if better < max(1, n - n_bottom):  # the best pod is never replaced
        return Verdict(False, mine, leader, top, reason="not in the bottom fraction")
    if target is not None and cfg.min_gap and top - mine < cfg.min_gap * abs(target - mine):
        return Verdict(False, mine, leader, top, reason="gap small against the target")
    if noise is None or not cfg.evidence_t:
        return Verdict(True, mine, leader, top, reason="bottom fraction")
    t = welch_t(top, noise.get(leader, math.inf), mine, noise.get(pod_id, math.inf))
    if not t >= cfg.evidence_t:
        return Verdict(False, mine, leader, top, t, reason="within the noise")
    return Verdict(True, mine, leader, top, t, reason="evidence")


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
