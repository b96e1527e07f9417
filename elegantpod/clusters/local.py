"""``local_client()``: the embedded default, and how local worker processes start.

:func:`local_client` starts a ``LocalCluster`` of single-thread CPU worker processes
(forked from a server that has torch imported: :func:`forkserver_workers`). The rest is
what it shares with a GPU node's :class:`~elegantpod.clusters.gpu.GPUCluster`: the
malloc settings of every worker process, the deadline that stops workers that never
come up, and the error a script without the ``__main__`` guard gets instead of a hang.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

import dask
from distributed import Client, LocalCluster

from elegantpod.clusters.gc_pause import gc_paused

logger = logging.getLogger(__name__)


def worker_settings() -> dict:
    """Dask config for local worker processes, CPU and GPU alike (set while they start).

    distributed's nanny starts workers with MALLOC_TRIM_THRESHOLD_=64 KiB so that freed
    memory goes back to the OS at once; for a pod that allocates and frees the same
    tensors every iteration that means page faults all the time. Pods keep their
    memory instead. And setting any malloc threshold switches glibc's dynamic mmap
    threshold off, so every allocation over 128 KiB (a minibatch, an activation) became
    an mmap, a munmap and fresh page faults; up to 32 MiB now comes from the reused
    heap. (What each cost a pod: ``benchmarks/README.md``, ``dask_overhead.py``.)

    The worker's statistical profiler samples every thread's stack every 10 ms, which
    costs a Python-heavy pod real steps/s; the tournament's own events say where time
    goes instead.

    Callers also set ``distributed.worker.daemon`` to ``False`` for the process: a pod on
    a CPU env may step it in worker processes of its own (gymnasium's async vector env,
    MuJoCo), which daemonic Dask workers could not start, and the nanny reads it when it
    (re)starts a worker, so it is set for the process, not just while workers start.
    """
    environ = {
        **dask.config.get("distributed.nanny.pre-spawn-environ", {}),
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD,
        "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD,
    }
    return {
        "distributed.nanny.pre-spawn-environ": environ,
        "distributed.worker.profile.enabled": False,
    }


TRIM_THRESHOLD = 256 * 1024 * 1024
"""glibc keeps up to this much freed memory in a worker before trimming (256 MiB)."""
MMAP_THRESHOLD = 32 * 1024 * 1024
"""Allocations below this come from glibc's heap, not fresh mmaps (32 MiB, glibc's most):
with a fixed trim threshold glibc no longer raises it by itself."""


def dashboard_off(dashboard_address: str | None, kwargs: dict) -> dict:
    """``kwargs`` with the scheduler's HTTP endpoints on loopback when there is no
    dashboard: distributed would still serve them on :8787 on every interface."""
    if dashboard_address is not None:
        return kwargs
    scheduler_kwargs = {
        "dashboard": False,
        "dashboard_address": "127.0.0.1:0",
        **kwargs.get("scheduler_kwargs", {}),
    }
    return {**kwargs, "scheduler_kwargs": scheduler_kwargs}


@contextlib.contextmanager
def start_deadline(seconds: float):
    """Stop this process's worker processes that are still starting after ``seconds``.

    Why: a worker process that never comes up (one that runs the script's own code
    again, stuck before it could fail) kept ``LocalCluster()`` waiting forever, and
    distributed's own start timeout (the nanny's ``death_timeout``) then hung in the
    nanny's close. A worker killed here is one that failed to start: ``LocalCluster``
    raises and cleans up. Yields a list that is non-empty once the deadline passed.
    """
    expired: list[bool] = []
    done = threading.Event()
    since = time.time()

    def watch() -> None:
        if done.wait(seconds):
            return
        expired.append(True)
        # and every worker process spawned later, until the start gives up: on a loaded
        # machine the nanny may spawn its process only after the deadline, and that one
        # would then keep LocalCluster() waiting with no deadline left (seen in CI)
        while True:
            kill_spawned_children(since)
            if done.wait(0.5):
                return

    watcher = threading.Thread(target=watch, name="elegantpod-worker-start-deadline", daemon=True)
    watcher.start()
    try:
        yield expired
    finally:
        done.set()


def kill_spawned_children(since: float) -> None:
    """Kill the worker processes this process started since ``since``: its spawned
    multiprocessing children, and the processes its forkserver forked for it (the
    forkserver's children, not the forkserver itself)."""
    import psutil

    me = os.getpid()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.create_time() < since - 1:
                continue
            command = " ".join(child.cmdline())
            spawned = child.ppid() == me and "--multiprocessing-fork" in command
            forked = child.ppid() != me and "multiprocessing.forkserver" in command
            if spawned or forked:
                child.kill()


def start_failure(exc: BaseException, timed_out: float | None) -> str:
    """The error of local workers that did not start, with the likely cause in a script."""
    import sys

    message = f"local Dask workers did not start: {exc}"
    if timed_out is not None:
        message = f"local Dask workers did not start within {timed_out:g} s (start_timeout)"
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None):  # a script (or python -m), not a notebook
        message += (
            "\n\nIf the script calls elegantpod.cluster() (or starts a Tournament) outside "
            f'`if __name__ == "__main__":`, that is why.\n{SCRIPT_GUARD}'
        )
    return message


SCRIPT_GUARD = """\
In a script, local workers are new Python processes that import the script again, so the
code that starts the cluster must run only in the main process: put it in a function and
call it under the guard (see "In a script" in ``docs/getting-started.md``):

    import elegantpod

    def main():
        client = elegantpod.cluster()
        ...

    if __name__ == "__main__":
        main()
"""
"""What a script without the ``__main__`` guard is told (it would otherwise hang)."""


def check_not_bootstrapping() -> None:
    """Raise at once when called while a spawned process re-imports the main script.

    Why: a script without ``if __name__ == "__main__":`` calls ``cluster()`` again in
    every worker process that multiprocessing's spawn starts, where it cannot start
    processes; the worker never comes up and the script's own ``cluster()`` waited
    forever. Failing in the worker ends it, and the parent sees the worker die.
    """
    import multiprocessing.process

    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        raise RuntimeError(
            "elegantpod.cluster() was called in a worker process that was still starting "
            f"(it imported the script again).\n{SCRIPT_GUARD}"
        )


def forget_stdin_main() -> None:
    """Let a script read from stdin (``python - < run.py``) start local workers.

    Why: a spawned worker process imports the main module again from its ``__file__``,
    and such a script's is ``"<stdin>"``, which names no file: every worker failed with
    ``FileNotFoundError: '<stdin>'`` and the script was told it lacked the ``__main__``
    guard. Without a ``__file__`` the workers import nothing of it, as for a notebook
    (functions defined in it reach them by value). So it is removed, for good: the nanny
    reads it again whenever it restarts a worker.
    """
    import sys

    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) == "<stdin>":
        del main.__file__


WORKER_PRELOAD = (
    "torch",
    "gymnasium",
    "elegantpod.agents",
    "elegantpod.pod.pod",
    "elegantpod.tournament.worker.segment",
)
"""What the forkserver imports once, so that no CPU worker imports it again: the modules
a worker needs to train a pod's segment (torch alone is about 1.2 s of one core)."""

_forkserver_lock = threading.Lock()
_forkserver: dict = {"pid": None, "environ": {}}
"""The forkserver this module started: its pid and the environment it started with."""


def forkserver_workers(pre_spawn_environ: dict[str, str]) -> dict | None:
    """Start CPU workers by forking them from this process's forkserver, and return the
    Dask config and the workers' ``env`` to start them with; ``None`` where the platform
    has no forkserver (Windows), so that they are spawned as before.

    Why: a spawned worker is a new Python that imports torch, gymnasium and the pod code,
    about 1.5 s of one core each; a forked one starts in about 0.1 s. That is each
    worker of every ``cluster()`` (16 at once on a 16-core node, all importing torch) and
    every CLI run's. The forkserver is a fresh Python, started once per process (not a
    fork of this one, which may hold threads, CUDA or a notebook's state), that imports
    :data:`WORKER_PRELOAD` and then forks a worker per request; each worker still
    prepares itself as a spawned one does (the parent's ``sys.path``, working folder,
    the script's ``__main__`` without its guarded code).

    What forking changes, and how it is kept as before: a forked process inherits the
    forkserver's environment, not this process's now. So the forkserver starts with the
    workers' malloc settings (glibc reads them when a process starts: in a fork they are
    inherited, and nothing can set them later) and the Nanny's fixed ``PYTHONHASHSEED``;
    and the variables this process set or changed after the forkserver started are
    returned as the workers' ``env``, which the Nanny sets in each worker before it
    starts. The GPU layout keeps spawning: nothing there has run on a GPU yet. Where the
    forkserver cannot start (its socket's path too long), workers are spawned too.
    """
    import multiprocessing
    import multiprocessing.forkserver as forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    server_environ = {**os.environ, **{k: str(v) for k, v in pre_spawn_environ.items()}}
    if server_environ.get("PYTHONHASHSEED") in (None, "0"):
        server_environ["PYTHONHASHSEED"] = "6640"  # as the Nanny does for spawned workers
    # The working folder never reaches the server's import path. multiprocessing starts
    # it as `python -c ...` in this process's working folder, and -c puts that folder
    # first, before the standard library; the server then imports multiprocessing and its
    # preload (distributed imports yaml) from there, so a yaml.py lying where a user ran
    # `elegantpod tournament` ran in the server and in every worker forked from it, though
    # the CLI keeps the folder off its own path (3.11's forkserver.main ignores the
    # sys_path it is given). PYTHONSAFEPATH (Python 3.11+, -P) puts no folder first; each
    # worker still takes this process's sys.path as it prepares, so a notebook's own
    # modules reach its workers as before.
    server_environ["PYTHONSAFEPATH"] = "1"
    with _forkserver_lock:
        server = forkserver._forkserver
        _socket_folder_back(server)
        if server._forkserver_pid not in (None, _forkserver["pid"]):
            _stop(server)  # another's (its own preload and environment): ours instead
        elif server._forkserver_pid is not None and (
            lost := [k for k in _forkserver["environ"] if k not in server_environ]
        ):
            # a variable deleted here since the server started (a revoked token) would
            # live on in every worker forked from it: the Nanny's env can set variables
            # but not remove them, so the server starts again without it
            logger.debug("forkserver restarted: %s no longer set", ", ".join(sorted(lost)))
            _stop(server)
        multiprocessing.get_context("forkserver").set_forkserver_preload(
            ["distributed", *WORKER_PRELOAD]
        )
        # started (or restarted, had it died) under the workers' environment; only the
        # differing variables are set meanwhile, never the whole environment cleared
        saved = {k: os.environ.get(k) for k, v in server_environ.items() if os.environ.get(k) != v}
        os.environ.update({k: server_environ[k] for k in saved})
        try:
            server.ensure_running()
        except OSError:
            # its socket is a file under TMPDIR (Python 3.11), and a long TMPDIR exceeds
            # a Unix socket's 108 bytes ("AF_UNIX path too long"): spawn instead
            return None
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if server._forkserver_pid != _forkserver["pid"]:
            _forkserver.update(pid=server._forkserver_pid, environ=server_environ)
            _socket_folder_at_exit()
        started_with = _forkserver["environ"]
    env = {k: v for k, v in os.environ.items() if started_with.get(k) != v}
    # the workers' own children see this process's setting again ("" is unset to Python)
    env["PYTHONSAFEPATH"] = os.environ.get("PYTHONSAFEPATH", "")
    return {"config": {"distributed.worker.multiprocessing-method": "forkserver"}, "env": env}


def _socket_folder_back(server) -> None:
    """Make the forkserver's socket folder again if it was removed while we ran.

    Why: multiprocessing keeps the server's socket in a temporary folder (``pymp-*``
    under TMPDIR) that it removes at exit. Removed mid-run (a tmp cleaner, a user's
    ``rm -rf /tmp/pymp-*``), every later worker start failed with distributed's raw
    ``FileNotFoundError`` tracebacks, and the exit printed one more. The folder is made
    again, private as ``mkdtemp`` makes it, and a server whose socket went with it is
    stopped, so that a new one binds its socket there.
    """
    import multiprocessing.process
    import multiprocessing.util as util

    folder = multiprocessing.process.current_process()._config.get("tempdir")
    if folder:
        _make_folder(folder)
    address = server._forkserver_address
    if (
        server._forkserver_pid is not None
        and isinstance(address, str)
        and not util.is_abstract_socket_namespace(address)
        and not os.path.exists(address)
    ):
        logger.debug("forkserver restarted: its socket %s was removed", address)
        _stop(server)


def _stop(server) -> None:
    """Stop the forkserver; a socket file already gone is no error (it unlinks it)."""
    with contextlib.suppress(OSError):
        server._stop()


_at_exit: set[str] = set()
"""The socket folders :func:`_socket_folder_at_exit` looks after."""


def _socket_folder_at_exit() -> None:
    """At exit, make the socket folder again just before multiprocessing removes it, so
    that one removed mid-run costs no ``FileNotFoundError`` traceback as the process ends
    (its clean-up runs at priority -100; this one first)."""
    import multiprocessing.process
    import multiprocessing.util as util

    folder = multiprocessing.process.current_process()._config.get("tempdir")
    if folder and folder not in _at_exit:
        _at_exit.add(folder)
        util.Finalize(None, _make_folder, args=(folder,), exitpriority=-99)


def _make_folder(folder: str) -> None:
    """``folder`` made again, private, if it no longer exists; never an error at exit."""
    if not os.path.lexists(folder):
        with contextlib.suppress(OSError):
            os.mkdir(folder, 0o700)


def local_client(
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    *,
    dashboard_address: str | None = "127.0.0.1:0",
    memory_limit: str | float | None = "auto",
    start_timeout: float = 60.0,
    **kwargs,
) -> Client:
    """A client on an embedded ``LocalCluster`` of single-thread CPU worker processes.

    The default of :func:`elegantpod.cluster`: one process per pod slot on loopback,
    each started with the malloc settings of :func:`worker_settings` and, where the
    platform allows, forked from a server that has torch imported
    (:func:`forkserver_workers`), so a worker is up in a fraction of a second instead of
    importing torch again.

    Parameters
    ----------
    n_workers
        Worker processes; ``None``: one per CPU core.
    threads_per_worker
        Threads per worker: one pod runs per thread (torch uses one thread per pod).
    dashboard_address
        Where the Dask dashboard listens (loopback); ``None``: no dashboard.
    memory_limit, **kwargs
        Passed to ``LocalCluster``.
    start_timeout
        Seconds the workers may take to start; past it their processes are stopped and
        this raises (it never waits forever).

    Raises
    ------
    RuntimeError
        When workers die while starting or take longer than ``start_timeout``.

    Examples
    --------
    >>> from elegantpod.clusters.shutdown import shutdown
    >>> from elegantpod.clusters.local import local_client
    >>> client = local_client(1, dashboard_address=None)
    >>> len(client.scheduler_info()["workers"])
    1
    >>> shutdown(client)
    """
    n = int(n_workers) if n_workers is not None else max(1, os.cpu_count() or 1)
    kwargs = dashboard_off(dashboard_address, kwargs)
    dask.config.set({"distributed.worker.daemon": False})  # see worker_settings()
    settings = worker_settings()
    forked = forkserver_workers(settings["distributed.nanny.pre-spawn-environ"])
    if forked is not None:  # workers forked with torch imported (a restart spawns one)
        settings.update(forked["config"])
        kwargs = {**kwargs, "env": {**forked["env"], **kwargs.get("env", {})}}
    # LocalCluster and Client each start a LoopRunner: no finalizer inside (gc_pause)
    with gc_paused():
        with dask.config.set(settings), start_deadline(float(start_timeout)) as expired:
            try:
                forget_stdin_main()
                lc = LocalCluster(
                    n_workers=n,
                    threads_per_worker=int(threads_per_worker),
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=dashboard_address,
                    memory_limit=memory_limit,
                    **kwargs,
                )
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(start_failure(exc, start_timeout if expired else None)) from exc
        return Client(lc)
