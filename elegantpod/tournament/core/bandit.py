"""A bandit explore: a child's hyperparameters chosen by a Gaussian process of what
the population learned, as population-based bandits (PB2) choose them.

Why: the default explore perturbs a copied setting by x0.8/x1.2 or a redraw, blind to
what every other pod has already shown. Parker-Holder et al. 2020 ("Provably Efficient
Online Hyperparameter Optimization with Population-Based Bandits", arXiv:2002.02518)
instead fit a time-varying Gaussian process to the *improvement* each pod made over each
interval, as a function of the time and of the hyperparameters it trained with, and
give a child the setting of highest upper confidence bound at the current time. With a
small population (4 pods on a 2-core machine) that is the regime they report PB2 to
beat PBT in: the data of every pod's every segment is used, not just the parent's.

What this module does, in plain steps (all pure: numpy on the records' histories):

1. Data: for every pod's consecutive history rows, the score change over the segment
   (``y``), the tournament time at its end (``t``) and the numeric hyperparameters the
   segment ran with (``h``), each scaled to [0, 1] over its search-space bounds (on a
   log scale where the bound is). The newest :data:`MAX_POINTS` points are kept.
2. A Gaussian process on ``(t, h)`` with the product kernel ``exp(-|h - h'|^2 / (2
   l^2)) * (1 - eps) ** (|t - t'| / 2)``: the squared-exponential kernel of PB2 over the
   hyperparameters, and its time-varying forgetting over time (old improvements say less
   about now), on standardized ``y`` with a noise term.
3. The child's numeric hyperparameters: the candidate of highest
   ``mean + kappa * std`` at the current time among :data:`CANDIDATES` draws of the
   space and the parent's own setting. Categorical choices (``Choice``) are mutated as
   the default explore does; PB2 handles only continuous ones.

With too little data (fewer than :data:`MIN_POINTS` intervals) the default perturbation
stands in, as PB2 starts from PBT's random explore.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from elegantpod.search.space import Bound, Choice
from elegantpod.tournament.core.generator import GeneratorConfig, mutate
from elegantpod.tournament.core.record import PodRecord

MAX_POINTS = 200
"""Intervals the process is fitted on (the newest): the solve is cubic in them."""
MIN_POINTS = 6
"""Fewer intervals than this: no fit, the default perturbation explores."""
CANDIDATES = 256
"""Random settings the acquisition is maximized over (with the parent's own)."""
LENGTH = 0.3
"""Length scale of the kernel over hyperparameters scaled to [0, 1]."""
FORGET = 0.1
"""``eps`` of the time kernel, per unit of time scaled to [0, 1] over the data's span."""
KAPPA = 1.5
"""Weight of the posterior's standard deviation in the upper confidence bound."""
NOISE = 0.1
"""Observation noise variance, on standardized improvements."""


def unit(bound: Bound, x: float) -> float:
    """``x`` scaled to [0, 1] over ``bound`` (its log where the bound is log-scaled)."""
    lo, hi, v = float(bound.low), float(bound.high), float(x)
    if bound.log:
        lo, hi, v = math.log(lo), math.log(hi), math.log(max(v, bound.low))
    return 0.5 if hi == lo else min(1.0, max(0.0, (v - lo) / (hi - lo)))


def from_unit(bound: Bound, u: float) -> float | int:
    """The value of ``bound`` at ``u`` in [0, 1] (the inverse of :func:`unit`), on its grid."""
    lo, hi = float(bound.low), float(bound.high)
    if bound.log:
        return bound.clip(math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))))
    return bound.clip(lo + u * (hi - lo))


def intervals(
    records: Mapping[str, PodRecord], algo: str, names: list[str], space: Mapping[str, Bound]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, H, y)`` of every interval of the pods of ``algo``: its end time, its numeric
    hyperparameters scaled to [0, 1], and its score change (finite ones only)."""
    ts, hs, ys = [], [], []
    for rec in records.values():
        if rec.algo != algo:
            continue
        hp = dict(rec.hparams)
        prev = None
        for row in rec.history:
            hp = dict(row.get("hparams") or hp)
            score = row.get("score")
            if prev is not None and score is not None and math.isfinite(score):
                values = [hp.get(n) for n in names]
                if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                    ts.append(float(row["time"]))
                    hs.append([unit(space[n], v) for n, v in zip(names, values, strict=True)])
                    ys.append(float(score) - prev)
            if score is not None and math.isfinite(score):
                prev = float(score)
    keep = slice(-MAX_POINTS, None)
    order = np.argsort(np.asarray(ts, dtype=float), kind="stable")[keep]
    t = np.asarray(ts, dtype=float)[order]
    h = np.asarray(hs, dtype=float).reshape(len(ts), len(names))[order]
    y = np.asarray(ys, dtype=float)[order]
    return t, h, y


def kernel(t1, h1, t2, h2, span: float) -> np.ndarray:
    """PB2's time-varying kernel between two sets of points."""
    d2 = ((h1[:, None, :] - h2[None, :, :]) ** 2).sum(-1)
    dt = np.abs(t1[:, None] - t2[None, :]) / max(span, 1e-9)
    return np.exp(-d2 / (2 * LENGTH**2)) * (1 - FORGET) ** (dt / 2)


def ucb(t: np.ndarray, h: np.ndarray, y: np.ndarray, now: float, cand: np.ndarray) -> np.ndarray:
    """The upper confidence bound of the improvement at ``now`` for each candidate row."""
    sd = y.std()
    z = (y - y.mean()) / (sd if sd > 0 else 1.0)
    span = max(float(t.max() - t.min()), 1e-9) if len(t) else 1.0
    k = kernel(t, h, t, h, span) + NOISE * np.eye(len(t))
    ks = kernel(np.full(len(cand), now), cand, t, h, span)
    chol = np.linalg.cholesky(k)
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
    mean = ks @ alpha
    v = np.linalg.solve(chol, ks.T)
    var = np.clip(1.0 - (v * v).sum(0), 1e-12, None)
    return mean + KAPPA * np.sqrt(var)


def bandit_explore(
    hparams: dict[str, Any],
    space: Mapping[str, Bound | Choice],
    rng: random.Random,
    cfg: GeneratorConfig,
    *,
    records: Mapping[str, PodRecord],
    algo: str,
) -> tuple[dict[str, Any], dict[str, list]]:
    """A child's hyperparameters from its parent's ``hparams``: the numeric ones by the
    Gaussian process's upper confidence bound, the categorical ones as
    :func:`~elegantpod.tournament.core.generator.mutate` does. Returns them and the
    mutation ``{name: [old, new]}``, as ``mutate`` does; with too little data, ``mutate``'s."""
    names = sorted(n for n, b in space.items() if isinstance(b, Bound) and n in hparams)
    t, h, y = intervals(records, algo, names, space) if names else (None, None, None)
    if not names or len(y) < MIN_POINTS:
        return mutate(hparams, space, rng, cfg)
    now = float(t.max())  # the newest result: the time the child starts at
    gen = np.random.default_rng(rng.getrandbits(63))
    parent = np.array([[unit(space[n], hparams[n]) for n in names]])
    cand = np.vstack([parent, gen.random((CANDIDATES, len(names)))])
    best = cand[int(np.argmax(ucb(t, h, y, now, cand)))]
    new, change = dict(hparams), {}
    for n, u in zip(names, best, strict=True):
        value = from_unit(space[n], float(u))
        if value != hparams[n]:
            new[n], change[n] = value, [hparams[n], value]
    choices = {n: b for n, b in space.items() if isinstance(b, Choice)}
    if choices:
        new, more = mutate(new, choices, rng, cfg)
        change.update(more)
    return new, change
