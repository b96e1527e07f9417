"""``Tournament``: the notebook-facing facade over one engine.

The :class:`~elegantpod.tournament.client.engine.Engine` (held, not inherited) drives the
tournament on a background thread, segments in flight on every worker slot, and owns
the parts: the population (every decision, pure), the runner (every Dask call), the
saver (snapshots through the store's lease). One lock guards the population, and
nothing waits on the network or the store while holding it: a button click never
queues behind a slow scheduler or bucket. Every public method is safe from any thread
and is what the dashboard's buttons call.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.envs.registry import env_hooks
from elegantpod.number_text import number
from elegantpod.tournament.assembly import assemble, empty_store, replace_tournament
from elegantpod.tournament.best_agent import load_best
from elegantpod.tournament.client.engine import Engine
from elegantpod.tournament.client.runner import scale_cluster, tournament_cluster_info
from elegantpod.tournament.core import views
from elegantpod.tournament.core.protocol import TournamentStatus
from elegantpod.tournament.core.rules import check_rules
from elegantpod.tournament.core.spec import TOURNAMENT, lone_pods_warning, make_spec
from elegantpod.tournament.store.saved import SavedTournament
from elegantpod.tournament.store.store import Store
from elegantpod.widgets.html import ENV_COLUMNS

PROGRESS_SECONDS = 10.0
"""How often :meth:`Tournament.wait` prints a progress line (when something changed)."""


class TournamentFailed(RuntimeError):
    """A tournament ended ``failed``; :attr:`summary` is its :meth:`Tournament.summary`."""

    def __init__(self, summary: dict[str, Any]):
        self.summary = summary
        super().__init__(f"tournament failed: {summary.get('error') or 'see its pods'}")


class Tournament:
    """A population of pods trained asynchronously on a Dask cluster.

    Parameters
    ----------
    env
        Env id every pod trains on: one of elegantpod's, gymnasium's, or one you
        registered in this process (``gymnasium.register`` or
        :func:`~elegantpod.envs.register_env`: the tournament ships it to its workers,
        those that join later included), or the env itself: a ``gymnasium.Env`` class or
        a factory that returns one (registered as ``<name>-v0``), or a
        :class:`~elegantpod.envs.base.TorchVecEnv` class (registered under its name). A
        resume needs the same registration in its process.
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
        (new_hparams, mutation)`` like :func:`elegantpod.tournament.core.generator.mutate`
        (the default); its results are checked like any hyperparameters. Not saved in
        the store: pass it again to :meth:`resume`.
    loggers
        Experiment tracking (:mod:`elegantpod.tracking` loggers, or ``"tensorboard"``...):
        a run per pod, logged from this process; not saved: pass them to :meth:`resume`.
    overwrite
        Replace the tournament ``store`` already holds (as ``train(overwrite=True)``
        replaces a run): its spec, state, leaderboard and checkpoints are deleted once
        every other argument has been checked, and never while a running tournament
        holds the store's lease. ``False``: such a store is refused.
    **options
        Any other :class:`TournamentSpec` field (``segment_steps``, ``leaderboard_size``,
        ``seed``, ``hparams``, ``generator``...).

    Raises
    ------
    ValueError
        For a bad argument (naming the unknown keyword and the close matches) or a store
        that holds another tournament, before any cluster work.

    Examples
    --------
    >>> import elegantpod
    >>> client = elegantpod.cluster(n_workers=2, dashboard_address=None)
    >>> t = elegantpod.Tournament(
    ...     "CartPole-v1", algos=["ppo"], pods=2, client=client,
    ...     max_steps=16_000, segment_steps=4_000, store=elegantpod.workdir("doc-example"),
    ... )
    >>> summary = t.start().wait()  # or t.dashboard() in a notebook, while it runs
    >>> summary["pods_finished"] >= 2 and summary["best_score"] is not None
    True
    >>> policy = elegantpod.Policy.from_pod(t.best())  # the leader, apart from the pod
    >>> elegantpod.shutdown(client)
    """

    def __init__(
        self,
        env,
        algos=TOURNAMENT.algos,
        pods: int = TOURNAMENT.pods,
        *,
        store,
        client=None,
        target_reward: float | None = TOURNAMENT.target_reward,
        max_seconds: float | None = TOURNAMENT.max_seconds,
        max_steps: int | None = TOURNAMENT.max_steps,
        mutation_policy=None,
        loggers=None,
        overwrite: bool = False,
        _resuming: tuple[SavedTournament, bool] | None = None,
        **options: Any,
    ):
        if _resuming is not None:  # Tournament.resume: the store's spec, checked
            saved, force = _resuming
            engine = assemble(saved.spec, store, client, mutation_policy, saved, force, loggers)
            self._attach(engine)
            self.resume_changes = dict(saved.changes)
            return
        from elegantpod.envs.user_gym import as_env_id

        env = as_env_id(env)
        spec = make_spec(
            env_id=env,
            algos=algos,
            pods=pods,
            target_reward=target_reward,
            max_seconds=max_seconds,
            max_steps=max_steps,
            **options,
        )
        check_rules(spec.generator.rules)  # registered here: before the store is made
        s = empty_store(store, env, overwrite=overwrite)
        engine = assemble(spec, s, client, mutation_policy, loggers=loggers)
        if overwrite:  # every argument checked: only now does the old tournament go
            replace_tournament(s)
        lone = lone_pods_warning(spec.algos, spec.pods)
        if lone is not None:
            warnings.warn(lone, UserWarning, stacklevel=2)
        self._attach(engine)

    def _attach(self, engine: Engine) -> None:
        self.engine = engine
        """The background loop and the run's state (runner, lease, saving, status): what
        :meth:`start` starts. The views and buttons here are all a user needs."""
        self.spec, self.store, self.population = engine.spec, engine.store, engine.population
        self._lock = engine.lock
        self.id = engine.id
        """This run's key on the cluster (tasks, Variables, topics)."""
        self.uid = engine.uid
        """The tournament's identity, saved in its store and kept by a resume: every
        checkpoint it writes names it, and a checkpoint naming another is refused."""
        self._baselines: dict[str, float] | None = None
        self.resume_changes: dict[str, list] = {}
        """Spec fields a resume changed, ``{field: [old, new]}`` (the CLI prints them)."""
        self._shown = None  # the dashboard that display(t) shows

    @classmethod
    def resume(
        cls,
        store,
        client=None,
        *,
        mutation_policy=None,
        loggers=None,
        force: bool = False,
        allow_remote: bool = False,
        **overrides: Any,
    ) -> Tournament:
        """Continue the tournament saved in ``store`` (after a kernel or cluster restart).

        Returns a tournament that has not started yet: call :meth:`start`. ``overrides``
        may change the budgets and the fields in
        :data:`~elegantpod.tournament.core.spec.RESUME_CHANGEABLE` (listed in
        ``resume_changes``); any other field given must equal the store's. ``force``
        takes over the store's lease from a writer that is gone. Everything read from
        the store is checked like user input first, and data files or URLs that its
        ``env_kwargs`` name are used only if you pass them again (``env_kwargs=...``)
        or say ``allow_remote=True``.
        """
        s = Store(store)
        saved = SavedTournament.read(s, overrides, allow_remote, given=str(store))
        spec = saved.spec
        return cls(
            spec.env_id,
            spec.algos,
            spec.pods,
            store=s,
            client=client,
            mutation_policy=mutation_policy,
            loggers=loggers,
            _resuming=(saved, force),
        )

    # ------------------------------------------------------------------ control
    def stop(self, pod: str | None = None) -> None:
        """Stop one pod (it checkpoints and ends), or with no argument the tournament.

        A tournament stopped this way ends with :attr:`status` ``stopped`` once its
        running pods have checkpointed (``wait()`` returns then); ``resume`` continues it.
        """
        if pod is None:
            self.engine.request_stop(by_user=True)
            return
        with self._lock:
            if not self.population.stop_pod(pod, self.engine.is_in_flight(pod)):
                return
            msg = self.engine.message(pod)
        self.engine.publish(msg)

    def pause(self, pod: str) -> None:
        """Pause a pod: it holds its worker slot but stops stepping, within a second."""
        with self._lock:
            msg = self.engine.message(pod) if self.population.pause(pod) else []
        self.engine.publish(msg)

    def unpause(self, pod: str) -> None:
        """Let a paused pod go on stepping (the opposite of :meth:`pause`; :meth:`resume`
        is another thing: it continues a tournament saved in a store)."""
        with self._lock:
            changed = self.population.unpause(pod, self.engine.is_in_flight(pod))
            msg = self.engine.message(pod) if changed else []
        self.engine.publish(msg)

    def mutate(self, pod: str, **hparams: Any) -> dict[str, Any]:
        """Change hyperparameters of a pod; a running pod applies them live.

        Raises ``ValueError`` naming an unknown hyperparameter or a bad value; the pod
        is untouched then. Returns the pod's new hyperparameters.
        """
        with self._lock:
            rec = self.population.mutate(pod, **hparams)
            msg, new = self.engine.message(pod), dict(rec.hparams)
            self.engine.changed()
        self.engine.publish(msg)
        self.engine.save(force=True)
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
            running = self.engine.status == TournamentStatus.RUNNING
            msg = self.engine.message(rec.pod_id) if running else []
            self.engine.changed()
        self.engine.publish(msg)
        self.engine.save(force=True)
        return rec.pod_id

    def start(self, client=None, *, close_client: bool | None = None) -> Tournament:
        """Start (or continue) the tournament in the background and return it at once.

        ``client`` replaces the one given at construction; ``close_client=True`` closes
        it (and its cluster) when the tournament ends, as for the embedded default.
        Raises :class:`~elegantpod.tournament.store.lease.LeaseError` if another tournament
        writes this store.

        What the baselines and the env's leaderboard columns read from files (a trading
        tournament's market data) is read here, once, rather than by the first refresh
        of a dashboard or the command line's last lines.
        """
        spent = self._spent_budget()
        if spent is not None:
            raise ValueError(
                f"this tournament's budget is spent ({spent}): resume it with a larger "
                "one (Tournament.resume(store, max_steps=...), or --max-steps / "
                "--max-seconds / --target-reward with --resume) to train on"
            )
        self.baselines()
        self.leaderboard  # noqa: B018 (read for its side effect: the env's data is kept)
        self.engine.start(client, close_client=close_client)
        return self

    def _spent_budget(self) -> str | None:
        """What already ends this tournament before it starts (a resume of a finished
        one with the same budget), in words; ``None`` if it has budget left."""
        s, p = self.spec, self.population
        if p.solved and s.target_reward is not None:
            return f"it reached target_reward={s.target_reward:g}"
        if s.max_steps is not None and p.total_steps >= s.max_steps:
            return f"{p.total_steps:,} env steps of max_steps={s.max_steps:,}"
        elapsed = self.engine.elapsed()
        if s.max_seconds is not None and elapsed >= s.max_seconds:
            return f"{elapsed:,.0f} s of max_seconds={s.max_seconds:g}"
        return None

    def wait(self, timeout: float | None = None, progress: bool | None = None) -> dict[str, Any]:
        """Block until the tournament ends (or ``timeout``); return :meth:`summary`.

        ``progress``: print a line to stderr every :data:`PROGRESS_SECONDS` while
        waiting, when something changed (best score, pods in flight, env steps), as the
        command line does; ``None`` (default): when a script runs in a terminal (a
        notebook has the dashboard, a batch job's log stays quiet), as ``train`` does.

        Raises
        ------
        TournamentFailed
            If the tournament ended ``failed`` (every pod failed, the store or the
            cluster gave out): a script that only calls ``t.start().wait()`` must not
            carry on (or exit 0) as if it trained. The summary is its ``summary``.
        """
        from elegantpod.tournament.progress import follow
        from elegantpod.training import watching

        if progress is None:
            progress = watching() and "IPython" not in sys.modules
        remaining = timeout
        if progress:
            until = None if timeout is None else time.monotonic() + timeout
            follow(self, every=PROGRESS_SECONDS, until=until)
            remaining = None if until is None else max(0.0, until - time.monotonic())
        self.engine.wait(remaining)
        summary = self.summary()
        if summary["status"] == TournamentStatus.FAILED:
            raise TournamentFailed(summary)
        return summary

    # ------------------------------------------------------------------ views
    @property
    def client(self):
        """The ``distributed.Client`` pods run on (``None`` before :meth:`start` made one)."""
        return self.engine.client

    @property
    def warning(self) -> str | None:
        """What goes wrong right now while training goes on (a failing store, a scheduler
        hiccup, a worker that stopped answering, an unusable leaderboard entry, a failing
        tracking logger), or ``None``."""
        engine = self.engine
        return engine.warning or engine.workers_warning or engine.tracker.warning

    @property
    def saved(self) -> bool:
        """Whether the store holds the state :meth:`summary` reports."""
        return self.engine.saver.saved

    @property
    def worker_deaths_survived(self) -> int:
        """Worker deaths that hit a running segment (the scheduler's count), all runs."""
        return self.engine.worker_deaths_survived

    @property
    def status(self) -> str:
        """``created``, ``running``, ``finished`` (its budget or target reached),
        ``stopped`` (:meth:`stop` or Ctrl-C ended it first) or ``failed``."""
        return self.engine.status

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
        :class:`~elegantpod.envs.hooks.EnvHooks`), named in the frame's
        ``attrs["env_columns"]``: a trading tournament ranked by Sharpe ratio has
        ``validation_dsr`` (:mod:`elegantpod.finance.trading.leaderboard`). Cheap to
        read: what those columns need from files is read once (at :meth:`start`).
        """
        with self._lock:
            self.engine.drain_events()
            board = views.leaderboard_frame(self.population, self.store.resolve)
            # every scored evaluation was compared: each is a trial of the selection
            trials = sum(
                1
                for r in self.population.records.values()
                for h in r.history
                if h.get("score") is not None
            )
        extra = env_hooks(self.spec.env_id).leaderboard_columns(board, trials, self.spec)
        for name, values in extra.items():
            board[name] = values
        board.attrs[ENV_COLUMNS] = list(extra)  # what a view shows beside the score
        return board

    def leaderboard_notes(self, board=None) -> list[str]:
        """One line per column the env added to :attr:`leaderboard` that needs
        explaining (its ``leaderboard_notes``: a Sharpe-ranked trading board's
        ``validation_dsr``, with the trials and days it was deflated by). ``board``: a
        leaderboard already read (else it is read now). Empty for most envs."""
        board = self.leaderboard if board is None else board
        return list(env_hooks(self.spec.env_id).leaderboard_notes(board))

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
        stocks (and the S&P 500 index for the shipped sample) over the validation range
        with the tournament's fitness (:mod:`elegantpod.finance.trading.baselines`); else empty.
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
            self.engine.drain_events()
            return self.population.record(pod).to_dict()

    def curves(self, pod: str | None = None) -> list[dict]:
        """Progress events received (all pods, or one), oldest first."""
        with self._lock:
            self.engine.drain_events()
            return self.engine.progress.curves(pod)

    @property
    def pods_in_flight(self) -> int:
        """Segments submitted to the cluster and not yet finished."""
        runner = self.engine.runner
        return runner.in_flight() if runner is not None else 0

    def lineage(self):
        """Parent -> child edges as a DataFrame, like :attr:`pods`: one row per pod, with
        ``pod``, ``parent``, ``algo``, the ``mutation`` that made it (``{name: [old,
        new]}``), its ``origin`` and ``why`` in words, its ``status`` and, for a failed
        pod, its ``error``. ``.to_dict("records")`` gives the rows as dicts."""
        import pandas as pd

        with self._lock:
            rows = views.lineage(self.population)
        # object columns: a founder's parent stays None (pandas' string dtype would
        # make it NaN, and ``row["parent"] is None`` false)
        return pd.DataFrame(rows, columns=views.LINEAGE_COLUMNS, dtype=object)

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

        Each phase is a dict (its keys: :func:`~elegantpod.tournament.core.views.schedule`).
        Its ``score`` is the fitness of the phase's *last* segment, not the best: the
        leaderboard keeps each pod's best evaluation ever, so a phase may end at 93.3
        while the leaderboard shows the same pod at 500.0 (scored mid-phase).
        """
        with self._lock:
            return views.schedule(self.population, None if pod is None else str(pod))

    def summary(self) -> dict[str, Any]:
        """The tournament's outcome so far (what ``elegantpod tournament --json`` prints).

        ``pods_hung`` names the pods whose segment had not returned when the last run's
        grace after its budget ran out (an env that never returns from ``reset`` or
        ``step``, a worker that keeps dying): abandoned, and said in ``warning``; a run
        in which no segment returned ends ``failed``, its ``error`` saying why."""
        with self._lock:
            self.engine.drain_events()
            return views.summary(
                self.population,
                self.store.resolve,
                status=str(self.engine.status),  # plain data, as every value here
                wall_seconds=self.engine.elapsed(),
                worker_deaths_survived=self.engine.worker_deaths_survived,
                store=self.store.url,
                store_bytes=self.engine.saver.store_bytes,
                error=self.engine.error,
                warning=self.warning or self.population.warning,
                saved=self.engine.saver.saved,
                pods_hung=list(self.engine.pods_hung),
            )

    def best(self, device: str | None = None):
        """The best agent, loaded from its checkpoint, as a :class:`~elegantpod.pod.pod.Pod`.

        The checkpoint is checked against its leaderboard entry first (env, algorithm,
        this tournament, the entry's pod): one that fails is marked unusable (never best,
        never a parent) and the next entry is tried. Raises ``ValueError`` when no entry
        is left.
        """
        return load_best(self.engine, device)

    def cluster_info(self) -> dict[str, Any]:
        """Workers, threads, memory, GPUs, their worker processes, pods per GPU, whether
        CUDA MPS runs, pod slots, pods in flight and the Dask dashboard link."""
        return tournament_cluster_info(self.client, self.engine.runner)

    def scale(self, n_workers: int) -> None:
        """Ask the cluster for ``n_workers`` workers (LocalCluster, Gateway, Kubernetes...)."""
        scale_cluster(self.client, n_workers)

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
        return tournament_html(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            # One dashboard for all displays of this tournament: each would otherwise
            # start a refresh thread of its own that nothing closes.
            return self.dashboard().widget._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return tournament_text(self)


__all__ = ["Tournament"]


# ----------------------------------------------------------------------
# How a tournament shows itself: the static HTML table a notebook falls back to, and the
# one-line ``repr`` a terminal prints. Both read only the tournament's public views, and
# every value in the HTML is escaped (:mod:`elegantpod.widgets.html`).


def tournament_html(t) -> str:
    """The leaderboard with its baselines, as escaped static HTML (no ipywidgets needed)."""
    from elegantpod.widgets.html import baselines_html, leaderboard_html

    s, spec = t.summary(), t.spec
    title = f"Tournament on {spec.env_id}: {s['status']}, {s['pods_total']} pods"
    board = t.leaderboard
    notes = t.leaderboard_notes(board)
    footer = baselines_html(t.baselines(), s["best_score"], spec.fitness, notes)
    return leaderboard_html(board, title, footer, hparams=t.leaderboard_hparams())


def tournament_text(t) -> str:
    """One line: env, algorithms, status, pods made, env steps, time, best and store."""
    s, spec = t.summary(), t.spec
    best = "no score yet"
    if s["best_pod"] is not None:
        best = f"best {spec.fitness} {number(s['best_score'])} by {s['best_pod']}"
    return (
        f"Tournament({spec.env_id}, {'+'.join(spec.algos)}, {spec.pods} pods: "
        f"{s['status']}, {s['pods_total']} made, {s['env_steps_total']:,} env steps in "
        f"{s['wall_seconds']:,.0f} s, {best}; store {s['store']!r})"
    )
