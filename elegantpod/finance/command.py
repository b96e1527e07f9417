"""``elegantpod backtest``: what the command runs, once its arguments are parsed.

The command line (:mod:`elegantpod.cli.main`) declares the arguments and imports this module
only when the command runs, so that the generic command line imports nothing of the
finance package.
"""

from __future__ import annotations

import json

BUILTIN_INDEXES = ("sp500",)
"""Index benchmarks that ship with the package (``--index sp500``)."""


def run(args) -> int:
    """Run ``elegantpod backtest`` with parsed ``args``: the backtest, then its metrics
    and verdict (or one JSON line), and the HTML report where ``--html`` asks for one.

    Raises
    ------
    ValueError
        For a report path that cannot be written (checked before the backtest runs), an
        index that is neither built in nor a local CSV of levels, or anything the
        backtest refuses.
    """
    from elegantpod.checks.overrides import env_kwargs
    from elegantpod.finance.backtests.backtest import backtest
    from elegantpod.finance.stats.verdict import verdict
    from elegantpod.safe_files import check_report_path

    if args.html is not None:
        check_report_path(args.html)  # before the backtest runs
    index = read_index(args.index)
    result = backtest(
        args.checkpoint,
        data=args.data,
        start=args.start,
        end=args.end,
        index=index,
        device=args.device,
        name=args.name,
        allow_in_sample=args.allow_in_sample,
        allow_remote=args.allow_remote,
        trials=args.trials,
        **env_kwargs(args.env_arg),
    )
    said = verdict(result)
    if args.html is not None:
        result.to_html(args.html)
    if args.json:
        d = result.to_dict()
        d["html"] = args.html
        d["verdict"] = said
        print(json.dumps(d, sort_keys=True), flush=True)
    else:
        if result.in_sample:
            print(f"IN-SAMPLE: {result.in_sample}")
        print(result.metrics().to_string(float_format=lambda x: f"{x:.4f}"))
        print(f"verdict: {said}")
        if args.html is not None:
            print(f"report: {args.html}")
    return 0


def read_index(index: str | None):
    """``None``, a built-in index (``sp500``, any case), or a CSV of (date, level) read
    as a Series."""
    if index is None:
        return index
    if index.lower() in BUILTIN_INDEXES:
        return index.lower()
    if "://" in index:  # a URL would make the backtest fetch it
        raise ValueError(
            f"--index {index[:200]!r} is a URL: give a built-in index "
            f"({', '.join(BUILTIN_INDEXES)}) or a local CSV file of dates and index levels"
        )
    import pandas as pd

    try:
        frame = pd.read_csv(index, index_col=0, parse_dates=True)
    except (FileNotFoundError, IsADirectoryError):
        raise ValueError(
            f"--index {index!r} is neither a built-in index ({', '.join(BUILTIN_INDEXES)}) "
            "nor a CSV file of dates and index levels"
        ) from None
    if frame.shape[1] < 1 or not isinstance(frame.index, pd.DatetimeIndex):
        raise ValueError(f"--index {index!r} must be a CSV of dates and index levels")
    series = frame.iloc[:, 0]
    from elegantpod.finance.market.names import check_name

    return series.rename(check_name(series.name, "index name", index))
