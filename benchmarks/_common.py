"""Shared helpers of the benchmark scripts: machine info, summaries, atomic JSON, tables.

Not part of the ``elegantpod`` package: the scripts in this folder import it as a sibling
module (``python benchmarks/NAME.py`` puts this folder first on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
QUICK_DIR = Path(tempfile.gettempdir()) / "elegantpod-bench"


def default_out(name: str, quick: bool) -> Path:
    """``benchmarks/results/NAME.json``; quick smoke runs go under the temp dir instead."""
    if quick:
        return QUICK_DIR / f"{name}-quick.json"
    return RESULTS_DIR / f"{name}.json"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git_revision() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=BENCH_DIR, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = bool(status) if status is not None else None
    return {"commit": git("rev-parse", "HEAD"), "dirty": dirty}


def machine_info() -> dict[str, Any]:
    """Where and with what the numbers were measured (the load average says how busy)."""
    import torch  # the scripts import torch anyway; kept local so this module stays light

    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "processor": platform.processor(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gymnasium": _version("gymnasium"),
        "numpy": _version("numpy"),
        "stable_baselines3": _version("stable-baselines3"),
        "elegantpod": _version("elegantpod"),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "loadavg_at_start": loadavg(),
        "git": _git_revision(),
    }


def apply_threads(threads: int | None) -> int:
    """``torch.set_num_threads(threads)`` unless ``None``; returns the count in effect.

    On a small machine shared with other busy processes, torch's intra-op thread pool can
    stall badly (a worker thread descheduled mid-op), so the count is an explicit,
    recorded choice: the default leaves torch's own choice alone.
    """
    import torch

    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads!r}")
        torch.set_num_threads(int(threads))
    return torch.get_num_threads()


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages, rounded; ``None`` where unavailable."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def now_iso() -> str:
    """The current time, UTC, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of per-seed values, with the raw values kept."""
    vals = [float(v) for v in values]
    if not vals:
        return {"median": math.nan, "min": math.nan, "max": math.nan, "n": 0, "values": []}
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
        "values": vals,
    }


def safe_ratio(num: float, den: float) -> float:
    """``num / den``; NaN when either is NaN or ``den`` is not positive."""
    if math.isnan(num) or math.isnan(den) or den <= 0:
        return math.nan
    return num / den


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def nonfinite_to_none(obj: Any) -> Any:
    """``obj`` with every NaN / inf (in nested dicts and lists too) replaced by ``None``,
    so the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: nonfinite_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nonfinite_to_none(v) for v in obj]
    return obj


def write_json_atomic(path: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` to a temp file next to ``path``, fsync it, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(nonfinite_to_none(data), fh, indent=2, sort_keys=False, default=_json_default)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain, right-aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def fmt_range(summary: dict[str, Any], fmt: str = "{:.3g}") -> str:
    """``median [min, max]`` of a :func:`summarize` result."""
    if not summary.get("n"):
        return "-"
    med, lo, hi = (fmt.format(summary[k]) for k in ("median", "min", "max"))
    return f"{med} [{lo}, {hi}]"


def log(msg: str) -> None:
    """Progress line on stderr, flushed (stdout carries the final table)."""
    print(msg, file=sys.stderr, flush=True)
