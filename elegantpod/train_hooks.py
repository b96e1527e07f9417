"""What ``train()`` shows and calls while a pod trains: the progress bar (when someone
is watching) and the user's callback, as one :class:`~elegantpod.hooks.PodHooks`.

Apart from :mod:`elegantpod.training`, which checks the inputs and runs the pod: this
is only the view of a run in progress.
"""

from __future__ import annotations

import sys

from elegantpod.hooks import PodHooks
from elegantpod.types import Progress


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
