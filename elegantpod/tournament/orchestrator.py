"""The orchestrator: the tournament's Dask glue, and the notebook-facing ``Tournament``.

One background thread in the notebook's process drives the tournament asynchronously:
it keeps as many segments in flight as the cluster has worker slots, reacts to each
finished segment (updater -> leaderboard -> generator -> next segment) and is the single
writer of the store's JSON files. Live control goes to pods through one
``distributed.Variable`` per pod; progress comes back through ``log_event`` /
``subscribe_topic``. Every public method is safe to call from any thread and is what
the dashboard's buttons call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import queue
import random
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict, deque
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from elegantpod.agents import get_algo
from elegantpod.config import PodSpec, check_learners, config_values, replace_checked
from elegantpod.envs import check_env_id, check_eval_env
from elegantpod.tournament import leaderboard as lb
from elegantpod.tournament import state as checked
from elegantpod.tournament.generator import (
    SEARCH_SPACES,
    GeneratorConfig,
    choose_algo,
    choose_parent,
    mutate,
    should_replace,
)
from elegantpod.tournament.segment import (
    ParentCheckpointError,
    SegmentResult,
    SegmentTask,
    run_segment,
)
from elegantpod.tournament.spec import PodRecord, TournamentSpec
from elegantpod.tournament.store import Store, StoreError, checkpoint_name

ACTIVE = ("queued", "running", "paused")


class _HybridMethod:
    """A name that acts as a classmethod on the class and a method on instances."""

    def __init__(self, on_class, on_instance):
        self.on_class = on_class.__func__ if isinstance(on_class, classmethod) else on_class
        self.on_instance = on_instance
        self.__doc__ = f"{self.on_class.__doc__}\n\nOn an instance: {on_instance.__doc__}"

    def __get__(self, obj, cls):
        if obj is None:
            return functools.partial(self.on_class, cls)
        return functools.partial(self.on_instance, obj)


LOOP_SECONDS = 0.1
CURVE_EVENTS = 20_000
"""Progress events kept per pod (the oldest go first): memory stays bounded in long runs."""
FINISH_SECONDS = 120.0
"""How long the end of a tournament waits for running segments to checkpoint and return."""
SAVE_SECONDS = 1.0
"""Segment results are saved to the store at most this often (control actions at once)."""
MAX_TRANSIENT_FAILURES = 20


def _transient_errors() -> tuple[type[BaseException], ...]:
    from distributed.comm.core import CommClosedError

    return (OSError, CommClosedError)


TRANSIENT_ERRORS = _transient_errors()


class Tournament:
    """A population of pods trained asynchronously on a Dask cluster.

    Parameters
    ----------
    env
        Env id every pod trains on.
    algos
        Algorithms in the population, e.g. ``["ppo", "sac"]``.
    pods
        Population size.
    target_reward, max_seconds, max_steps
        End conditions (any one ends the tournament); ``stop()`` ends it too.
    store
        Directory or fsspec URL for leaderboard, pod records and checkpoints.
    client
        A ``distributed.Client``; ``None``: :func:`elegantpod.cluster` on ``start()``.
    mutation_policy
        How the generator mutates a parent's hyperparameters (and the base ones, for the
        explorers that start a population after its first pod): a function
        ``(hparams, space, rng, config) -> (new_hparams, mutation)`` with the signature
        of :func:`elegantpod.tournament.generator.mutate` (the default), where ``space``
        is the algorithm's search space, ``rng`` a seeded ``random.Random`` and
        ``mutation`` maps each changed name to ``[old, new]``. Its results are checked
        like any hyperparameters. It runs in this process and is not saved in the
        store: pass it again to :meth:`resume`.
    **options
        Any other :class:`TournamentSpec` field (``segment_steps``, ``leaderboard_size``,
        ``seed``, ``hparams``, ``generator``...).

    Raises
    ------
    ValueError
        For a bad argument or a store that holds another tournament, before any cluster
        work.
    """

    def __init__(
        self,
        env: str,
        algos=("ppo",),
        pods: int = 4,
        *,
        store,
        client=None,
        target_reward: float | None = None,
        max_seconds: float | None = None,
        max_steps: int | None = None,
        mutation_policy=None,
        _resume: bool = False,
        **options: Any,
    ):
        if isinstance(algos, str):
            algos = tuple(a.strip() for a in algos.split(",") if a.strip())
        if isinstance(options.get("generator"), dict):
            options["generator"] = GeneratorConfig(**options["generator"])
        algos = tuple(get_algo(a).name for a in algos)  # "PPO" -> "ppo", unknown -> error
        if isinstance(options.get("hparams"), dict):
            options["hparams"] = {get_algo(k).name: dict(v) for k, v in options["hparams"].items()}
        spec = TournamentSpec(
            env_id=env,
            algos=tuple(algos),
            pods=pods,
            target_reward=target_reward,
            max_seconds=max_seconds,
            max_steps=max_steps,
            **options,
        )
        _check_spec(spec)
        if mutation_policy is not None and not callable(mutation_policy):
            raise ValueError(f"mutation_policy must be a function, got {mutation_policy!r}")
        self._mutation_policy = mutation_policy or mutate
        self.spec = spec
        self.store = Store(store)
        existing = self.store.read_json("tournament.json")
        if existing is not None and not _resume:
            if existing.get("env_id") != env:
                raise ValueError(
                    f"store {self.store.url!r} belongs to a tournament on "
                    f"{existing.get('env_id')!r}, not {env!r}"
                )
            raise ValueError(
                f"store {self.store.url!r} already holds a tournament; continue it "
                "with Tournament.resume(store) or choose a new store"
            )
        self.client = client
        self._own_client = client is None
        self.id = uuid.uuid4().hex[:8]
        self._lock = threading.RLock()
        self._rng = random.Random(spec.seed)
        self._records: dict[str, PodRecord] = {}
        self._entries: list[lb.Entry] = []
        self._futures: dict[Any, str] = {}
        self._flying: set[str] = set()  # pods with a segment in _futures
        self._done: queue.SimpleQueue = queue.SimpleQueue()  # futures as they finish
        self._curves: dict[str, deque] = defaultdict(lambda: deque(maxlen=CURVE_EVENTS))
        self._inbox: deque = deque()
        self.events_received: Counter = Counter()
        self.events_sent = 0
        """Progress events that finished segments report having sent (for auditing)."""
        self._versions: Counter = Counter()
        self._variables: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self._stop_requested = False
        self._status = "created"
        self._error: str | None = None
        self._solved = False
        self._total_steps = 0
        self._elapsed_before = 0.0
        self._started_at: float | None = None
        self.worker_deaths_survived = 0
        self._next_index = 0
        self._capacity_cache = (0.0, 0, False)
        self._saved_at = -math.inf
        self._shipped: set[str] = set()
        self._shown = None  # the dashboard that display(t) shows
        self._dirty = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def _resume_store(cls, store, client=None, **overrides: Any) -> Tournament:
        """Continue the tournament saved in ``store`` (after a kernel or cluster restart).

        ``Tournament.resume(store, client=None, **overrides)`` returns a tournament that
        has not started yet: call ``start()`` on it. ``overrides`` change spec fields,
        e.g. a longer ``max_seconds``.
        """
        mutation_policy = overrides.pop("mutation_policy", None)
        s = Store(store)
        saved = s.read_json("tournament.json")
        if saved is None:
            raise ValueError(f"store {s.url!r} holds no tournament (no tournament.json)")
        try:
            spec = TournamentSpec.from_dict(checked.mapping(saved, "tournament.json"))
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"{s.path('tournament.json')!r} is not a tournament spec: {exc}"
            ) from None
        try:
            spec = dataclasses.replace(spec, **overrides)
        except TypeError as exc:
            raise ValueError(f"bad resume override: {exc}") from exc
        opts = {
            f.name: getattr(spec, f.name)
            for f in dataclasses.fields(spec)
            if f.name
            not in ("env_id", "algos", "pods", "target_reward", "max_seconds", "max_steps")
        }
        t = cls(
            spec.env_id,
            spec.algos,
            spec.pods,
            store=store,
            client=client,
            target_reward=spec.target_reward,
            max_seconds=spec.max_seconds,
            max_steps=spec.max_steps,
            mutation_policy=mutation_policy,
            _resume=True,
            **opts,
        )
        raw = t.store.load_state()
        # Untrusted input: every field is checked (ids, paths, budgets) before any use.
        t._records, t._entries, state = checked.load(
            raw or {}, t.store.loaded_from or t.store.path("state")
        )
        for rec in t._records.values():
            if rec.status in ("running", "idle"):
                rec.status = "queued"
        t._total_steps = state["total_steps"]
        t._elapsed_before = state["elapsed_seconds"]
        t.worker_deaths_survived = state["worker_deaths_survived"]
        t._solved = state["solved"] and not any(
            k in overrides for k in ("target_reward", "max_seconds", "max_steps")
        )
        # Saves are at most SAVE_SECONDS apart: a pod created after the last one may have
        # left checkpoints. Never reuse an id that a record or a checkpoint folder holds.
        known = set(t._records) | set(t.store.pod_ids())
        highest = max((int(p[1:]) for p in known if p[1:].isdigit()), default=-1)
        t._next_index = max(state["next_index"], highest + 1)
        t._rng.seed(f"{spec.seed}-{t._next_index}")
        return t

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Tournament:
        """Start (or continue) the tournament in the background and return at once."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise RuntimeError("tournament is already running")
            self.store.ensure()
            self.store.clean_orphans()
            if self.client is None:
                from elegantpod.cluster import cluster

                self.client = cluster()
            if not self._records:
                for _ in range(self.spec.pods):
                    self._new_pod(None)
            self.store.write_json("tournament.json", self.spec.to_dict())
            self._save()
            for rec in self._records.values():
                if rec.status in ACTIVE:
                    self._publish_control(rec)
            self.topic = f"elegantpod-{self.id}"
            self.client.subscribe_topic(self.topic, self._on_event)
            # The scheduler's own record of lost workers and the tasks they were running:
            # a death is counted even when the segment sent no progress event before it.
            self.client.subscribe_topic("all", self._on_scheduler_event)
            self._stop_requested = False
            self._status = "running"
            self._started_at = time.monotonic()
            self._thread = threading.Thread(
                target=self._loop, name=f"tournament-{self.id}", daemon=True
            )
            self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the tournament ends (or ``timeout``); return :meth:`summary`."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.summary()

    def stop(self, pod: str | None = None) -> None:
        """Stop one pod (it checkpoints and ends), or with no argument the tournament."""
        with self._lock:
            if pod is None:
                self._stop_requested = True
                return
            rec = self._record(pod)
            if rec.status not in ACTIVE:
                return
            rec.stop_requested = True
            if rec.status in ("queued", "paused") and not self._in_flight(pod):
                rec.status = "stopped"
            self._publish_control(rec)

    def pause(self, pod: str) -> None:
        """Pause a pod: it holds its worker slot but stops stepping, within a second."""
        with self._lock:
            rec = self._record(pod)
            if rec.status in ("queued", "running"):
                rec.status = "paused"
                self._publish_control(rec)

    def _resume_pod(self, pod: str) -> None:
        """Resume a paused pod: ``t.resume(pod)``."""
        with self._lock:
            rec = self._record(pod)
            if rec.status == "paused":
                rec.status = "running" if self._in_flight(pod) else "queued"
                self._publish_control(rec)

    def mutate(self, pod: str, **hparams: Any) -> dict[str, Any]:
        """Change hyperparameters of a pod; a running pod applies them live.

        Raises ``ValueError`` naming an unknown hyperparameter or a bad value; the pod
        is untouched then. Returns the pod's new hyperparameters.
        """
        with self._lock:
            rec = self._record(pod)
            learner = get_algo(rec.algo)
            current = _config(learner, rec.hparams)
            new = replace_checked(current, hparams)
            for key in hparams:
                old = getattr(current, key)
                if key in learner.structural_hparams and getattr(new, key) != old:
                    raise ValueError(
                        f"{key!r} fixes the network or buffer shapes of pod "
                        f"{pod!r}; it cannot change live"
                    )
            rec.hparams = dataclasses.asdict(new)
            self._publish_control(rec)
            self._save()
            return dict(rec.hparams)

    def add_pod(
        self, algo: str | None = None, parent: str | lb.Entry | None = None, **hparams: Any
    ) -> str:
        """Add a pod to the population: fresh, or cloned from a leaderboard entry / pod.

        Returns the new pod's id. Raises ``ValueError`` for an algorithm the env cannot
        take, an unknown parent or hyperparameter.
        """
        with self._lock:
            parent_entry = None
            if parent is not None:
                pid = parent.pod_id if isinstance(parent, lb.Entry) else str(parent)
                matches = [e for e in self._entries if e.pod_id == pid]
                if matches and not matches[0].usable:
                    raise ValueError(
                        f"parent {pid!r}: its checkpoint failed to load; choose another parent"
                    )
                if matches:
                    parent_entry = matches[0]
                elif pid in self._records and self._records[pid].latest_checkpoint:
                    r = self._records[pid]
                    parent_entry = lb.Entry(
                        pod_id=pid,
                        algo=r.algo,
                        hparams=r.hparams,
                        score_mean=math.nan if r.score_mean is None else r.score_mean,
                        score_std=math.nan if r.score_std is None else r.score_std,
                        env_steps=r.env_steps,
                        wall_seconds=r.wall_seconds,
                        checkpoint=r.latest_checkpoint,
                        segment=r.segment,
                    )
                else:
                    raise ValueError(
                        f"unknown parent {pid!r}: not on the leaderboard and no checkpoint yet"
                    )
            algo = algo or (parent_entry.algo if parent_entry else self.spec.algos[0])
            learner = get_algo(algo)
            learner.check_env(self.spec.env_id, self.spec.env_kwargs)
            if parent_entry is not None and parent_entry.algo != learner.name:
                raise ValueError(
                    f"parent {parent_entry.pod_id!r} is a {parent_entry.algo!r} "
                    f"agent, not {learner.name!r}"
                )
            base = dict(parent_entry.hparams) if parent_entry else self._base_hparams(learner.name)
            base_cfg = _config(learner, base)
            cfg = replace_checked(base_cfg, hparams)
            if parent_entry is not None:
                for key in learner.structural_hparams:
                    if getattr(cfg, key) != getattr(base_cfg, key):
                        raise ValueError(f"{key!r} must equal the parent's to copy its networks")
            before = dataclasses.asdict(base_cfg)  # tuples restored: JSON lists are no change
            mutation = {
                k: [before[k], v] for k, v in dataclasses.asdict(cfg).items() if before[k] != v
            }
            rec = self._new_pod_record(
                learner.name, dataclasses.asdict(cfg), parent_entry, mutation
            )
            if self._status == "running":
                self._publish_control(rec)
            self._save()
            return rec.pod_id

    resume = _HybridMethod(_resume_store, _resume_pod)
    """``Tournament.resume(store)`` continues a saved tournament; ``t.resume(pod)`` resumes a
    paused pod."""

    # ------------------------------------------------------------------ views
    @property
    def status(self) -> str:
        """created, running, finished or failed."""
        return self._status

    @property
    def leaderboard(self):
        """The leaderboard as a pandas DataFrame, best first (always current)."""
        import pandas as pd

        with self._lock:
            self._drain_events()
            rows = []
            for i, e in enumerate(lb.rank(self._entries), 1):
                rec = self._records.get(e.pod_id)
                rows.append(
                    {
                        "rank": i,
                        "pod": e.pod_id,
                        "algo": e.algo,
                        "score_mean": e.score_mean,
                        "score_std": e.score_std,
                        "env_steps": e.env_steps,
                        "wall_seconds": e.wall_seconds,
                        "segment": e.segment,
                        "status": rec.status if rec else "",
                        "steps_per_second": rec.steps_per_second if rec else None,
                        "parent": e.parent,
                        "mutation": e.mutation,
                        "hparams": e.hparams,
                        "checkpoint": self.store.resolve(e.checkpoint),
                    }
                )
        cols = [
            "rank",
            "pod",
            "algo",
            "score_mean",
            "score_std",
            "env_steps",
            "wall_seconds",
            "segment",
            "status",
            "steps_per_second",
            "parent",
            "mutation",
            "hparams",
            "checkpoint",
        ]
        return pd.DataFrame(rows, columns=cols)

    @property
    def pods(self):
        """Every pod's record (status, lineage, hyperparameters) as a DataFrame."""
        import pandas as pd

        with self._lock:
            return pd.DataFrame([r.to_dict() for r in self._records.values()])

    def pod(self, pod: str) -> dict[str, Any]:
        """One pod's record as a dict."""
        with self._lock:
            self._drain_events()
            return self._record(pod).to_dict()

    def curves(self, pod: str | None = None) -> list[dict]:
        """Progress events received (all pods, or one), oldest first."""
        with self._lock:
            self._drain_events()
            if pod is not None:
                return list(self._curves.get(pod, []))
            return [m for msgs in self._curves.values() for m in msgs]

    @property
    def pods_in_flight(self) -> int:
        """Segments submitted to the cluster and not yet finished."""
        with self._lock:
            return len(self._futures)

    def lineage(self) -> list[dict[str, Any]]:
        """Parent -> child edges with the mutation that made each child, each pod's status
        and, for a failed pod, why it failed."""
        with self._lock:
            return [
                {
                    "pod": r.pod_id,
                    "parent": r.parent,
                    "algo": r.algo,
                    "mutation": r.mutation,
                    "status": r.status,
                    "error": r.error,
                }
                for r in self._records.values()
            ]

    def summary(self) -> dict[str, Any]:
        """The tournament's outcome so far (what ``elegantpod tournament --json`` prints)."""
        with self._lock:
            self._drain_events()
            best = lb.rank(self._entries)[0] if self._entries else None
            statuses = Counter(r.status for r in self._records.values())
            return {
                "env": self.spec.env_id,
                "algos": list(self.spec.algos),
                "status": self._status,
                "solved": self._solved,
                "best_score": best.score_mean if best else None,
                "best_pod": best.pod_id if best else None,
                "best_checkpoint": self.store.resolve(best.checkpoint) if best else None,
                "wall_seconds": self._elapsed(),
                "env_steps_total": self._total_steps,
                "pods_total": len(self._records),
                "pods_finished": sum(
                    1 for r in self._records.values() if r.segment >= 1 and r.status != "failed"
                ),
                "pods_failed": statuses["failed"],
                "failures": dict(
                    Counter(r.error for r in self._records.values() if r.status == "failed")
                ),
                "worker_deaths_survived": self.worker_deaths_survived,
                "store": self.store.url,
                "error": self._error,
            }

    def best(self, device: str | None = None):
        """The best agent, loaded from its checkpoint, as a :class:`~elegantpod.pod.Pod`."""
        from elegantpod.pod import Pod

        with self._lock:
            if not self._entries:
                raise ValueError("the leaderboard is empty: no segment has finished yet")
            best = lb.rank(self._entries)[0]
        # the store's own path: a leaderboard entry can name nothing outside the store
        return Pod.from_checkpoint(self.store.resolve(best.checkpoint), device=device)

    def cluster_info(self) -> dict[str, Any]:
        """Workers, threads, memory, GPUs, pods in flight and the Dask dashboard link."""
        info: dict[str, Any] = {
            "workers": 0,
            "threads": 0,
            "memory_bytes": 0,
            "gpus": 0,
            "pods_in_flight": self.pods_in_flight,
            "dashboard": None,
            "can_scale": False,
        }
        client = self.client
        if client is None:
            return info
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        info.update(
            workers=len(workers),
            threads=sum(int(w.get("nthreads", 0)) for w in workers.values()),
            memory_bytes=sum(int(w.get("memory_limit") or 0) for w in workers.values()),
            gpus=sum(int(w.get("resources", {}).get("GPU", 0)) for w in workers.values()),
            dashboard=getattr(client, "dashboard_link", None),
            can_scale=hasattr(getattr(client, "cluster", None), "scale"),
        )
        return info

    def scale(self, n_workers: int) -> None:
        """Ask the cluster for ``n_workers`` workers (LocalCluster, Gateway, Kubernetes...)."""
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
            raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
        cluster = getattr(self.client, "cluster", None)
        if cluster is None or not hasattr(cluster, "scale"):
            raise ValueError("this client's cluster cannot be scaled from here")
        cluster.scale(n_workers)

    def dashboard(self, refresh_seconds: float = 1.0):
        """The live ipywidgets dashboard bound to this tournament (needs ``ipywidgets``)."""
        from elegantpod.widgets.dashboard import Dashboard

        return Dashboard(self, refresh_seconds=refresh_seconds)

    def _repr_html_(self) -> str:
        from elegantpod.widgets.html import leaderboard_html

        s = self.summary()
        title = f"Tournament on {self.spec.env_id}: {s['status']}, {s['pods_total']} pods"
        return leaderboard_html(self.leaderboard, title)

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            # One dashboard for all displays of this tournament: each would otherwise
            # start a refresh thread of its own that nothing closes.
            if self._shown is None:
                self._shown = self.dashboard()
            return self._shown.widget._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Tournament({self.spec.env_id!r}, algos={list(self.spec.algos)}, "
            f"pods={self.spec.pods}, status={s['status']!r}, best={s['best_score']})"
        )

    # ------------------------------------------------------------------ internals
    def _record(self, pod: str) -> PodRecord:
        if pod not in self._records:
            known = ", ".join(sorted(self._records)) or "none yet"
            raise ValueError(f"unknown pod {pod!r}; pods: {known}")
        return self._records[pod]

    def _resolve(self, name: str | None) -> str | None:
        return None if name is None else self.store.resolve(name)

    def _in_flight(self, pod: str) -> bool:
        return pod in self._flying

    def _elapsed(self) -> float:
        running = time.monotonic() - self._started_at if self._started_at is not None else 0.0
        return self._elapsed_before + running

    def _base_hparams(self, algo: str) -> dict[str, Any]:
        learner = get_algo(algo)
        cfg = replace_checked(learner.config_cls(), self.spec.hparams.get(algo, {}))
        return dataclasses.asdict(cfg)

    def _new_pod_record(self, algo, hparams, parent: lb.Entry | None, mutation) -> PodRecord:
        pod_id = f"p{self._next_index:03d}"
        seed = self.spec.seed * 1_000_003 + self._next_index
        self._next_index += 1
        rec = PodRecord(
            pod_id=pod_id,
            algo=algo,
            hparams=hparams,
            seed=seed,
            parent=parent.pod_id if parent else None,
            mutation=mutation,
            parent_checkpoint=parent.checkpoint if parent else None,
            env_steps=parent.env_steps if parent else 0,
        )
        self._records[pod_id] = rec
        return rec

    def _new_pod(self, replacing: PodRecord | None) -> PodRecord:
        """The generator at work: a fresh pod, or a mutated child of a leaderboard entry."""
        active = Counter(r.algo for r in self._records.values() if r.status in ACTIVE)
        algo = choose_algo(list(self.spec.algos), active, self._rng)
        parents = [e for e in self._entries if e.algo == algo and e.usable]
        space = SEARCH_SPACES.get(algo, {})
        if parents:
            parent = choose_parent(parents, self._rng, self.spec.generator)
            hparams, mutation = self._mutate(algo, parent.hparams, space, structural=True)
            return self._new_pod_record(algo, hparams, parent, mutation)
        base = self._base_hparams(algo)
        if any(r.algo == algo for r in self._records.values()):
            # Not the first of its algorithm: explore around the base instead of cloning it.
            hparams, mutation = self._mutate(algo, base, space, structural=False)
        else:
            hparams, mutation = base, {}
        return self._new_pod_record(algo, hparams, None, mutation)

    def _mutate(self, algo: str, hparams: dict, space: dict, structural: bool):
        """The mutation policy, its output checked like user input."""
        new, mutation = self._mutation_policy(dict(hparams), space, self._rng, self.spec.generator)
        learner = get_algo(algo)
        try:
            cfg = replace_checked(_config(learner, hparams), dict(new))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"mutation_policy returned bad {algo} hyperparameters: {exc}") from exc
        if structural:
            changed = [
                k
                for k in learner.structural_hparams
                if new.get(k, hparams.get(k)) != hparams.get(k)
            ]
            if changed:
                raise ValueError(
                    f"mutation_policy changed {changed}, which fix the network shapes a "
                    "child copies from its parent"
                )
        try:  # its lineage reaches the store and every HTML view: checked like a store's
            mutation = checked.mutation(algo, dict(mutation), "mutation")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"mutation_policy returned a bad mutation: {exc}") from exc
        return dataclasses.asdict(cfg), mutation

    def _ship(self, algo: str) -> None:
        """Register a custom algorithm or env on every worker, present and future.

        Pods are rebuilt on workers from names (``PodSpec.algo``, ``env_id``), so a
        learner or env registered only in this process must be registered there too.
        Called for every submitted segment (a set lookup once shipped), so pods added
        before ``start()`` or after a resume are covered alike.
        """
        from elegantpod.agents import BUILTIN, register_algo
        from elegantpod.envs import register_env
        from elegantpod.envs.registry import CUSTOM_ENVS

        env_id = self.spec.env_id
        wanted = []
        if algo not in BUILTIN:
            wanted.append((f"elegantpod-algo-{algo}", register_algo, (get_algo(algo),)))
        if env_id in CUSTOM_ENVS:
            wanted.append((f"elegantpod-env-{env_id}", register_env, (env_id, CUSTOM_ENVS[env_id])))
        for name, register, args in wanted:
            if name not in self._shipped:
                self.client.register_plugin(_Register(register, *args), name=name)
                self._shipped.add(name)

    def _variable(self, pod_id: str):
        if pod_id not in self._variables:
            from distributed import Variable

            self._variables[pod_id] = Variable(f"elegantpod-{self.id}-{pod_id}", client=self.client)
        return self._variables[pod_id]

    def _publish_control(self, rec: PodRecord) -> None:
        if self.client is None:
            return
        self._versions[rec.pod_id] += 1
        learner = get_algo(rec.algo)
        live = {k: v for k, v in rec.hparams.items() if k not in learner.structural_hparams}
        state = (
            "stopped" if rec.stop_requested else ("paused" if rec.status == "paused" else "running")
        )
        self._variable(rec.pod_id).set(
            {
                "state": state,
                "hparams": live,
                "version": self._versions[rec.pod_id],
                "tournament": "stopped" if self._stop_requested else "running",
            }
        )

    def _capacity(self) -> tuple[int, bool]:
        """Worker slots (threads, or GPUs on GPU workers), refreshed about once a second."""
        t, n, gpu = self._capacity_cache
        if time.monotonic() - t < 1.0:
            return n, gpu
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        gpus = sum(int(w.get("resources", {}).get("GPU", 0)) for w in workers.values())
        n = gpus if gpus else sum(int(w.get("nthreads", 1)) for w in workers.values())
        self._capacity_cache = (time.monotonic(), n, bool(gpus))
        return n, bool(gpus)

    def _segment_steps(self, algo: str) -> int | None:
        if self.spec.segment_steps is None and self.spec.segment_seconds is None:
            return get_algo(algo).default_segment_steps
        return self.spec.segment_steps

    def _submit(self, rec: PodRecord, uses_gpu: bool) -> None:
        learner = get_algo(rec.algo)
        spec = PodSpec(
            env_id=self.spec.env_id,
            algo=rec.algo,
            hparams=_config(learner, rec.hparams),
            seed=rec.seed,
            device=self.spec.device,
            target_reward=self.spec.target_reward,
            eval_episodes=self.spec.eval_episodes,
            env_kwargs=self.spec.env_kwargs,
            eval_env_kwargs=self.spec.eval_env_kwargs,
            fitness=self.spec.fitness,
            learners=self.spec.learners,
        )
        self._ship(rec.algo)
        seg = rec.segment + 1
        task = SegmentTask(
            tournament_id=self.id,
            pod_id=rec.pod_id,
            segment=seg,
            spec_json=spec.to_json(),
            checkpoint=self.store.checkpoint(rec.pod_id, seg),
            resume_from=self._resolve(rec.latest_checkpoint),
            parent_checkpoint=(
                self._resolve(rec.parent_checkpoint) if rec.latest_checkpoint is None else None
            ),
            segment_steps=self._segment_steps(rec.algo),
            segment_seconds=self.spec.segment_seconds,
            control=f"elegantpod-{self.id}-{rec.pod_id}",
            topic=self.topic,
        )
        key = f"elegantpod-{self.id}-{rec.pod_id}-s{seg}-r{rec.retries}"
        fut = self.client.submit(
            run_segment, task, key=key, pure=False, resources={"GPU": 1} if uses_gpu else None
        )
        self._futures[fut] = rec.pod_id
        self._flying.add(rec.pod_id)
        # Dask calls this from its own thread when the segment ends: the loop then waits
        # on one queue instead of asking about every future in flight each round.
        fut.add_done_callback(self._done.put)
        if rec.status == "queued":
            rec.status = "running"

    def _loop(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    if self._step():
                        break
                    failures = 0
                except TRANSIENT_ERRORS as exc:
                    # A scheduler hiccup or a slow store write must not end a tournament
                    # of many hours: retry, and give up only if it persists.
                    failures += 1
                    self._error = f"transient ({failures}): {type(exc).__name__}: {exc}"
                    if failures > MAX_TRANSIENT_FAILURES:
                        raise
                    time.sleep(min(5.0, 0.2 * failures))
            self._error = None
            self._finish()
        except Exception:
            self._error = traceback.format_exc()
            self._status = "failed"
            with contextlib.suppress(Exception):
                self._finish()

    def _step(self) -> bool:
        """One round: submit what fits, handle what finished. True when it is time to end."""
        with self._lock:
            self._drain_events()
            if self._dirty:
                self._save(force=False)
            if self._should_end():
                return True
            capacity, uses_gpu = self._capacity()
            # Fair share: the pod with the fewest finished segments goes first, so a
            # population larger than the cluster trains round-robin.
            runnable = sorted(
                (
                    r
                    for r in self._records.values()
                    if r.status == "queued" and not self._in_flight(r.pod_id)
                ),
                key=lambda r: (r.segment, r.pod_id),
            )
            for rec in runnable[: max(0, capacity - len(self._futures))]:
                self._submit(rec, uses_gpu)
        try:
            done = [self._done.get(timeout=LOOP_SECONDS)]
        except queue.Empty:
            return False
        while len(done) < 1000:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                break
        with self._lock:
            self._drain_events()
            for fut in done:
                self._handle(fut)
        return False

    def _should_end(self) -> bool:
        s = self.spec
        if self._stop_requested or self._solved:
            return True
        if s.max_seconds is not None and self._elapsed() >= s.max_seconds:
            return True
        if s.max_steps is not None and self._total_steps >= s.max_steps:
            return True
        return not any(r.status in ACTIVE for r in self._records.values()) and not self._futures

    def _finish(self) -> None:
        """Ask running pods to stop, collect their last segments, save, release."""
        with self._lock:
            self._stop_requested = True
            for pod_id in set(self._futures.values()):
                self._publish_control(self._records[pod_id])
            futures = list(self._futures)
        # Not distributed.wait: it needs a default client, and ours may not be one.
        deadline = time.monotonic() + FINISH_SECONDS
        while time.monotonic() < deadline and not all(f.done() for f in futures):
            time.sleep(LOOP_SECONDS / 2)
        with self._lock:
            self._drain_events()
            for fut in futures:
                if fut.done():
                    self._handle(fut, ending=True)
                else:
                    fut.cancel()
            self._futures.clear()
            self._flying.clear()
            for rec in self._records.values():
                if rec.stop_requested and rec.status in ACTIVE:
                    rec.status = "stopped"
                elif rec.status in ("queued", "running"):
                    rec.status = "idle"  # alive, not running: Tournament.resume continues it
            self._elapsed_before = self._elapsed()
            self._started_at = None
            if self._records and all(r.status == "failed" for r in self._records.values()):
                # Nothing trained: not a finished tournament (the CLI exits non-zero).
                self._status = "failed"
                reasons = Counter(r.error for r in self._records.values())
                self._error = "every pod failed: " + "; ".join(
                    f"{n} x {why}" for why, n in reasons.most_common()
                )
            if self._status != "failed":
                self._status = "finished"
            self._save()
            with contextlib.suppress(OSError):
                self.store.clean_orphans()
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic("all")
        if self._own_client:
            try:
                cl = self.client.cluster
                self.client.close()
                if cl is not None:
                    cl.close()
            except Exception:
                pass
            self.client = None  # a later start() makes a new one
        self._variables.clear()

    def _handle(self, fut, ending: bool = False) -> None:
        from distributed.scheduler import KilledWorker

        pod_id = self._futures.pop(fut, None)
        if pod_id is None:
            return
        self._flying.discard(pod_id)
        rec = self._records[pod_id]
        if fut.status == "finished":
            result = fut.result()
            # Drop the result from the cluster: otherwise a dying worker that holds it
            # makes Dask recompute a segment we already have.
            fut.release()
            self._on_result(rec, result, ending)
            return
        if fut.status == "cancelled":
            if rec.status in ("running",):
                rec.status = "queued"
            return
        exc = fut.exception()
        if isinstance(exc, ParentCheckpointError):
            # Breed from it no more: every child of a corrupt parent would fail the same way.
            self._entries = [
                dataclasses.replace(e, usable=False) if e.checkpoint == rec.parent_checkpoint else e
                for e in self._entries
            ]
        if isinstance(exc, KilledWorker) and rec.retries < self.spec.max_retries:
            rec.retries += 1  # the deaths were counted from the scheduler's events
            if rec.stop_requested:
                rec.status = "stopped"
            elif rec.status != "paused":
                rec.status = "queued"
        else:
            rec.status = "failed"
            rec.error = f"{type(exc).__name__}: {exc}"[: checked.MAX_TEXT]
        self._save(force=False)

    def _on_result(self, rec: PodRecord, res: SegmentResult, ending: bool) -> None:
        self.events_sent += res.events_sent
        # from the record, not the task: a re-run that found its checkpoint reports 0
        self._total_steps += max(0, res.env_steps - rec.env_steps)
        rec.segment = res.segment
        rec.env_steps = res.env_steps
        rec.latest_checkpoint = checkpoint_name(rec.pod_id, res.segment)
        rec.score_mean, rec.score_std = res.score_mean, res.score_std
        rec.wall_seconds += res.wall_seconds
        rec.steps_per_second = res.steps_per_second
        entry = lb.Entry(
            pod_id=rec.pod_id,
            algo=rec.algo,
            hparams=dict(res.hparams),
            score_mean=res.score_mean,
            score_std=res.score_std,
            env_steps=res.env_steps,
            wall_seconds=rec.wall_seconds,
            checkpoint=rec.latest_checkpoint,
            segment=res.segment,
            parent=rec.parent,
            mutation=rec.mutation,
        )
        self._entries, _ = lb.update(self._entries, entry, self.spec.leaderboard_size)
        if res.solved:
            self._solved = True
        if rec.stop_requested:
            rec.status = "stopped"
        elif rec.status == "paused":
            pass  # stays paused and queued-off until resumed
        elif ending or self._solved or self._stop_requested:
            rec.status = "idle"
        elif should_replace(
            res.score_mean, self._entries, self.spec.generator, rec.segment
        ) and not any(e.pod_id == rec.pod_id for e in lb.rank(self._entries)[:1]):
            rec.status = "replaced"
            child = self._new_pod(rec)
            self._publish_control(child)
        else:
            rec.status = "queued"
        self._save(force=False)

    def _on_scheduler_event(self, event) -> None:
        """Count segments that were running on a worker the scheduler lost.

        Runs on the client's event-loop thread, like :meth:`_on_event`: only a counter
        moves here (an int increment is atomic under the GIL), no lock is taken.
        """
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        if msg.get("expected"):
            return  # retired on purpose (scale down): the task moves, nobody died
        prefix = f"elegantpod-{self.id}-"
        lost = [k for k in msg.get("processing-tasks", ()) if str(k).startswith(prefix)]
        self.worker_deaths_survived += len(lost)

    def _on_event(self, event) -> None:
        # Runs on the client's event-loop thread: it must never wait for self._lock, since
        # the orchestrator thread makes synchronous client calls while holding it.
        self._inbox.append(event)

    def _drain_events(self) -> None:
        """Fold queued progress events into curves and records (call with the lock held)."""
        while self._inbox:
            _, msg = self._inbox.popleft()
            if not isinstance(msg, dict) or "pod" not in msg:
                continue
            pod = msg["pod"]
            self.events_received[pod] += 1
            self._curves[pod].append(msg)
            rec = self._records.get(pod)
            if rec is not None and msg.get("type") == "progress":
                rec.steps_per_second = msg.get("steps_per_second", rec.steps_per_second)

    def _save(self, force: bool = True) -> None:
        """Snapshot leaderboard, records and counters to the store (one object).

        Segment results save with ``force=False``: at most every :data:`SAVE_SECONDS`,
        so that a thousand pods finishing segments do not each rewrite every record. A
        client that dies loses at most that much bookkeeping, never a checkpoint: a
        resumed pod re-runs from its checkpoints (a segment finds its own and reuses it).
        """
        now = time.monotonic()
        if not force and now - self._saved_at < SAVE_SECONDS:
            self._dirty = True
            return
        self.store.save_state(
            {
                "leaderboard": [e.to_dict() for e in lb.rank(self._entries)],
                "pods": [r.to_dict() for r in self._records.values()],
                "state": {
                    "total_steps": self._total_steps,
                    "elapsed_seconds": self._elapsed(),
                    "worker_deaths_survived": self.worker_deaths_survived,
                    "next_index": self._next_index,
                    "solved": self._solved,
                },
            }
        )
        self._saved_at, self._dirty = now, False


class _Register(WorkerPlugin):
    """Runs ``register(*args)`` on each worker as it joins (custom algorithms and envs)."""

    def __init__(self, register, *args):
        self.register, self.args = register, args

    def setup(self, worker) -> None:
        self.register(*self.args)


def _config(learner, hparams: dict[str, Any]):
    """A learner's frozen config from a (JSON-read) hyperparameter dict."""
    return learner.config_cls(**config_values(learner.config_cls, hparams, drop_unknown=True))


def _check_spec(spec: TournamentSpec) -> None:
    """Every check that needs no cluster: bad input fails here, before any Dask work."""
    check_env_id(spec.env_id)
    spec.validate()
    check_eval_env(spec.env_id, spec.env_kwargs, spec.eval_env_kwargs, spec.fitness)
    for algo in spec.algos:
        learner = get_algo(algo)
        learner.check_env(spec.env_id, spec.env_kwargs)
        config = replace_checked(learner.config_cls(), spec.hparams.get(algo, {}))
        check_learners(spec.learners, config.num_envs, algo)
    unknown = set(spec.hparams) - {get_algo(a).name for a in spec.algos}
    if unknown:
        raise ValueError(
            f"hparams given for {sorted(unknown)}, which are not in algos {list(spec.algos)}"
        )
