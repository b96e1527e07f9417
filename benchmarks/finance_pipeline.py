"""The paper's trading pipeline on the shipped S&P 500 sample, reported honestly.

Why: section 5.3 of the paper trains trading agents in a tournament, keeps the ones with
the best risk-adjusted validation performance, and backtests them on later dates. This
script does exactly that with the 20 shipped stocks: training windows drawn from
1990-2015, pods ranked by their Sharpe ratio over 2016-2018 (validation), and the
leaderboard's best agent backtested once over 2019-2022 against equal-weight buy-and-hold
of the same 20 stocks and the S&P 500 index, all measured in the same run over the same
days with the same 0.1% transaction cost. Whatever the numbers are, they go in the
README.

Writes ``benchmarks/results/finance_pipeline.json`` and the HTML report
``benchmarks/results/finance_report.html``.

Usage::

    python benchmarks/finance_pipeline.py [--seconds 600] [--workers 2] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import (
    QUICK_DIR,
    RESULTS_DIR,
    default_out,
    format_table,
    log,
    machine_info,
    now_iso,
    write_json_atomic,
)

from elegantpod import Tournament, cluster
from elegantpod.finance import DateSplits, backtest

NAME = "finance_pipeline"
SPLITS = DateSplits(
    train=("1990-01-01", "2015-12-31"),
    validation=("2016-01-01", "2018-12-31"),
    backtest=("2019-01-01", "2022-12-31"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="tournament wall budget")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--algos", default="ppo,sac")
    ap.add_argument("--episode-days", type=int, default=252)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="60 s smoke run, results to temp")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    seconds = 60.0 if args.quick else args.seconds
    out = Path(args.out) if args.out else default_out(NAME, args.quick)
    report = (QUICK_DIR if args.quick else RESULTS_DIR) / "finance_report.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    options = SPLITS.tournament_options(
        fitness="sharpe", data="sp500", episode_days=args.episode_days
    )
    client = cluster(n_workers=args.workers, dashboard_address=None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = Tournament(
                "StockTrading-v0",
                algos=args.algos,
                pods=args.pods,
                store=str(Path(tmp) / "store"),
                client=client,
                max_seconds=seconds,
                seed=args.seed,
                **options,
            )
            t0 = time.monotonic()
            t.start()
            summary = t.wait()
            wall = time.monotonic() - t0
            board = t.leaderboard
            t_bt = time.monotonic()
            result = backtest(
                t,
                start=SPLITS.backtest[0],
                end=SPLITS.backtest[1],
                index="sp500",
                name=f"Best agent ({board['algo'].iloc[0].upper()} {board['pod'].iloc[0]})",
            )
            backtest_seconds = time.monotonic() - t_bt
            result.to_html(report, title="elegantpod: S&P 500 sample, backtest 2019-2022")
            top = board.head(5)[["pod", "algo", "score_mean", "env_steps", "parent"]]
    finally:
        c = client.cluster
        client.close()
        c.close()
    table = result.metrics()
    rows = [
        [
            name,
            *(
                f"{100 * row[k]:.1f}%"
                for k in ("cumulative_return", "annual_return", "annual_volatility", "max_drawdown")
            ),
            *(f"{row[k]:.2f}" for k in ("sharpe", "calmar", "sortino")),
        ]
        for name, row in table.iterrows()
    ]
    print(
        format_table(
            ["strategy", "cum", "annual", "vol", "max dd", "sharpe", "calmar", "sortino"], rows
        )
    )
    agent, ew = table.iloc[0], table.iloc[1]
    data = {
        "name": NAME,
        "when": now_iso(),
        "machine": machine_info(),
        "quick": args.quick,
        "splits": {k: list(getattr(SPLITS, k)) for k in ("train", "validation", "backtest")},
        "tournament": {
            "algos": args.algos.split(","),
            "pods": args.pods,
            "workers": args.workers,
            "episode_days": args.episode_days,
            "fitness": "sharpe (validation 2016-2018)",
            "budget_seconds": seconds,
            "wall_seconds": wall,
            "env_steps_total": summary["env_steps_total"],
            "pods_total": summary["pods_total"],
            "best_validation_sharpe": summary["best_score"],
            "top5": top.to_dict(orient="records"),
        },
        "backtest": result.to_dict(),
        "backtest_seconds": backtest_seconds,
        "ratios": {
            "sharpe_agent_over_equal_weight": float(agent["sharpe"] / ew["sharpe"]),
            "annual_return_agent_minus_equal_weight": float(
                agent["annual_return"] - ew["annual_return"]
            ),
        },
        "report": str(report),
        "note": "one tournament, one backtest: a single sample of a noisy process",
    }
    write_json_atomic(out, data)
    log(f"wrote {out} and {report}")


if __name__ == "__main__":
    main()
