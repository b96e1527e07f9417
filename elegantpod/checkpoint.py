"""Checkpoints: atomic writes, ``weights_only`` loads, clear errors.

A checkpoint is a plain dict of tensors, numbers and strings (the pod spec as JSON), so
``torch.load(..., weights_only=True)`` can read it: loading never runs pickled code.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

FORMAT = "elegantpod-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the learner it is loaded into."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide reports from other readers
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _is_url(path: str | os.PathLike) -> bool:
    s = os.fspath(path)
    return "://" in s and not s.startswith("file://")


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> str:
    """Save ``payload`` atomically: a reader sees the old file or the new one, never half.

    ``path`` is a local path or an fsspec URL (object stores write one object at once).
    """
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, **payload}, buf)
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(os.fspath(path))
        fs.pipe_file(p, buf.getvalue())
        return os.fspath(path)
    atomic_write_bytes(path, buf.getvalue())
    return os.fspath(path)


def load_checkpoint(
    path: str | os.PathLike, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load a checkpoint safely (``weights_only=True``).

    Raises
    ------
    CheckpointError
        If the file is missing, corrupt, or not an elegantpod checkpoint.
    """
    if _is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(os.fspath(path))
        if not fs.exists(p):
            raise CheckpointError(f"checkpoint {os.fspath(path)!r} does not exist")
        source: Any = io.BytesIO(fs.cat_file(p))
    else:
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
        source = path
    try:
        data = torch.load(source, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several types for truncated/garbage files
        raise CheckpointError(
            f"checkpoint {str(path)!r} is corrupt or not a torch file: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not an elegantpod checkpoint")
    if data.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has format version {data.get('version')!r}; "
            f"this elegantpod reads version {VERSION}"
        )
    return data
