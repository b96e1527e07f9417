"""``Tournament``: the notebook-facing facade over population, runner and store.

One background thread drives a tournament asynchronously: it keeps as many segments in
flight as the cluster has worker slots and reacts to each finished segment (updater ->
leaderboard -> generator -> next segment). The parts:

- :mod:`~elegantpod.tournament.population`: every decision, pure (no Dask, no I/O);
- :mod:`~elegantpod.tournament.runner`: every Dask call (submit, outcomes, control);
- :mod:`~elegantpod.tournament.store`: snapshots, checkpoints, pruning; one writer per
  store through a :mod:`~elegantpod.tournament.lease`.

One lock guards the population, and nothing waits on the network or the store while
holding it: a button click never queues behind a slow scheduler or bucket. Every public
method is safe from any thread and is what the dashboard's buttons call.
"""

from __future__ import annotations

import math
import threading
import uuid
import warnings
from collections import Counter, defaultdict, deque
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.envs.registry import env_hooks
from elegantpod.tournament import field_checks, stored_state, views
from elegantpod.tournament.engine import Engine
from elegantpod.tournament.population import Population
from elegantpod.tournament.protocol import ACTIVE, ControlMessage, TournamentStatus
from elegantpod.tournament.runner import cluster_info, control_message
from elegantpod.tournament.spec import (
    TournamentSpec,
    check_sources,
    check_spec,
    make_spec,
    resume_changes,
    spec_names,
)
from elegantpod.tournament.store import Store, StoreError

CURVE_EVENTS = 20_000
"""Progress events kept per pod (the oldest go first): memory stays bounded in long runs."""


class Tournament(Engine):
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
        Directory or fsspec URL for leaderboard, pod records and checkpoints. One
        tournament writes a store at a time (a lease).
    client
        A ``distributed.Client``; ``None``: :func:`elegantpod.cluster` on ``start()``.
    mutation_policy
        How the generator mutates hyperparameters: ``(hparams, space, rng, config) ->
        (new_hparams, mutation)`` like :func:`elegantpod.tournament.generator.mutate`
        (the default); its results are checked like any hyperparameters. Not saved in
        the store: pass it again to :meth:`resume`.
    **options
        Any other :class:`TournamentSpec` field (``segment_steps``, ``leaderboard_size``,
        ``seed``, ``hparams``, ``generator``...).

    Raises
    ------
    ValueError
        For a bad argument (naming the unknown keyword and the close matches) or a store
        that holds another tournament, before any cluster work.
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
        **options: Any,
    ):
        spec = make_spec(
            env_id=env,
            algos=algos,
            pods=pods,
            target_reward=target_reward,
            max_seconds=max_seconds,
            max_steps=max_steps,
            **options,
        )
        s = Store(store)
        existing = s.read_json("tournament.json")
        if existing is not None:
            where = f"store {s.url!r}"
            if isinstance(existing, dict) and existing.get("env_id") != env:
                raise ValueError(
                    f"{where} belongs to a tournament on {existing.get('env_id')!r}, not {env!r}"
                )
            raise ValueError(
                f"{where} already holds a tournament; continue it with "
                "Tournament.resume(store) (--resume on the command line) or choose a new store"
            )
        lone = lone_pods_warning(spec.algos, spec.pods)
        if lone is not None:
            warnings.warn(lone, UserWarning, stacklevel=2)
        self._setup(spec, s, client, mutation_policy)

    def _setup(self, spec: TournamentSpec, store: Store, client, mutation_policy) -> None:
        if mutation_policy is not None and not callable(mutation_policy):
            raise ValueError(f"mutation_policy must be a function, got {mutation_policy!r}")
        self.spec = spec
        self.store = store
        self.population = Population(spec, mutation_policy)
        """The pure state (records, leaderboard, counters); read it through the views."""
        self.client = client
        self._own_client = client is None
        self.id = uuid.uuid4().hex[:8]
        """This run's key on the cluster (tasks, Variables, topics): new at every start."""
        self.uid = uuid.uuid4().hex
        """The tournament's identity, saved in its store and kept by a resume: every
        checkpoint it writes names it, and a checkpoint naming another is refused."""
        self._lock = threading.RLock()
        self._curves: dict[str, deque] = defaultdict(lambda: deque(maxlen=CURVE_EVENTS))
        self._baselines: dict[str, float] | None = None
        self.events_received: Counter = Counter()
        self.events_sent = 0
        """Progress events that finished segments report having sent (for auditing)."""
        self.resume_changes: dict[str, list] = {}
        """Spec fields a resume changed, ``{field: [old, new]}`` (the CLI prints them)."""
        self._shown = None  # the dashboard that display(t) shows
        self._init_engine()

    @classmethod
    def resume(
        cls,
        store,
        client=None,
        *,
        mutation_policy=None,
        force: bool = False,
        allow_remote: bool = False,
        **overrides: Any,
    ) -> Tournament:
        """Continue the tournament saved in ``store`` (after a kernel or cluster restart).

        Returns a tournament that has not started yet: call :meth:`start`. ``overrides``
        may change the budgets and the fields in
        :data:`~elegantpod.tournament.spec.RESUME_CHANGEABLE` (listed in
        ``resume_changes``); any other field given must equal the store's. ``force``
        takes over the store's lease from a writer that is gone. Everything read from
        the store is checked like user input first, and data files or URLs that its
        ``env_kwargs`` name are used only if you pass them again (``env_kwargs=...``)
        or say ``allow_remote=True``.
        """
        s = Store(store)
        saved = s.read_json("tournament.json")
        if saved is None:
            hint = ""
            if field_checks.POD_ID.match(str(store)):
                hint = f"; to resume a paused pod, call t.resume_pod({str(store)!r})"
            raise ValueError(f"store {s.url!r} holds no tournament (no tournament.json){hint}")
        overrides = spec_names(overrides)
        where = f"{s.path('tournament.json')!r} is not a tournament spec"
        try:
            spec = TournamentSpec.from_dict(field_checks.mapping(saved, "tournament.json"))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {exc}") from None
        try:  # before anything reads them
            check_sources(s.path("tournament.json"), spec, overrides, allow_remote)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        try:
            check_spec(spec)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {exc}") from None
        changes = resume_changes(spec, overrides, f"store {s.url!r}")
        spec = make_spec(**{**spec.to_dict(), **{k: v[1] for k, v in changes.items()}})
        t = cls.__new__(cls)
        t._setup(spec, s, client, mutation_policy)
        t.resume_changes = changes
        t._force = force
        raw = s.load_state()
        records, entries, counters = stored_state.load(raw or {}, s.loaded_from or s.path("state"))
        t.population.load(records, entries, counters)
        # A solved tournament stays solved unless the resume changes what ends it.
        if any(k in changes for k in ("target_reward", "max_seconds", "max_steps")):
            t.population.solved = False
        t.uid = counters["tournament_uid"] or t.uid  # older stores: from now on
        t._elapsed_before = counters["elapsed_seconds"]
        t.worker_deaths_survived = counters["worker_deaths_survived"]
        # Saves are at most SAVE_SECONDS apart: a pod created after the last one may have
        # left checkpoints. Never reuse an id that a record or a checkpoint folder holds.
        t.population.reseed(set(s.pod_ids()))
        return t

    # ------------------------------------------------------------------ control
    def stop(self, pod: str | None = None) -> None:
        """Stop one pod (it checkpoints and ends), or with no argument the tournament.

        A tournament stopped this way ends with :attr:`status` ``stopped`` once its
        running pods have checkpointed (``wait()`` returns then); ``resume`` continues it.
        """
        if pod is None:
            with self._lock:
                if self._status == TournamentStatus.RUNNING:
                    self._stopped_by_user = True
            self._stop_requested = True
            return
        with self._lock:
            if not self.population.stop_pod(pod, self._in_flight(pod)):
                return
            msg = self._message(pod)
        self._publish(msg)

    def pause(self, pod: str) -> None:
        """Pause a pod: it holds its worker slot but stops stepping, within a second."""
        with self._lock:
            msg = self._message(pod) if self.population.pause(pod) else []
        self._publish(msg)

    def resume_pod(self, pod: str) -> None:
        """Resume a paused pod (``Tournament.resume(store)`` continues a saved tournament)."""
        with self._lock:
            changed = self.population.resume_pod(pod, self._in_flight(pod))
            msg = self._message(pod) if changed else []
        self._publish(msg)

    def mutate(self, pod: str, **hparams: Any) -> dict[str, Any]:
        """Change hyperparameters of a pod; a running pod applies them live.

        Raises ``ValueError`` naming an unknown hyperparameter or a bad value; the pod
        is untouched then. Returns the pod's new hyperparameters.
        """
        with self._lock:
            rec = self.population.mutate(pod, **hparams)
            msg, new = self._message(pod), dict(rec.hparams)
            self._dirty = True
        self._publish(msg)
        self._save(force=True)
        return new

    def add_pod(self, algo: str | None = None, parent=None, **hparams: Any) -> str:
        """Add a pod to the population: fresh, or cloned from a leaderboard entry / pod.

        Returns the new pod's id. Raises ``ValueError`` for an algorithm the env cannot
        take, an unknown or unusable parent, or a bad hyperparameter.
        """
        if parent is not None:
            parent = getattr(parent, "pod_id", parent)  # an Entry, or a pod id
            parent = str(parent)
        if algo is not None:  # may build an env (read data): before the lock, not under it
            get_algo(algo).check_env(self.spec.env_id, self.spec.env_kwargs)
        with self._lock:
            rec = self.population.add_pod(algo, parent, **hparams)
            msg = self._message(rec.pod_id) if self._status == TournamentStatus.RUNNING else []
            self._dirty = True
        self._publish(msg)
        self._save(force=True)
        return rec.pod_id

    def start(self, client=None, *, close_client: bool | None = None):
        """Start (or continue) the tournament in the background and return at once (see
        :meth:`Engine.start <elegantpod.tournament.engine.Engine.start>`).

        What the baselines and the env's leaderboard columns read from files (a trading
        tournament's market data) is read here, once, rather than by the first refresh
        of a dashboard or the command line's last lines.
        """
        self.baselines()
        self.leaderboard  # noqa: B018 (read for its side effect: the env's data is kept)
        return super().start(client, close_client=close_client)

    # ------------------------------------------------------------------ views
    @property
    def status(self) -> str:
        """``created``, ``running``, ``finished`` (its budget or target reached),
        ``stopped`` (:meth:`stop` or Ctrl-C ended it first) or ``failed``."""
        return self._status

    @property
    def leaderboard(self):
        """The leaderboard as a pandas DataFrame, best first (always current).

        One entry per pod, its best evaluation ever (a pod replaced or stopped since
        keeps its entry and checkpoint), in short typed columns: ``rank``, ``pod``,
        ``algo``, ``score_mean``, ``score_std``, ``env_steps``, ``wall_seconds``,
        ``segment``, ``status``, ``steps_per_second``, ``parent``, ``checkpoint`` and
        ``usable``. The hyperparameters each entry scored with are in
        :meth:`leaderboard_hparams` (same rows), the mutations in :meth:`lineage`.

        The env class may add columns after these (its ``leaderboard_columns``, see
        :class:`~elegantpod.envs.hooks.EnvHooks`): a trading tournament ranked by Sharpe
        ratio has ``deflated_sharpe``, the probability that an agent's true Sharpe
        ratio beats the best that as many luck-only agents as the tournament scored
        would show on the validation range. Cheap to read: what those columns need from
        files is read once (at :meth:`start` at the latest).
        """
        with self._lock:
            self._drain_events()
            board = views.leaderboard_frame(self.population, self.store.resolve)
            trials = sum(1 for r in self.population.records.values() if r.history)
        extra = env_hooks(self.spec.env_id).leaderboard_columns(board, trials, self.spec)
        for name, values in extra.items():
            board[name] = values
        return board

    def leaderboard_hparams(self):
        """The hyperparameters of each leaderboard entry as a DataFrame, best first.

        The rows of :attr:`leaderboard`, keyed by ``rank``, ``pod``, ``algo``,
        ``segment`` and ``parent``, with ``mutated`` (the names the entry's pod changed
        from its parent) and one typed column per hyperparameter, so that numbers stay
        numbers: ``t.leaderboard_hparams()[["pod", "lr"]]``, or sorted by ``lr``. A
        hyperparameter that an entry's algorithm lacks is missing (NaN, ``<NA>``).
        """
        with self._lock:
            return views.leaderboard_hparams(self.population)

    def baselines(self) -> dict[str, float]:
        """What doing nothing scores on the leaderboard's own range and fitness.

        The env class's ``baselines`` (:class:`~elegantpod.envs.hooks.EnvHooks`), asked
        once and kept: for a trading tournament, equal-weight buy-and-hold of the same
        stocks (and the S&P 500 index for the shipped sample) over the validation range,
        measured with the tournament's fitness, so the leaderboard shows whether any
        agent beats them (:mod:`elegantpod.finance.baselines`). Empty for other envs.
        """
        if self._baselines is None:
            spec = self.spec
            hooks = env_hooks(spec.env_id)
            self._baselines = hooks.baselines(spec.env_kwargs, spec.eval_env_kwargs, spec.fitness)
        return dict(self._baselines)

    @property
    def pods(self):
        """Every pod's record (status, lineage, hyperparameters, error) as a DataFrame."""
        with self._lock:
            return views.pods_frame(self.population)

    def pod(self, pod: str) -> dict[str, Any]:
        """One pod's record as a dict."""
        with self._lock:
            self._drain_events()
            return self.population.record(pod).to_dict()

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
        return self._runner.in_flight() if self._runner is not None else 0

    def lineage(self) -> list[dict[str, Any]]:
        """Parent -> child edges with the mutation that made each child, each pod's status
        and, for a failed pod, why it failed."""
        with self._lock:
            return views.lineage(self.population)

    def history(self):
        """Every segment evaluation as a DataFrame, oldest first: ``pod``, ``parent``,
        ``fork_segment``, ``segment``, ``env_steps``, ``score`` (the fitness the
        leaderboard ranks) and ``time`` (tournament seconds). What the dashboard's
        fitness curves draw."""
        import pandas as pd

        with self._lock:
            rows = views.history(self.population)
        return pd.DataFrame(rows, columns=views.HISTORY_COLUMNS)

    def schedule(self, pod: str | None = None) -> list[dict[str, Any]]:
        """The hyperparameter schedule that trained ``pod`` (default: the best pod),
        through its ancestors: one phase per run of segments with the same settings,
        oldest first. Empty before any segment finished. Raises ``ValueError`` for an
        unknown pod.

        Each phase is a dict:

        - ``pod``: the pod that trained in this phase (an ancestor, or ``pod`` itself);
        - ``from_steps``, ``to_steps``: env steps of the lineage at its start and end
          (counted from the first ancestor's 0, so a child continues its parent's count);
        - ``from_time``, ``to_time``: tournament seconds at its start and end;
        - ``segments``: how many segments it lasted;
        - ``score``: the fitness of the phase's *last* segment, not the best: the
          leaderboard keeps each pod's best evaluation ever, so a phase may end at 93.3
          while the leaderboard shows the same pod at 500.0 (scored mid-phase);
        - ``hparams``: the settings of the phase;
        - ``changes``: ``{name: [old, new]}`` against the previous phase (for the first,
          the mutation that made its pod, if any);
        - ``origin``: why the phase began, in words (the pod's ``why`` in
          :meth:`lineage`, or ``"live mutation"``).
        """
        with self._lock:
            if pod is None:
                best = self.population.best()
                if best is None or best.pod_id not in self.population.records:
                    return []
                pod = best.pod_id
            return views.schedule(self.population, str(pod))

    def summary(self) -> dict[str, Any]:
        """The tournament's outcome so far (what ``elegantpod tournament --json`` prints)."""
        with self._lock:
            self._drain_events()
            return views.summary(
                self.population,
                self.store.resolve,
                status=str(self._status),  # plain data, as every value here
                wall_seconds=self._elapsed(),
                worker_deaths_survived=self.worker_deaths_survived,
                store=self.store.url,
                store_bytes=self.store_bytes,
                error=self._error,
                warning=self.warning or self.population.warning,
                saved=self.saved,
            )

    def best(self, device: str | None = None):
        """The best agent, loaded from its checkpoint, as a :class:`~elegantpod.pod.Pod`.

        The checkpoint is checked against its leaderboard entry first (env, algorithm,
        this tournament, the entry's pod): one that fails is marked unusable (never best,
        never a parent) and the next entry is tried. Raises ``ValueError`` when no entry
        is left.
        """
        from elegantpod.checkpoint import CheckpointError, check_origin, load_checkpoint
        from elegantpod.envs.registry import external_sources
        from elegantpod.pod import Pod

        refused = []
        while True:
            with self._lock:
                best = self.population.best()
            if best is None:
                why = "; ".join(refused) or "no segment has finished yet"
                raise ValueError(f"the leaderboard has no usable entry: {why}")
            # the store's own path: a leaderboard entry can name nothing outside the store
            path = self.store.resolve(best.checkpoint)
            try:
                check_origin(
                    load_checkpoint(path),
                    path,
                    tournament=self.uid,
                    env_id=self.spec.env_id,
                    algo=best.algo,
                    pod=best.pod_id,
                )
                # the data this tournament was given, not what the checkpoint names
                return Pod.from_checkpoint(
                    path, device=device, env_kwargs=external_sources(self.spec.env_kwargs) or None
                )
            except CheckpointError as exc:
                with self._lock:
                    self.population.mark_unusable(best.checkpoint)
                    self._dirty = True
                refused.append(str(exc))
                self.warning = f"leaderboard entry of pod {best.pod_id} is unusable: {exc}"

    def cluster_info(self) -> dict[str, Any]:
        """Workers, threads, memory, GPUs, their worker processes, pods per GPU, whether
        CUDA MPS runs, pod slots, pods in flight and the Dask dashboard link."""
        info = {"workers": 0, "threads": 0, "memory_bytes": 0, "gpus": 0, "dashboard": None}
        info.update({"gpu_processes": 0, "mps": None, "can_scale": False})
        if self.client is not None:
            info.update(cluster_info(self.client))
        info["pods_in_flight"] = self.pods_in_flight
        runner = self._runner
        info["pods_per_gpu"] = runner.pods_per_gpu if runner is not None and info["gpus"] else 0
        if runner is not None and runner.mps is not None:
            info["mps"] = runner.mps  # asked on the GPU workers' own machines
        info["slots"] = runner.capacity()[0] if runner is not None else None
        return info

    def scale(self, n_workers: int) -> None:
        """Ask the cluster for ``n_workers`` workers (LocalCluster, Gateway, Kubernetes...)."""
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
            raise ValueError(f"n_workers must be an integer >= 0, got {n_workers!r}")
        cluster = getattr(self.client, "cluster", None)
        if cluster is None or not hasattr(cluster, "scale"):
            raise ValueError("this client's cluster cannot be scaled from here")
        cluster.scale(n_workers)

    def dashboard(self, refresh_seconds: float | None = None):
        """The live ipywidgets dashboard of this tournament (needs ``ipywidgets``).

        One per tournament: ``t.dashboard()``, and ``t`` (or ``t.start()``) as a cell's
        last line, show the same widget until it is closed, so a kernel never runs two
        refresh threads for one tournament. ``refresh_seconds`` (default 1 s) sets its
        refresh interval; ``0`` stops the background refresh.
        """
        from elegantpod.widgets.dashboard import Dashboard

        shown = self._shown
        if shown is not None and not shown.is_closed:
            # also restarts the refresh of a tournament started again after it ended
            shown.set_refresh(shown.refresh_seconds if refresh_seconds is None else refresh_seconds)
            return shown
        interval = 1.0 if refresh_seconds is None else refresh_seconds
        self._shown = Dashboard(self, refresh_seconds=interval)
        return self._shown

    def _repr_html_(self) -> str:
        from elegantpod.widgets.html import baselines_html, leaderboard_html

        s = self.summary()
        title = f"Tournament on {self.spec.env_id}: {s['status']}, {s['pods_total']} pods"
        board = self.leaderboard
        footer = baselines_html(
            self.baselines(),
            s["best_score"],
            self.spec.fitness,
            board.attrs.get("trials"),
            board.attrs.get("validation_days"),
        )
        return leaderboard_html(board, title, footer, hparams=self.leaderboard_hparams())

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            # One dashboard for all displays of this tournament: each would otherwise
            # start a refresh thread of its own that nothing closes.
            return self.dashboard().widget._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        s, spec = self.summary(), self.spec
        best = "no score yet"
        if s["best_pod"] is not None:
            best = f"best {spec.fitness} {_number(s['best_score'])} by {s['best_pod']}"
        return (
            f"Tournament({spec.env_id}, {'+'.join(spec.algos)}, {spec.pods} pods: "
            f"{s['status']}, {s['pods_total']} made, {s['env_steps_total']:,} env steps in "
            f"{s['wall_seconds']:,.0f} s, {best}; store {s['store']!r})"
        )

    # ------------------------------------------------------------------ helpers
    def _message(self, pod: str) -> list[tuple[str, ControlMessage]]:
        """A pod's control message (call with the lock held; publish after releasing it)."""
        return [(pod, control_message(self.population.record(pod), self._stop_requested))]


def _number(x) -> str:
    """A score as a person reads it (four significant digits), ``-`` for none."""
    if not isinstance(x, int | float) or not math.isfinite(x):
        return "-"
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


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


__all__ = ["ACTIVE", "Tournament"]
