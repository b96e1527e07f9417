"""Search spaces: where a tournament's generator may move each hyperparameter.

A learner declares its own space as the class attribute ``Learner.search_space``
(``{hyperparameter: Bound | Choice}``), next to the algorithm it tunes, as a model zoo keeps
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


MAX_CHOICES = 64
"""Most options a :class:`Choice` may hold (a categorical space is a short list)."""


@dataclass(frozen=True)
class Choice:
    """A categorical hyperparameter: one of a few ``options`` (strings or numbers).

    Categories have no order, so mutation cannot perturb them by a factor; with
    probability ``prob`` it redraws among the *other* options (a mutation that keeps the
    value would be no mutation), else it keeps the parent's. Integer options (network
    widths) work the same way: a ``Choice`` is for values whose neighbours are not
    better guesses than any other option.

    Examples
    --------
    >>> Choice(["gaussian", "ou", "colored"], prob=0.3)
    Choice(options=('gaussian', 'ou', 'colored'), prob=0.3)
    """

    options: tuple
    prob: float = 0.25
    """Probability that one mutation redraws this hyperparameter (among the others)."""

    def __post_init__(self) -> None:
        opts = tuple(self.options) if isinstance(self.options, list | tuple) else None
        if not opts or len(opts) > MAX_CHOICES:
            raise ValueError(
                f"Choice needs 1 to {MAX_CHOICES} options in a list, got {self.options!r}"
            )
        for o in opts:
            if isinstance(o, bool) or not isinstance(o, str | int | float):
                raise ValueError(f"Choice options must be strings or numbers, got {o!r}")
            if isinstance(o, float) and not math.isfinite(o):
                raise ValueError(f"Choice options must be finite, got {o!r}")
        if len(set(opts)) != len(opts):
            raise ValueError(f"Choice options must differ, got {list(opts)!r}")
        if isinstance(self.prob, bool) or not isinstance(self.prob, int | float):
            raise ValueError(f"Choice prob must be a number in [0, 1], got {self.prob!r}")
        if not 0.0 <= self.prob <= 1.0:
            raise ValueError(f"Choice prob must be in [0, 1], got {self.prob!r}")
        object.__setattr__(self, "options", opts)

    def sample(self, rng: random.Random) -> str | int | float:
        """A fresh draw: each option equally likely."""
        return self.options[rng.randrange(len(self.options))]

    def mutate(self, old, rng: random.Random):
        """``old``, or with probability ``prob`` another option (uniformly). An ``old``
        that is not an option (a user's own value) is always redrawn."""
        if old in self.options and (len(self.options) == 1 or rng.random() >= self.prob):
            return old
        others = [o for o in self.options if o != old]
        return others[rng.randrange(len(others))] if others else old


Domain = Bound | Choice
"""Where one hyperparameter may go: a numeric :class:`Bound` or a categorical :class:`Choice`."""


def check_search_space(space: dict, config_cls: type, owner: str) -> dict[str, Domain]:
    """``space`` as a plain dict, or ``ValueError`` naming a value that is not a
    :class:`Bound` or :class:`Choice`, or a name that is not a field of ``config_cls``."""
    bad = {k: v for k, v in space.items() if not isinstance(v, Bound | Choice)}
    if bad:
        raise ValueError(f"search_space values must be Bound(...) or Choice([...]), got {bad!r}")
    fields = getattr(config_cls, "__dataclass_fields__", {})
    unknown = sorted(set(space) - set(fields))
    if unknown:
        raise ValueError(f"search_space names unknown {owner} hyperparameters {unknown}")
    return dict(space)
