"""``WandbLogger``: Weights & Biases runs, one per pod, grouped by tournament.

Each pod is a ``wandb.init(reinit="create_new")`` run of the tournament's group, so
W&B's group view lines the pods up; one more run (``job_type="tournament"``) holds
the spec and the end's tables (``wandb.Table``). Metrics are plotted against
``env_steps`` (a metric W&B is told is the x axis) rather than W&B's own step, which
must only grow: a mutation is stamped at the step its segment began, earlier than the
metrics already logged. Without ``WANDB_API_KEY`` (and no ``WANDB_MODE``) the runs are
offline: written to the run folder, ``wandb sync`` uploads them later.
"""

from __future__ import annotations

import os
from typing import Any

from elegantpod.tracking.base import Logger, require


class WandbLogger(Logger):
    """Log to Weights & Biases (``pip install 'elegantpod[wandb]'``).

    Parameters
    ----------
    project, entity
        Where the runs go.
    dir
        The folder for W&B's files (its ``wandb/`` run folders); default W&B's own.
    mode
        ``"online"``, ``"offline"`` or ``"disabled"``; default: ``$WANDB_MODE``, else
        offline when no ``WANDB_API_KEY`` is set (no login prompt in a batch job).
    """

    name = "wandb"

    def __init__(
        self,
        project: str = "elegantpod",
        *,
        entity: str | None = None,
        dir: str | os.PathLike | None = None,  # noqa: A002 (wandb.init's own name)
        mode: str | None = None,
    ) -> None:
        require("wandb", "wandb")
        if not project:
            raise ValueError("WandbLogger needs a project name, got ''")
        if mode not in (None, "online", "offline", "disabled"):
            raise ValueError(f"mode must be online, offline or disabled, got {mode!r}")
        if mode is None and not os.environ.get("WANDB_MODE"):
            mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        self.project, self.entity, self.mode = project, entity, mode
        self.dir = None if dir is None else str(dir)
        self._group: str | None = None
        self._runs: dict[str, Any] = {}
        self._mutations: dict[str, list] = {}

    def _init(self, name: str, job_type: str, config: dict, tags=()) -> Any:
        import wandb

        if self.dir is not None:
            os.makedirs(self.dir, exist_ok=True)
        run = wandb.init(
            project=self.project,
            entity=self.entity,
            dir=self.dir,
            mode=self.mode,
            name=name,
            group=self._group,
            job_type=job_type,
            config=config,
            tags=list(tags)[:20],
            reinit="create_new",
        )
        run.define_metric("env_steps")
        run.define_metric("*", step_metric="env_steps")
        return run

    def open(self, group: str, config: dict[str, Any]) -> None:
        self._group = group
        self._runs["\0tournament"] = self._init(f"{group}-tournament", "tournament", config)

    def start_run(self, run_id, name, tags, params) -> None:
        labels = [f"{k}:{v}"[:64] for k, v in tags.items() if v]
        config = {**params, **{f"tag.{k}": v for k, v in tags.items()}}
        self._runs[run_id] = self._init(name, "pod", config, labels)
        self._mutations[run_id] = []

    def log_metrics(self, run_id, metrics, step) -> None:
        self._runs[run_id].log({**metrics, "env_steps": step})

    def log_params_change(self, run_id, changes, step) -> None:
        run = self._runs[run_id]
        numbers = {
            f"hparams/{k}": new
            for k, (_, new) in changes.items()
            if isinstance(new, int | float) and not isinstance(new, bool)
        }
        if numbers:
            run.log({**numbers, "env_steps": step})
        self._mutations[run_id].append({"env_steps": step, "changes": changes})
        run.summary["mutations"] = self._mutations[run_id]

    def log_tables(self, tables) -> None:
        import wandb

        run = self._runs.get("\0tournament")
        if run is None:
            return
        for name, rows in tables.items():
            cols = list(dict.fromkeys(k for r in rows for k in r)) or ["empty"]
            data = [[_cell(r.get(c)) for c in cols] for r in rows]
            run.log({name: wandb.Table(columns=cols, data=data)})

    def close(self) -> None:
        runs, self._runs = self._runs, {}
        for run in runs.values():
            run.finish()


def _cell(v: Any) -> Any:
    """A table cell W&B takes: numbers, text and ``None`` as they are, the rest as text."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    import json

    return json.dumps(v, default=str)
