"""``MLflowLogger``: MLflow runs, one per pod, nested under one run per tournament.

Through ``MlflowClient`` rather than MLflow's global (fluent) API, so two tournaments
in one process never share an "active run". MLflow params are immutable, so a
hyperparameter that changes is logged as the metric ``hparam/<name>`` at the step it
changed (its first value at step 0), and the change itself as a tag
``mutation.<step>`` (``{name: [old, new]}`` as JSON). The end's tables are JSON
artifacts of the tournament's run (``tables/leaderboard.json``...).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from elegantpod.tracking.base import Logger, require

DEFAULT_URI = "sqlite:///mlflow.db"
"""MLflow's own default since 3.7: a SQLite file in the working folder."""
PARAM_CHARS = 500
"""Longest param value sent (MLflow refuses long ones; a spec's data list can be long)."""


class MLflowLogger(Logger):
    """Log to MLflow (``pip install 'elegantpod[mlflow]'``).

    Parameters
    ----------
    tracking_uri
        A tracking server (``http://...``), ``sqlite:///path.db`` or a folder; default:
        ``$MLFLOW_TRACKING_URI``, else :data:`DEFAULT_URI`.
    experiment
        The experiment the runs go under (created if missing).
    artifact_location
        Where a new experiment keeps artifacts; default for a local SQLite store: the
        folder ``mlartifacts`` beside its file.
    """

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: str | os.PathLike | None = None,
        *,
        experiment: str = "elegantpod",
        artifact_location: str | None = None,
    ) -> None:
        require("mlflow", "mlflow")
        uri = str(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI)
        if not experiment:
            raise ValueError("MLflowLogger needs an experiment name, got ''")
        self.tracking_uri, self.experiment = uri, experiment
        if artifact_location is None and uri.startswith("sqlite:///"):
            db = Path(uri[len("sqlite:///") :]).expanduser().resolve()
            artifact_location = (db.parent / "mlartifacts").as_uri()
        self.artifact_location = artifact_location
        self._client = None
        self._experiment_id: str | None = None
        self._runs: dict[str, str] = {}  # our run ids -> MLflow's
        self._group_run: str | None = None

    def open(self, group: str, config: dict[str, Any]) -> None:
        from mlflow import MlflowClient

        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
            self._experiment_id = self._experiment()
        run = self._client.create_run(
            self._experiment_id, run_name=group, tags={"elegantpod.kind": "tournament"}
        )
        self._group_run = run.info.run_id
        self._params(self._group_run, _flat(config))

    def _experiment(self) -> str:
        found = self._client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return self._client.create_experiment(
                self.experiment, artifact_location=self.artifact_location
            )
        except Exception:  # another process made it first
            found = self._client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return found.experiment_id

    def _params(self, run: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(_key(k), str(v)[:PARAM_CHARS]) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow's batch limit
            self._client.log_batch(run, params=items[i : i + 100])

    def start_run(self, run_id, name, tags, params) -> None:
        tags = {**tags, "elegantpod.kind": "pod"}
        if self._group_run is not None:
            tags["mlflow.parentRunId"] = self._group_run
        run = self._client.create_run(self._experiment_id, run_name=name, tags=tags)
        self._runs[run_id] = run.info.run_id
        self._params(run.info.run_id, params)
        first = {f"hparam/{k}": v for k, v in params.items() if _is_number(v)}
        if first:
            self.log_metrics(run_id, first, 0)

    def log_metrics(self, run_id, metrics, step) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(_key(k), float(v), now, int(step)) for k, v in metrics.items()]
        self._client.log_batch(self._runs[run_id], metrics=items)

    def log_params_change(self, run_id, changes, step) -> None:
        run = self._runs[run_id]
        text = json.dumps(changes, default=str)[:5000]  # a tag holds 8,000 characters at most
        self._client.set_tag(run, f"mutation.{int(step)}", text)
        numbers = {f"hparam/{k}": new for k, (_, new) in changes.items() if _is_number(new)}
        if numbers:
            self.log_metrics(run_id, numbers, step)

    def log_tables(self, tables) -> None:
        if self._group_run is None:
            return
        for name, rows in tables.items():
            text = json.dumps(rows, indent=1, default=str)
            self._client.log_text(self._group_run, text, f"tables/{name}.json")

    def close(self) -> None:
        runs = [*self._runs.values(), *([self._group_run] if self._group_run else [])]
        self._runs, self._group_run = {}, None
        for run in runs:
            self._client.set_terminated(run, "FINISHED")


def _key(name: Any) -> str:
    """A name MLflow takes as a key (letters, digits, ``_-. /``; a user's ``env_kwargs``
    may hold any): anything else becomes ``_``, so one odd name costs no run."""
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in str(name))[:250] or "_"


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested spec as ``a.b`` keys (MLflow params are flat strings)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
