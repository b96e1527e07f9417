"""``train()``: one pod, start to finish, with every input checked before any work."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from elegantpod.agents import get_algo
from elegantpod.checks.json_values import check_json, json_safe
from elegantpod.checks.overrides import replace_checked
from elegantpod.checks.settings import defaults, flagged
from elegantpod.config import PodSpec
from elegantpod.devices import resolve_device
from elegantpod.envs.registry import check_env_id, check_eval_env, check_fitness
from elegantpod.pod.hooks import PodHooks
from elegantpod.pod.memory import check_memory
from elegantpod.safe_files import FileLock, LockHeld, UnsafeFileError, atomic_write_bytes
from elegantpod.threads import check_threads, torch_threads
from elegantpod.tracking.train_run import TrainTracking
from elegantpod.types import Progress, TrainResult

logger = logging.getLogger(__name__)
"""Library messages (``elegantpod.training``, under ``logging.getLogger("elegantpod")``)."""

OUTPUT_FILES = ("checkpoint.pt", "best.pt", "result.json", "spec.json")
RUN_LOCK = ".run.lock"
"""The lock file of a run folder, held by the run that writes there (:func:`run_folder`)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a :func:`train` run, after its state was saved.

    Why a ``KeyboardInterrupt``: code that stops on Ctrl-C still does; code that wants
    to say what was kept reads :attr:`result` (the run so far) and :attr:`out`.
    """

    def __init__(self, result: TrainResult, out: Path | None):
        super().__init__(f"interrupted at {result.env_steps:,} env steps")
        self.result = result
        self.out = out


POD = defaults(PodSpec)
"""The declared default of each pod setting (:class:`~elegantpod.config.PodSpec`):
what :func:`train`'s and :func:`build_spec`'s keywords default to."""


def build_spec(
    env: str,
    algo: str = "ppo",
    *,
    num_envs: int | None = None,
    hparams: dict[str, Any] | None = None,
    **settings: Any,
) -> PodSpec:
    """Check every input and return the :class:`PodSpec`; ``ValueError`` names a bad value.

    ``settings`` are :class:`PodSpec`'s settings by name (``seed``, ``max_steps``,
    ``eval_episodes``...: those with a command-line flag, and ``env_kwargs`` /
    ``eval_env_kwargs``); one not given takes its declared default.

    Cheap by design: it builds one single sub-env to read the spaces, never a network.
    The spec keeps ``device`` as given (``"auto"`` is decided by the pod that is built
    from it), but a device this machine lacks fails here, before that sub-env.
    """
    unknown = sorted(set(settings) - set(TRAIN_SETTINGS))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {unknown}: a pod's settings are {', '.join(TRAIN_SETTINGS)}"
        )
    given = {**{k: getattr(POD, k) for k in TRAIN_SETTINGS}, **settings}
    device = given["device"]
    resolve_device(device)
    check_env_id(env)
    given["env_kwargs"] = dict(given["env_kwargs"] or {})
    given["eval_env_kwargs"] = dict(given["eval_env_kwargs"] or {})
    check_json("env_kwargs", given["env_kwargs"])
    check_json("eval_env_kwargs", given["eval_env_kwargs"])
    check_fitness(given["fitness"], env)
    learner_cls = get_algo(algo)
    if num_envs is not None and (isinstance(num_envs, bool) or int(num_envs) < 1):
        raise ValueError(f"num_envs must be >= 1, got {num_envs!r}")
    overrides = dict(hparams or {})
    if num_envs is not None:
        overrides["num_envs"] = int(num_envs)
    config = replace_checked(learner_cls.config_cls(), overrides)
    learner_cls.check_env(env, given["env_kwargs"])
    check_eval_env(env, given["env_kwargs"], given["eval_env_kwargs"], given["fitness"])
    given["device"] = str(device)  # a torch.device too
    if hasattr(given["seed"], "__index__") and not isinstance(given["seed"], bool):
        given["seed"] = given["seed"].__index__()  # a numpy integer too
    spec = PodSpec(env_id=env, algo=learner_cls.name, hparams=config, **given)
    spec.validate()
    check_memory(spec)  # a lower bound (1-dimensional observations): no env is built yet
    return spec


TRAIN_SETTINGS = (*flagged(PodSpec), "env_kwargs", "eval_env_kwargs")
"""The pod settings :func:`train` and :func:`build_spec` take by name: those with a
command-line flag, and the env keywords (``--env-arg``, ``--eval-env-arg``)."""


def prepare_out_dir(
    out: str | os.PathLike, *, overwrite: bool = False, resume: bool = False
) -> Path:
    """Create ``out`` and prove it is writable; refuse to clobber an earlier run's files."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"out {str(path)!r} exists and is not a directory")
    existing = [f for f in OUTPUT_FILES if (path / f).exists()]
    if existing and not (overwrite or resume):
        raise ValueError(
            f"out {str(path)!r} already holds a run ({', '.join(existing)}); replace it "
            "with overwrite=True (--overwrite) or continue it with resume=True (--resume)"
        )
    if resume and not (path / "checkpoint.pt").exists():
        raise ValueError(
            f"cannot resume: no checkpoint.pt in {str(path)!r} (a run saves one at its "
            "first evaluation)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        if overwrite and not resume:
            # the earlier run goes as a whole: a best.pt left behind would be loaded as
            # this run's agent (Pod.from_checkpoint(out) prefers it)
            for name in existing:
                (path / name).unlink()
        remove_orphan_temps(path)
    except OSError as exc:
        raise ValueError(f"out {str(path)!r} is not writable: {exc.strerror or exc}") from exc
    return path


@contextlib.contextmanager
def run_folder(
    out: str | os.PathLike, *, overwrite: bool = False, resume: bool = False
) -> Iterator[Path]:
    """``out`` prepared for a run (:func:`prepare_out_dir`) and held by it until the
    ``with`` block ends: the folder's lock (:data:`RUN_LOCK`, an ``flock``) is taken
    before any file in it is changed.

    Why: two runs writing one folder (two ``elegantpod train --out DIR``, a ``--resume``
    while the first still runs) both exited 0, each overwriting the other's checkpoint
    and result, so one's progress was lost. The second now fails at once, naming the
    folder, and changes nothing there; the kernel drops the lock when its holder ends,
    however it ends.

    Raises
    ------
    ValueError
        What :func:`prepare_out_dir` refuses, or the folder is held by another run (in
        this process or another).
    """
    path = Path(out)
    if not path.is_dir():  # a file, a resume of nothing: refused before a folder is made
        prepare_out_dir(path, overwrite=overwrite, resume=resume)
    # locked before its files are even looked at: a second run hears that the folder
    # is in use, whatever else it would be refused for
    lock = FileLock(path / RUN_LOCK)
    try:
        lock.acquire(note=f"pid {os.getpid()} on {socket.gethostname()}")
    except LockHeld as exc:
        raise ValueError(
            f"out {str(path)!r} is in use: another run holds it ({exc.note or 'unknown'}); "
            "wait for it to end, or give another folder"
        ) from None
    except (UnsafeFileError, OSError) as exc:
        raise ValueError(f"out {str(path)!r} cannot be locked for this run: {exc}") from None
    try:
        yield prepare_out_dir(path, overwrite=overwrite, resume=resume)
    finally:
        lock.release(remove=True)  # the folder keeps only the run's files


_TEMP = re.compile(r"^\.(?P<name>[^/]+)\.[0-9a-f]{8}\.tmp$")


def remove_orphan_temps(path: Path) -> list[str]:
    """Delete the temporary files that an atomic write of a run's own files left in
    ``path`` (``.checkpoint.pt.1a2b3c4d.tmp``: a process killed, or stopped by Ctrl-C,
    while a background thread wrote); return their names. Only regular files named
    after :data:`OUTPUT_FILES` go: nothing else in the folder is touched."""
    removed = []
    for entry in os.scandir(path):
        m = _TEMP.match(entry.name)
        if m and m["name"] in OUTPUT_FILES and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed


def result_json(result: TrainResult) -> str:
    """One-line JSON of a result (NaN becomes ``null``)."""
    return json.dumps(json_safe(result.to_dict()), sort_keys=True)


def train(
    env: str,
    algo: str = "ppo",
    *,
    seed: int = POD.seed,
    num_envs: int | None = None,
    max_steps: int | None = POD.max_steps,
    max_seconds: float | None = POD.max_seconds,
    target_reward: float | None = POD.target_reward,
    device: str = POD.device,
    threads: int | None = None,
    out: str | os.PathLike | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool | None = None,
    eval_episodes: int = POD.eval_episodes,
    eval_every_steps: int | None = POD.eval_every_steps,
    env_kwargs: dict[str, Any] | None = None,
    eval_env_kwargs: dict[str, Any] | None = None,
    fitness: str = POD.fitness,
    learners: int = POD.learners,
    callback: Callable[[Progress], bool | None] | None = None,
    logger=None,
    **hparams: Any,
) -> TrainResult:
    """Train one pod and return its :class:`TrainResult`.

    Parameters
    ----------
    env
        Native or gymnasium env id, e.g. ``"CartPole-v1"``.
    algo
        ``"ppo"``, ``"sac"``, ``"td3"``, ``"ddpg"`` or ``"dqn"``.
    seed
        Seeds envs, networks and sampling: same seed, same run.
    num_envs
        Sub-envs in the worker; ``None``: the algorithm's default.
    max_steps, max_seconds
        Budgets (env steps over all sub-envs; wall seconds). Without either, the
        algorithm's default step budget applies.
    target_reward
        Stop at the first evaluation whose mean return (or ``fitness``) reaches it.
    device
        Torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``...); ``"auto"``: the GPU when
        torch sees one, else the CPU.
    threads
        Torch intra-op threads during training (restored after). ``None``: on a CPU, one
        (or ``OMP_NUM_THREADS`` where the environment sets it); on a GPU, torch's own
        setting. ``0``: torch's own (a thread per core, which on a busy machine stalls each
        op on a descheduled thread: :func:`~elegantpod.threads.default_threads`). The pod
        is built with it, so ``threads=1`` repeats a run made with ``OMP_NUM_THREADS=1``.
    out
        Directory for ``checkpoint.pt`` (the latest state, written at each evaluation
        and at the end), ``best.pt`` (the best evaluation so far: the agent to use;
        :meth:`Pod.from_checkpoint(out) <elegantpod.pod.pod.Pod.from_checkpoint>` loads it),
        ``spec.json`` and ``result.json``. The run holds the folder for its whole
        length (a ``.run.lock`` there while it runs): another run given the same folder
        meanwhile fails at once.
    overwrite, resume
        When ``out`` holds a run: replace it, or continue it (none if it spent ``max_steps``).
    progress
        Show a progress bar (tqdm: on stderr, or a widget in Jupyter): env steps, the
        latest evaluation, under a time budget the time left. ``None`` (the default):
        when someone is watching (Jupyter, IPython, stderr a terminal;
        :func:`~elegantpod.training.watching`).
    env_kwargs, eval_env_kwargs
        Keyword arguments of the env (a trading env's ``data``, ``start``, ``end``...),
        and their overrides for the evaluator's env (validation dates).
    fitness
        ``"return"`` or a finance metric of the evaluation (``"sharpe"``...).
    learners
        Fused learners (paper 4.3): each trains on its share of the sub-envs; they
        average parameters after every update epoch.
    callback
        Called with the :class:`Progress` of each evaluation; returning ``False`` stops.
    logger
        Experiment tracking (an :mod:`elegantpod.tracking` logger or its name): a run of
        each evaluation's metrics against env steps, and the result at the end.
    **hparams
        Algorithm hyperparameters by name (see ``PPOConfig`` / ``SACConfig``).

    Returns
    -------
    TrainResult
        The last evaluation and the best one (``best_eval_return_mean``: training is
        noisy, the last can be far below the best), and in ``checkpoint`` the agent to
        use: the best evaluation's ``best.pt`` when ``out`` was given.

    Raises
    ------
    ValueError
        For any bad input, before anything is built or written; or ``out`` is held by
        another run (:func:`run_folder`).
    TrainingInterrupted
        On Ctrl-C (in the main thread): the pod stops within one gradient step, and
        ``out`` holds its checkpoint and result, so ``resume=True`` continues it.

    Examples
    --------
    >>> import elegantpod
    >>> result = elegantpod.train("CartPole-v1", "ppo", max_steps=8_192, progress=False,
    ...                           out=elegantpod.workdir("doc-train"))
    >>> result.env_steps
    8192
    >>> policy = elegantpod.Policy.load(result.checkpoint)  # the best evaluation's agent
    """
    check_threads(threads)
    given = locals()  # train's keywords named after pod settings are those settings
    spec = build_spec(
        env,
        algo,
        num_envs=num_envs,
        hparams=hparams,
        **{name: given[name] for name in TRAIN_SETTINGS},
    )
    if resume and out is None:
        raise ValueError("resume=True needs out, the folder of the run to continue")
    tracking = TrainTracking(logger, callback)  # a bad logger fails here, before any work
    if out is None:
        return _train(spec, None, resume, threads, progress, tracking)
    with run_folder(out, overwrite=overwrite, resume=resume) as out_dir:  # the whole run
        return _train(spec, out_dir, resume, threads, progress, tracking)


def _train(
    spec: PodSpec,
    out_dir: Path | None,
    resume: bool,
    threads: int | None,
    progress: bool | None,
    tracking: TrainTracking,
) -> TrainResult:
    """:func:`train` once its inputs are checked (and ``out_dir`` held)."""
    from elegantpod.pod.pod import Pod

    # The pod is built with the run's thread count too: a network initialised with
    # another count differs in its last bits, and the run with it.
    with torch_threads(threads, resolve_device(spec.device)):
        pod = Pod(spec, out_dir=out_dir, resume=resume)
        if resume and spec.max_steps is not None and pod.env_steps >= spec.max_steps:
            return _spent(pod)
        if out_dir is not None:  # with the device the pod uses ("auto" decided)
            atomic_write_bytes(out_dir / "spec.json", pod.spec.to_json().encode())
        show = watching() if progress is None else bool(progress)
        hooks, result = TrainHooks(pod, show, tracking), None
        tracking.open(pod.spec)
        with _ctrl_c_stops(hooks) as interrupted:
            try:
                result = with_best(pod.run(hooks=hooks, threads=threads), pod)
            finally:
                hooks.close()
                tracking.close(result)
    if out_dir is not None:
        record = json_safe(result.to_dict(with_curve=True))
        atomic_write_bytes(out_dir / "result.json", json.dumps(record, indent=2).encode())
        remove_orphan_temps(out_dir)  # every write has ended: a temp file now is an orphan
    if interrupted[0]:
        raise TrainingInterrupted(result, out_dir)
    return result


@contextlib.contextmanager
def _ctrl_c_stops(hooks: PodHooks) -> Iterator[list[bool]]:
    """While training: the first Ctrl-C asks the pod to stop (within one gradient step;
    the run then ends as a finished one does, checkpointed), a second one interrupts at
    once. Only the main thread can own signals; elsewhere Ctrl-C behaves as usual.

    Yields a one-item list, ``[True]`` once Ctrl-C was pressed.
    """
    flag = [False]
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # a handler installed from C: Python cannot put it back
        previous = signal.default_int_handler

    def on_sigint(signum, frame):
        flag[0] = True
        hooks.request_stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second one is hard

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _spent(pod) -> TrainResult:
    """A resumed run whose step budget is already spent trains nothing and overwrites
    nothing; its result is a fresh evaluation of the checkpoint it would continue."""
    spec = pod.spec
    logger.warning(
        "nothing to train: the run is at %s env steps, its budget of %s is spent (raise it "
        "to train on); files left as they are",
        f"{pod.env_steps:,}",
        f"{spec.max_steps:,}",
    )
    ev = pod.evaluate()
    score = None if spec.fitness == "return" else ev.score(spec.fitness)[0]
    value = ev.mean if score is None else score
    result = TrainResult(
        env=spec.env_id,
        algo=spec.algo,
        seed=spec.seed,
        solved=spec.target_reward is not None
        and math.isfinite(value)
        and value >= spec.target_reward,
        eval_return_mean=ev.mean,
        eval_return_std=ev.std,
        env_steps=pod.env_steps,
        wall_seconds=0.0,
        checkpoint=str(pod.checkpoint_path),
        fitness=spec.fitness,
        score=score,
    )
    return with_best(result, pod)


def best_evaluation(
    curve: tuple[Progress, ...], best_score: float | None, fitness: str = "return"
) -> tuple[float, float | None, int | None]:
    """``(return mean, fitness, env steps)`` of a run's best evaluation by ``fitness``.

    ``curve`` is this run's evaluations; ``best_score`` the pod's best fitness ever (the
    one its ``best.pt`` holds; ``None``: none saved), which a resumed run may have scored
    before its curve began. The fitness is ``None`` when it is the return; what is not
    known is NaN or ``None``. The first of equal scores is the best, as for ``best.pt``.
    """

    def value(p: Progress) -> float:
        return p.eval_return_mean if p.score is None else p.score

    scored = [p for p in curve if math.isfinite(value(p))]
    best = max(scored, key=value, default=None)
    if best is not None and (best_score is None or value(best) >= best_score):
        return best.eval_return_mean, best.score, best.env_steps
    if best_score is None:
        return math.nan, None, None
    if fitness == "return":  # scored before a resume: its return is the score
        return float(best_score), None, None
    return math.nan, float(best_score), None


def with_best(result: TrainResult, pod) -> TrainResult:
    """``result`` with the run's best evaluation, and ``checkpoint`` naming the agent to
    use: ``best.pt`` where the pod wrote one (the latest state stays in
    ``last_checkpoint``)."""
    mean, score, steps = best_evaluation(result.curve, pod.best_score, result.fitness)
    best = pod.best_path
    use = str(best) if best is not None and best.is_file() else result.checkpoint
    return dataclasses.replace(
        result,
        best_eval_return_mean=mean,
        best_score=score,
        best_env_steps=steps,
        checkpoint=use,
        last_checkpoint=result.checkpoint,
    )


# ----------------------------------------------------------------------
# What ``train()`` shows and calls while a pod trains: the progress bar (when someone
# is watching) and the user's callback, as one :class:`~elegantpod.pod.hooks.PodHooks`.
#
# Only the view of a run in progress: the inputs are checked and the pod is run above.


def watching() -> bool:
    """Whether someone is likely watching this run: an IPython shell or Jupyter kernel,
    or a terminal on stderr. A script run from a terminal shows a bar; the same script
    in a batch job, a pipe or a test (stderr to a file) stays quiet."""
    shell = sys.modules.get("IPython")
    if shell is not None and getattr(shell, "get_ipython", lambda: None)() is not None:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def progress_bar(pod):
    """A tqdm bar for ``pod``: counting env steps under a step budget (or none), and
    seconds under a time budget alone, so that its elapsed and remaining times are the
    budget's."""
    from tqdm.auto import tqdm

    spec = pod.spec
    by_time = spec.max_steps is None and spec.max_seconds is not None
    common = dict(desc=f"{spec.algo} {spec.env_id}", file=sys.stderr, dynamic_ncols=True)
    if by_time:
        fmt = "{desc}: {percentage:3.0f}%|{bar}| {elapsed} of " + _clock(spec.max_seconds)
        fmt += ", {remaining} left{postfix}"
        return tqdm(total=float(spec.max_seconds), unit="s", bar_format=fmt, **common)
    total = spec.max_steps or pod.learner.default_max_steps
    return tqdm(total=total, unit="step", unit_scale=True, initial=pod.env_steps, **common)


def _clock(seconds: float) -> str:
    """``seconds`` as tqdm writes times (``01:30``, ``1:02:03``)."""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class TrainHooks(PodHooks):
    """What ``train()`` does at each evaluation: the progress bar (when shown) and the
    user's ``callback``; Ctrl-C stops through :meth:`request_stop`."""

    def __init__(self, pod, progress: bool, callback) -> None:
        super().__init__()
        self.spec, self.callback = pod.spec, callback
        self.bar = progress_bar(pod) if progress else None
        self.by_time = self.bar is not None and self.bar.unit == "s"

    def on_evaluation(self, pod, p: Progress) -> bool | None:
        bar = self.bar
        if bar is not None:
            # The postfix first: ``update`` redraws, and the line then shows this
            # evaluation rather than the one before.
            shown = {"steps": f"{p.env_steps:,}"} if self.by_time else {}
            if p.score is None:  # the fitness is the evaluation return
                shown["eval_return"] = f"{p.eval_return_mean:.4g}"
            else:
                shown[self.spec.fitness] = f"{p.score:.4g}"
            bar.set_postfix(shown, refresh=False)
            done = min(p.wall_seconds, bar.total) if self.by_time else p.env_steps
            bar.update(done - bar.n)
            bar.refresh()
        return self.callback(p) if self.callback is not None else None

    def close(self) -> None:
        """Close the progress bar (its last line stays on the terminal)."""
        if self.bar is not None:
            self.bar.close()
