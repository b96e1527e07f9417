"""A tournament's own search spaces (``TournamentSpec.search_space``): read and checked.

A learner declares where the generator may move its hyperparameters
(``Learner.search_space``); a tournament may narrow, widen or extend that for itself,
``{algorithm: {hyperparameter: Bound | Choice}}``, and
:func:`~elegantpod.tournament.core.generator.search_space` lays it over the learner's. What
the user gives may be ``Bound`` and ``Choice`` values, their plain-JSON form (a config
file, ``tournament.json``; see :mod:`elegantpod.search.plain`) or ``ray.tune``
domains; :func:`normalize` makes them all ``Bound`` and ``Choice``. :func:`check` then
holds every domain to the learner's own checks, before any cluster work: a value that a
mutation or a fresh draw could produce must be one the learner's config accepts (its
type and hard limits), or the tournament would fail hours later, at that draw.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks.overrides import replace_checked
from elegantpod.checks.text import short
from elegantpod.search.plain import domain_from_dict
from elegantpod.search.space import Bound, Choice, Domain
from elegantpod.search.tune import from_tune, is_tune_domain

INITS = ("base", "sample")
"""How a tournament's first pods start (``TournamentSpec.init``)."""


def normalize(value: Any) -> dict[str, dict[str, Domain]]:
    """``{algorithm: {hyperparameter: Bound | Choice}}`` from what a user or a file gives:
    ``Bound``/``Choice`` values, their plain-JSON form or ``ray.tune`` domains, under
    algorithm names in any case (``"PPO"`` is ``"ppo"``). ``None`` is no space.

    Raises
    ------
    ValueError
        Naming the key and the value: not an object of objects, an unknown algorithm
        (or one named twice), a value that is no domain.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(
            "search_space must be an object {algorithm: {hyperparameter: domain}}, e.g. "
            f"{{'ppo': {{'lr': loguniform(1e-4, 1e-2)}}}}, got {short(value)}"
        )
    out: dict[str, dict[str, Domain]] = {}
    for algo, names in value.items():
        try:
            name = get_algo(algo).name
        except ValueError as exc:  # a flat space, {"lr": ...}, lacks its algorithm
            raise ValueError(
                f"search_space: {exc} (the space is per algorithm: "
                "{'ppo': {'lr': loguniform(1e-4, 1e-2)}})"
            ) from None
        if name in out:
            raise ValueError(f"search_space names algorithm {name!r} twice ({short(algo)})")
        if not isinstance(names, dict):
            raise ValueError(
                f"search_space[{short(algo)}] must be an object {{hyperparameter: domain}}, "
                f"got {short(names)}"
            )
        out[name] = {}
        for key, domain in names.items():
            where = f"search_space[{short(algo)}][{short(key)}]"
            if not isinstance(key, str):
                raise ValueError(
                    f"search_space[{short(algo)}]: names are strings, got {short(key)}"
                )
            if is_tune_domain(domain):
                out[name][key] = from_tune({key: domain})[key]
            else:
                out[name][key] = domain_from_dict(domain, where)
    return out


def check(spec) -> None:
    """Every domain of ``spec.search_space`` checked against its learner: the algorithm
    is one of the tournament's, the name a hyperparameter that does not fix network
    shapes, and the domain's ends (each option of a ``Choice``) values the learner's
    config accepts over the tournament's base hyperparameters: types and hard limits.
    ``ValueError`` names the key and the value."""
    space = spec.search_space
    if not isinstance(space, dict):
        raise ValueError(f"search_space must be a dict, got {short(space)}")
    for algo, names in space.items():
        if algo not in spec.algos:
            raise ValueError(
                f"search_space given for {short(algo)}, which is not in algos {list(spec.algos)}"
            )
        learner = get_algo(algo)
        base = replace_checked(learner.config_cls(), spec.hparams.get(algo, {}))
        hints = typing.get_type_hints(learner.config_cls)
        fields = [f.name for f in dataclasses.fields(learner.config_cls)]
        if not isinstance(names, dict):
            raise ValueError(f"search_space[{short(algo)}] must be a dict, got {short(names)}")
        for name, domain in names.items():
            where = f"search_space[{short(algo)}][{short(name)}] = {short(domain)}"
            if not isinstance(domain, Bound | Choice):
                raise ValueError(f"{where}: must be a Bound or Choice (see elegantpod.search)")
            if name not in fields:
                raise ValueError(
                    f"{where}: not a {algo} hyperparameter; valid: {', '.join(sorted(fields))}"
                )
            if name in learner.structural_hparams:
                raise ValueError(
                    f"{where}: {short(name)} fixes the network or buffer shapes that a child "
                    "copies from its parent, so the generator cannot search it; set it "
                    "in hparams= instead"
                )
            _check_domain(where, domain, hints[name], base, name)


def _check_domain(where: str, domain: Domain, hint: Any, base: Any, name: str) -> None:
    kinds = set(typing.get_args(hint)) or {hint}
    if isinstance(domain, Bound):
        if not kinds & {int, float}:
            raise ValueError(f"{where}: {name} is not a number; use choice([...])")
        if int in kinds and float not in kinds and not domain.integer:
            raise ValueError(f"{where}: {name} is an integer; use randint, qrandint or lograndint")
    values = domain.options if isinstance(domain, Choice) else (domain.low, domain.high)
    for value in values:
        try:
            replace_checked(base, {name: value})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
