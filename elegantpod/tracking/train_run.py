"""``TrainTracking``: one :func:`~elegantpod.train` run fed to a tracking logger.

The same :class:`~elegantpod.tracking.tracker.Tracker` as a tournament's, so a slow or
failing tracking server costs a warning here too, never the run: one run whose metrics
are each evaluation's (plotted against env steps), and at the end the result as a table.
"""

from __future__ import annotations

import uuid
from typing import Any

from elegantpod.tracking.tracker import Tracker, check_loggers, group_name


class TrainTracking:
    """A ``train()`` callback that logs each evaluation, then calls the user's.

    Parameters
    ----------
    logger
        A :class:`~elegantpod.tracking.base.Logger`, a backend's name, or ``None``
        (nothing is logged). Checked here, before the run builds anything.
    callback
        The user's ``callback`` (its return value stops the run or not, as without
        tracking).
    """

    def __init__(self, logger, callback=None) -> None:
        self.tracker = Tracker(check_loggers(logger))
        self.callback = callback
        self.run_id = ""

    def open(self, spec) -> None:
        """Begin the run of pod ``spec`` (a :class:`~elegantpod.config.PodSpec`)."""
        config = spec.to_dict()
        self.run_id = f"{spec.algo}-{spec.env_id}-seed{spec.seed}"
        self.tracker.open(group_name("train", uuid.uuid4().hex), config)
        tags = {"algo": spec.algo, "env": spec.env_id, "parent": "", "generation": "0"}
        self.tracker.start_run(self.run_id, self.run_id, tags, config.get("hparams") or {})

    def __call__(self, p) -> bool | None:
        metrics = {
            "eval_return": p.eval_return_mean,
            "eval_return_std": p.eval_return_std,
            "train_return": p.train_return_mean,
            "fitness": p.eval_return_mean if p.score is None else p.score,
            "wall_seconds": p.wall_seconds,
            "env_steps": p.env_steps,
        }
        metrics.update({k if "/" in k else f"losses/{k}": v for k, v in p.stats.items()})
        self.tracker.log_metrics(self.run_id, metrics, p.env_steps)
        return self.callback(p) if self.callback is not None else None

    def close(self, result=None) -> None:
        """End the run; ``result`` (a :class:`~elegantpod.types.TrainResult`) is logged
        as its last metrics and a one-row ``result`` table."""
        tables: dict[str, list[dict[str, Any]]] = {}
        if result is not None:
            row = result.to_dict()
            final = {f"final/{k}": v for k, v in row.items()}
            self.tracker.log_metrics(self.run_id, final, result.env_steps)
            tables["result"] = [row]
        self.tracker.close(tables)

    @property
    def warning(self) -> str | None:
        """What went wrong with tracking (the run went on), or ``None``."""
        return self.tracker.warning
