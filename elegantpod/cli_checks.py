"""Checks of the command line's parsed arguments: each refuses a bad value before any
import or cluster work, naming the value and what is accepted.

Apart from :mod:`elegantpod.cli_args` (the parser and its ``KEY=VALUE`` lists), so each
stays short; :func:`check_args` runs first in :func:`elegantpod.cli.main`.
"""

from __future__ import annotations

import os

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
"""Devices the command line accepts."""
MAX_WORKERS = 1024
"""Most local worker processes ``--workers`` starts."""
ADDRESS_SCHEMES = ("tcp://", "tls://", "ucx://")
READ_ONLY_PROTOCOLS = frozenset(
    ("zip", "tar", "libarchive", "http", "https", "github", "gist", "git", "data", "reference")
)
"""fsspec protocols that cannot hold a store: archives and web pages are read-only."""


def max_threads() -> int:
    """Most torch threads ``--threads`` asks for: 4 per core (256 where unknown); tens of
    thousands crash the process (SIGSEGV) in the thread pool."""
    cpus = os.cpu_count()
    return 4 * cpus if cpus else 256


def check_args(args) -> None:
    """Refuse values that would fail late, crash or do something other than asked,
    before any import or cluster work; each error names the value and what is accepted."""
    import re

    device = getattr(args, "device", None)
    if device is not None and not re.fullmatch(r"auto|cpu|mps|cuda(:[0-9]{1,4})?", device):
        raise ValueError(f"unknown device {device[:200]!r}: use one of {', '.join(DEVICES)}")
    threads = getattr(args, "threads", None)
    if threads is not None and not 0 <= threads <= max_threads():
        raise ValueError(
            f"threads must be an integer in 0..{max_threads()} (0: torch's own setting), "
            f"got {threads}"
        )
    workers = getattr(args, "workers", None)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be in 1..{MAX_WORKERS}, got {workers}")
    address = getattr(args, "address", None)
    if address is not None and not (
        address.startswith(ADDRESS_SCHEMES) or re.fullmatch(r"[A-Za-z0-9.\-]+:[0-9]{1,5}", address)
    ):
        raise ValueError(
            f"--address {address[:200]!r}: give a Dask scheduler as "
            f"{', '.join(s + 'host:port' for s in ADDRESS_SCHEMES)} or host:port"
        )
    required = {"train": ("env", "algo"), "tournament": ("store",)}
    for name in required.get(getattr(args, "command", None), ()):
        if getattr(args, name, None) is None:
            raise ValueError(
                f"--{name} is required (on the command line, or {name}: in --config or --preset)"
            )
    if getattr(args, "out", None) == "":
        raise ValueError("--out '' names no folder: give a folder (the working one is '.')")
    if getattr(args, "store", None) is not None:
        check_store_argument(args.store)
    if args.command == "export":
        check_export_args(args)


def check_export_args(args) -> None:
    """``export``: the checkpoint exists, the format is known and agrees with ``--out``,
    and ``--out`` lands in an existing folder; ``args.out`` becomes the file to write."""
    from pathlib import Path

    source = Path(args.checkpoint)
    if not source.exists():
        raise ValueError(f"--checkpoint {args.checkpoint[:200]!r} does not exist")
    from elegantpod.policy_export import FORMATS, export_format

    fmt = args.export_format
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown --format {fmt[:50]!r}: use one of {', '.join(FORMATS)}")
    if args.out is None:
        folder = source if source.is_dir() else source.parent
        args.out = str(folder / f"policy{FORMATS[fmt or 'onnx']}")
    args.export_format = export_format(args.out, fmt)
    if not Path(args.out).parent.is_dir():
        raise ValueError(f"--out {args.out[:200]!r}: its folder does not exist")


def check_store_argument(store: str) -> None:
    """A store is a folder (new or existing) or a writable object-store URL."""
    where = store[:200]
    protocols = [part.split("://", 1)[0].lower() for part in store.split("::") if "://" in part]
    if "::" in store and not protocols:
        protocols = [store.split("::", 1)[0].lower()]
    refused = [p for p in protocols if p in READ_ONLY_PROTOCOLS]
    if refused:
        raise ValueError(
            f"--store {where!r}: a store must be a folder or an object-store URL "
            f"(s3://, gs://, az://...); {refused[0]}:// is read-only"
        )
    if protocols and protocols != ["file"]:
        return
    path = store.split("://", 1)[1] if protocols else store
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(
            f"--store {where!r} is not a folder: a store must be a folder or an object-store URL"
        )
