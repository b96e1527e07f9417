"""``make demo``: the showcase on the embedded default, in a few minutes on a laptop.

A PPO + SAC tournament learns to trade 10 stocks of the shipped S&P 500 sample on an
embedded Dask ``LocalCluster``, ranked by Sharpe ratio on validation dates it never
trains on; its best agent is then backtested on later, held-out dates against
equal-weight buy-and-hold and the S&P 500 index, and the result is written as one
self-contained HTML report. Nothing is downloaded.
"""

from __future__ import annotations

import sys
from pathlib import Path

TICKERS = ["AAPL", "BAC", "CVX", "HD", "JNJ", "JPM", "KO", "MSFT", "WMT", "XOM"]


def run_demo(
    seed: int = 0,
    max_seconds: float = 150.0,
    out_dir: str | None = None,
    max_steps: int | None = None,
) -> int:
    """Run the demo; print the leaderboard, the backtest metrics and the report's path.

    Parameters
    ----------
    seed
        Tournament seed (pods' seeds derive from it).
    max_seconds
        Wall-clock budget of the tournament (the backtest and report take seconds more).
    max_steps
        An env-step budget too (over all pods): the tournament ends at whichever comes
        first. A fixed amount of work, for a run that must rank pods however busy the
        machine is (65,536: one 16,384-step segment for each of the four pods).
    out_dir
        Where the tournament store and the report go; ``None``:
        :func:`elegantpod.workdir` ``("demo")``, emptied first, so reruns do not pile up.

    Returns
    -------
    int
        0 when the tournament finished with no failed pod and the report was written.
    """
    from elegantpod.finance.backtests.backtest import backtest
    from elegantpod.finance.market.splits import DateSplits
    from elegantpod.finance.stats.verdict import verdict
    from elegantpod.number_text import steps
    from elegantpod.tournament.orchestrator import Tournament
    from elegantpod.tournament.progress import follow, leaderboard_note
    from elegantpod.workspace import workdir

    if not max_seconds > 0:
        raise ValueError(f"max_seconds must be > 0, got {max_seconds!r}")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0
    ):
        raise ValueError(f"max_steps must be an integer > 0, got {max_steps!r}")
    out = Path(out_dir) if out_dir else workdir("demo")
    splits = DateSplits(
        train=("2010-01-01", "2016-12-31"),
        validation=("2017-01-01", "2018-12-31"),
        backtest=("2019-01-01", "2022-12-31"),
    )
    t = Tournament(
        "StockTrading-v0",
        algos=["ppo", "sac"],
        pods=4,
        max_seconds=max_seconds,
        max_steps=max_steps,
        # long enough that a pod is scored after real training, not on its first few
        # thousand steps (a near-untrained agent once won the demo on noise)
        segment_steps=16_384,
        store=out / "store",
        seed=seed,
        **splits.tournament_options(
            fitness="sharpe", data="sp500", tickers=TICKERS, episode_days=63
        ),
    )
    print(
        f"PPO + SAC tournament on {len(TICKERS)} stocks, "
        f"train {splits.train[0]}..{splits.train[1]}, "
        f"ranked by Sharpe on {splits.validation[0]}..{splits.validation[1]}, "
        f"{max_seconds:.0f} s"
        + (f" or {max_steps:,} env steps" if max_steps is not None else "")
        + " on the embedded Dask cluster",
        file=sys.stderr,
    )
    t.start()  # no client given: the tournament starts (and later closes) a LocalCluster
    print(f"Dask dashboard: {t.cluster_info()['dashboard']}", file=sys.stderr)
    follow(t, every=10.0)
    s = t.wait()
    board = t.leaderboard
    cols = ["rank", "pod", "algo", "score_mean", "validation_dsr", "env_steps", "status"]
    cols = [c for c in cols if c in board]
    print(
        "\nLeaderboard (score = validation Sharpe ratio; validation_dsr = probability it "
        f"beats the best of {board.attrs.get('trials', '?')} luck-only evaluations)"
    )
    print(
        board[cols]
        .fillna("-")
        .to_string(index=False, float_format=lambda x: f"{x:.2f}", formatters={"env_steps": steps})
    )
    note = leaderboard_note(board["status"])
    if note:
        print(note)
    if board.empty:
        print(f"no segment finished: {s['error']}", file=sys.stderr)
        return 1
    baselines = t.baselines()
    print(
        "Baselines on the same validation range: "
        + ", ".join(f"{name} {score:.2f}" for name, score in baselines.items())
    )
    res = backtest(t, start=splits.backtest[0], end=splits.backtest[1], index="sp500")
    print(f"\nBacktest {splits.backtest[0]}..{splits.backtest[1]} (held out)")
    print(res.metrics().to_string(float_format=lambda x: f"{x:.3f}"))
    best = board.iloc[0]
    print(
        f"\nThe agent: {best['pod']} ({best['algo']}), {int(best['env_steps']):,} env steps "
        f"of training, chosen for the best validation Sharpe among {res.trials} scored "
        f"evaluations of {s['pods_total']} pods (each evaluation compared is a trial of the "
        "selection, which the deflated Sharpe ratio counts)."
    )
    print(verdict(res))
    report = res.to_html(out / "backtest_report.html")
    print(
        f"\n{s['pods_total']} pods ({s['pods_failed']} failed), "
        f"{steps(s['env_steps_total'])} env steps in {s['wall_seconds']:.0f} s; "
        f"best {s['best_pod']} "
        f"(Sharpe {s['best_score']:.2f} on validation)"
    )
    print(f"store: {out / 'store'}")
    print(f"HTML report: {report}")
    return 0 if s["status"] == "finished" and s["pods_failed"] == 0 else 1
