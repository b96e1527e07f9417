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
from elegantpod.agents.space import Bound
from elegantpod.config import in_range
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
    score_window: int = 2
    """Segments whose scores the exploit rule averages per pod (smooths noisy evaluations)."""
    min_gap: float = 0.1
    """With a target (``target_reward``): a pod is replaced only if the best live pod
    leads it by at least this fraction of the way the pod still has to go to the target.
    Differences small against that distance are noise for selection, and chasing them
    is harmful: in an exploration trap (MountainCarContinuous) every pod scores ~0 before
    one finds the goal, and the pod that stopped moving earliest scores best, so the
    plain rule replaced the pods still exploring with copies of the most trapped one.
    0: the plain truncation rule. Without a target it has no effect."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad setting."""
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

    Returns the new hyperparameters and the mutation ``{name: [old, new]}`` (only the
    names whose value changed).
    """
    new = dict(hparams)
    mutation: dict[str, list] = {}
    for name in sorted(space):
        if name not in hparams:
            continue
        bound, old = space[name], hparams[name]
        if rng.random() < cfg.resample_prob:
            value = bound.sample(rng)
        else:
            factor = rng.choice(cfg.perturb_factors)
            value = bound.clip(old * factor) if old != 0 else bound.sample(rng)
            if bound.integer and value == old:  # x1.2 of a small integer rounds back
                value = bound.clip(old + (1 if factor > 1 else -1))
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
    pod_id: str, scores: dict[str, float], cfg: GeneratorConfig, target: float | None = None
) -> bool:
    """PBT's truncation rule: is ``pod_id`` in the bottom fraction of the live pods, and
    (with a ``target``) does the best live pod lead it by a gap that matters?

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
        ``min_gap * |target - score|``.
    target
        The tournament's ``target_reward`` (``None``: no gap is asked).
    """
    n = len(scores)
    n_bottom = math.floor(n * cfg.truncation)
    if n < 2 or n_bottom < 1:
        return False
    mine = scores[pod_id]
    if not math.isfinite(mine):
        return any(math.isfinite(s) for s in scores.values())
    better = sum(1 for p, s in scores.items() if p != pod_id and math.isfinite(s) and s > mine)
    if better < max(1, n - n_bottom):  # the best pod is never replaced
        return False
    if target is None or not cfg.min_gap:
        return True
    top = max(s for s in scores.values() if math.isfinite(s))
    return top - mine >= cfg.min_gap * abs(target - mine)


def search_space(algo: str) -> dict[str, Bound]:
    """Where the generator may move each hyperparameter of ``algo``: a copy of its
    learner's ``search_space`` (raises ``ValueError`` for an unknown algorithm)."""
    return dict(get_algo(algo).search_space)
