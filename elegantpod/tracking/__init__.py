"""Experiment tracking: TensorBoard, MLflow and W&B runs of tournaments and pods.

``Tournament(..., loggers=[TensorBoardLogger("runs")])`` or ``train(...,
logger=MLflowLogger())``: the process that runs the tournament logs (see
:mod:`~elegantpod.tracking.tracker`); each backend's library is imported only when
its logger is made, with an error naming the extra to install.

- ``base``: the ``Logger`` protocol and the escaping every text summary goes through.
- ``tracker``: one thread and a bounded queue feeding the loggers; a failing one costs
  a warning, never the run.
- ``train_run``: what ``train()`` logs.
- ``tensorboard_logger``, ``mlflow_logger``, ``wandb_logger``: one backend each.
"""

from __future__ import annotations

from elegantpod.tracking.base import Logger
from elegantpod.tracking.tracker import BACKENDS, Tracker, check_loggers, make_logger


def __getattr__(name: str):
    modules = {
        "TensorBoardLogger": "tensorboard_logger",
        "MLflowLogger": "mlflow_logger",
        "WandbLogger": "wandb_logger",
    }
    if name in modules:
        import importlib

        return getattr(importlib.import_module(f"elegantpod.tracking.{modules[name]}"), name)
    raise AttributeError(name)


__all__ = [
    "BACKENDS",
    "Logger",
    "MLflowLogger",
    "TensorBoardLogger",
    "Tracker",
    "WandbLogger",
    "check_loggers",
    "make_logger",
]
