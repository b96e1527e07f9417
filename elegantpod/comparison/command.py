"""``elegantpod compare``: what the command runs, once its arguments are parsed.

The command line (:mod:`elegantpod.cli.main`) declares the arguments and imports this
module only when the command runs.
"""

from __future__ import annotations

import json

from elegantpod.checks.json_values import json_safe


def run(args) -> int:
    """Run ``elegantpod compare`` with parsed ``args``: read every run, print the figures
    (a text table, Markdown with ``--markdown`` or one JSON line with ``--json``) and
    write the HTML report where ``--html`` asks for one.

    Raises
    ------
    ValueError
        For a method given without runs or twice, a report path that cannot be written
        (both checked before any run is read), or anything :func:`compare` refuses.
    """
    from elegantpod.comparison.comparison import compare
    from elegantpod.safe_files import check_report_path

    runs: dict[str, list[str]] = {}
    for name, *paths in args.methods:
        if not paths:
            raise ValueError(f"--method {name[:80]!r} has no runs: give its stores or run folders")
        if name in runs:
            raise ValueError(f"--method {name[:80]!r} is given twice")
        runs[name] = paths
    if args.html is not None:
        check_report_path(args.html)
    result = compare(
        runs,
        args.target,
        budget=args.budget,
        title=args.title,
        out=args.html,
        family=[tuple(p) for p in args.pair] if args.pair else args.family,
        alternative=args.alternative,
        level=args.level,
        paired={"auto": None, "yes": True, "no": False}[args.paired],
    )
    if args.json:
        print(json.dumps(json_safe(result.to_dict()), sort_keys=True))
    elif args.markdown:
        print(result.to_markdown())
    else:
        print(text_table(result))
        if args.html is not None:
            print(f"report: {args.html}")
    return 0


def text_table(result) -> str:
    """The methods and the verdicts as plain text for a terminal: the solved fraction
    beside the RMST and the time IQM (``>=`` where censoring makes it a lower bound)."""
    from elegantpod.comparison.report import (
        fraction_text,
        interval_text,
        time_iqm_text,
        verdict_lines,
    )

    rows = [
        (
            "method",
            "solved [95% CI]",
            "RMST s [95% CI]",
            "IQM s to target [95% CI]",
            "IQM final [95% CI]",
        )
    ]
    for f in result.figures.values():
        rows.append(
            (
                f.method,
                fraction_text(f.solved, f.runs),
                interval_text(f.rmst),
                time_iqm_text(f),
                interval_text(f.final_iqm),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [result.title]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines += verdict_lines(result)
    return "\n".join(lines)
