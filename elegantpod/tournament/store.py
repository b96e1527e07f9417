"""The tournament store: a directory or any fsspec URL that all workers can reach.

Layout::

    tournament.json      the tournament's spec (env, algorithms, budgets, seed)
    leaderboard.json     ranked entries (the orchestrator is the single writer)
    pods.json            every pod's record: algorithm, hyperparameters, lineage, status
    pods/<pod>/seg-00003.pt   checkpoint at the end of each segment

Every write is atomic: on a local filesystem a temp file is renamed over the target; on
object stores a single ``put`` is atomic per object.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import fsspec

from elegantpod.checkpoint import atomic_write_bytes


class Store:
    """Read and write a tournament's files under ``url``."""

    def __init__(self, url: str | os.PathLike):
        url = os.fspath(url)
        if not url:
            raise ValueError("store must be a directory path or an fsspec URL, got ''")
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.is_local = "file" in (
            self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        )
        self.url = str(Path(self.root).resolve()) if self.is_local else url.rstrip("/")

    def path(self, *parts: str) -> str:
        """Absolute path (local) or URL (remote) of a file in the store."""
        if self.is_local:
            return str(Path(self.url, *parts))
        return "/".join([self.url, *parts])

    def _fs_path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts]) if not self.is_local else self.path(*parts)

    def exists(self, *parts: str) -> bool:
        return self.fs.exists(self._fs_path(*parts))

    def write_bytes(self, name: str, data: bytes) -> None:
        if self.is_local:
            atomic_write_bytes(self.path(name), data)
        else:
            self.fs.pipe_file(self._fs_path(name), data)

    def read_bytes(self, name: str) -> bytes:
        return self.fs.cat_file(self._fs_path(name))

    def write_json(self, name: str, obj: Any) -> None:
        self.write_bytes(name, json.dumps(obj, indent=1, sort_keys=True, allow_nan=False).encode())

    def read_json(self, name: str, default: Any = None) -> Any:
        if not self.exists(name):
            return default
        return json.loads(self.read_bytes(name))

    def ensure(self) -> None:
        """Create the store's root (and prove it is writable)."""
        try:
            self.fs.makedirs(self._fs_path("pods"), exist_ok=True)
            self.write_bytes(".write-test", b"")
            self.fs.rm(self._fs_path(".write-test"))
        except OSError as exc:
            raise ValueError(f"store {self.url!r} is not writable: {exc}") from exc

    def checkpoint(self, pod_id: str, segment: int) -> str:
        """Where segment ``segment`` of ``pod_id`` checkpoints."""
        return self.path("pods", pod_id, f"seg-{segment:05d}.pt")
