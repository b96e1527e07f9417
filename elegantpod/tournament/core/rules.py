"""Selection rules: what replaces a pod at the end of its segment, behind one protocol.

At the end of every segment of a live pod (the target not yet reached, the budget not
spent), the :class:`~elegantpod.tournament.core.population.Population` hands the result to
each rule of ``GeneratorConfig.rules`` (``observe``), then asks them in that order
whether the pod is replaced (``take``). The first rule that answers with a
:class:`Replacement` decides, and the pod's successor is made as it says:

- a *fresh* pod: new networks and hyperparameters drawn from the whole search space (a
  restart, :meth:`~elegantpod.tournament.core.breeder.Breeder.fresh_pod`);
- a *child* of a top live pod: its networks and optimizer state copied, its
  hyperparameters perturbed (explore) or, with ``mutate=False``, copied as they are
  (:meth:`~elegantpod.tournament.core.breeder.Breeder.new_pod`).

Why one protocol: the tournament's claim is that these rules pay, and a claim about a
rule is tested by switching it off or swapping it for a control. With the rules as
objects, each control is a setting, not a fork of the population: Ray Tune's schedulers
have the same shape (``on_trial_result`` observes, the scheduler answers with a
decision; ``PopulationBasedTraining`` takes a ``custom_explore_fn``), as do TorchRL's
samplers. Rules are registered by name, as algorithms are (:func:`register_rule`), so a
user's own rule is one class with ``observe`` and ``take``, named in
``GeneratorConfig(rules=(...))`` or ``--rules`` on the command line.

The rules that ship:

``"restart"``
    :class:`~elegantpod.tournament.core.restart.RestartRule`: a population stuck on a
    plateau replaces its bottom with fresh draws.
``"exploit"``
    :class:`ExploitRule`: population-based training's truncation selection with the
    evidence rule (:mod:`~elegantpod.tournament.core.exploit`); the child's
    hyperparameters are perturbed.
``"copy"``
    :class:`CopyRule`: the same selection, but the child keeps its parent's
    hyperparameters: only the weights are exploited. The control of Dalibard &
    Jaderberg 2021 ("Faster improvement rate population based training", their
    "variance exploitation" baseline): whatever the tournament gains over it is what
    exploring the hyperparameters adds, not the copying of lucky networks.

The line-ups a study compares (:data:`LINEUPS`): the tournament
(``("restart", "exploit")``, the default), restart-only (``("restart",)``), copy
(``("restart", "copy")``) and no rule at all (``()``): a plain sweep with
``init="base"``, random search with ``init="sample"`` (the base and draws of the space,
never replaced).

Parent choice (``GeneratorConfig.selection``: truncation or softmax among the top live
pods) stays a setting of the breeder: it says *whom* a child copies, not *whether* a pod
is replaced.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from elegantpod.tournament.core import exploit
from elegantpod.tournament.core.breeder import Pool
from elegantpod.tournament.core.field_checks import POD_ID
from elegantpod.tournament.core.generator import check_rule_names
from elegantpod.tournament.core.record import PodRecord
from elegantpod.tournament.core.restart import RestartRule

WHY_KEYS = ("score", "leader", "leader_score", "t", "stale", "best")
"""The figures a :class:`Replacement` may carry into its pod's ``origin`` (what a store
keeps of it and the lineage view shows)."""


@dataclass(frozen=True)
class Replacement:
    """A rule's answer: replace the pod, and how its successor is made."""

    fresh: bool = False
    """True: a fresh pod, hyperparameters drawn from the whole search space (a restart);
    False: a child of a top live pod (its networks and optimizer state copied)."""
    mutate: bool = True
    """For a child: perturb the copied hyperparameters (explore); False: keep them."""
    why: dict[str, Any] = field(default_factory=dict)
    """The evidence, as figures of :data:`WHY_KEYS` (the others are dropped)."""


@runtime_checkable
class SelectionRule(Protocol):
    """What a selection rule is: two methods, handed what they read.

    A rule is made anew for each run of a tournament (a resume judges afresh) and keeps
    its own counters; it reads the population only through the
    :class:`~elegantpod.tournament.core.breeder.Pool` it is handed.
    """

    def observe(self, pool: Pool, pod: PodRecord, now: float) -> None:
        """Pod ``pod`` finished a segment at ``now`` tournament seconds (its record
        already holds the segment's score, ``pod.score_mean``)."""

    def take(self, pool: Pool, pod: PodRecord) -> Replacement | None:
        """A :class:`Replacement` if ``pod`` is replaced now; ``None`` otherwise."""


class ExploitRule:
    """Truncation selection on evidence (:func:`~elegantpod.tournament.core.exploit.judge`):
    a ready pod in the bottom fraction that the leader beats beyond the noise is
    replaced by a child of a top pod, its hyperparameters perturbed."""

    mutate = True
    """Whether the child's hyperparameters are perturbed."""

    def __init__(self) -> None:
        self.kept_in_noise = 0
        """Bottom pods kept because the leader's lead was within the noise, this run."""

    def observe(self, pool: Pool, pod: PodRecord, now: float) -> None:
        """Nothing to count: the rule judges the live scores when asked."""

    def take(self, pool: Pool, pod: PodRecord) -> Replacement | None:
        """A child of a top pod if the exploit rule replaces ``pod`` on evidence now."""
        verdict = exploit.judge(pod, pool)
        self.kept_in_noise += verdict.reason == "within the noise"
        if not verdict.replace:
            return None
        why = exploit.child_origin(pod.pod_id, verdict)
        return Replacement(fresh=False, mutate=self.mutate, why=why)


class CopyRule(ExploitRule):
    """:class:`ExploitRule` whose child keeps its parent's hyperparameters: the weights
    are exploited, the hyperparameters not explored (the "variance exploitation"
    control)."""

    mutate = False


class _Restart(RestartRule):
    """:class:`~elegantpod.tournament.core.restart.RestartRule` under the protocol."""

    def observe(self, pool: Pool, pod: PodRecord, now: float) -> None:  # type: ignore[override]
        score = pod.score_mean if pod.score_mean is not None else math.nan
        super().observe(pool, score, now)

    def take(self, pool: Pool, pod: PodRecord) -> Replacement | None:  # type: ignore[override]
        origin = super().take(pod.pod_id)
        return None if origin is None else Replacement(fresh=True, why=origin)


RULES: dict[str, Callable[[], SelectionRule]] = {
    "restart": _Restart,
    "exploit": ExploitRule,
    "copy": CopyRule,
}
"""Every selection rule by name: a factory (a class) that makes a fresh rule."""
BUILTIN = frozenset(RULES)
"""The rules that ship with elegantpod."""

LINEUPS: dict[str, tuple[str, ...]] = {
    "tournament": ("restart", "exploit"),
    "restart_only": ("restart",),
    "copy": ("restart", "copy"),
    "none": (),
}
"""The line-ups a study compares, by the name a benchmark gives them (``"none"``: no
pod is ever replaced, a sweep or random search by ``init``)."""


def register_rule(factory: Callable[[], SelectionRule], name: str) -> Callable:
    """Make a selection rule usable by name in ``GeneratorConfig(rules=...)`` and ``--rules``.

    The population lives in the process that runs the tournament (a notebook, the CLI),
    so a rule registered there is enough: workers never run it. A store names its rules;
    resuming it needs the same registration.

    Parameters
    ----------
    factory
        A class (or any callable with no arguments) whose instances have ``observe`` and
        ``take`` (:class:`SelectionRule`).
    name
        Its name, as an algorithm's
        (:data:`~elegantpod.tournament.core.generator.RULE_NAME`).

    Returns
    -------
    The factory, so that ``register_rule`` can follow a class definition.

    Raises
    ------
    ValueError
        For a bad name (shown escaped), a built-in rule's name, or a factory whose
        instances lack ``observe`` or ``take``.

    Examples
    --------
    >>> class Never:
    ...     def observe(self, pool, pod, now): pass
    ...     def take(self, pool, pod): return None
    >>> _ = register_rule(Never, "never")
    >>> check_rules(["restart", "never"])
    ('restart', 'never')
    """
    (name,) = check_rule_names([name])
    if name in BUILTIN and RULES[name] is not factory:
        raise ValueError(f"{name!r} is a built-in selection rule; choose another name")
    if not callable(factory):
        raise ValueError(f"a selection rule must be a class or factory, got {factory!r}")
    for method in ("observe", "take"):
        if not callable(getattr(factory, method, None)):
            raise ValueError(
                f"selection rule {name!r}: {getattr(factory, '__name__', factory)!r} has no "
                f"{method}() method (a rule needs observe(pool, pod, now) and take(pool, pod))"
            )
    RULES[name] = factory
    return factory


def check_rules(names: object) -> tuple[str, ...]:
    """``names`` as a tuple of registered rule names, each at most once; ``ValueError``
    naming the first bad, unknown or repeated one, and the rules there are."""
    out = check_rule_names(names)
    for n in out:
        if n not in RULES:
            raise ValueError(
                f"unknown selection rule {n!r}; registered: {', '.join(sorted(RULES))} "
                "(register_rule adds one)"
            )
    return out


def make_rules(names: Iterable[str]) -> list[tuple[str, SelectionRule]]:
    """A fresh rule of each name, in order; ``ValueError`` for an unknown name or a
    factory whose product lacks ``observe``/``take``."""
    rules = []
    for name in check_rules(tuple(names)):
        rule = RULES[name]()
        if not isinstance(rule, SelectionRule):
            raise ValueError(f"selection rule {name!r} made {rule!r}, which has no observe/take")
        rules.append((name, rule))
    return rules


def replacement_origin(name: str, pod: str, answer: object) -> dict[str, Any]:
    """The successor's ``origin`` from a rule's answer, checked as a rule may be a
    user's: the kind from ``fresh``, the pod replaced, the rule's name and its figures
    (:data:`WHY_KEYS`: numbers, or a pod id for ``leader``)."""
    if not isinstance(answer, Replacement):
        raise ValueError(
            f"selection rule {name!r}: take() must return a Replacement or None, "
            f"got {ascii(answer)[:100]}"
        )
    origin: dict[str, Any] = {
        "kind": "restart" if answer.fresh else "child",
        "replaced": pod,
        "rule": name,
    }
    why = answer.why if isinstance(answer.why, dict) else {}
    for key in WHY_KEYS:
        value = why.get(key)
        if key == "leader":
            if isinstance(value, str) and POD_ID.match(value):
                origin[key] = value
        elif key == "stale":
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                origin[key] = value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            origin[key] = max(-1e9, min(1e9, value)) if not math.isnan(value) else None
        elif value is None and key in why:
            origin[key] = None
    return origin
