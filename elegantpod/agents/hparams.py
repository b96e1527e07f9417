"""A hyperparameter, declared once: its default, its hard limit, its search domain, and
how the rest of the package treats it, in one field of the algorithm's config.

Before, one hyperparameter could be written in four places (the config field, a
``limits`` table, the learner's ``search_space`` and the dashboard's key columns), and
an algorithm's change had to find them all. Now the config says it::

    lr: float = hparam(3e-3, limit=Limit(0.0, MAX_LR, open_low=True),
                       search=Bound(1e-4, 1e-2, log=True), key=True)
    \"\"\"Adam learning rate of actor and critic.\"\"\"

and the readers ask the config: :meth:`validate` checks :func:`limits`, the learner's
``search_space`` is :func:`search_space`, its ``structural_hparams`` are
:func:`structural` and the leaderboard's key columns are :func:`key_names`. The doc is
the attribute docstring under the field (what ``help()`` and the API reference show).

A subclass that changes only a default (DQN's ``lr``) takes the rest from its base with
:func:`inherit`, so a limit or a domain is never copied by hand.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.limits import Limit
from elegantpod.search.space import Domain

HPARAM = "elegantpod.hparam"
"""The key of a field's metadata that holds its :class:`HParam`."""


@dataclass(frozen=True)
class HParam:
    """What a config field declares beyond its default and its doc."""

    limit: Limit | None = None
    """Hard range, enforced for a user's value, a mutation and a stored value alike
    (``None``: not a number, or checked by the config's own ``validate``)."""
    search: Domain | None = None
    """Where a tournament's generator may move it (``None``: it never mutates it)."""
    key: bool = False
    """Worth a glance: one of the leaderboard's and the dashboard's key columns."""
    structural: bool = False
    """Shapes networks, buffers or envs: fixed for a pod's life, never mutated (a
    mutation or a stored change of it is refused)."""


def hparam(
    default: Any,
    *,
    limit: Limit | None = None,
    search: Domain | None = None,
    key: bool = False,
    structural: bool = False,
) -> Any:
    """A config field with its default and what :class:`HParam` says about it."""
    spec = HParam(limit=limit, search=search, key=key, structural=structural)
    return field(default=default, metadata={HPARAM: spec})


def inherit(base: type, name: str, default: Any = dataclasses.MISSING, **changes: Any) -> Any:
    """``base``'s field ``name`` again, with a new ``default`` and any of
    :class:`HParam`'s attributes changed (``search=None`` stops mutating it)."""
    found = {f.name: f for f in dataclasses.fields(base)}
    if name not in found or HPARAM not in found[name].metadata:
        raise ValueError(f"{base.__name__} declares no hyperparameter {name!r} to inherit")
    old = found[name]
    spec = dataclasses.replace(old.metadata[HPARAM], **changes)
    value = old.default if default is dataclasses.MISSING else default
    return field(default=value, metadata={HPARAM: spec})


def declared(config_cls: type) -> dict[str, HParam]:
    """Every hyperparameter ``config_cls`` declares with :func:`hparam`, in field order."""
    if not dataclasses.is_dataclass(config_cls):
        return {}
    return {
        f.name: f.metadata[HPARAM] for f in dataclasses.fields(config_cls) if HPARAM in f.metadata
    }


def limits(config_cls: type) -> dict[str, Limit]:
    """Each field's hard range (the fields that declare one)."""
    return {n: h.limit for n, h in declared(config_cls).items() if h.limit is not None}


def search_space(config_cls: type) -> dict[str, Domain]:
    """The learner's own search space: each field's domain (the fields that have one)."""
    return {n: h.search for n, h in declared(config_cls).items() if h.search is not None}


def structural(config_cls: type) -> tuple[str, ...]:
    """The fields fixed for a pod's life."""
    return tuple(n for n, h in declared(config_cls).items() if h.structural)


def key_names(config_cls: type) -> tuple[str, ...]:
    """The key columns of the leaderboard and the dashboard, in field order."""
    return tuple(n for n, h in declared(config_cls).items() if h.key)
