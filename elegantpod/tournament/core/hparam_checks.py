"""Hyperparameters and mutation lineage, checked by the learner's own config: read from a
store, or returned by a user's mutation policy.

Both end up in the store and in every HTML view, and the hyperparameters configure a
learner, so both pass the same checks wherever they come from:

- hyperparameters go through the learner's config (names, types, bounds); a history
  repeats the same few settings thousands of times, so each setting is checked once;
- mutation keys are hyperparameter names, their values scalars or flat lists (nothing
  nested, so nothing to recurse into);
- a policy that breeds a child copying its parent's networks keeps the network shapes.

Errors from a store are :class:`~elegantpod.tournament.core.field_checks.StateError`; a bad
policy output is a ``ValueError`` that names the policy.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any

from elegantpod.agents import ALGOS, UNREGISTERED_HINT, get_algo
from elegantpod.checks.overrides import config_values, replace_checked
from elegantpod.checks.text import short
from elegantpod.tournament.core.field_checks import StateError


def hparams(algo: str, value: Any, where: str) -> dict[str, Any]:
    """Hyperparameters checked by the learner's own config (names, types, bounds)."""
    if not isinstance(value, dict):
        raise StateError(f"{where} must be a dict, got {type(value).__name__}")
    learner = get_algo(algo)
    try:
        # a history repeats the same few settings thousands of times: each checked once
        key = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # not JSON's: the check below says why
        key = None
    try:
        if key is not None and len(key) <= _HPARAMS_KEY_CHARS:
            return dict(_checked_hparams(learner, key))
        return _check_hparams(learner, value)
    except (TypeError, ValueError) as exc:
        raise StateError(f"{where}: {exc}") from None


_HPARAMS_KEY_CHARS = 20_000
"""Longest hyperparameter dict (as JSON) that :func:`hparams` remembers having checked."""


def _check_hparams(learner: type, value: dict[str, Any]) -> dict[str, Any]:
    values = config_values(learner.config_cls, value, drop_unknown=True)
    cfg = replace_checked(learner.config_cls(), values)
    # shallow: the values are numbers, strings and tuples (asdict's deep copy was most
    # of the time a long history took to check)
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


@functools.lru_cache(maxsize=1024)
def _checked_hparams(learner: type, key: str) -> dict[str, Any]:
    # keyed by the learner class too: a name registered again means another config
    return _check_hparams(learner, json.loads(key))


MAX_LIST = 64
"""Longest list a mutation value may be (``hidden`` has at most 64 layers)."""


def _scalar(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, int):  # bool too; 10**400 is not a hyperparameter
        return v.bit_length() <= 64
    return v is None or isinstance(v, str) and len(v) <= 200


def _scalar_or_list(v: Any) -> bool:
    """A scalar or a flat list of scalars: nothing nested, so nothing to recurse into."""
    if isinstance(v, list | tuple):
        return len(v) <= MAX_LIST and all(_scalar(x) for x in v)
    return _scalar(v)


def mutation(algo: str, value: Any, where: str) -> dict[str, list]:
    """``{name: [old, new]}`` with names of the algorithm's hyperparameters."""
    if not isinstance(value, dict):
        raise StateError(f"{where} must be a dict, got {type(value).__name__}")
    names = {f.name for f in dataclasses.fields(get_algo(algo).config_cls)}
    out = {}
    for key, change in value.items():
        if key not in names:
            raise StateError(f"{where}: {short(key)} is not a hyperparameter of {algo}")
        pair = isinstance(change, list | tuple) and len(change) == 2
        if not (pair and all(_scalar_or_list(v) for v in change)):
            raise StateError(
                f"{where}[{key!r}] must be [old, new] values, each a number, string or flat "
                f"list, got {short(change)}"
            )
        out[key] = [list(v) if isinstance(v, tuple) else v for v in change]
    return out


def algo_name(value: Any, where: str) -> str:
    """A registered algorithm's name."""
    if not isinstance(value, str) or value.lower() not in ALGOS:
        raise StateError(
            f"{where}: unknown algorithm {short(value)}; choose one of {', '.join(sorted(ALGOS))}"
            f"{UNREGISTERED_HINT}"
        )
    return get_algo(value).name


def learner_config(algo: str, hparams: dict[str, Any]):
    """A learner's frozen config from a (JSON-read) hyperparameter dict."""
    learner = get_algo(algo)
    return learner.config_cls(**config_values(learner.config_cls, hparams, drop_unknown=True))


def keep_consistent(
    algo: str, hparams: dict[str, Any], new: dict[str, Any], change: dict[str, list]
) -> tuple[dict[str, Any], dict[str, list]]:
    """The default mutation's ``(new, change)`` less the changes the learner's config
    refuses together with the others: each change (in name order) is kept only if the
    config still validates with it and those kept before it.

    Why: each hyperparameter moves within its own domain, but a config may tie two of
    them (DQN's ``epsilon_end`` at most its ``epsilon_start``, a ``batch_size`` within
    the ``buffer_size``); a draw across such a tie must neither end a tournament of many
    hours nor reach a worker as a pod that cannot run. The hyperparameter then stays the
    parent's (or the base's) this time. ``hparams`` must be valid themselves.
    """
    cfg = learner_config(algo, hparams)
    values, kept = dict(hparams), {}
    for name in sorted(change):
        try:
            cfg = replace_checked(cfg, {name: new[name]})
        except (TypeError, ValueError):
            continue  # across a tie with another hyperparameter: left as it was
        values[name], kept[name] = new[name], change[name]
    return values, kept


def policy_output(algo: str, hparams: dict, new: Any, change: Any, structural: bool):
    """A mutation policy's ``(new_hparams, mutation)`` checked like user input.

    Its hyperparameters pass the learner's checks; with ``structural`` (a child that
    copies its parent's networks) the network shapes must not change; its lineage record
    reaches the store and every HTML view, so it is checked like a store's.
    """
    learner = get_algo(algo)
    try:
        cfg = replace_checked(learner_config(algo, hparams), dict(new))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mutation_policy returned bad {algo} hyperparameters: {exc}") from exc
    if structural:
        changed = [
            k for k in learner.structural_hparams if new.get(k, hparams.get(k)) != hparams.get(k)
        ]
        if changed:
            raise ValueError(
                f"mutation_policy changed {changed}, which fix the network shapes a "
                "child copies from its parent"
            )
    try:
        lineage = mutation(algo, dict(change), "mutation")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mutation_policy returned a bad mutation: {exc}") from exc
    return dataclasses.asdict(cfg), lineage
