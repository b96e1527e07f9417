"""``TournamentSpec``: the recipe of a tournament, the spec of each of its pods, and the
checks and resume rules around it."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks.limits import MAX_COUNT, MAX_SECONDS, Limit, check_learners
from elegantpod.checks.overrides import replace_checked
from elegantpod.checks.settings import check_settings, declared, defaults, setting
from elegantpod.checks.text import short
from elegantpod.config import PodSettings, PodSpec
from elegantpod.envs.registry import check_env_id, check_eval_env
from elegantpod.pod.memory import check_memory
from elegantpod.search.plain import space_from_dict, space_to_dict
from elegantpod.tournament.core import field_checks, search_spaces
from elegantpod.tournament.core.generator import GeneratorConfig

MAX_PODS = 10_000
"""Hard limit of a population's size (a typo or a hostile store, not a tournament)."""
MAX_RETRIES = 1_000
"""Hard limit of ``max_retries`` and of ``failed_replacements`` per pod slot."""
MAX_NAME = 200
"""Longest env id (real ones are a few dozen characters)."""
MAX_TOURNAMENT_SEED = 2**32
"""Largest tournament seed, either sign: each pod's seed is derived from it
(``seed * 1,000,003 + index``), which keeps the pods' seeds far inside
:data:`~elegantpod.checks.limits.MAX_POD_SEED`."""


@dataclass(frozen=True, kw_only=True)
class TournamentSpec(PodSettings):
    """What a tournament trains, for how long, and how it breeds pods.

    The env, device, evaluation, fitness and fused learners of every pod are the
    :class:`~elegantpod.config.PodSettings` it inherits (:meth:`pod_spec` copies each);
    every field is declared once with :func:`~elegantpod.checks.settings.setting`, which
    the checks, the command line's flags and a resume's rules read."""

    algos: tuple[str, ...] = setting(("ppo",), flag=False)
    """Algorithms in the population; the generator keeps them mixed (``--algos``,
    comma-separated)."""
    pods: int = setting(
        4, limit=Limit(0, MAX_PODS, integer=True, open_low=True), help="population size"
    )
    """Population size: pods alive at once (those in flight follow the workers)."""
    confirm_target: bool = setting(
        True,
        resume=True,
        help="a crossing of --target-reward ends the tournament only when one more "
        "evaluation on fresh episodes reaches it too",
    )
    """A segment whose evaluation reaches ``target_reward`` evaluates its agent once more
    on fresh episodes (new seeds), and ends the tournament only if that evaluation
    reaches the target too; the confirmation's seconds count in the tournament's clock.
    Why: the maximum of many noisy evaluations crosses a target by luck (trading's
    one-episode Sharpe crossed 1.0 within a second of training), and a time to target
    measured on one lucky evaluation rewards the method that evaluates most often.
    False: the first crossing ends it."""
    max_seconds: float | None = setting(
        None,
        limit=Limit(0, MAX_SECONDS, open_low=True),
        resume=True,
        help="wall-clock budget of the whole tournament, across resumes",
    )
    """Wall-clock budget of the whole tournament (across resumes)."""
    max_steps: int | None = setting(
        None,
        limit=Limit(0, MAX_COUNT, integer=True, open_low=True),
        resume=True,
        help="env steps over all pods",
    )
    """Budget of env steps simulated by all pods together."""
    segment_steps: int | None = setting(
        None,
        limit=Limit(0, MAX_COUNT, integer=True, open_low=True),
        resume=True,
        help="env steps per segment (default: the algorithm's own, unless --segment-seconds "
        "is given)",
    )
    """Env steps per segment; ``None``: the algorithm's default."""
    segment_seconds: float | None = setting(
        None,
        limit=Limit(0, MAX_SECONDS, open_low=True),
        resume=True,
        help="wall seconds per segment. A segment is one pod's turn on a worker: it trains, "
        "is evaluated and checkpointed, then the tournament ranks it and may replace it by a "
        "mutated child of a better pod; it ends at --segment-steps or --segment-seconds, "
        "whichever comes first",
    )
    """Wall seconds per segment (whichever budget ends first)."""
    leaderboard_size: int = setting(
        8,
        limit=Limit(0, MAX_PODS, integer=True, open_low=True),
        resume=True,
        help="entries the leaderboard keeps",
    )
    """Entries the leaderboard keeps (k)."""
    seed: int = setting(
        0,
        limit=Limit(-MAX_TOURNAMENT_SEED, MAX_TOURNAMENT_SEED, integer=True, domain=True),
        help="seeds the generator and, through it, each pod",
    )
    """Seeds pods (each gets its own) and the generator."""
    pods_per_gpu: int | None = setting(
        None,
        resume=True,
        help="pods sharing one GPU at once (1, 2, 4... 64); default: from the GPU's memory",
    )
    """Pods that share one GPU at once (1, 2, 4... a power of two, so that the fractional
    ``GPU`` resources add up exactly); ``None``: from the GPU's memory and the pods'
    estimated size, at most the GPU worker's threads."""
    hparams: dict[str, dict[str, Any]] = setting(default_factory=dict, flag=False)
    """Base hyperparameters per algorithm, e.g. ``{"sac": {"lr": 3e-4}}`` (``--set
    ALGO.KEY=VALUE``)."""
    generator: GeneratorConfig = setting(default_factory=GeneratorConfig, flag=False, resume=True)
    """Parent selection and mutation (``--rules`` names its rules)."""
    max_retries: int = setting(
        3,
        limit=Limit(0, MAX_RETRIES, integer=True),
        resume=True,
        help="resubmissions of a segment after Dask gives up on it (KilledWorker)",
    )
    """Resubmissions of a segment after Dask gives up on it (``KilledWorker``)."""
    failed_replacements: int = setting(
        8,
        limit=Limit(0, MAX_RETRIES * MAX_PODS, integer=True),
        resume=True,
        help="failed pods replaced by new ones over the whole tournament",
    )
    """Failed pods replaced by new ones over the whole tournament; a setup that fails
    every pod stops after this many instead of breeding failures forever."""
    search_space: dict[str, dict[str, Any]] = setting(default_factory=dict, flag=False, resume=True)
    """This tournament's own search space per algorithm,
    ``{"ppo": {"lr": loguniform(1e-4, 1e-2)}}`` (:mod:`elegantpod.search`): each domain replaces the
    learner's of that name, or adds one; mutation, restarts and ``init="sample"`` draw
    from the result. Checked against the learner's hard limits; saved as plain JSON. A
    resume may give a new one: it replaces the store's whole (``--search-space FILE``)."""
    init: str = setting(
        "base",
        choices=search_spaces.INITS,
        help="first pods of each algorithm: the base hyperparameters, then variations of "
        "them (base) or draws of every searched hyperparameter, yours included (sample)",
    )
    """How the first pods of each algorithm start. The first always takes the base
    hyperparameters (the user's own choice is never missing from the population); the
    others are, with ``"base"``, variations of the base's numbers (categorical choices
    kept), and with ``"sample"``, draws of every hyperparameter of the search space
    from the seeded generator, as population-based training starts (Jaderberg et al.
    2017): the population then spans the space from t = 0 instead of waiting for a
    restart to reach a far corner of it. ``"base"`` is the default because, on the four
    tasks of ``benchmarks/tournament_pays.py`` (ten seeds each), the two starts never
    separated and ``"base"`` solved 36 seeds of 40 against 34 (docs: "Which start")."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field, before any cluster work."""
        _check_shapes({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        check_settings(self)
        if self.pods_per_gpu is not None:
            n = self.pods_per_gpu
            if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n & (n - 1) or n > 64:
                raise ValueError(
                    f"pods_per_gpu must be a power of two from 1 to 64 (or None: automatic), "
                    f"got {short(n)}"
                )
        if not self.algos:
            raise ValueError("algos must name at least one algorithm")
        self.generator.validate()
        self.check_pod_settings()

    def pod_spec(self, algo: str, hparams: Any, seed: int = 0) -> PodSpec:
        """The spec of a pod of this tournament: ``algo`` trained with ``hparams`` (its
        learner's frozen config) and seeded ``seed``; every
        :class:`~elegantpod.config.PodSettings` field (env, device, evaluation, fitness,
        learners...) is the tournament's. What a worker builds a pod from, and what its
        size is estimated from."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(PodSettings)}
        return PodSpec(algo=algo, hparams=hparams, seed=seed, **shared)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able values (what ``tournament.json`` holds)."""
        d = dataclasses.asdict(self)
        d["algos"] = list(self.algos)
        d["search_space"] = space_to_dict(self.search_space)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TournamentSpec:
        """Rebuild a spec from :meth:`to_dict` output (as saved in ``tournament.json``).

        Raises
        ------
        ValueError
            Naming the field whose value has the wrong shape (``hparams`` that is not
            an object of objects, say): the file may come from someone else. Values are
            checked by :meth:`validate` and :func:`check_spec`.
        """
        if not isinstance(d, dict):
            raise ValueError(f"a tournament spec must be a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in d if k not in names]
        if unknown:
            raise ValueError(
                f"unknown tournament spec key(s) {short(unknown)}; valid keys: "
                f"{', '.join(sorted(names))}"
            )
        _check_shapes(d)
        d = dict(d)
        d["algos"] = tuple(d.get("algos", TOURNAMENT.algos))
        g = dict(d.get("generator") or {})
        if "perturb_factors" in g:
            g["perturb_factors"] = tuple(g["perturb_factors"])
        if isinstance(g.get("rules"), list):
            g["rules"] = tuple(g["rules"])
        if g:  # a store written before these rules existed keeps the rules it ran with
            g.setdefault("min_gap", 0.0)
            g.setdefault("evidence_t", 0.0)
            g.setdefault("restart_after", 0)
            g.setdefault("score_window", 2)
        d["generator"] = GeneratorConfig(**g)
        d["search_space"] = space_from_dict(d.get("search_space", {}))
        # a store from before ``init`` existed started from the base; "default" was the
        # name of "base" until the third round of the tournament's benchmark
        d["init"] = "base" if d.get("init", "default") == "default" else d["init"]
        return cls(**d)

    def to_json(self) -> str:
        """The spec as JSON (``tournament.json``)."""
        return json.dumps(self.to_dict(), sort_keys=True)


TOURNAMENT = defaults(TournamentSpec)
"""The declared default of each tournament setting, made once: what a spec read from a
file without ``algos`` takes, and what the arguments of
:class:`~elegantpod.tournament.orchestrator.Tournament` default to."""


def _check_shapes(d: dict[str, Any]) -> None:
    """``ValueError`` naming the first field of a spec dict whose JSON shape is wrong."""
    field_checks.check_depth(d, "the spec")
    env_id = d.get("env_id")
    if not isinstance(env_id, str) or not 0 < len(env_id) <= MAX_NAME:
        raise ValueError(f"env_id must be an env id (a short string), got {short(env_id)}")
    algos = d.get("algos", TOURNAMENT.algos)
    if not isinstance(algos, list | tuple) or not all(isinstance(a, str) for a in algos):
        raise ValueError(f"algos must be a list of algorithm names, got {short(algos)}")
    for name in ("generator", "env_kwargs", "eval_env_kwargs", "search_space"):
        if not isinstance(d.get(name, {}), dict | GeneratorConfig):
            raise ValueError(f"{name} must be an object (a dict), got {short(d.get(name))}")
    hparams = d.get("hparams", {})
    if not isinstance(hparams, dict) or not all(isinstance(v, dict) for v in hparams.values()):
        raise ValueError(
            "hparams must be an object of objects, {algorithm: {name: value}} "
            f"(e.g. {{'ppo': {{'lr': 0.001}}}}), got {short(hparams)}"
        )


# ---------------------------------------------------------------------------- building
RESUME_CHANGEABLE = tuple(name for name, s in declared(TournamentSpec).items() if s.resume)
"""Spec fields a resume may change (those declared ``resume=True``); any other given
value must equal the store's."""


def resume_changes(spec: TournamentSpec, overrides: dict[str, Any], where: str) -> dict:
    """``{field: [old, new]}`` for the fields a resume changes; ``ValueError`` for a
    field that differs from the store's and may not change (env, algorithms, pods...)."""
    changes = {}
    for key, value in overrides.items():
        if not hasattr(spec, key):
            raise ValueError(unknown_option(key))
        old = getattr(spec, key)
        if key == "generator" and isinstance(value, dict):
            if isinstance(value.get("rules"), list):
                value = {**value, "rules": tuple(value["rules"])}
            value = dataclasses.replace(old, **value)  # a partial dict changes just those
        if key == "search_space":
            value = search_spaces.normalize(value)
        if key == "algos":
            if isinstance(value, str):
                value = tuple(a.strip() for a in value.split(",") if a.strip())
            value = tuple(get_algo(a).name for a in value)
        if value == old:
            continue
        if key not in RESUME_CHANGEABLE:
            raise ValueError(
                f"{where} holds a tournament with {key}={short(old)}; a resume cannot "
                f"change it to {short(value)} (start a new store for that)"
            )
        changes[key] = [old, value]
    return changes


def check_sources(where: str, spec: TournamentSpec, overrides: dict, allow: bool) -> None:
    """Refuse data paths or URLs that a store's spec names and the user did not give."""
    from elegantpod.envs.registry import external_sources
    from elegantpod.provenance import own_sources, same_file

    for name in ("env_kwargs", "eval_env_kwargs"):
        given = overrides.get(name) or {}
        named = external_sources(getattr(spec, name))
        own = own_sources(named, where)  # this user's store and data table
        unconfirmed = {
            k: v for k, v in named.items() if k not in own and not same_file(given.get(k), v)
        }
        if unconfirmed and not allow:
            raise ValueError(
                f"{where!r} names data to read in {name}: "
                f"{short(unconfirmed)}; a store from someone else must not make this process "
                f"read files or fetch URLs. Pass {name}={short(unconfirmed)} to resume (or "
                "allow_remote=True) if you trust it"
            )


def spec_names(options: dict[str, Any]) -> dict[str, Any]:
    """User-facing argument names (``env``) as spec fields (``env_id``)."""
    options = dict(options)
    if "env" in options:
        options["env_id"] = options.pop("env")
    return options


def unknown_option(key: str) -> str:
    """'unknown option' with the close matches among the spec's fields."""
    import difflib

    names = [f.name for f in dataclasses.fields(TournamentSpec)]
    close = difflib.get_close_matches(key, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; options: {', '.join(names)}"
    return f"unknown tournament option {short(key)}{hint}"


def make_spec(**options: Any) -> TournamentSpec:
    """A checked :class:`TournamentSpec` from keyword arguments (names checked first)."""
    options = spec_names(options)
    for key in options:
        if key not in {f.name for f in dataclasses.fields(TournamentSpec)}:
            raise ValueError(unknown_option(key))
    algos = options.get("algos", TOURNAMENT.algos)
    if isinstance(algos, str):
        algos = tuple(a.strip() for a in algos.split(",") if a.strip())
    options["algos"] = tuple(get_algo(a).name for a in algos)  # "PPO" -> "ppo"
    if isinstance(options.get("generator"), dict):
        g = dict(options["generator"])
        if "perturb_factors" in g:
            g["perturb_factors"] = tuple(g["perturb_factors"])
        if isinstance(g.get("rules"), list):
            g["rules"] = tuple(g["rules"])
        options["generator"] = GeneratorConfig(**g)
    if "search_space" in options:  # Bound/Choice, plain JSON or Tune domains: ours
        options["search_space"] = search_spaces.normalize(options["search_space"])
    if isinstance(options.get("hparams"), dict):
        hparams = {}
        for algo, given in options["hparams"].items():
            learner = get_algo(algo)
            if not isinstance(given, dict):
                raise ValueError(
                    f"hparams[{algo!r}] must be a dict of hyperparameters, got {short(given)}"
                )
            # values in their field's type ("3e-4" from a command line is 0.0003)
            try:
                config = replace_checked(learner.config_cls(), given)
            except ValueError as exc:
                raise ValueError(f"hparams[{learner.name!r}]: {exc}") from None
            hparams[learner.name] = {k: getattr(config, k) for k in given}
        options["hparams"] = hparams
    spec = TournamentSpec(**options)
    check_spec(spec)
    return spec


def check_spec(spec: TournamentSpec) -> None:
    """Every check that needs no cluster: bad input fails here, before any Dask work."""
    check_env_id(spec.env_id)
    spec.validate()
    check_eval_env(spec.env_id, spec.env_kwargs, spec.eval_env_kwargs, spec.fitness)
    for algo in spec.algos:
        learner = get_algo(algo)
        learner.check_env(spec.env_id, spec.env_kwargs)
        try:
            config = replace_checked(learner.config_cls(), spec.hparams.get(algo, {}))
        except ValueError as exc:
            raise ValueError(f"hparams[{algo!r}]: {exc}") from None
        check_pod(spec, algo, config)
    unknown = set(spec.hparams) - {get_algo(a).name for a in spec.algos}
    if unknown:
        raise ValueError(
            f"hparams given for {sorted(unknown)}, which are not in algos {list(spec.algos)}"
        )
    search_spaces.check(spec)


def check_pod(spec: TournamentSpec, algo: str, config: Any) -> None:
    """One pod of ``spec`` checked whole, before any cluster work: its hyperparameters
    together (``config.validate()``: a batch within the replay, a rollout within its
    limit), with the tournament's fused learners (a sub-env each), and its memory on the
    device the tournament names (``"auto"``: checked where the pod is built).
    ``ValueError`` names the fields and their values.

    Why: each size can be in range while the pod is impossible; a worker would build it
    and fail (or swap its machine to a halt). The spec's base hyperparameters pass this
    at the start, and so does every pod and parent a resume reads from a store, whose
    hyperparameters are untrusted.
    """
    config.validate()
    check_learners(spec.learners, config.num_envs, algo)
    # A lower bound before any env exists: refuses the absurd. Without env_kwargs,
    # as this check always ran: it counts no MJX worlds (largest_pod_bytes does).
    check_memory(dataclasses.replace(spec.pod_spec(algo, config), env_kwargs={}))


def lone_pods_warning(algos, pods: int) -> str | None:
    """Why a population with fewer than two pods of some algorithm does no
    population-based training for it, or ``None``.

    A child copies its parent's networks, so its parent is a live pod of its own
    algorithm; a lone pod's would-be parent is itself. The population never replaces
    such a pod by exploitation (restarts still may), so a 2-pod ``ppo`` + ``sac``
    tournament is two single runs. The starting pods are shared out evenly: with fewer
    than two per algorithm, some (or all) algorithms get one.
    """
    algos = list(algos)
    k = len(algos)
    if pods < 2 or pods >= 2 * k:
        return None
    which = (
        f"each of {', '.join(algos)} has"
        if pods <= k
        else f"{2 * k - pods} of {', '.join(algos)} will have"
    )
    return (
        f"{pods} pods for {k} algorithms: {which} a single pod. A child copies a live "
        "pod of its own algorithm (its networks), so a lone pod could only be replaced by "
        "a mutated copy of itself: it is kept and trains on alone (a restart may still "
        f"replace it), with no exploitation. Give pods={2 * k} or more (two per "
        "algorithm) for population-based training."
    )
