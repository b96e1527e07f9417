"""Run every tutorial (and the dashboards in ``notebooks/``) top to bottom at the full
budget, as a reader would, and say which passed.

The test suite runs them with ``ELEGANTPOD_SMALL_BUDGET=1`` (seconds each), which checks
that every cell runs but not what the prose promises: a claim such as "the tournament
replaces a lagging pod" or "the winner beats buy-and-hold" needs the full budget to come
true. Each tutorial asserts those claims in cells guarded by ``if not SMALL:``; this
script is how they are checked. On a 2-core machine the whole run takes about half an
hour.

Usage::

    make tutorials                                    # all of them, full budget
    .venv/bin/python tutorials/run_all.py 03 04       # the ones whose name starts so
    .venv/bin/python tutorials/run_all.py --small     # the test suite's budget

Executed copies, outputs included, go to ``tutorials/executed/`` (not committed), so a
failure can be read where it happened. Exits 1 when any notebook failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def notebooks(prefixes: list[str]) -> list[Path]:
    """The tutorials, then the dashboards, whose file names start with one of
    ``prefixes`` (all of them when there is none)."""
    found = sorted((ROOT / "tutorials").glob("*.ipynb")) + sorted(
        (ROOT / "notebooks").glob("*.ipynb")
    )
    chosen = [p for p in found if not prefixes or any(p.name.startswith(x) for x in prefixes)]
    if prefixes and not chosen:
        names = ", ".join(p.name for p in found)
        raise SystemExit(f"no notebook starts with {prefixes!r}; there are: {names}")
    return chosen


def run(path: Path, out: Path, small: bool, timeout: int) -> tuple[bool, float, str]:
    """Execute ``path`` in a fresh kernel; write the executed copy to ``out``. Returns
    ``(passed, seconds, what failed)``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    os.environ["ELEGANTPOD_SMALL_BUDGET"] = "1" if small else "0"
    started, failure = time.monotonic(), ""
    with tempfile.TemporaryDirectory(prefix="elegantpod-tutorial-") as cwd:
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": cwd}}
        )
        try:
            client.execute()
        except CellExecutionError as exc:
            failure = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
        except Exception as exc:  # a dead kernel, a timeout
            failure = f"{type(exc).__name__}: {exc}"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / path.name)
    return not failure, time.monotonic() - started, failure


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="file name prefixes (01, 03_tournament...)")
    ap.add_argument("--small", action="store_true", help="the test suite's small budget")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    ap.add_argument("--out", type=Path, default=ROOT / "tutorials" / "executed")
    args = ap.parse_args(argv)
    if args.timeout <= 0:
        ap.error(f"--timeout must be positive, got {args.timeout}")
    chosen = notebooks(args.names)
    results = []
    for path in chosen:
        print(f"{path.relative_to(ROOT)} ...", flush=True)
        ok, seconds, failure = run(path, args.out, args.small, args.timeout)
        results.append(ok)
        print(
            f"  {'passed' if ok else 'FAILED'} in {seconds:.0f} s"
            + (f": {failure}" if failure else ""),
            flush=True,
        )
    budget = "small" if args.small else "full"
    print(
        f"{sum(results)} of {len(results)} passed at the {budget} budget; "
        f"executed copies in {args.out}"
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
