"""A policy network written as a file that runs without elegantpod: ONNX, ``torch.export``
or TorchScript, the observation normalisation and action scaling inside the graph.

Which exporter: torch 2.13's ``torch.onnx.export`` still offers the legacy TorchScript
exporter (``dynamo=False``), but warns that it is deprecated and will be removed;
the ``torch.export``-based one (``dynamo=True``, the default, which needs ``onnxscript``)
is used here. It warns of nothing of ours, only of torch's own internals (a pytree
``LeafSpec`` deprecation and a log line per torchvision operator when torchvision is
absent), which are silenced for the export alone. TorchScript itself is deprecated in
torch 2.13 (``torch.jit`` warns so); it is offered for runtimes that still load it,
and ``.pt2`` (``torch.export``) is the torch format to prefer.

Every format takes ``obs``, float32 ``(batch, *obs_shape)`` with a dynamic batch, and
gives ``action``: int64 ``(batch,)`` for discrete actions (the argmax: an export is the
deterministic policy) or float32 ``(batch, act_dim)`` within the env's bounds. Files are
written atomically (a reader never sees half of one).
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import warnings
from pathlib import Path

import torch

from elegantpod.safe_files import atomic_write_bytes

FORMATS = {"onnx": ".onnx", "export": ".pt2", "torchscript": ".pt"}
"""Export formats and the suffix each writes by default."""
SUFFIXES = {".onnx": "onnx", ".pt2": "export", ".pt": "torchscript", ".ts": "torchscript"}
"""The format a file name's suffix says."""


def export_format(path: str | os.PathLike, format: str | None = None) -> str:
    """The format to write ``path`` in: ``format`` when given (checked against the
    suffix when it says one), else the suffix's.

    Raises
    ------
    ValueError
        Naming an unknown format, a suffix that says none, or the two disagreeing.
    """
    suffix = Path(path).suffix.lower()
    said = SUFFIXES.get(suffix)
    if format is None:
        if said is None:
            raise ValueError(
                f"cannot tell the export format of {os.fspath(path)[:200]!r}: name a file "
                f"ending in {', '.join(SUFFIXES)}, or pass format= one of {', '.join(FORMATS)}"
            )
        return said
    if format not in FORMATS:
        raise ValueError(
            f"unknown export format {str(format)[:50]!r}: use one of {', '.join(FORMATS)}"
        )
    if said is not None and said != format:
        raise ValueError(
            f"format {format!r} and the file name {os.fspath(path)[:200]!r} disagree "
            f"(a {suffix} file is {said!r}); {format!r} files end in {FORMATS[format]}"
        )
    return format


def export_policy_net(
    net: torch.nn.Module, obs_shape: tuple[int, ...], path: str | os.PathLike, format=None
) -> str:
    """Write ``net`` (observations -> actions) to ``path`` in ``format`` (see
    :func:`export_format`); returns the path. The module is traced on the CPU."""
    fmt = export_format(path, format)
    net = copy.deepcopy(net).cpu().eval()  # a copy: a GPU policy stays where it is
    example = torch.zeros(2, *obs_shape)  # 2: a batch of 1 would be specialised
    batch = {"obs": {0: torch.export.Dim.DYNAMIC}}
    buf = io.BytesIO()
    if fmt == "onnx":
        with _torch_internals_quiet():
            program = torch.onnx.export(
                net,
                (example,),
                dynamo=True,
                input_names=["obs"],
                output_names=["action"],
                dynamic_shapes=batch,
                verbose=False,
            )
        buf.write(program.model_proto.SerializeToString())
    elif fmt == "export":
        torch.export.save(torch.export.export(net, (example,), dynamic_shapes=batch), buf)
    else:
        torch.jit.save(torch.jit.trace(net, example), buf)
    atomic_write_bytes(path, buf.getvalue())
    return os.fspath(path)


@contextlib.contextmanager
def _torch_internals_quiet():
    """The ONNX exporter's notices about torch itself, off for one export (see the
    module's docstring); anything else still warns."""
    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
            )
            yield
    finally:
        logger.setLevel(level)
