"""Search spaces: where a tournament's generator may move each hyperparameter.

A learner declares its own space as the class attribute ``Learner.search_space``
(``{hyperparameter: Bound | Choice}``), next to the algorithm it tunes, as a model zoo keeps
hyperparameters beside each algorithm. This module is pure: the tournament reads the
spaces, the learners do not know about tournaments.
"""

from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass
from typing import Any

from elegantpod.checks.limits import check_finite
from elegantpod.checks.text import short


def _number(name: str, value: Any) -> float | int:
    """``value`` if it is a finite number (not a bool), else ``ValueError`` naming it."""
    check_finite(name, value)
    return value


def _on_grid(x: float, q: float) -> bool:
    """Whether ``x`` is a multiple of ``q`` (to rounding); a grid too fine to index
    (``x / q`` past a float) holds nothing."""
    ratio = x / q
    return math.isfinite(ratio) and math.isclose(ratio, round(ratio), rel_tol=1e-9, abs_tol=1e-9)


@dataclass(frozen=True)
class Bound:
    """A numeric hyperparameter's range: where mutation and fresh draws may move it.

    ``low`` and ``high`` are both reachable (inclusive). Build one with the Tune-named
    constructors (:func:`uniform`, :func:`loguniform`, :func:`randint`, :func:`qrandint`...)
    or directly: ``Bound(1e-4, 1e-2, log=True)``.

    Raises ``ValueError`` for ends that are not finite numbers, ``low > high``, a log
    scale that reaches 0, integer ends that are not integers, or ends off the ``q`` grid.
    """

    low: float
    high: float
    log: bool = False
    """Sample and perturb on a log scale (learning rates, rates in general)."""
    integer: bool = False
    """Round to an integer (epochs, batch sizes)."""
    q: float | None = None
    """Quantization: every value is a multiple of ``q`` (``low`` and ``high`` are too).
    An integer one with ``q=1`` is a plain integer range (``q`` is then ``None``)."""

    def __post_init__(self) -> None:
        low, high = _number("Bound low", self.low), _number("Bound high", self.high)
        if not low <= high:
            raise ValueError(f"Bound needs low <= high, got low={short(low)}, high={short(high)}")
        if self.log and not low > 0:
            raise ValueError(f"a log-scale Bound needs low > 0, got low={short(low)}")
        q = self.q
        if q is not None and (_number("Bound q", q) <= 0):
            raise ValueError(f"Bound q must be > 0, got {short(q)}")
        if self.integer:
            for name, v in (("low", low), ("high", high), ("q", q)):
                if v is not None and not float(v).is_integer():
                    raise ValueError(f"an integer Bound needs an integer {name}, got {short(v)}")
            low, high = int(low), int(high)
            q = None if q is None or int(q) == 1 else int(q)
        else:  # a float range: its ends and draws are floats (10 is 10.0)
            low, high, q = float(low), float(high), None if q is None else float(q)
        if q is not None and not (_on_grid(low, q) and _on_grid(high, q)):
            raise ValueError(
                f"Bound low={short(low)} and high={short(high)} must be multiples of q={short(q)}"
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "q", q)

    @property
    def step(self) -> float | int | None:
        """The grid's spacing: ``q``, 1 for an integer range, ``None`` for a continuous one."""
        return self.q if self.q is not None else (1 if self.integer else None)

    def clip(self, x: float) -> float | int:
        """``x`` clipped into the bounds and rounded to the nearest value of the grid
        (integers, multiples of ``q``)."""
        x = min(max(x, self.low), self.high)
        step = self.step
        if step is not None:  # low and high are on the grid: the rounded value stays in
            x = round(x / step) * step
            if self.q is not None and not self.integer:  # 0.30000000000000004 -> 0.3
                x = float(f"{x:.15g}")
            x = min(max(x, self.low), self.high)
        return int(round(x)) if self.integer else float(x)

    def sample(self, rng: random.Random) -> float | int:
        """A fresh draw within the bounds: uniform, or log-uniform when ``log``. On a
        linear grid each value is equally likely (the ends too), as Tune's samplers draw."""
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        elif self.step is not None:  # half a step past each end: whole cells at the ends
            x = rng.uniform(self.low - self.step / 2, self.high + self.step / 2)
        else:
            x = rng.uniform(self.low, self.high)
        return self.clip(x)

    def __contains__(self, x: Any) -> bool:
        """Whether ``x`` is a value of this range (on its grid)."""
        if isinstance(x, bool) or not isinstance(x, numbers.Real):  # numpy's numbers too
            return False
        if not self.low <= x <= self.high:
            return False
        step = self.step
        return step is None or _on_grid(x, step)


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
                f"Choice needs 1 to {MAX_CHOICES} options in a list, got {short(self.options)}"
            )
        for o in opts:
            if isinstance(o, bool) or not isinstance(o, str | int | float):
                raise ValueError(f"Choice options must be strings or numbers, got {short(o)}")
            if isinstance(o, float) and not math.isfinite(o):
                raise ValueError(f"Choice options must be finite, got {short(o)}")
        if len(set(opts)) != len(opts):
            raise ValueError(f"Choice options must differ, got {short(list(opts))}")
        if isinstance(self.prob, bool) or not isinstance(self.prob, int | float):
            raise ValueError(f"Choice prob must be a number in [0, 1], got {short(self.prob)}")
        if not 0.0 <= self.prob <= 1.0:
            raise ValueError(f"Choice prob must be in [0, 1], got {short(self.prob)}")
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

    def __contains__(self, x: Any) -> bool:
        """Whether ``x`` is one of the options."""
        return x in self.options


Domain = Bound | Choice
"""Where one hyperparameter may go: a numeric :class:`Bound` or a categorical :class:`Choice`."""


# ------------------------------------------------------------------ Ray Tune's names
# Same names, argument order and bounds as ray.tune's, so a Tune search space reads the
# same here; each returns a Bound or a Choice (what the generator mutates and samples).
def uniform(low: float, high: float) -> Bound:
    """A float drawn uniformly in ``[low, high]`` (as ``tune.uniform``)."""
    return Bound(low, high)


def loguniform(low: float, high: float) -> Bound:
    """A float drawn log-uniformly in ``[low, high]``, ``0 < low`` (as ``tune.loguniform``):
    every decade is equally likely, as a learning rate's search wants.

    >>> loguniform(1e-4, 1e-2)
    Bound(low=0.0001, high=0.01, log=True, integer=False, q=None)
    """
    return Bound(low, high, log=True)


def quniform(low: float, high: float, q: float) -> Bound:
    """A float drawn uniformly in ``[low, high]`` and rounded to a multiple of ``q``
    (as ``tune.quniform``: ``low`` and ``high`` must be multiples of ``q``, both reachable)."""
    return Bound(low, high, q=q)


def qloguniform(low: float, high: float, q: float) -> Bound:
    """A float drawn log-uniformly in ``[low, high]`` and rounded to a multiple of ``q``
    (as ``tune.qloguniform``)."""
    return Bound(low, high, log=True, q=q)


def _int_ends(name: str, low: Any, high: Any) -> tuple[int, int]:
    for v in (low, high):
        whole = isinstance(v, int) or isinstance(v, float) and v.is_integer()
        if isinstance(v, bool) or not whole:
            raise ValueError(f"{name}({short(low)}, {short(high)}) needs integer bounds")
    return int(low), int(high)


def randint(low: int, high: int) -> Bound:
    """An integer drawn uniformly from ``low`` (inclusive) to ``high`` (**exclusive**), as
    ``tune.randint`` and ``numpy.random.randint``: ``randint(2, 9)`` gives 2 to 8.

    >>> randint(2, 9)
    Bound(low=2, high=8, log=False, integer=True, q=None)
    """
    low, high = _int_ends("randint", low, high)
    if high <= low:
        raise ValueError(f"randint({low}, {high}) holds no integer: high is exclusive")
    return Bound(low, high - 1, integer=True)


def lograndint(low: int, high: int) -> Bound:
    """An integer drawn log-uniformly from ``low`` (inclusive, > 0) to ``high``
    (exclusive), as ``tune.lograndint`` (batch sizes)."""
    low, high = _int_ends("lograndint", low, high)
    if high <= low:
        raise ValueError(f"lograndint({low}, {high}) holds no integer: high is exclusive")
    return Bound(low, high - 1, log=True, integer=True)


def qrandint(low: int, high: int, q: int = 1) -> Bound:
    """A multiple of ``q`` drawn uniformly between ``low`` and ``high``, as
    ``tune.qrandint``: ``high`` is **inclusive** (``qrandint(8, 64, 8)`` gives 8, 16...
    64), except for ``q=1``, where it is exclusive as in :func:`randint`. Ends off the
    grid are rounded inwards (``qrandint(5, 30, 10)`` gives 10, 20, 30)."""
    return _quantized_int("qrandint", low, high, q, log=False)


def qlograndint(low: int, high: int, q: int) -> Bound:
    """A multiple of ``q`` drawn log-uniformly between ``low`` and ``high`` (inclusive
    except for ``q=1``), as ``tune.qlograndint``."""
    return _quantized_int("qlograndint", low, high, q, log=True)


def _quantized_int(name: str, low: Any, high: Any, q: Any, log: bool) -> Bound:
    low, high = _int_ends(name, low, high)
    if isinstance(q, bool) or not isinstance(q, int) or q < 1:
        raise ValueError(f"{name} q must be an integer >= 1, got {short(q)}")
    if q == 1:
        return (lograndint if log else randint)(low, high)
    first, last = -(-low // q) * q, (high // q) * q  # the grid's ends inside [low, high]
    if first > last:
        raise ValueError(f"{name}({low}, {high}, {q}) holds no multiple of {q}")
    return Bound(first, last, log=log, integer=True, q=q)


def choice(options: list | tuple) -> Choice:
    """One of ``options`` (strings or numbers), each equally likely, as ``tune.choice``;
    mutation switches to another option (see :class:`Choice`).

    >>> choice([2, 4, 8])
    Choice(options=(2, 4, 8), prob=0.25)
    """
    return Choice(list(options) if isinstance(options, list | tuple) else options)


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
