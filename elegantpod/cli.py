"""Command line: ``elegantpod train | tournament | backtest | demo``."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys

from elegantpod.checks import parse_assignments


def _import_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        default=[],
        help="import MODULE first (it may call register_algo / register_env): an installed "
        "module, one in the working folder, or a path to a .py file; repeatable",
    )


def _drop_working_folder() -> None:
    """Take the working folder off ``sys.path``.

    ``python -m`` puts it first, so any ``sympy.py`` lying there would run when torch
    imports sympy, though the user only ran ``elegantpod train``. Only ``--import`` puts
    a folder back (:func:`_import_modules`).
    """
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the working folder was deleted
        here = None
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]


def _import_modules(names: list[str]) -> None:
    """Import user modules that register their own algorithms or envs, before any check.

    ``--import mymodule`` finds an installed module, else ``./mymodule.py``;
    ``--import plugins/mymodule.py`` imports that file. Its folder joins the *end* of
    ``sys.path`` (Dask workers started later inherit it), so it adds modules but never
    shadows an installed one.
    """
    import importlib

    for name in names:
        module, folder = name, os.getcwd()
        if name.endswith(".py") or os.sep in name:
            module = os.path.splitext(os.path.basename(name))[0]
            folder = os.path.dirname(os.path.abspath(name))
            if not os.path.isfile(name):
                raise ValueError(f"cannot import {name!r}: no such file")
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            importlib.import_module(module)
        except SystemExit as exc:  # it would end the run having done nothing
            raise ValueError(
                f"cannot import {name!r}: it called sys.exit({exc.code!r}) while importing"
            ) from None
        except Exception as exc:
            raise ValueError(f"cannot import {name!r}: {type(exc).__name__}: {exc}") from exc


def _parser() -> argparse.ArgumentParser:
    from elegantpod import __version__

    p = argparse.ArgumentParser(prog="elegantpod", description="Cloud-native deep RL pods.")
    p.add_argument("--version", action="version", version=f"elegantpod {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one pod")
    _import_option(t)
    t.add_argument("--env", required=True, help="native or gymnasium env id")
    t.add_argument(
        "--algo", required=True, help="ppo, sac, td3, ddpg, dqn, or one registered by --import"
    )
    t.add_argument("--num-envs", type=int, default=None, help="parallel sub-envs")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-steps", type=int, default=None, help="env-step budget")
    t.add_argument("--max-seconds", type=float, default=None, help="wall-clock budget")
    t.add_argument(
        "--target-reward", type=float, default=None, help="stop when eval mean reaches it"
    )
    t.add_argument("--set", action="append", metavar="KEY=VALUE", default=[], help="hyperparameter")
    t.add_argument(
        "--device",
        default="auto",
        help="auto (default: the GPU if torch sees one, else the CPU), cpu, cuda, cuda:N, mps",
    )
    t.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads; default on a CPU: 1, or $OMP_NUM_THREADS if set; 0: torch's own",
    )
    t.add_argument("--out", default=None, help="directory for checkpoint, spec and result")
    t.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    t.add_argument("--resume", action="store_true", help="continue the run in --out")
    t.add_argument("--json", action="store_true", help="print the result as one JSON line")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--learners", type=int, default=1, help="fused learners (paper 4.3)")
    _env_options(t)
    r = sub.add_parser("tournament", help="run a tournament of pods on Dask")
    _import_option(r)
    r.add_argument(
        "--env", default=None, help="native or gymnasium env id (with --resume: the store's)"
    )
    r.add_argument(
        "--algos", default=None, help="comma-separated algorithms, e.g. ppo,sac (default ppo)"
    )
    r.add_argument("--pods", type=int, default=None, help="population size (default 4)")
    where = r.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, help="local worker processes")
    where.add_argument("--address", default=None, help="existing Dask scheduler address")
    r.add_argument("--target-reward", type=float, default=None)
    r.add_argument("--max-seconds", type=float, default=None)
    r.add_argument("--max-steps", type=int, default=None, help="env steps over all pods")
    r.add_argument(
        "--segment-steps",
        type=int,
        default=None,
        help="env steps per segment (default: the algorithm's own, unless --segment-seconds "
        "is given); with --resume: changes the store's",
    )
    r.add_argument(
        "--segment-seconds",
        type=float,
        default=None,
        help="wall seconds per segment. A segment is one pod's turn on a worker: it trains, "
        "is evaluated and checkpointed, then the tournament ranks it and may replace it by a "
        "mutated child of a better pod; it ends at --segment-steps or --segment-seconds, "
        "whichever comes first. With --resume: changes the store's",
    )
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--store", required=True, help="directory or fsspec URL of the tournament")
    r.add_argument("--resume", action="store_true", help="continue the tournament in --store")
    r.add_argument(
        "--force",
        action="store_true",
        help="with --resume: take the store over from a writer that is gone (its lease)",
    )
    r.add_argument(
        "--allow-remote",
        action="store_true",
        help="with --resume: read the data files or URLs the store's spec names (only for a "
        "store you trust; not needed for your own store naming your own data file)",
    )
    r.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    r.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    r.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation")
    r.add_argument(
        "--set",
        action="append",
        metavar="ALGO.KEY=VALUE",
        default=[],
        help="base hyperparameter of one algorithm's pods, e.g. ppo.lr=3e-4 sac.hidden=[256,256]",
    )
    r.add_argument(
        "--device",
        default=None,
        help="torch device in each pod; default auto: the worker's GPU if it has one",
    )
    r.add_argument(
        "--pods-per-gpu",
        type=int,
        default=None,
        help="pods sharing one GPU (1, 2, 4...); default: from the GPU's memory",
    )
    _env_options(r)
    b = sub.add_parser("backtest", help="backtest a trading agent and write its report")
    _import_option(b)
    b.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint of a StockTrading-v0 agent, a run folder, or a tournament's store "
        "(its best agent); a checkpoint inside a store is deflated by the store's selection",
    )
    b.add_argument(
        "--trials",
        type=int,
        default=None,
        help="agents the selection tried, for the deflated Sharpe ratio (default: what the "
        "store records; unknown for a checkpoint from train)",
    )
    b.add_argument(
        "--allow-remote",
        action="store_true",
        help="read the data file or URL the checkpoint names (only for one you trust; not "
        "needed for your own checkpoint naming your own data file)",
    )
    b.add_argument("--data", default=None, help="market data (default: the agent's own)")
    b.add_argument(
        "--start",
        default=None,
        help="first day, YYYY-MM-DD (default: the day after the agent's validation end)",
    )
    b.add_argument("--end", default=None, help="last day, YYYY-MM-DD")
    b.add_argument(
        "--index",
        default=None,
        help="index benchmark: 'sp500' (built in) or a local CSV of levels (no URLs)",
    )
    b.add_argument("--name", default=None, help="the agent's name in the report")
    b.add_argument("--html", default=None, help="write the HTML report here")
    b.add_argument("--device", default="cpu")
    b.add_argument(
        "--env-arg", action="append", metavar="KEY=VALUE", default=[], help="env override"
    )
    b.add_argument(
        "--allow-in-sample",
        action="store_true",
        help="run a range that overlaps the agent's training or validation dates "
        "(labelled in-sample); by default such a range is refused",
    )
    b.add_argument("--json", action="store_true", help="print the result as one JSON line")
    d = sub.add_parser("demo", help="the showcase run on the embedded default")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--max-seconds", type=float, default=150.0)
    d.add_argument("--out", default=None, help="folder for the store and report")
    return p


def _env_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env-arg",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="env keyword, e.g. data=sp500 start=1990-01-01 (values parsed as JSON if they can be)",
    )
    p.add_argument(
        "--eval-env-arg",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="override for the evaluation env, e.g. start=2016-01-01 episode_days=null",
    )
    p.add_argument("--fitness", default="return", help="return, sharpe, calmar, sortino...")


def env_kwargs(items: list[str]) -> dict:
    """``["start=2016-01-01", "episode_days=null"]`` -> ``{"start": "2016-01-01",
    "episode_days": None}``: values that parse as JSON are taken as JSON."""
    import json

    out = {}
    for key, text in parse_assignments(items).items():
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def algo_hparams(items: list[str]) -> dict[str, dict[str, str]]:
    """``["ppo.lr=3e-4", "sac.tau=0.01"]`` -> ``{"ppo": {"lr": "3e-4"}, "sac": {...}}``:
    a tournament's base hyperparameters per algorithm (checked by the tournament)."""
    out: dict[str, dict[str, str]] = {}
    for key, value in parse_assignments(items).items():
        algo, dot, name = key.partition(".")
        if not dot or not algo or not name:
            raise ValueError(
                f"--set expects ALGO.KEY=VALUE in a tournament (e.g. ppo.lr=3e-4), got {key!r}"
            )
        out.setdefault(algo.lower(), {})[name] = value
    return out


def _train(args) -> int:
    from elegantpod.training import result_json, train

    hparams = parse_assignments(args.set)
    num_envs = args.num_envs
    if "num_envs" in hparams:  # a hyperparameter, and train()'s own keyword
        text = hparams.pop("num_envs")
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"num_envs must be an integer, got {text[:200]!r}") from None
        if num_envs is not None and num_envs != value:
            raise ValueError(f"--set num_envs={value} and --num-envs {num_envs} disagree")
        num_envs = value
    import inspect

    taken = [k for k in hparams if k in inspect.signature(train).parameters]
    if taken:
        flag = "--" + taken[0].replace("_", "-")
        raise ValueError(f"--set {taken[0]}=... is not a hyperparameter: use {flag}")
    result = train(
        args.env,
        args.algo,
        seed=args.seed,
        num_envs=num_envs,
        max_steps=args.max_steps,
        max_seconds=args.max_seconds,
        target_reward=args.target_reward,
        device=args.device,
        threads=args.threads,
        out=args.out,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not args.quiet,
        env_kwargs=env_kwargs(args.env_arg),
        eval_env_kwargs=env_kwargs(args.eval_env_arg),
        fitness=args.fitness,
        learners=args.learners,
        **hparams,
    )
    if args.json:
        print(result_json(result), flush=True)
    else:
        print(train_line(result))
    return 0


def train_line(result) -> str:
    """The line ``elegantpod train`` ends with: the last and the best evaluation, the
    step count formatted as the progress lines format it, and the agent to use."""
    from elegantpod.progress import number

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
    return line + (f"; checkpoint {result.checkpoint}" if result.checkpoint else "")


def _tournament(args) -> int:
    import json

    from elegantpod.checks import json_safe
    from elegantpod.cluster import cluster
    from elegantpod.envs.registry import env_hooks
    from elegantpod.progress import follow, number
    from elegantpod.tournament import Tournament
    from elegantpod.tournament.views import LEADERBOARD_COLUMNS

    budget = {
        "target_reward": args.target_reward,
        "max_seconds": args.max_seconds,
        "max_steps": args.max_steps,
    }
    given = {
        "env": args.env,
        "algos": args.algos,
        "pods": args.pods,
        "seed": args.seed,
        "segment_steps": args.segment_steps,
        "segment_seconds": args.segment_seconds,
        "eval_episodes": args.eval_episodes,
        "device": args.device,
        "pods_per_gpu": args.pods_per_gpu,
        "env_kwargs": env_kwargs(args.env_arg) or None,
        "eval_env_kwargs": env_kwargs(args.eval_env_arg) or None,
        "fitness": None if args.fitness == "return" else args.fitness,
        "hparams": algo_hparams(args.set) or None,
        **budget,
    }
    given = {k: v for k, v in given.items() if v is not None}
    if args.resume:
        # What is given must agree with the store, except budgets and the like, which
        # change visibly; nothing given is silently ignored.
        t = Tournament.resume(args.store, force=args.force, allow_remote=args.allow_remote, **given)
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
            t = Tournament(env, store=args.store, **given)
        for w in caught:  # one line each, not Python's file:line banner
            print(f"elegantpod: warning: {w.message}", file=sys.stderr)
    # All input is checked; only now start (or reach) a cluster.
    t.start(cluster(args.address, n_workers=args.workers), close_client=True)
    guard = _CtrlCStopsTournament(t)
    with guard:
        follow(t, every=None if args.quiet else 2.0)
        summary = t.wait()
    summary = ended_by(summary, guard.pressed)
    if not args.quiet:
        board = t.leaderboard  # once: the notes below read the same board
        cols = ["rank", "pod", "algo", "score_mean", "score_std", "env_steps", "status", "parent"]
        cols += [c for c in board.columns if c not in LEADERBOARD_COLUMNS]  # the env's own
        shown = board[cols].astype(object).where(board[cols].notna(), "-")
        print(
            shown.to_string(index=False, float_format=number, formatters={"env_steps": fmt_steps}),
            file=sys.stderr,
        )
        note = leaderboard_note(list(board["status"]))
        if note:
            print(note, file=sys.stderr)
        for name, score in t.baselines().items():  # what doing nothing scores (trading)
            print(f"baseline  {name}: {number(score)} ({t.spec.fitness})", file=sys.stderr)
        for line in env_hooks(t.spec.env_id).leaderboard_notes(board):
            print(line, file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(summary), sort_keys=True), flush=True)
    else:
        print(summary_line(summary, t.spec.fitness, t.spec.target_reward))
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


def fmt_steps(x) -> str:
    """An env-step count as the progress lines print it (``163,840``)."""
    try:
        return f"{int(x):,}"
    except (TypeError, ValueError):  # "-": none
        return str(x)


def summary_line(summary: dict, fitness: str, target: float | None) -> str:
    """The line a tournament ends with: how it ended (``stopped`` after Ctrl-C), whether
    it reached its target (only when it has one), and its best agent."""
    from elegantpod.progress import number

    line = f"tournament {summary['status']}: "
    if target is not None:
        if summary["solved"]:
            line += f"solved (target {number(target)}), "
        else:
            line += f"target {number(target)} not reached, "
    return line + (
        f"best {fitness} {number(summary['best_score'])} by {summary['best_pod'] or '-'}, "
        f"{fmt_steps(summary['env_steps_total'])} env steps in {summary['wall_seconds']:.1f}s; "
        f"store {summary['store']}"
    )


def leaderboard_note(statuses) -> str | None:
    """The line under a printed leaderboard that explains a ``replaced`` (or stopped,
    failed) status: the leaderboard keeps each pod's best evaluation ever, so its entry,
    and checkpoint, outlive the pod. ``None`` when every pod listed is still around."""
    gone = sorted({s for s in statuses if s in ("replaced", "stopped", "failed")})
    if not gone:
        return None
    return (
        "The leaderboard keeps each pod's best evaluation ever, with its checkpoint: a pod "
        f"{' or '.join(gone)} since keeps its entry (replaced: later on it ranked low among "
        "the live pods, and a new pod took its place)"
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


COMMANDS = {"backtest": "elegantpod.finance.command"}
"""Commands run by the part of the package they serve: the module's ``run(args) -> int``
runs the parsed command, and is imported only then (this module imports no such part)."""


DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
"""Devices the command line accepts."""
MAX_WORKERS = 1024
"""Most local worker processes ``--workers`` starts."""
ADDRESS_SCHEMES = ("tcp://", "tls://", "ucx://")
READ_ONLY_PROTOCOLS = frozenset(
    ("zip", "tar", "libarchive", "http", "https", "github", "gist", "git", "data", "reference")
)
"""fsspec protocols that cannot hold a store: archives and web pages are read-only."""


def max_threads() -> int:
    """Most torch threads ``--threads`` asks for: 4 per core (256 where unknown); tens of
    thousands crash the process (SIGSEGV) in the thread pool."""
    cpus = os.cpu_count()
    return 4 * cpus if cpus else 256


def check_args(args) -> None:
    """Refuse values that would fail late, crash or do something other than asked,
    before any import or cluster work; each error names the value and what is accepted."""
    import re

    device = getattr(args, "device", None)
    if device is not None and not re.fullmatch(r"auto|cpu|mps|cuda(:[0-9]{1,4})?", device):
        raise ValueError(f"unknown device {device[:200]!r}: use one of {', '.join(DEVICES)}")
    threads = getattr(args, "threads", None)
    if threads is not None and not 0 <= threads <= max_threads():
        raise ValueError(
            f"threads must be an integer in 0..{max_threads()} (0: torch's own setting), "
            f"got {threads}"
        )
    workers = getattr(args, "workers", None)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be in 1..{MAX_WORKERS}, got {workers}")
    address = getattr(args, "address", None)
    if address is not None and not (
        address.startswith(ADDRESS_SCHEMES) or re.fullmatch(r"[A-Za-z0-9.\-]+:[0-9]{1,5}", address)
    ):
        raise ValueError(
            f"--address {address[:200]!r}: give a Dask scheduler as "
            f"{', '.join(s + 'host:port' for s in ADDRESS_SCHEMES)} or host:port"
        )
    if getattr(args, "out", None) == "":
        raise ValueError("--out '' names no folder: give a folder (the working one is '.')")
    if getattr(args, "store", None) is not None:
        check_store_argument(args.store)


def check_store_argument(store: str) -> None:
    """A store is a folder (new or existing) or a writable object-store URL."""
    where = store[:200]
    protocols = [part.split("://", 1)[0].lower() for part in store.split("::") if "://" in part]
    if "::" in store and not protocols:
        protocols = [store.split("::", 1)[0].lower()]
    refused = [p for p in protocols if p in READ_ONLY_PROTOCOLS]
    if refused:
        raise ValueError(
            f"--store {where!r}: a store must be a folder or an object-store URL "
            f"(s3://, gs://, az://...); {refused[0]}:// is read-only"
        )
    if protocols and protocols != ["file"]:
        return
    path = store.split("://", 1)[1] if protocols else store
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(
            f"--store {where!r} is not a folder: a store must be a folder or an object-store URL"
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input prints one ``error:`` line and exits with status 2, Ctrl-C
    ends with one line on what was kept and how to continue (status 130)."""
    _drop_working_folder()  # before anything imports lazily (torch imports sympy late)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    try:
        check_args(args)
        _import_modules(getattr(args, "imports", []))
        if args.command == "train":
            return _train(args)
        if args.command == "tournament":
            return _tournament(args)
        if args.command in COMMANDS:
            import importlib

            return importlib.import_module(COMMANDS[args.command]).run(args)
        from elegantpod.demo import run_demo

        return run_demo(seed=args.seed, max_seconds=args.max_seconds, out_dir=args.out)
    except ValueError as exc:  # CheckpointError is a ValueError too
        print(f"elegantpod: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        _quiet_dask()
        print(f"elegantpod: {_interrupted(args, argv, exc)}", file=sys.stderr, flush=True)
        return 130


def _interrupted(args, argv: list[str], exc: KeyboardInterrupt) -> str:
    """What Ctrl-C left behind, and the command that continues it."""
    from elegantpod.training import TrainingInterrupted

    if isinstance(exc, TrainingInterrupted):
        if exc.out is None:
            return f"{exc}; nothing was saved (give --out DIR to keep a run)"
        kept = [n for n in ("checkpoint.pt", "best.pt") if (exc.out / n).is_file()]
        return f"{exc}; kept {', '.join(str(exc.out / n) for n in kept)}. " + (
            f"Continue with: {resume_command(argv)}"
        )
    if args.command == "train" and args.out is not None:
        if os.path.isfile(os.path.join(args.out, "checkpoint.pt")):
            return (
                f"interrupted; {args.out} keeps the checkpoint of the last evaluation. "
                f"Continue with: {resume_command(argv)}"
            )
        return "interrupted before the first evaluation: nothing was saved"
    if args.command == "tournament":
        return (
            "interrupted; the store keeps its last snapshot. Continue with: elegantpod "
            f"tournament --store {shlex.quote(args.store)} --resume"
        )
    return "interrupted"


def resume_command(argv: list[str]) -> str:
    """The command line that continues a run: the same arguments, ``--resume`` instead of
    ``--overwrite`` (a budget is a total, so the same ``--max-steps`` goes on to it)."""
    kept = [a for a in argv if a != "--overwrite"]
    if "--resume" not in kept:
        kept.append("--resume")
    return shlex.join(["elegantpod", *kept])


def _quiet_dask() -> None:
    """A closing cluster's workers log their shutdown (nanny 'killing' warnings, tornado
    errors of a loop that is gone); after Ctrl-C the user's terminal gets one line."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


if __name__ == "__main__":
    sys.exit(main())
