"""Search spaces as plain JSON: what a config file holds and ``tournament.json`` saves.

A :class:`~elegantpod.search.space.Bound` or :class:`~elegantpod.search.space.Choice`
is written as a one-key object that names the Tune-style constructor and lists its
arguments, so a YAML or JSON file reads like the Python that builds the same space::

    {"ppo": {"lr": {"loguniform": [1e-4, 1e-2]}, "epochs": {"choice": [2, 4, 8]}}}

The constructors and their arguments (bounds as in :mod:`elegantpod.search.space`, which
follows ``ray.tune``: ``randint``'s ``high`` is exclusive, ``qrandint``'s inclusive):

=================  =====================  ==========================================
key                arguments              the domain
=================  =====================  ==========================================
``uniform``        ``[low, high]``        a float, uniform
``loguniform``     ``[low, high]``        a float, log-uniform (``low > 0``)
``quniform``       ``[low, high, q]``     a float multiple of ``q``, uniform
``qloguniform``    ``[low, high, q]``     a float multiple of ``q``, log-uniform
``randint``        ``[low, high]``        an integer, ``low <= x < high``
``lograndint``     ``[low, high]``        an integer, log-uniform, ``high`` exclusive
``qrandint``       ``[low, high, q]``     a multiple of ``q``, ``high`` inclusive
``qlograndint``    ``[low, high, q]``     the same, log-uniform
``choice``         ``[option, ...]``      one of the options (strings or numbers);
                                          an optional ``"prob"`` key beside it is the
                                          :class:`~elegantpod.search.space.Choice`'s
=================  =====================  ==========================================

What is read is untrusted (a file from someone else): every value is checked by the
constructor it names, and an error names the key and the value.
"""

from __future__ import annotations

from typing import Any

from elegantpod.checks.text import short
from elegantpod.search import space as sp

FORMS = {
    "uniform": (sp.uniform, (2,)),
    "loguniform": (sp.loguniform, (2,)),
    "quniform": (sp.quniform, (3,)),
    "qloguniform": (sp.qloguniform, (3,)),
    "randint": (sp.randint, (2,)),
    "lograndint": (sp.lograndint, (2,)),
    "qrandint": (sp.qrandint, (2, 3)),
    "qlograndint": (sp.qlograndint, (3,)),
}
"""Numeric constructors by name: the function and how many arguments it takes."""

MAX_NAMES = 1_000
"""Most algorithms, or hyperparameters of one, a space may name (real ones: a dozen)."""


def domain_from_dict(value: Any, where: str = "search space") -> sp.Domain:
    """A :class:`~elegantpod.search.space.Bound` or :class:`~elegantpod.search.space.Choice`
    from its plain-JSON form (``{"loguniform": [1e-4, 1e-2]}``); a ``Bound`` or ``Choice``
    is returned as it is.

    Raises
    ------
    ValueError
        Naming ``where`` and the value: not a one-constructor object, an unknown
        constructor, the wrong arguments, or bounds the constructor refuses.
    """
    if isinstance(value, sp.Bound | sp.Choice):
        return value
    names = ", ".join([*FORMS, "choice"])
    if not isinstance(value, dict):
        raise ValueError(
            f"{where} must be a Bound, a Choice or an object such as "
            f"{{'loguniform': [0.0001, 0.01]}} ({names}), got {short(value)}"
        )
    keys = [k for k in value if k != "prob"]
    if len(keys) != 1 or keys[0] not in (*FORMS, "choice"):
        raise ValueError(f"{where} must name one of {names}, got {short(value)}")
    (kind,) = keys
    args = value[kind]
    if not isinstance(args, list | tuple):
        raise ValueError(f"{where}: {kind} takes a list of arguments, got {short(args)}")
    try:
        if kind == "choice":
            return sp.Choice(list(args), **({"prob": value["prob"]} if "prob" in value else {}))
        if "prob" in value:
            raise ValueError("'prob' goes with 'choice' only")
        make, counts = FORMS[kind]
        if len(args) not in counts:
            wanted = " or ".join(str(n) for n in counts)
            raise ValueError(f"{kind} takes {wanted} arguments, got {len(args)}")
        return make(*args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} = {short(value)}: {exc}") from None


def domain_to_dict(domain: sp.Domain) -> dict[str, Any]:
    """The plain-JSON form of ``domain``: ``domain_from_dict(domain_to_dict(d)) == d``."""
    if isinstance(domain, sp.Choice):
        out: dict[str, Any] = {"choice": list(domain.options)}
        if domain.prob != sp.Choice.__dataclass_fields__["prob"].default:
            out["prob"] = domain.prob
        return out
    if not isinstance(domain, sp.Bound):
        raise ValueError(f"not a Bound or Choice: {short(domain)}")
    log = "log" if domain.log else ""
    if domain.integer and domain.q is None:  # Tune's randint: high exclusive
        return {f"{log}randint": [domain.low, domain.high + 1]}
    if domain.integer:
        return {f"q{log}randint": [domain.low, domain.high, domain.q]}
    if domain.q is not None:
        return {f"q{log}uniform": [domain.low, domain.high, domain.q]}
    return {f"{log}uniform": [domain.low, domain.high]}


def flat_from_dict(value: Any, where: str = "search space") -> dict[str, sp.Domain]:
    """One algorithm's space, ``{hyperparameter: domain}``, from its plain-JSON form."""
    if not isinstance(value, dict):
        raise ValueError(
            f"{where} must be an object {{hyperparameter: domain}}, got {short(value)}"
        )
    if len(value) > MAX_NAMES:
        raise ValueError(f"{where} names {len(value)} hyperparameters; at most {MAX_NAMES}")
    out = {}
    for name, domain in value.items():
        if not isinstance(name, str):
            raise ValueError(f"{where}: hyperparameter names are strings, got {short(name)}")
        out[name] = domain_from_dict(domain, f"{where}[{short(name)}]")
    return out


def space_from_dict(value: Any, where: str = "search_space") -> dict[str, dict[str, sp.Domain]]:
    """``{algorithm: {hyperparameter: Bound | Choice}}`` from the plain-JSON form (see the
    module's table); values that are already ``Bound`` or ``Choice`` are kept.

    Checks the form only: whether the algorithms and hyperparameters exist, and the
    bounds lie within the learners' hard limits, is the tournament's check (it knows the
    learners).

    >>> space_from_dict({"ppo": {"epochs": {"choice": [2, 4, 8]}}})
    {'ppo': {'epochs': Choice(options=(2, 4, 8), prob=0.25)}}
    """
    if not isinstance(value, dict):
        raise ValueError(
            f"{where} must be an object {{algorithm: {{hyperparameter: domain}}}}, "
            f"got {short(value)}"
        )
    if len(value) > MAX_NAMES:
        raise ValueError(f"{where} names {len(value)} algorithms; at most {MAX_NAMES}")
    out = {}
    for algo, space in value.items():
        if not isinstance(algo, str):
            raise ValueError(f"{where}: algorithm names are strings, got {short(algo)}")
        out[algo] = flat_from_dict(space, f"{where}[{short(algo)}]")
    return out


def space_to_dict(space: dict[str, dict[str, sp.Domain]]) -> dict[str, dict[str, dict]]:
    """The plain-JSON form of ``{algorithm: {hyperparameter: Bound | Choice}}`` (what
    ``tournament.json`` holds): ``space_from_dict(space_to_dict(s)) == s``."""
    return {
        algo: {name: domain_to_dict(d) for name, d in names.items()}
        for algo, names in space.items()
    }
