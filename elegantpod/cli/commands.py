"""What ``elegantpod train``, ``tournament`` and ``backtest`` do with their parsed
arguments, and the lines they print (``demo`` is :mod:`elegantpod.cli.demo`)."""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys

from elegantpod.checks.overrides import env_kwargs, parse_assignments
from elegantpod.checks.settings import flagged
from elegantpod.cli.args import algo_hparams, search_space_file, tracking_logger
from elegantpod.config import PodSpec


def _from_files(args):
    """What ``--preset`` and ``--config`` set besides flags (empty without them)."""
    from elegantpod.cli.run_config import RunConfig

    return getattr(args, "run_config", None) or RunConfig()


def _train(args) -> int:
    from elegantpod.checks.overrides import coerce_value
    from elegantpod.training import result_json, train

    files = _from_files(args)
    hparams = {**files.train_hparams(args.algo), **parse_assignments(args.set)}
    num_envs = args.num_envs
    if "num_envs" in hparams:  # a hyperparameter, and train()'s own keyword
        value = coerce_value(hparams.pop("num_envs"), int, "num_envs")
        if num_envs is not None and num_envs != value:
            raise ValueError(f"--set num_envs={value} and --num-envs {num_envs} disagree")
        num_envs = value
    import inspect

    taken = [k for k in hparams if k in inspect.signature(train).parameters]
    if taken:
        flag = {"logger": "--track"}.get(taken[0], "--" + taken[0].replace("_", "-"))
        raise ValueError(f"--set {taken[0]}=... is not a hyperparameter: use {flag}")
    files.check_hparams(args.algo, {**hparams, "num_envs": num_envs} if num_envs else hparams)
    settings = {name: getattr(args, name) for name in flagged(PodSpec)}
    result = train(
        args.env,
        args.algo,
        num_envs=num_envs,
        threads=args.threads,
        out=args.out,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not args.quiet,
        env_kwargs={**files.env_kwargs, **env_kwargs(args.env_arg)},
        eval_env_kwargs={**files.eval_env_kwargs, **env_kwargs(args.eval_env_arg)},
        logger=tracking_logger(args),
        **{name: value for name, value in settings.items() if value is not None},
        **hparams,
    )
    if args.json:
        print(result_json(result), flush=True)
    else:
        print(train_line(result))
    return 0


def _export(args) -> int:
    """``elegantpod export``: the policy of a checkpoint, run folder or store (its best
    agent, checked against the store's record) as a file (checked in ``check_args``)."""
    from elegantpod.tournament.deployment import Deployment

    policy = Deployment.of(args.checkpoint).policy
    path = policy.export(args.out, args.export_format)
    print(f"{policy!r} written as {args.export_format} to {path}")
    return 0


def train_line(result) -> str:
    """The line ``elegantpod train`` ends with: the last and the best evaluation, the
    step count formatted as the progress lines format it, and the agent to use."""
    from elegantpod.number_text import number

    status = "solved" if result.solved else "finished"
    line = (
        f"{result.algo} on {result.env}: {status}, eval return "
        f"{result.eval_return_mean:.1f} +- {result.eval_return_std:.1f} after "
        f"{result.env_steps:,} steps in {result.wall_seconds:.1f}s"
    )
    if result.fitness == "return":
        line += f", best {number(result.best_eval_return_mean)}"
    else:
        line += f", {result.fitness} {number(result.score)} (best {number(result.best_score)})"
    if result.best_env_steps is not None:
        line += f" at {result.best_env_steps:,} steps"
    line += f"; checkpoint {result.checkpoint}" if result.checkpoint else ""
    return line + (f"\nstopped early: {result.stopped_early}" if result.stopped_early else "")


def tournament_options(args) -> dict:
    """The keyword arguments of ``Tournament`` (or ``Tournament.resume``) that the flags
    and files give: files first, the flags over them (``--set`` key by key)."""
    from elegantpod.tournament.core.spec import TournamentSpec

    files = _from_files(args)
    hparams = files.tournament_hparams(args.algos if not args.resume else None)
    for algo, given in algo_hparams(args.set).items():
        hparams[algo] = {**hparams.get(algo, {}), **given}
    for algo, values in hparams.items():
        files.check_hparams(algo, values)
    given = {
        **{name: getattr(args, name) for name in flagged(TournamentSpec)},
        "env": args.env,
        "algos": args.algos,
        "env_kwargs": {**files.env_kwargs, **env_kwargs(args.env_arg)} or None,
        "eval_env_kwargs": {**files.eval_env_kwargs, **env_kwargs(args.eval_env_arg)} or None,
        "hparams": hparams or None,
        "search_space": search_space_file(args.search_space) if args.search_space else None,
    }
    if args.rules is not None:  # over the files' generator settings, key by key
        names = [n.strip() for n in args.rules.split(",") if n.strip()]
        rules = [] if names == ["none"] else names
        given["generator"] = {**dict(files.spec_fields.get("generator") or {}), "rules": rules}
    # generator and search_space from the files, under the flags
    return {**files.spec_fields, **{k: v for k, v in given.items() if v is not None}}


def _tournament(args) -> int:
    import json

    from elegantpod.checks.json_values import json_safe
    from elegantpod.clusters.cluster import cluster
    from elegantpod.number_text import number, steps
    from elegantpod.tournament.core.views import LEADERBOARD_COLUMNS
    from elegantpod.tournament.orchestrator import Tournament, TournamentFailed
    from elegantpod.tournament.progress import follow, leaderboard_note

    given = tournament_options(args)
    loggers = [lg for lg in [tracking_logger(args)] if lg is not None]
    if args.resume and args.overwrite:
        raise ValueError(
            "--overwrite replaces the store's tournament; --resume continues it: give one"
        )
    if args.resume:
        # What is given must agree with the store, except budgets and the like, which
        # change visibly; nothing given is silently ignored.
        t = Tournament.resume(
            args.store, force=args.force, allow_remote=args.allow_remote, loggers=loggers, **given
        )
        for key, (old, new) in t.resume_changes.items():
            print(f"resume: {key} {old!r} -> {new!r}", file=sys.stderr)
    else:
        if args.force:
            raise ValueError("--force takes over a store's lease: it goes with --resume")
        if args.allow_remote:
            raise ValueError("--allow-remote reads what a store names: it goes with --resume")
        if args.env is None:
            raise ValueError("--env is required (unless --resume continues a store)")
        if args.target_reward is None and args.max_seconds is None and args.max_steps is None:
            raise ValueError(
                "give at least one end condition: --target-reward, --max-seconds or --max-steps"
            )
        env = given.pop("env")
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            t = Tournament(
                env, store=args.store, loggers=loggers, overwrite=args.overwrite, **given
            )
        for w in caught:  # one line each, not Python's file:line banner
            print(f"elegantpod: warning: {w.message}", file=sys.stderr)
    # All input is checked; only now start (or reach) a cluster.
    t.start(cluster(args.address, n_workers=args.workers), close_client=True)
    guard = _CtrlCStopsTournament(t)
    with guard:
        follow(t, every=None if args.quiet else 2.0)
        try:
            summary = t.wait()
        except TournamentFailed as exc:  # said below, with the leaderboard; exit 1
            summary = exc.summary
    summary = ended_by(summary, guard.pressed)
    if not args.quiet:
        board = t.leaderboard  # once: the notes below read the same board
        cols = ["rank", "pod", "algo", "score_mean", "score_std", "env_steps", "status", "parent"]
        cols += [c for c in board.columns if c not in LEADERBOARD_COLUMNS]  # the env's own
        shown = board[cols].astype(object).where(board[cols].notna(), "-")
        print(
            shown.to_string(index=False, float_format=number, formatters={"env_steps": steps}),
            file=sys.stderr,
        )
        note = leaderboard_note(list(board["status"]))
        if note:
            print(note, file=sys.stderr)
        for name, score in t.baselines().items():  # what doing nothing scores (trading)
            print(f"baseline  {name}: {number(score)} ({t.spec.fitness})", file=sys.stderr)
        for line in t.leaderboard_notes(board):
            print(line, file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(summary), sort_keys=True), flush=True)
    else:
        print(summary_line(summary, t.spec.fitness, t.spec.target_reward))
    if summary.get("warning"):  # what the end found: pods that hung, a save that failed
        print(f"elegantpod: warning: {summary['warning']}", file=sys.stderr)
    if guard.pressed:
        print(
            "elegantpod: stopped by Ctrl-C; the store keeps every finished segment. "
            f"Continue with: elegantpod tournament --store {shlex.quote(args.store)} --resume",
            file=sys.stderr,
        )
        return 130
    if summary["status"] not in ("finished", "stopped"):
        print(f"elegantpod: tournament {summary['status']}: {summary['error']}", file=sys.stderr)
        return 1
    return 0


def ended_by(summary: dict, pressed: bool) -> dict:
    """The summary the command line prints: a tournament that Ctrl-C ended is
    ``stopped``, not ``finished`` (the tournament's own status says it ended cleanly)."""
    if pressed and summary["status"] == "finished":
        return {**summary, "status": "stopped"}
    return summary


def summary_line(summary: dict, fitness: str, target: float | None) -> str:
    """The line a tournament ends with: how it ended (``stopped`` after Ctrl-C), whether
    it reached its target (only when it has one), and its best agent."""
    from elegantpod.number_text import number, steps

    line = f"tournament {summary['status']}: "
    if target is not None:
        if summary["solved"]:
            line += f"solved (target {number(target)}), "
        else:
            line += f"target {number(target)} not reached, "
    return line + (
        f"best {fitness} {number(summary['best_score'])} by {summary['best_pod'] or '-'}, "
        f"{steps(summary['env_steps_total'])} env steps in {summary['wall_seconds']:.1f}s; "
        f"store {summary['store']}"
    )


class _CtrlCStopsTournament:
    """While a tournament runs from the command line, the first Ctrl-C stops it as
    ``Tournament.stop()`` does: nothing new is submitted, running pods checkpoint and
    end within a gradient step, the store is saved and the cluster closed. A second
    Ctrl-C quits at once (the store keeps its last snapshot)."""

    def __init__(self, t):
        self.t, self.pressed, self.previous = t, False, None

    def _on_sigint(self, signum, frame):
        # the stop first: printing could fail if the signal landed mid-write to stderr
        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.t.stop()
        with contextlib.suppress(RuntimeError):  # a reentrant write to stderr
            print(
                "\nelegantpod: stopping: running pods save their work (Ctrl-C again to quit now)",
                file=sys.stderr,
                flush=True,
            )

    def __enter__(self):
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        # None: a handler installed from C, which Python cannot put back
        self.previous = signal.default_int_handler if previous is None else previous
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)
        return False
