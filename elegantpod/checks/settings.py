"""A setting of a run, declared once: its default, its hard limit, its command-line
flag and help, and what a tournament does with it, in one field of the spec.

A pod's settings (``eval_episodes``, ``learners``, ``fitness``...) had five homes: the
field of :class:`~elegantpod.config.PodSpec`, a copy in ``TournamentSpec``, the
keyword defaults of ``build_spec`` and ``train``, and a flag of each command, with
``eval_episodes=10`` written five times and ``--seed`` defaulting to ``0`` on one
command and ``None`` on the other. Now the spec says it, as
:func:`~elegantpod.agents.hparams.hparam` does for a learner's hyperparameters::

    eval_episodes: int = setting(10, limit=Limit(0, MAX_EVAL_EPISODES, integer=True,
                                 open_low=True), help="deterministic episodes per evaluation")
    \"\"\"Deterministic episodes per evaluation, run in parallel on a separate env.\"\"\"

and its readers ask the spec: :func:`check_settings` (each spec's ``validate``) checks
the type its annotation names and the :class:`~elegantpod.checks.limits.Limit`; the
command line adds a flag for each setting with ``flag=True`` (``--eval-episodes``, its
help from here, its default shown from here; :func:`elegantpod.cli.args.add_settings`);
``train``'s keyword defaults are :func:`defaults`; a tournament's resume may change the
settings declared ``resume=True``. The settings a tournament shares with each of its
pods are the fields of :class:`~elegantpod.config.PodSettings`, which both specs
inherit: a field added there is a field, a check and a flag of both, and each pod of a
tournament takes its value.

A setting's long doc is the attribute docstring under its field (what ``help()`` and
the API reference show); ``help`` is the one line ``--help`` prints.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any

from elegantpod.checks.limits import Limit, check_finite, check_limit
from elegantpod.checks.text import short

SETTING = "elegantpod.setting"
"""The key of a field's metadata that holds its :class:`Setting`."""
KINDS = {"int": int, "float": float, "str": str, "bool": bool}
"""The annotations :func:`kind` reads as a value's type (a setting of another type,
a mapping or a tuple, is checked by its spec's ``validate``)."""


@dataclass(frozen=True)
class Setting:
    """What a spec's field declares beyond its default, its type and its doc."""

    limit: Limit | None = None
    """Hard range of a number (``None``: any value of its type, or checked by the
    spec's own ``validate``). Whether ``None`` is allowed is the annotation's word
    (``int | None``), not the limit's."""
    help: str = ""
    """The one line of the command line's ``--help`` (the default is added to it)."""
    flag: bool = True
    """Whether the commands whose spec declares it take it as ``--name-with-dashes``
    (``False``: the command line gives it another way, ``--env`` or ``--set``, or not
    at all)."""
    choices: tuple[Any, ...] = ()
    """The values it takes (empty: any of its type)."""
    resume: bool = False
    """A resumed tournament may change it (a budget, a device); any other setting given
    to a resume must equal the store's."""


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    limit: Limit | None = None,
    help: str = "",
    flag: bool = True,
    choices: tuple[Any, ...] = (),
    resume: bool = False,
) -> Any:
    """A spec field with its default and what :class:`Setting` says about it."""
    meta = {SETTING: Setting(limit=limit, help=help, flag=flag, choices=choices, resume=resume)}
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def declared(spec_cls: type) -> dict[str, Setting]:
    """Every setting ``spec_cls`` declares (those it inherits first), in field order."""
    if not dataclasses.is_dataclass(spec_cls):
        return {}
    return {
        f.name: f.metadata[SETTING] for f in dataclasses.fields(spec_cls) if SETTING in f.metadata
    }


def flagged(spec_cls: type) -> dict[str, Setting]:
    """The settings the command line takes as flags of their own."""
    return {name: s for name, s in declared(spec_cls).items() if s.flag}


def kind(spec_cls: type, name: str) -> tuple[type | None, bool]:
    """``(type, optional)`` of the setting ``name`` from its annotation: ``int | None``
    is ``(int, True)``; a type outside :data:`KINDS` is ``None``."""
    found = {f.name: f for f in dataclasses.fields(spec_cls)}[name]
    of = found.type  # a string under ``from __future__ import annotations``, else a type
    text = of if isinstance(of, str) else of.__name__ if isinstance(of, type) else str(of)
    parts = [p.strip() for p in text.split("|")]
    optional = "None" in parts
    names = [p for p in parts if p != "None"]
    return (KINDS.get(names[0]) if len(names) == 1 else None), optional


def defaults(spec_cls: type) -> types.SimpleNamespace:
    """Each setting's declared default as an attribute (``defaults(PodSpec).seed``):
    what ``train``'s keywords default to, so that a default is written once."""
    out = {}
    for f in dataclasses.fields(spec_cls):
        if SETTING not in f.metadata:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return types.SimpleNamespace(**out)


def check_settings(spec: Any) -> None:
    """Raise ``ValueError`` naming the first setting of ``spec`` whose value is not of
    its declared type, outside its choices, or outside its limit."""
    spec_cls = type(spec)
    for name, s in declared(spec_cls).items():
        check_setting(spec_cls, name, getattr(spec, name), s)


def check_setting(spec_cls: type, name: str, value: Any, s: Setting) -> None:
    """One setting's value checked against its declaration (see :func:`check_settings`)."""
    of, optional = kind(spec_cls, name)
    if value is None:
        if optional or of is None:
            return
        raise ValueError(f"{name} must be given (None is not a value of it)")
    if s.choices:
        if value not in s.choices or type(value) is not type(s.choices[0]):
            raise ValueError(f"{name} must be one of {list(s.choices)}, got {short(value)}")
        return
    if of is bool:
        if not isinstance(value, bool):
            either = "True, False or None" if optional else "True or False"
            raise ValueError(f"{name} must be {either}, got {short(value)}")
    elif of is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be an integer, got {short(value)}")
    elif of is float and s.limit is None:  # a limit checks that it is a finite number
        check_finite(name, value)
    elif of is str and (not isinstance(value, str) or not value):
        raise ValueError(f"{name} must be a non-empty string, got {short(value)}")
    if s.limit is not None:
        check_limit(name, value, s.limit)
