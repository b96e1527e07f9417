"""A store's state read back as untrusted input: a whole snapshot checked field by field.

A store can come from anyone: a shared bucket, a colleague's run, a downloaded archive.
Its snapshot names pods, checkpoints, hyperparameters, scores and budgets, and each of
those reaches a file path, a worker, a budget check or an HTML view. So nothing from it
is used before :func:`load` turns it into records, leaderboard entries and counters:

- every single value passes :mod:`elegantpod.tournament.core.field_checks` (pod ids,
  checkpoint names, bounded counters and budgets, cut text);
- hyperparameters and mutations pass :mod:`elegantpod.tournament.core.hparam_checks`
  (the learner's own checks);
- a pod keeps its newest :data:`~elegantpod.tournament.core.field_checks.MAX_HISTORY`
  segment rows, and the tournament's clock (``elapsed_seconds``) is not behind any
  row's time.

Every error is a :class:`~elegantpod.tournament.core.field_checks.StateError` (a
``ValueError``) naming the file and the field.
"""

from __future__ import annotations

import math
from typing import Any

from elegantpod.checks.limits import MAX_COUNT
from elegantpod.checks.text import short
from elegantpod.tournament.core.field_checks import (
    MAX_HISTORY,
    TOURNAMENT_UID,
    StateError,
    check_checkpoint,
    check_pod_id,
    count,
    items,
    mapping,
    score,
    seconds,
    text,
)
from elegantpod.tournament.core.generator import RULE_NAME
from elegantpod.tournament.core.hparam_checks import algo_name, hparams, mutation
from elegantpod.tournament.core.leaderboard import Entry
from elegantpod.tournament.core.protocol import PodStatus
from elegantpod.tournament.core.record import PodRecord

STATUSES = tuple(s.value for s in PodStatus)
"""The values a record's ``status`` may hold."""


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
    """A :class:`~elegantpod.tournament.core.record.PodRecord` from a snapshot's dict, checked."""
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
        set(d)
        - {"kind", "replaced", "score", "leader", "leader_score", "t", "stale", "best", "rule"}
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
    if "rule" in d:  # the selection rule that replaced the pod (a name, as an algorithm's)
        rule = d["rule"]
        if not isinstance(rule, str) or not RULE_NAME.fullmatch(rule):
            raise StateError(f"{where}.rule must be a selection rule's name, got {short(rule)}")
        out["rule"] = rule
    return out


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
        if "confirm" in row:  # a crossing's confirming evaluation (None: not finite)
            clean["confirm"] = score(row["confirm"], f"{at}.confirm")
        out.append(clean)
    return out


def entry(d: Any, where: str) -> Entry:
    """A leaderboard :class:`~elegantpod.tournament.core.leaderboard.Entry`, checked."""
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
