"""Search spaces for tournaments, under Ray Tune's names.

One import for everything a search space is made of: the constructors (same names,
argument order and bounds as ``ray.tune``'s), :func:`from_tune` for a Tune space, and
the plain-JSON form that config files and ``tournament.json`` hold.

>>> from elegantpod.search import choice, loguniform
>>> space = {"ppo": {"lr": loguniform(1e-4, 1e-2), "epochs": choice([2, 4, 8])}}
>>> # Tournament("CartPole-v1", store=..., search_space=space, init="sample")
>>> space_to_dict(space)["ppo"]["epochs"]
{'choice': [2, 4, 8]}

Bounds follow Tune: :func:`randint` and :func:`lograndint` exclude ``high``;
:func:`qrandint` and :func:`qlograndint` include it (except for ``q=1``); the float
ones include both ends.
"""

from elegantpod.search.plain import (
    domain_from_dict,
    domain_to_dict,
    space_from_dict,
    space_to_dict,
)
from elegantpod.search.space import (
    Bound,
    Choice,
    Domain,
    choice,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    quniform,
    randint,
    uniform,
)
from elegantpod.search.tune import from_tune

__all__ = [
    "Bound",
    "Choice",
    "Domain",
    "choice",
    "domain_from_dict",
    "domain_to_dict",
    "from_tune",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "quniform",
    "randint",
    "space_from_dict",
    "space_to_dict",
    "uniform",
]
