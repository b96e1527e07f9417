"""Experiment tracking: TensorBoard, MLflow and W&B runs of tournaments and pods.

``Tournament(..., loggers=[TensorBoardLogger("runs")])`` or ``train(...,
logger=MLflowLogger())``: the process that runs the tournament logs (see
:mod:`~elegantpod.tracking.tracker`); each backend's library is imported only when
its logger is made, with an error naming the extra to install.
"""

from __future__ import annotations

from elegantpod.tracking.base import Logger
from elegantpod.tracking.tracker import Tracker, check_loggers

BACKENDS = ("tensorboard", "mlflow", "wandb")
"""The backends by name (``--track``, ``loggers=["tensorboard"]``)."""


def make_logger(kind: str, where: str | None = None) -> Logger:
    """The backend named ``kind``; ``where`` is its folder (TensorBoard), tracking URI
    (MLflow) or project (W&B); ``None``: its default. ``ValueError`` for an unknown
    name, ``ImportError`` naming the extra when its library is missing."""
    if kind == "tensorboard":
        from elegantpod.tracking.tensorboard_logger import TensorBoardLogger

        return TensorBoardLogger(where or "runs")
    if kind == "mlflow":
        from elegantpod.tracking.mlflow_logger import MLflowLogger

        return MLflowLogger(where)
    if kind == "wandb":
        from elegantpod.tracking.wandb_logger import WandbLogger

        return WandbLogger(where or "elegantpod")
    raise ValueError(f"unknown tracking backend {kind!r}: use one of {', '.join(BACKENDS)}")


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
