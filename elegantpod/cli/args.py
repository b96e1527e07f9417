"""The command line's arguments: the parser and its ``KEY=VALUE`` lists.

Apart from :mod:`elegantpod.cli.main` (the entry point), :mod:`elegantpod.cli.checks` (the
checks that refuse a bad value before any work) and :mod:`elegantpod.cli.commands`
(what each command does), so each stays short.
"""

from __future__ import annotations

import argparse
import os

from elegantpod.checks.overrides import parse_assignments


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


def _run_file_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="read options from FILE (YAML or JSON): keys are the long options below "
        "(max_steps or max-steps), plus hparams; a spec.json or tournament.json repeats "
        "that run. Flags given here override the file, which overrides --preset",
    )
    p.add_argument(
        "--preset",
        metavar="NAME",
        default=None,
        help="start from a shipped preset (mujoco, mjx, box2d, trading; "
        "'elegantpod presets' lists them)",
    )


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``elegantpod`` command's argument parser, subcommands and all: what the
    console script parses, and what the docs site's command-line reference prints.

    ``command``: the one about to run, whose flags must all be there; the tournament's
    setting flags are then left out of any other command's parser. Why: they are read
    from :class:`~elegantpod.tournament.core.spec.TournamentSpec`, whose layer imports
    torch and Dask (two seconds), and ``--version``, ``--help``, ``presets``, ``train``,
    ``export`` or ``backtest`` need neither to parse. ``None``: every flag (the docs'
    reference, the tests)."""
    from elegantpod import __version__
    from elegantpod.config import PodSpec  # light: checks and devices only

    p = argparse.ArgumentParser(prog="elegantpod", description="Cloud-native deep RL pods.")
    p.add_argument("--version", action="version", version=f"elegantpod {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one pod")
    _import_option(t)
    _run_file_options(t)
    t.add_argument("--env", default=None, help="native or gymnasium env id (required)")
    t.add_argument(
        "--algo",
        default=None,
        help="ppo, sac, td3, ddpg, dqn, or one registered by --import (required)",
    )
    t.add_argument("--num-envs", type=int, default=None, help="parallel sub-envs")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", default=[], help="hyperparameter")
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
    add_settings(t, PodSpec)
    _env_options(t)
    _track_options(t)
    r = sub.add_parser("tournament", help="run a tournament of pods on Dask")
    _import_option(r)
    _run_file_options(r)
    r.add_argument(
        "--env", default=None, help="native or gymnasium env id (with --resume: the store's)"
    )
    r.add_argument(
        "--algos", default=None, help="comma-separated algorithms, e.g. ppo,sac (default ppo)"
    )
    where = r.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, help="local worker processes")
    where.add_argument("--address", default=None, help="existing Dask scheduler address")
    r.add_argument(
        "--store", default=None, help="directory or fsspec URL of the tournament (required)"
    )
    r.add_argument("--resume", action="store_true", help="continue the tournament in --store")
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the tournament --store holds (never one a running tournament writes)",
    )
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
    r.add_argument(
        "--set",
        action="append",
        metavar="ALGO.KEY=VALUE",
        default=[],
        help="base hyperparameter of one algorithm's pods, e.g. ppo.lr=3e-4 sac.hidden=[256,256]",
    )
    r.add_argument(
        "--search-space",
        metavar="FILE",
        default=None,
        help='JSON or YAML file of the search space per algorithm, e.g. {"ppo": {"lr": '
        '{"loguniform": [1e-4, 1e-2]}, "epochs": {"choice": [2, 4, 8]}}} (see '
        "elegantpod.search); over each learner's own",
    )
    r.add_argument(
        "--rules",
        default=None,
        metavar="NAMES",
        help="selection rules, comma-separated, asked in order at each segment's end: "
        "restart,exploit (the default tournament), restart (restart-only), restart,copy "
        "(copy the leader's weights, keep its hyperparameters), none (no pod is ever "
        "replaced: a sweep with --init base, random search with --init sample), or names "
        "given to register_rule by an --import module",
    )
    if command in (None, "tournament"):
        from elegantpod.tournament.core.spec import TournamentSpec  # torch and Dask

        add_settings(r, TournamentSpec, resumable=True)
    _env_options(r)
    _track_options(r)
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
    x = sub.add_parser("export", help="write a trained policy as ONNX, torch.export or TorchScript")
    _import_option(x)
    x.add_argument("--checkpoint", required=True, help="a checkpoint file or a run folder")
    x.add_argument(
        "--format",
        dest="export_format",
        default=None,
        help="onnx, export (torch.export, .pt2) or torchscript; default: --out's suffix, else onnx",
    )
    x.add_argument(
        "--out",
        default=None,
        help="the file to write (default: policy.<suffix> beside the checkpoint)",
    )
    c = sub.add_parser(
        "compare",
        help="compare methods over their runs (Kaplan-Meier, RMST and IQMs with intervals, "
        "paired or unpaired tests Holm-adjusted over a family) and write the HTML report",
    )
    _import_option(c)
    c.add_argument(
        "--method",
        nargs="+",
        action="append",
        metavar=("NAME", "RUN"),
        required=True,
        dest="methods",
        help="a method's name, then its runs: tournament stores (folders or URLs) or single "
        "pods' output folders; repeat for each method (the first is compared against the rest)",
    )
    c.add_argument(
        "--target",
        type=float,
        default=None,
        help="the score that counts as solved (default: the stores' target_reward)",
    )
    c.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds each run is judged on (default: the stores' max_seconds, else the "
        "longest run)",
    )
    c.add_argument("--title", default=None, help="the report's title")
    c.add_argument("--html", default=None, help="write the HTML report here")
    c.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (a README's)"
    )
    c.add_argument("--json", action="store_true", help="print every figure as one JSON line")
    c.add_argument(
        "--family",
        choices=("reference", "all"),
        default="reference",
        help="the comparisons tested together, Holm-adjusted: the first method against each "
        "other (default) or every pair",
    )
    c.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("METHOD", "OTHER"),
        default=None,
        help="declare the family pair by pair instead (repeat)",
    )
    c.add_argument(
        "--alternative",
        choices=("two-sided", "less", "greater"),
        default="two-sided",
        help="what each test is for (less: the method is faster)",
    )
    c.add_argument("--level", type=float, default=0.05, help="the family-wise level (default 0.05)")
    c.add_argument(
        "--paired",
        choices=("auto", "yes", "no"),
        default="auto",
        help="pair runs by seed: where both methods ran the same seeds (auto), required, or never",
    )
    sub.add_parser("presets", help="list the presets that --preset takes")
    d = sub.add_parser("demo", help="the showcase run on the embedded default")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--max-seconds", type=float, default=150.0)
    d.add_argument(
        "--max-steps", type=int, default=None, help="an env-step budget too (whichever first)"
    )
    d.add_argument("--out", default=None, help="folder for the store and report")
    return p


def add_settings(p: argparse.ArgumentParser, spec_cls: type, *, resumable: bool = False) -> None:
    """A flag for each setting ``spec_cls`` declares with ``flag=True``
    (:mod:`elegantpod.checks.settings`): ``--eval-episodes``, typed by its annotation,
    its help and default from its declaration. Every such flag defaults to ``None``
    (not given): the spec's own default stands then, and a resume keeps the store's.
    ``resumable``: the command resumes a store, and the help says which settings a
    resume may change."""
    from elegantpod.checks.settings import defaults, flagged, kind

    default = vars(defaults(spec_cls))
    for name, s in flagged(spec_cls).items():
        of, _ = kind(spec_cls, name)
        shown = default.get(name)
        note = "" if shown is None else f" (default: {_shown(shown)})"
        if resumable and s.resume:
            note += "; --resume may change it"
        flag = "--" + name.replace("_", "-")
        if of is bool:
            p.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=s.help + note
            )
        elif s.choices:
            p.add_argument(flag, choices=s.choices, default=None, help=s.help + note)
        else:
            metavar = {int: "N", float: "X"}.get(of, name.rsplit("_", 1)[-1].upper())
            if name.endswith("_seconds"):
                metavar = "SECONDS"
            p.add_argument(flag, type=of or str, default=None, metavar=metavar, help=s.help + note)


def _shown(value) -> str:
    """A declared default as the command line writes it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def command_of(argv: list[str]) -> str:
    """The subcommand ``argv`` runs (``""``: none, as for ``--version``): the top level
    takes only ``--version`` and ``--help``, so it is the first word that is no option."""
    return next((a for a in argv if not a.startswith("-")), "")


def given_options(argv: list[str]) -> set[str]:
    """The ``argparse`` destinations that ``argv`` gives explicitly (a default is not
    given: the file's value stands then)."""
    p = parser(command_of(argv))
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for command in sub.choices.values():
        for action in command._actions:
            action.default = argparse.SUPPRESS
            action.required = False
    return set(vars(p.parse_args(argv))) - {"command"}


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


def _track_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--track",
        choices=TRACKING,
        default=None,
        help="log the run(s) to TensorBoard, MLflow or Weights & Biases (a run per pod; "
        "needs the extra of that name: pip install 'elegantpod[mlflow]')",
    )
    p.add_argument(
        "--track-to",
        default=None,
        metavar="WHERE",
        help="with --track: TensorBoard's folder (default runs), MLflow's tracking URI "
        "(default sqlite:///mlflow.db) or the W&B project (default elegantpod; offline "
        "without WANDB_API_KEY)",
    )


TRACKING = ("tensorboard", "mlflow", "wandb")
"""The backends ``--track`` takes (:data:`elegantpod.tracking.BACKENDS`)."""


def tracking_logger(args):
    """The ``--track`` logger, or ``None``; a missing library is a ``ValueError`` naming
    the extra to install, before any training or cluster work."""
    kind, where = getattr(args, "track", None), getattr(args, "track_to", None)
    if kind is None:
        if where is not None:
            raise ValueError("--track-to says where --track logs: give --track too")
        return None
    from elegantpod.tracking.tracker import make_logger

    try:
        return make_logger(kind, where)
    except ImportError as exc:
        raise ValueError(str(exc)) from None


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


MAX_SPACE_FILE = 1_000_000
"""Largest ``--search-space`` file read (bytes; real ones are a few hundred)."""


def search_space_file(path: str) -> dict:
    """The plain-JSON search space in ``path`` (``.json``: JSON; else YAML, which reads
    JSON too), read as untrusted input: a regular file of bounded size, parsed as a run
    file is (:func:`~elegantpod.cli.run_file.parse_run_file`: a key given twice, tags,
    anchors and base-60 numbers refused, errors with their line). The tournament checks
    its contents (:func:`elegantpod.search.plain.space_from_dict`)."""
    from elegantpod.cli.run_file import parse_run_file
    from elegantpod.safe_files import read_bytes

    shown = f"--search-space {path[:200]}"
    try:
        data = read_bytes(path, MAX_SPACE_FILE)
    except OSError as exc:
        raise ValueError(f"--search-space {path[:200]!r}: cannot read it: {exc}") from None
    what = "search_space must be an object {algorithm: {hyperparameter: range}}"
    return parse_run_file(data, shown, what).values


# ----------------------------------------------------------------------
# Checks of the command line's parsed arguments: each refuses a bad value before any
# import or cluster work, naming the value and what is accepted.
#
# Apart from :mod:`elegantpod.cli.args` (the parser and its ``KEY=VALUE`` lists), so each
# stays short; :func:`check_args` runs first in :func:`elegantpod.cli.main.main`.


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
    before any training or cluster work; each error names the value and what is accepted."""
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
    required = {"train": ("env", "algo"), "tournament": ("store",)}
    for name in required.get(getattr(args, "command", None), ()):
        if getattr(args, name, None) is None:
            raise ValueError(
                f"--{name} is required (on the command line, or {name}: in --config or --preset)"
            )
    if getattr(args, "out", None) == "":
        raise ValueError("--out '' names no folder: give a folder (the working one is '.')")
    if getattr(args, "store", None) is not None:
        check_store_argument(args.store)
    if args.command == "export":
        check_export_args(args)


def check_export_args(args) -> None:
    """``export``: the checkpoint exists, the format is known and agrees with ``--out``,
    and ``--out`` lands in an existing folder; ``args.out`` becomes the file to write."""
    from pathlib import Path

    source = Path(args.checkpoint)
    if not source.exists():
        raise ValueError(f"--checkpoint {args.checkpoint[:200]!r} does not exist")
    from elegantpod.policy.export import FORMATS, export_format

    fmt = args.export_format
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown --format {fmt[:50]!r}: use one of {', '.join(FORMATS)}")
    if args.out is None:
        folder = source if source.is_dir() else source.parent
        args.out = str(folder / f"policy{FORMATS[fmt or 'onnx']}")
    args.export_format = export_format(args.out, fmt)
    if not Path(args.out).parent.is_dir():
        raise ValueError(f"--out {args.out[:200]!r}: its folder does not exist")


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
