"""Ray Tune search spaces as ours: :func:`from_tune`.

A Tune user has a ``param_space`` of ``tune.loguniform(...)``, ``tune.choice(...)``...;
:func:`from_tune` turns it into :class:`~elegantpod.search.space.Bound` and
:class:`~elegantpod.search.space.Choice` values with the same support, so the same
space drives a tournament's generator. Ray is imported only here, and only when called
(``pip install 'elegantpod[tune]'``).
"""

from __future__ import annotations

from typing import Any

from elegantpod.checks.text import short
from elegantpod.search import space as sp


def is_tune_domain(value: Any) -> bool:
    """Whether ``value`` is a ``ray.tune`` domain object (checked without importing Ray)."""
    return type(value).__module__.startswith("ray.tune.")


def from_tune(space: dict) -> dict:
    """Our search space from a ``ray.tune`` one, in the same shape.

    Two shapes are taken: flat, ``{hyperparameter: tune domain}`` (one algorithm's,
    e.g. a Tune ``param_space``), and per algorithm, ``{algorithm: {hyperparameter: tune
    domain}}`` (what ``Tournament(search_space=...)`` takes). A dict whose values are
    all dicts is the second. ``Bound`` and ``Choice`` values pass through unchanged.

    ======================================  =============================================
    Tune                                    ours (same support)
    ======================================  =============================================
    ``uniform``, ``loguniform``             :func:`~elegantpod.search.space.uniform`, ...
    ``quniform``, ``qloguniform``           multiples of ``q`` (:class:`Bound` ``q``)
    ``randint``, ``lograndint``             ``high`` exclusive, as Tune's
    ``qrandint``, ``qlograndint``           ``high`` inclusive (exclusive for ``q=1``)
    ``choice``                              :class:`~elegantpod.search.space.Choice`
    ======================================  =============================================

    Raises
    ------
    ImportError
        Without Ray Tune installed.
    ValueError
        Naming the key and the object for anything we cannot express: ``randn`` (no
        bounds), ``sample_from`` (a function), ``grid_search`` (a grid, not a
        distribution), a constant (put it in ``hparams=``), or a choice of options that
        are not strings or numbers.

    Examples
    --------
    >>> from ray import tune  # doctest: +SKIP
    >>> space = from_tune({"ppo": {"lr": tune.loguniform(1e-4, 1e-2)}})  # doctest: +SKIP
    >>> space["ppo"]["lr"]  # doctest: +SKIP
    Bound(low=0.0001, high=0.01, log=True, integer=False, q=None)
    """
    if not isinstance(space, dict):
        raise ValueError(f"from_tune takes a dict of Tune domains, got {short(space)}")
    try:
        from ray.tune.search import sample
    except ImportError as exc:
        raise ImportError(
            "from_tune needs Ray Tune: pip install 'elegantpod[tune]' (or 'ray[tune]')"
        ) from exc
    if space and all(isinstance(v, dict) and "grid_search" not in v for v in space.values()):
        return {algo: _flat(sample, names, f"[{short(algo)}]") for algo, names in space.items()}
    return _flat(sample, space, "")


def _flat(sample, space: dict, prefix: str) -> dict[str, sp.Domain]:
    return {name: convert(sample, d, f"{prefix}[{short(name)}]") for name, d in space.items()}


def convert(sample, domain: Any, where: str) -> sp.Domain:
    """One Tune domain as a ``Bound`` or ``Choice``; ``sample`` is
    ``ray.tune.search.sample``. ``ValueError`` names ``where`` and the object."""
    if isinstance(domain, sp.Bound | sp.Choice):
        return domain
    inner, q = None, None
    if isinstance(domain, sample.Domain):
        inner = domain.get_sampler()
        if isinstance(inner, sample.Quantized):
            inner, q = inner.get_sampler(), inner.q
    try:
        if isinstance(domain, sample.Categorical) and isinstance(inner, sample.Uniform):
            return sp.choice(list(domain.categories))
        if isinstance(domain, sample.Float) and isinstance(
            inner, sample.Uniform | sample.LogUniform
        ):
            log = isinstance(inner, sample.LogUniform)
            if q is None:
                return (sp.loguniform if log else sp.uniform)(domain.lower, domain.upper)
            return (sp.qloguniform if log else sp.quniform)(domain.lower, domain.upper, q)
        if isinstance(domain, sample.Integer) and isinstance(
            inner, sample.Uniform | sample.LogUniform
        ):
            log = isinstance(inner, sample.LogUniform)
            if q is None:
                return (sp.lograndint if log else sp.randint)(domain.lower, domain.upper)
            return (sp.qlograndint if log else sp.qrandint)(domain.lower, domain.upper, q)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"from_tune: search space{where} = {_shown(sample, domain)}: {exc}"
        ) from None
    why = "we take uniform, loguniform, quniform, qloguniform, randint, lograndint, "
    why += "qrandint, qlograndint and choice"
    if isinstance(domain, dict) and "grid_search" in domain:
        why = "a grid search is not a distribution the generator can sample or mutate"
    elif isinstance(domain, sample.Function):
        why = "sample_from runs a function; the generator needs bounds it can mutate within"
    elif isinstance(inner, sample.Normal):
        why = "randn has no bounds; use uniform(low, high)"
    elif not isinstance(domain, sample.Domain):
        why = "not a Tune domain (a constant goes in hparams=)"
    raise ValueError(
        f"from_tune cannot express search space{where} = {_shown(sample, domain)}: {why}"
    )


def _shown(sample, domain: Any) -> str:
    """A Tune domain as an error shows it: its kind, bounds and sampler (its ``repr`` is
    only an address)."""
    if not isinstance(domain, sample.Domain):
        return short(domain)
    sampler = domain.get_sampler()
    kind = type(sampler.get_sampler() if isinstance(sampler, sample.Quantized) else sampler)
    q = f", q={sampler.q!r}" if isinstance(sampler, sample.Quantized) else ""
    return f"tune {type(domain).__name__}{short(domain.domain_str)} ({kind.__name__}{q})"
