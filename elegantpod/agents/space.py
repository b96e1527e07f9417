"""Search spaces: where a tournament's generator may move each hyperparameter.

A learner declares its own space as the class attribute ``Learner.search_space``
(``{hyperparameter: Bound}``), next to the algorithm it tunes, as a model zoo keeps
hyperparameters beside each algorithm. This module is pure: the tournament reads the
spaces, the learners do not know about tournaments.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """Where a hyperparameter may go under mutation."""

    low: float
    high: float
    log: bool = False
    """Sample and perturb on a log scale (learning rates, rates in general)."""
    integer: bool = False
    """Round to an integer (epochs, batch sizes)."""

    def clip(self, x: float) -> float | int:
        """``x`` clipped into the bounds (rounded for integer hyperparameters)."""
        x = min(max(x, self.low), self.high)
        return int(round(x)) if self.integer else float(x)

    def sample(self, rng: random.Random) -> float | int:
        """A fresh draw within the bounds (log-uniform when ``log``)."""
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        return self.clip(x)


def check_search_space(space: dict, config_cls: type, owner: str) -> dict[str, Bound]:
    """``space`` as a plain dict, or ``ValueError`` naming a value that is not a
    :class:`Bound` or a name that is not a field of ``config_cls``."""
    bad = {k: v for k, v in space.items() if not isinstance(v, Bound)}
    if bad:
        raise ValueError(f"search_space values must be Bound(...), got {bad!r}")
    fields = getattr(config_cls, "__dataclass_fields__", {})
    unknown = sorted(set(space) - set(fields))
    if unknown:
        raise ValueError(f"search_space names unknown {owner} hyperparameters {unknown}")
    return dict(space)
