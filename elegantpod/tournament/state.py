"""A store's state read back as untrusted input: checked like user input, field by field.

(A mutation policy's output is checked here too: it is a user's code, and its lineage
ends up in the store.)

A store can come from anyone: a shared bucket, a colleague's run, a downloaded archive.
Its snapshot names pods, checkpoints, hyperparameters, scores and budgets, and each of
those reaches a file path, a worker, a budget check or an HTML view. So nothing from it
is used before it passes here:

- pod ids match :data:`POD_ID` (``p`` and digits): they become folder names;
- checkpoints are store-relative names matching :data:`CHECKPOINT_NAME`, so a moved or
  copied store reads its own files and no path or URL in a file can point elsewhere
  (absolute paths written by older versions keep only their ``pods/<id>/seg-N.pt`` tail);
- hyperparameters go through the learner's own checks (names, types, bounds);
- counters and budgets are finite, non-negative and bounded;
- mutation keys are hyperparameter names, their values scalars or flat lists, and
  lineage strings are bounded in length;
- a pod keeps its newest :data:`MAX_HISTORY` segment rows, and the tournament's clock
  (``elapsed_seconds``) is not behind any row's time.

Every error is a :class:`StateError` (a ``ValueError``) naming the file and the field,
and repeats at most :data:`~elegantpod.checks.MAX_SHOWN` characters of the bad value
(:func:`~elegantpod.checks.short`): a value can be megabytes, or an integer of
thousands of digits that Python refuses to print. Numbers are compared as they are,
never through ``float()``, so such an integer is refused, not an ``OverflowError``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from typing import Any

from elegantpod.agents import ALGOS, get_algo
from elegantpod.checks import check_finite, config_values, replace_checked, short
from elegantpod.tournament.leaderboard import Entry
from elegantpod.tournament.protocol import PodStatus
from elegantpod.tournament.record import PodRecord

POD_ID = re.compile(r"^p[0-9]{3,9}$")
"""Pod ids the orchestrator makes (``p000``, ``p001``...): the only ones a store may name."""
CHECKPOINT_NAME = re.compile(r"^pods/(p[0-9]{3,9})/seg-([0-9]{5,9})\.pt$")
"""A checkpoint's name relative to the store root."""
TOURNAMENT_UID = re.compile(r"^[0-9a-f]{32}$")
"""A tournament's identity, made once and saved in its state: every checkpoint it writes
names it, so a checkpoint from another tournament is refused (see
:func:`elegantpod.checkpoint.check_origin`)."""
STATUSES = tuple(s.value for s in PodStatus)
MAX_COUNT = 10**15
"""Upper bound of env-step counters (a thousand years at 30 M steps/s)."""
MAX_SECONDS = 1e9
"""Upper bound of wall-time counters (about 30 years)."""
MAX_INDEX = 10**9 - 1
"""Upper bound of pod indexes, segments, retries and death counts (nine digits: what the
pod id and checkpoint name patterns allow)."""
MAX_TEXT = 4000
"""Longest error or lineage string kept from a store (longer ones are cut)."""


class StateError(ValueError):
    """A field of a store's state that fails its check (message: where and why)."""


def check_pod_id(value: Any, where: str) -> str:
    """``value`` if it is a pod id the orchestrator could have made, else ``StateError``."""
    if not isinstance(value, str) or not POD_ID.match(value):
        raise StateError(f"{where}: pod id must match {POD_ID.pattern}, got {short(value)}")
    return value


def checkpoint_name(pod_id: str, segment: int) -> str:
    """Store-relative name of a pod's checkpoint at the end of ``segment``."""
    return f"pods/{check_pod_id(pod_id, 'pod id')}/seg-{segment:05d}.pt"


def check_checkpoint(value: Any, where: str) -> str:
    """A store-relative checkpoint name; legacy absolute paths keep their tail.

    Never returns anything that could leave the store: the result always matches
    :data:`CHECKPOINT_NAME` (no ``..``, no scheme, no leading slash).
    """
    if isinstance(value, str):
        parts = value.replace("\\", "/").split("/")
        tail = "/".join(parts[-3:])
        if CHECKPOINT_NAME.match(tail):
            return tail
    raise StateError(
        f"{where}: checkpoint must be a store-relative name like pods/p000/seg-00001.pt, "
        f"got {short(value)}"
    )


def _number(value: Any, where: str, high: float, integer: bool) -> float | int:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    # only floats can be NaN or infinite; math.isfinite(10**400) raises OverflowError
    bad_float = isinstance(value, float) and not math.isfinite(value)
    if isinstance(value, bool) or not ok_type or bad_float:
        kind = "an integer" if integer else "a finite number"
        raise StateError(f"{where} must be {kind}, got {short(value)}")
    if not 0 <= value <= high:  # exact for integers of any size
        raise StateError(f"{where} must be in [0, {high:g}], got {short(value)}")
    return value


def count(value: Any, where: str, high: float = MAX_INDEX) -> int:
    """A non-negative bounded integer."""
    return int(_number(value, where, high, integer=True))


def seconds(value: Any, where: str) -> float:
    """A non-negative bounded number of seconds."""
    return float(_number(value, where, MAX_SECONDS, integer=False))


def score(value: Any, where: str, optional: bool = True) -> float | None:
    """A finite score, or ``None`` where a score may be missing."""
    if value is None and optional:
        return None
    try:
        check_finite(where, value)
    except ValueError as exc:
        raise StateError(str(exc)) from None
    return float(value)


def text(value: Any, where: str) -> str | None:
    """An optional string, cut to :data:`MAX_TEXT` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise StateError(f"{where} must be a string, got {type(value).__name__}")
    return value[:MAX_TEXT]


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
        )
    return get_algo(value).name


MAX_DEPTH = 32
"""Deepest nesting of lists and objects a value from a store may have (an env's keywords
need three or four levels). Deeper values would exhaust Python's stack in whatever walks
them (``json.dumps``, a check, a repr), so they are refused before anything does."""


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> Any:
    """``value`` if its lists and objects nest at most ``limit`` deep, else ``StateError``.

    Walks with its own stack, never by recursion: the value it refuses is the one that
    would break a recursive walk."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list | tuple):
            if depth >= limit:
                raise StateError(f"{where} nests lists or objects deeper than {limit} levels")
            children = v.values() if isinstance(v, dict) else v
            stack.extend((child, depth + 1) for child in children)
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a dict (JSON object)."""
    if not isinstance(value, dict):
        raise StateError(f"{where} must be an object, got {type(value).__name__}")
    return value


def items(value: Any, where: str) -> list[Any]:
    """``value`` if it is a list (JSON array)."""
    if not isinstance(value, list):
        raise StateError(f"{where} must be a list, got {type(value).__name__}")
    return value


def counters(value: Any, where: str = "state") -> dict[str, Any]:
    """The tournament's counters: steps, elapsed seconds, deaths, next index, solved."""
    d = mapping(value if value is not None else {}, where)
    solved = d.get("solved", False)
    if not isinstance(solved, bool):
        raise StateError(f"{where}.solved must be true or false, got {short(solved)}")
    uid = d.get("tournament_uid")  # stores saved before it was recorded have none
    if uid is not None and not (isinstance(uid, str) and TOURNAMENT_UID.match(uid)):
        raise StateError(
            f"{where}.tournament_uid must match {TOURNAMENT_UID.pattern}, got {short(uid)}"
        )
    return {
        "total_steps": count(d.get("total_steps", 0), f"{where}.total_steps", MAX_COUNT),
        "elapsed_seconds": seconds(d.get("elapsed_seconds", 0.0), f"{where}.elapsed_seconds"),
        "worker_deaths_survived": count(
            d.get("worker_deaths_survived", 0), f"{where}.worker_deaths_survived"
        ),
        "next_index": count(d.get("next_index", 0), f"{where}.next_index"),
        "failures_replaced": count(d.get("failures_replaced", 0), f"{where}.failures_replaced"),
        "solved": solved,
        "tournament_uid": uid,
    }


def _identity(d: Any, where: str) -> tuple[dict, str, str, str]:
    """A record's or entry's dict, pod id, place for messages (with the id) and algorithm."""
    d = mapping(d, where)
    if "pod_id" not in d:
        raise StateError(f"{where} has no pod_id")
    pod_id = check_pod_id(d["pod_id"], f"{where}.pod_id")
    where = f"{where} ({pod_id})"
    return d, pod_id, where, algo_name(d.get("algo"), f"{where}.algo")


def record(d: Any, where: str) -> PodRecord:
    """A :class:`~elegantpod.tournament.record.PodRecord` from a snapshot's dict, checked."""
    d, pod_id, where, algo = _identity(d, where)
    status = d.get("status", PodStatus.QUEUED)
    if status not in STATUSES:
        raise StateError(f"{where}.status must be one of {list(STATUSES)}, got {short(status)}")
    parent = d.get("parent")
    seed = d.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or abs(seed) > 2**62:
        raise StateError(f"{where}.seed must be an integer within +-2**62, got {short(seed)}")
    stop = d.get("stop_requested", False)
    if not isinstance(stop, bool):
        raise StateError(f"{where}.stop_requested must be true or false, got {short(stop)}")

    def ckpt(key: str) -> str | None:
        v = d.get(key)
        return None if v is None else check_checkpoint(v, f"{where}.{key}")

    return PodRecord(
        pod_id=pod_id,
        algo=algo,
        hparams=hparams(algo, d.get("hparams", {}), f"{where}.hparams"),
        seed=seed,
        parent=None if parent is None else check_pod_id(parent, f"{where}.parent"),
        mutation=mutation(algo, d.get("mutation") or {}, f"{where}.mutation"),
        parent_checkpoint=ckpt("parent_checkpoint"),
        status=PodStatus(status),
        segment=count(d.get("segment", 0), f"{where}.segment"),
        env_steps=count(d.get("env_steps", 0), f"{where}.env_steps", MAX_COUNT),
        latest_checkpoint=ckpt("latest_checkpoint"),
        score_mean=score(d.get("score_mean"), f"{where}.score_mean"),
        score_std=score(d.get("score_std"), f"{where}.score_std"),
        wall_seconds=seconds(d.get("wall_seconds", 0.0), f"{where}.wall_seconds"),
        steps_per_second=score(d.get("steps_per_second"), f"{where}.steps_per_second"),
        retries=count(d.get("retries", 0), f"{where}.retries"),
        error=text(d.get("error"), f"{where}.error"),
        stop_requested=stop,
        recent_scores=[
            score(x, f"{where}.recent_scores[{i}]", optional=False)
            for i, x in enumerate(items(d.get("recent_scores", []), f"{where}.recent_scores")[-64:])
        ],
        origin=origin(d.get("origin") or {}, f"{where}.origin"),
        history=history(algo, d.get("history", []), f"{where}.history"),
    )


ORIGIN_KINDS = ("start", "child", "restart", "failure", "user")
"""Why a pod was made (``PodRecord.origin["kind"]``)."""


def origin(value: Any, where: str) -> dict[str, Any]:
    """A pod's ``origin`` (see ``PodRecord.origin``): known keys only, each checked, as
    it reaches the lineage views and every HTML page."""
    d = mapping(value, where)
    if not d:
        return {}
    kind = d.get("kind")
    if kind not in ORIGIN_KINDS:
        raise StateError(f"{where}.kind must be one of {list(ORIGIN_KINDS)}, got {short(kind)}")
    out: dict[str, Any] = {"kind": kind}
    unknown = sorted(
        set(d) - {"kind", "replaced", "score", "leader", "leader_score", "t", "stale", "best"}
    )
    if unknown:
        raise StateError(f"{where} has unknown key(s) {short(unknown)}")
    for key in ("replaced", "leader"):
        if d.get(key) is not None:
            out[key] = check_pod_id(d[key], f"{where}.{key}")
    for key in ("score", "leader_score", "best"):
        if key in d:
            out[key] = score(d[key], f"{where}.{key}")
    if "t" in d:  # inf (no noise) is saved as a large number; None: not measured
        out["t"] = score(d["t"], f"{where}.t")
    if "stale" in d:
        out["stale"] = count(d["stale"], f"{where}.stale")
    return out


MAX_HISTORY = 10_000
"""Segment rows kept per pod (the newest): what a store can make a resume check, hold
and plot is bounded, however long its file."""


def history(algo: str, value: Any, where: str) -> list[dict[str, Any]]:
    """A pod's segment rows (see ``PodRecord.history``), each field checked."""
    rows = items(value, where)
    start = max(0, len(rows) - MAX_HISTORY)
    out = []
    for i, row in enumerate(rows[start:], start):
        at = f"{where}[{i}]"
        row = mapping(row, at)
        clean = {
            "segment": count(row.get("segment", 0), f"{at}.segment"),
            "env_steps": count(row.get("env_steps", 0), f"{at}.env_steps", MAX_COUNT),
            "score": score(row.get("score"), f"{at}.score"),
            "time": seconds(row.get("time", 0.0), f"{at}.time"),
        }
        if row.get("hparams") is not None:
            clean["hparams"] = hparams(algo, row["hparams"], f"{at}.hparams")
        out.append(clean)
    return out


def entry(d: Any, where: str) -> Entry:
    """A leaderboard :class:`~elegantpod.tournament.leaderboard.Entry`, checked."""
    d, pod_id, where, algo = _identity(d, where)
    if "checkpoint" not in d:
        raise StateError(f"{where} has no checkpoint")
    parent = d.get("parent")
    usable = d.get("usable", True)
    if not isinstance(usable, bool):
        raise StateError(f"{where}.usable must be true or false, got {short(usable)}")
    std = d.get("score_std")
    return Entry(
        pod_id=pod_id,
        algo=algo,
        hparams=hparams(algo, d.get("hparams", {}), f"{where}.hparams"),
        score_mean=score(d.get("score_mean"), f"{where}.score_mean", optional=False),
        # a single evaluation episode has no spread: NaN is saved as null
        score_std=math.nan if std is None else score(std, f"{where}.score_std"),
        env_steps=count(d.get("env_steps", 0), f"{where}.env_steps", MAX_COUNT),
        wall_seconds=seconds(d.get("wall_seconds", 0.0), f"{where}.wall_seconds"),
        checkpoint=check_checkpoint(d["checkpoint"], f"{where}.checkpoint"),
        segment=count(d.get("segment", 0), f"{where}.segment"),
        parent=None if parent is None else check_pod_id(parent, f"{where}.parent"),
        mutation=mutation(algo, d.get("mutation") or {}, f"{where}.mutation"),
        usable=usable,
    )


def load(raw: Any, where: str) -> tuple[dict, list, dict[str, Any]]:
    """Records by pod id, leaderboard entries and counters from a whole snapshot."""
    raw = mapping(raw, where)
    records = {}
    for i, d in enumerate(items(raw.get("pods", []), f"{where}: pods")):
        rec = record(d, f"{where}: pods[{i}]")
        if rec.pod_id in records:
            raise StateError(f"{where}: pods[{i}]: pod {rec.pod_id!r} appears twice")
        records[rec.pod_id] = rec
    entries = [
        entry(d, f"{where}: leaderboard[{i}]")
        for i, d in enumerate(items(raw.get("leaderboard", []), f"{where}: leaderboard"))
    ]
    clock = counters(raw.get("state"), f"{where}: state")
    # Refused rather than moved forward: the clock that stamps each history row is the
    # one a snapshot saves, taken later and under the same lock, so an honest writer never
    # saves a clock behind its rows. A store that does was edited; resuming it would draw
    # curves going back in time and judge max_seconds by a clock no one can trust.
    latest = max((h["time"] for r in records.values() for h in r.history), default=0.0)
    if latest > clock["elapsed_seconds"]:
        raise StateError(
            f"{where}: state.elapsed_seconds ({clock['elapsed_seconds']:g}) is behind the "
            f"history it saved (a segment at {latest:g} s): the file was edited or corrupted"
        )
    return records, entries, clock


def learner_config(algo: str, hparams: dict[str, Any]):
    """A learner's frozen config from a (JSON-read) hyperparameter dict."""
    learner = get_algo(algo)
    return learner.config_cls(**config_values(learner.config_cls, hparams, drop_unknown=True))


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
