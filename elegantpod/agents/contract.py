"""The learner contract: what a :class:`~elegantpod.agents.base.Learner` of your own
must declare, checked once when it is registered (:func:`check_learner`, called by
``register_algo``), with one clear error per missing piece.

Why at registration: a pod, a tournament's workers and a checkpoint's loader read a
learner through this contract, and a piece missing from it used to surface far from its
cause (a ``TypeError`` inside the pod's memory check, a Dask traceback on a worker, a
``Policy`` that cannot be built). Checked here, the mistake is named in the line that
registers the learner.

The contract, in full (``docs/guides/algorithms.md`` walks through a complete learner):

- class attributes ``name`` (see :data:`~elegantpod.agents.NAME`), ``config_cls`` and
  ``is_on_policy`` (a bool saying which kind the learner is; the pod treats both alike:
  each iteration ``update`` gets the time-major rollout of ``horizon`` steps of
  ``num_envs`` sub-envs just collected, which an off-policy learner adds to a replay of
  its own and samples from);
- ``config_cls``: a frozen dataclass that builds with no arguments (the defaults), with
  integer fields ``num_envs`` (sub-envs the pod steps) and ``horizon`` (env steps per
  iteration) and a ``validate()`` method that raises ``ValueError`` naming a bad value;
- the methods ``explore(obs)`` (training actions: ``(to store, to send)``),
  ``act(obs, deterministic)`` (env-ready actions) and ``update(batch)`` (statistics);
- optional: ``memory_bytes`` (what it allocates beyond the rollout: a replay, large
  networks; 0 by default) and ``actor_params`` (for the checkpoint size check),
  ``deployed`` (the :class:`~elegantpod.agents.base.DeployedActor` that ``Policy``,
  exports and videos run; without it the learner trains but does not deploy),
  ``search_space``, ``structural_hparams``, ``random_action``, ``episodes_ended``.
"""

from __future__ import annotations

import dataclasses
import inspect

REQUIRED_FIELDS = ("num_envs", "horizon")
"""Config fields the pod reads by name: the rollout's shape."""
REQUIRED_METHODS = ("explore", "act", "update")
"""Methods the pod calls on every learner."""


def check_learner(cls: type) -> None:
    """Raise ``ValueError`` naming the first piece of the contract (module docstring)
    that ``cls``, a ``Learner`` subclass, lacks or gets wrong."""
    who = cls.__name__
    missing = sorted(
        m
        for m in REQUIRED_METHODS
        if m in getattr(cls, "__abstractmethods__", ()) or not callable(getattr(cls, m, None))
    )
    if missing:
        raise ValueError(
            f"{who} does not define {', '.join(missing)}: a learner implements "
            "explore(obs) -> (stored, sent), act(obs, deterministic) -> actions and "
            "update(batch) -> statistics"
        )
    if not isinstance(getattr(cls, "is_on_policy", None), bool):
        raise ValueError(
            f"{who} needs a class attribute is_on_policy = True or False: whether it "
            "learns from each rollout alone or keeps a replay of past ones"
        )
    config_cls = cls.config_cls
    params = getattr(config_cls, "__dataclass_params__", None)
    if not dataclasses.is_dataclass(config_cls) or params is None or not params.frozen:
        raise ValueError(
            f"{who}.config_cls must be a frozen dataclass (@dataclasses.dataclass("
            f"frozen=True)), got {config_cls.__name__}: configs are copied between pods "
            "and mutated only by replacement"
        )
    try:
        default = config_cls()
    except TypeError as exc:
        raise ValueError(
            f"{who}.config_cls() must build the default config with no arguments (give "
            f"every field a default): {exc}"
        ) from None
    fields = {f.name for f in dataclasses.fields(config_cls)}
    for name in REQUIRED_FIELDS:
        value = getattr(default, name, None)
        if name not in fields or type(value) is not int or value < 1:
            raise ValueError(
                f"{who}.config_cls needs an integer field {name!r} with a default >= 1 "
                f"(got {'no such field' if name not in fields else repr(value)}): the pod "
                "steps num_envs sub-envs for horizon steps per iteration"
            )
    if not callable(getattr(default, "validate", None)):
        raise ValueError(
            f"{who}.config_cls needs a validate() method that raises ValueError naming a "
            "bad value (it is called before any pod is built)"
        )
    try:
        default.validate()
    except ValueError as exc:
        raise ValueError(f"{who}'s default config fails its own validate(): {exc}") from None
    for name in ("memory_bytes", "actor_params"):
        method = getattr(cls, name)
        try:
            n = method(default, 4, 2)
        except Exception as exc:
            raise ValueError(
                f"{who}.{name}(config, obs_dim=4, act_dim=2) raised {type(exc).__name__}: {exc}"
            ) from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{who}.{name} must return a whole number >= 0, got {n!r}")
    deployed = getattr(cls, "deployed", None)
    if deployed is not None and not inspect.ismethod(deployed):
        raise ValueError(
            f"{who}.deployed must be a classmethod (observation_space, action_space, "
            "config) -> DeployedActor: a Policy builds it without a learner"
        )
