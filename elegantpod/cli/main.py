"""Command line: ``elegantpod train | tournament | backtest | export | presets | demo``.

The entry point (``elegantpod.cli.main:main``): the process set-up, the dispatch to a command
and what Ctrl-C leaves behind. The arguments are parsed and checked in
:mod:`elegantpod.cli.args`, completed from ``--preset`` and ``--config`` by
:mod:`elegantpod.cli.run_config`, and the commands run in :mod:`elegantpod.cli.commands`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
import time

from elegantpod.cli.args import check_args, command_of, parser
from elegantpod.cli.commands import _export, _tournament, _train
from elegantpod.cli.run_config import apply_run_files


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


COMMANDS = {"backtest": "elegantpod.finance.command", "compare": "elegantpod.comparison.command"}
"""Commands run by the part of the package they serve: the module's ``run(args) -> int``
runs the parsed command, and is imported only then (this module imports no such part)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input prints one ``error:`` line and exits with status 2, Ctrl-C
    ends with one line on what was kept and how to continue (status 130)."""
    _drop_working_folder()  # before anything imports lazily (torch imports sympy late)
    with _safe_path_for_children():
        return _main(argv)


@contextlib.contextmanager
def _safe_path_for_children():
    """Keep the working folder off the import path of every Python this command starts.

    Why: multiprocessing starts a spawned Dask worker (a worker restart, the GPU layout,
    a TMPDIR too long for the forkserver) as ``python -c ...`` in the working folder, and
    ``-c`` puts that folder first, before the standard library: a stray ``tempfile.py``
    there ran in the worker before it took this process's ``sys.path``. With
    ``PYTHONSAFEPATH`` set (Python 3.11+), no folder is put first, in the workers and in
    whatever they start. (The forkserver gets it whoever calls ``cluster()``:
    :func:`elegantpod.clusters.local.forkserver_workers`.) Only for the command: a
    notebook or test that calls :func:`main` gets its environment back as it was.
    """
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


def _main(argv: list[str] | None) -> int:
    """:func:`main` once the working folder is off the path."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(command_of(argv)).parse_args(argv)
    if args.command == "presets" or getattr(args, "preset", None) == "list":
        from elegantpod.cli.presets import preset_lines

        print("\n".join(preset_lines()))
        return 0
    try:  # the files first: their quiet, out and store count below
        args.run_config = run_config = apply_run_files(args, argv)
    except ValueError as exc:
        print(f"elegantpod: error: {exc}", file=sys.stderr)
        return 2
    lib = logging.getLogger("elegantpod")
    before = lib.level, lib.propagate
    handler = _show_library_messages(quiet=bool(getattr(args, "quiet", False)))
    try:
        check_args(args)
        _import_modules(getattr(args, "imports", []))
        if args.command == "train":
            return _train(args)
        if args.command == "tournament":
            return _tournament(args)
        if args.command == "export":
            return _export(args)
        if args.command in COMMANDS:
            import importlib

            return importlib.import_module(COMMANDS[args.command]).run(args)
        from elegantpod.cli.demo import run_demo

        return run_demo(
            seed=args.seed, max_seconds=args.max_seconds, out_dir=args.out, max_steps=args.max_steps
        )
    except ValueError as exc:  # CheckpointError is a ValueError too
        if run_config is not None:  # the file's line, where a value came from one
            exc = run_config.locate(exc)
        print(f"elegantpod: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        global _QUIT_NOW
        _quiet_dask()
        # a tournament raises only at its second Ctrl-C (the first stops it cleanly)
        _QUIT_NOW = args.command == "tournament"
        print(f"elegantpod: {_interrupted(args, argv, exc)}", file=sys.stderr, flush=True)
        return 130
    finally:  # in-process callers (tests, notebooks) get their logging back as it was
        lib.removeHandler(handler)
        lib.setLevel(before[0])
        lib.propagate = before[1]


class _Stderr(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a message comes (a test's capture,
    a notebook's stream), not the one it was when the command started."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler sets it; the property decides
        pass


def _show_library_messages(quiet: bool) -> logging.Handler:
    """Show the library's messages (``logging.getLogger("elegantpod")``) on stderr as
    ``elegantpod: ...`` lines for this command: info and up, warnings only with
    ``--quiet``. The library itself adds no handler: in a notebook or script its
    warnings reach Python's last-resort handler, and its info messages the user's own
    logging set-up."""
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("elegantpod: %(message)s"))
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    lib = logging.getLogger("elegantpod")
    lib.addHandler(handler)
    if lib.level == logging.NOTSET or lib.level > handler.level:
        lib.setLevel(handler.level)
    lib.propagate = False  # one line per message, not also the root's
    return handler


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
    # every logger of those trees: dask's logging config gives some children a level of
    # their own ("distributed.client": warning), which the parent's level does not cover,
    # and a client's "Couldn't gather ... rescheduling" warning followed the one line
    parts = ("distributed", "tornado", "asyncio")
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in parts]
    for name in {*parts, *names}:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        for h in logger.handlers:
            h.setLevel(logging.CRITICAL + 1)


_QUIT_NOW = False
"""Set when a second Ctrl-C ended a tournament: :func:`entry` then exits at once."""

_ENDING = False
"""Set by :func:`entry` once the command has returned: a Ctrl-C from then on (while the
interpreter exits and distributed's exit hooks close what is left) quits at once."""


def entry() -> None:
    """The ``elegantpod`` command (its console script, and ``python -m elegantpod.cli``):
    :func:`main`, then exit with its status.

    After a tournament's second Ctrl-C, the one line is printed and the process ends at
    once (``os._exit``), as the user asked: a normal exit would run distributed's exit
    hooks, which await the close the interrupt cancelled and print tracebacks, while the
    closing cluster's callbacks fail against a shutting-down interpreter. Nothing is lost:
    the store keeps its last snapshot (files are written atomically), the lease of a
    process that is gone is taken back without ``--force``, and the worker processes end
    with their parent (distributed's workers watch it).

    A Ctrl-C that lands after the command has returned (the user pressed it twice and the
    first one's clean stop was already done) quits at once too, with status 130, instead
    of raising into an exit hook, which printed "Exception ignored in atexit callback" and
    a traceback after the one line. (In the last moments of the exit Python has put the
    default action back, and such a Ctrl-C ends the process by the signal: a shell reads
    that as status 130 as well.)
    """
    global _ENDING
    # whatever the command inherited, as the tournament's and training's own handlers
    # do: a shell starts a script's background job with Ctrl-C ignored (the test suite
    # runs so in CI), and a SIGINT sent to the command still asks it to stop
    signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        code = main()
        _ENDING = True
    except KeyboardInterrupt:  # landed between the command's end and the line above
        _ENDING, code = True, 130
    if _QUIT_NOW:
        _quit(code)
    sys.exit(code)


def _on_ctrl_c(signum, frame) -> None:
    """The command's Ctrl-C: a ``KeyboardInterrupt`` while the command runs (each command
    says what it keeps, and a tournament or training run puts its own handler on top),
    an exit at once after it returned."""
    if not _ENDING:
        raise KeyboardInterrupt
    _quit(130)


_QUITTING = False


def _quit(code: int) -> None:
    """End the process now with ``code``: its worker processes first, so that nothing
    they print follows the command's last line (once: a Ctrl-C while they are being
    ended skips to the exit)."""
    global _QUITTING
    if not _QUITTING:
        _QUITTING = True
        _end_children()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a write this signal interrupted
            stream.flush()
    os._exit(code)


def _end_children() -> None:
    """End this process's worker processes at once, and run multiprocessing's clean-up,
    before a second Ctrl-C's ``os._exit``: nothing they print follows the one line.

    Why: left to notice that their parent is gone, the workers first logged distributed's
    heartbeat ``CommClosedError`` tracebacks on the user's terminal (seen on a loaded
    machine, where they notice late), and multiprocessing's resource tracker then warned
    of "leaked semaphore objects": the semaphores this process had made for its workers,
    which its exit would have unlinked. So every process below this one but the tracker
    is killed (they hold nothing the store needs: its files are written atomically), and
    the clean-up a normal exit runs first (unlink those semaphores, remove the socket
    folder) runs here; the tracker then ends with nothing to say.
    """
    import multiprocessing.resource_tracker as resource_tracker
    import multiprocessing.util as util

    import psutil

    nannies = sys.modules.get("distributed.nanny")
    if nannies is not None:
        from distributed.core import Status

        # a Nanny whose worker dies starts (spawns) another unless it is closing, and
        # that one failed reading the semaphores the clean-up below removes
        for nanny in list(nannies.Nanny._instances):
            nanny.status = Status.closing
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    deadline, quiet_since = time.monotonic() + 10.0, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 1.0:
        # again until none is left for a second: one may have been starting meanwhile
        try:
            below = [c for c in psutil.Process().children(recursive=True) if c.pid != tracker]
        except psutil.Error:
            below = []
        if below:
            quiet_since = time.monotonic()
        for child in below:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(below, timeout=5)
        time.sleep(0.05)
    if time.monotonic() >= deadline:
        return  # processes still starting: their semaphores stay for the tracker
    with contextlib.suppress(Exception):  # at exit, as multiprocessing's own hook does
        util._run_finalizers(0)
        util._run_finalizers()


if __name__ == "__main__":
    entry()
