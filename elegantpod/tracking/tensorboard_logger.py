"""``TensorBoardLogger``: TensorBoard event files, one run folder per pod.

Layout: ``<log_dir>/<group>/<pod>/`` for each pod's scalars (``fitness``,
``losses/<name>``..., ``hparams/<name>`` at the step a hyperparameter changed) and
``<log_dir>/<group>/tournament/`` for the spec and the end's tables as text (Markdown
tables, which TensorBoard's text tab renders). ``tensorboard --logdir <log_dir>`` shows
every pod of every tournament side by side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from elegantpod.tracking.base import Logger, markdown_code, markdown_table, require


class TensorBoardLogger(Logger):
    """Write TensorBoard event files under ``log_dir`` (``pip install
    'elegantpod[tensorboard]'``).

    Parameters
    ----------
    log_dir
        The folder ``tensorboard --logdir`` reads; created if missing.
    """

    name = "tensorboard"

    def __init__(self, log_dir: str | os.PathLike = "runs") -> None:
        if not str(log_dir):
            raise ValueError("TensorBoardLogger needs a folder, got ''")
        require("tensorboard", "tensorboard")  # now: a missing extra fails before any run
        self.log_dir = Path(log_dir)
        self._group_dir: Path | None = None
        self._writers: dict[str, Any] = {}

    def _writer(self, run: str):
        w = self._writers.get(run)
        if w is None:
            from torch.utils.tensorboard import SummaryWriter

            w = self._writers[run] = SummaryWriter(str(self._group_dir / _safe(run)))
        return w

    def open(self, group: str, config: dict[str, Any]) -> None:
        self._group_dir = self.log_dir / _safe(group)
        text = markdown_code(json.dumps(config, indent=2, default=str))
        self._writer("tournament").add_text("config", text, 0)

    def start_run(self, run_id, name, tags, params) -> None:
        w = self._writer(run_id)
        rows = [{"tag": k, "value": v} for k, v in tags.items()]
        rows += [{"tag": f"hparam {k}", "value": v} for k, v in params.items()]
        w.add_text("run", markdown_table(rows), 0)
        for k, v in params.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                w.add_scalar(f"hparams/{k}", v, 0)

    def log_metrics(self, run_id, metrics, step) -> None:
        w = self._writer(run_id)
        for k, v in metrics.items():
            w.add_scalar(k, v, step)

    def log_params_change(self, run_id, changes, step) -> None:
        w = self._writer(run_id)
        rows = [{"hparam": k, "old": old, "new": new} for k, (old, new) in changes.items()]
        w.add_text("mutations", markdown_table(rows), step)
        for k, (_, new) in changes.items():
            if isinstance(new, int | float) and not isinstance(new, bool):
                w.add_scalar(f"hparams/{k}", new, step)

    def log_tables(self, tables) -> None:
        w = self._writer("tournament")
        for name, rows in tables.items():
            w.add_text(name, markdown_table(rows), 0)

    def close(self) -> None:
        writers, self._writers = self._writers, {}
        for w in writers.values():
            w.close()


def _safe(name: str) -> str:
    """A run's folder name: no separators or dots that would leave ``log_dir``."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(name))
    return cleaned or "_"
