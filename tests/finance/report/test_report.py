"""The HTML report: self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from elegantpod.config import PodSpec
from elegantpod.finance.backtests.backtest import backtest
from elegantpod.finance.backtests.result import BacktestResult
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.report.report import render_html
from elegantpod.finance.stats.verdict import verdict
from elegantpod.pod.pod import Pod
from tests.finance.backtests.test_backtest import write_market
from tests.helpers import need_chromium, open_report

EVIL = "<script>alert(1)</script>"
EVIL_NAME = '<img src=x onerror="alert(2)">'
CHARTS = 6  # equity, drawdown, excess return, rolling, weights, return distribution
SECTIONS = (
    "metrics",
    "verdict",
    "sharpe-ci",
    "deflated",
    "equity",
    "drawdown",
    "drawdowns",
    "relative",
    "excess",
    "rolling",
    "exposure",
    "one-stock",  # the largest position in words (flagged when one stock dominates)
    "concentration",
    "distribution",
    "return-stats",
    "monthly",
    "monthly-1",  # equal weight's months beside the agent's
    "trade-days",
    "trades",
    "agent",
    "spec",
    "caveats",
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    market = write_market(d / "closes.csv", days=330, tickers=["AAA", EVIL, "CCC"])
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        max_steps=1024,
        eval_episodes=1,
        env_kwargs={"data": str(market), "end": "2015-12-31", "episode_days": 40},
        extra={"note": EVIL},
    )
    pod = Pod(spec, out_dir=d / "pod")
    pod.run()
    return pod


@pytest.fixture(scope="module")
def result(trained):
    return backtest(trained, start="2016-01-04", end="2016-03-31", name=EVIL_NAME)


def test_every_user_string_is_escaped(result, tmp_path):
    path = result.to_html(tmp_path / "report.html")
    text = path.read_text(encoding="utf-8")
    assert EVIL not in text and EVIL_NAME not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in text
    # the only tags are ours: no script element at all, no event handler attributes
    assert "<script" not in text.lower()
    assert not re.search(r"<[^>]+\son\w+=", text)


def test_report_is_self_contained(result, tmp_path):
    text = result.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    assert text.count('src="data:image/png;base64,') == CHARTS
    assert not re.search(r"(src|href)=\"(https?:)?//", text)  # nothing fetched
    assert "@import" not in text and "url(" not in text
    for section in SECTIONS:
        assert f'id="{section}"' in text or f"id='{section}'" in text, section
    assert os.stat(tmp_path / "r.html").st_mode & 0o044  # readable by others


def test_report_path_is_checked_and_writes_are_atomic(result, tmp_path):
    with pytest.raises(ValueError, match="end in .html"):
        result.to_html(tmp_path / "report.txt")
    with pytest.raises(ValueError, match="does not exist"):
        result.to_html(tmp_path / "missing" / "report.html")
    target = tmp_path / "keep.html"
    target.write_text("old report")
    result.to_html(target)
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_report_in_headless_chromium(result, tmp_path):
    need_chromium()
    path = result.to_html(tmp_path / "report.html")
    shot = tmp_path / "report.png"
    page = open_report(path, shot)
    assert page["dialogs"] == []  # no injected script ran
    assert all(u.startswith(("file://", "data:")) for u in page["requests"]), page["requests"]
    assert len(page["rows"]) == 2  # agent and equal-weight buy & hold
    assert page["rows"][0][0] == EVIL_NAME  # shown as text
    assert EVIL in page["text"]
    assert page["chart_loaded"] and page["chart_std"] > 10  # a drawn chart, not a blank box
    assert shot.stat().st_size > 20_000
    for heading in ("Did it beat doing nothing?", "Worst drawdown periods", "Caveats of the data"):
        assert heading in page["text"]
    assert verdict(result) in page["text"]  # the sentence, shown as text
    keep = os.environ.get("ELEGANTPOD_ARTIFACTS")
    if keep:
        shutil.copy(shot, os.path.join(keep, "backtest_report.png"))


DOLLAR = "$\\foo{$"  # what `backtest --name '$\foo{$'` passes: not valid mathtext


def test_dollar_signs_are_plain_text_in_charts(tmp_path):
    """Names with ``$`` reach matplotlib's legend (agent, benchmarks): no mathtext parse,
    and no LaTeX even where the user's matplotlibrc turns it on."""
    import matplotlib
    import pandas as pd

    market = write_market(tmp_path / "cl$ses.csv", days=330, tickers=["$AAA", "B$B", "$C{$"])
    spec = PodSpec(
        env_id="StockTrading-v0",
        algo="ppo",
        max_steps=512,
        eval_episodes=1,
        env_kwargs={"data": str(market), "end": "2015-12-31", "episode_days": 40},
    )
    pod = Pod(spec)
    pod.run()
    dates = pd.bdate_range("2015-01-01", "2016-12-31")
    index = pd.Series(range(100, 100 + len(dates)), index=dates, name="$\\bar{$ index")
    res = backtest(pod, start="2016-01-04", end="2016-03-31", name=DOLLAR, index=index)
    with matplotlib.rc_context({"text.usetex": True}):
        text = res.to_html(tmp_path / "report.html").read_text(encoding="utf-8")
        assert matplotlib.rcParams["text.usetex"]  # the user's settings are left alone
    assert matplotlib.rcParams["text.parse_math"]
    assert f"<h1>Backtest: {DOLLAR}</h1>" in text
    assert "$\\bar{$ index" in text and "$AAA, B$B, $C{$" in text
    assert text.count('src="data:image/png;base64,') == CHARTS


def test_in_sample_banner_and_execution_timing(result):
    text = render_html(result)
    assert result.in_sample == "" and 'id="in-sample"' not in text
    assert "In-sample backtest" not in text
    assert "orders fill at the next day&#x27;s close (execution lag 1)" in text
    said = f"The range overlaps its training dates {EVIL} & <b>more</b>"
    marked = dataclasses.replace(result, in_sample=said, execution_lag=0, trials=50)
    text = render_html(marked)
    banner = text.index('<div class="banner" id="in-sample">')
    assert banner < text.index("<h1>")  # at the very top
    assert "The range overlaps its training dates &lt;script&gt;" in text
    assert "&amp; &lt;b&gt;more&lt;/b&gt;" in text and "<b>more" not in text
    assert "<script" not in text.lower()
    assert "at the observed close (execution lag 0, optimistic)" in text
    assert "Deflated Sharpe ratio (50 trials)" in text
    assert verdict(marked).startswith("In-sample")


def test_verdict_counts_trials(result):
    one, many = verdict(result), verdict(dataclasses.replace(result, trials=50))
    assert result.trials == 1 and "over 1 trial is" in one and "over 50 trials is" in many
    assert EVIL_NAME in one  # the sentence is plain text; the report escapes it
    dsr = [float(re.search(r"trials? is (\d\.\d\d)", s).group(1)) for s in (one, many)]
    assert dsr[1] <= dsr[0]


def synthetic(agent_returns, bench_returns, name="Agent", tickers=("AAA", "BBB")):
    """A BacktestResult built from return series, no agent trained: half the account in
    the first stock, the rest in cash (positions are for the tear sheet only)."""
    days = len(agent_returns) + 1
    dates = pd.bdate_range("2019-01-02", periods=days)
    value = 1e6 * np.concatenate([[1.0], np.cumprod(1.0 + np.asarray(agent_returns))])
    ew = 1e6 * np.concatenate([[1.0], np.cumprod(1.0 + np.asarray(bench_returns))])
    prices = pd.DataFrame(
        {t: 100.0 * ew / 1e6 * (1 + 0.1 * i) for i, t in enumerate(tickers)}, index=dates
    )
    shares = pd.DataFrame(0.0, index=dates, columns=list(tickers))
    shares.iloc[:, 0] = np.floor(0.5 * value / prices.iloc[:, 0].to_numpy())
    return BacktestResult(
        account_value=pd.Series(value, index=dates, name=name),
        benchmarks={EQUAL_WEIGHT: pd.Series(ew, index=dates, name=EQUAL_WEIGHT)},
        trades=pd.DataFrame(columns=["date", "tic", "shares", "price", "value", "cost"]),
        positions=shares,
        periods_per_year=252,
        initial_amount=1e6,
        cost=0.001,
        agent={"name": name},
        data_source="synthetic.csv",
        execution_lag=1,
        prices=prices,
    )


def test_verdict_sentences():
    rng = np.random.default_rng(0)
    market = rng.normal(0.0008, 0.01, 1000)
    better = synthetic(market + 0.002 + rng.normal(0, 0.001, 1000), market)
    assert "it beat equal weight risk-adjusted with 95% confidence" in verdict(better)
    assert "so luck is unlikely" in verdict(better)
    worse = synthetic(market - 0.002 + rng.normal(0, 0.001, 1000), market)
    assert "it did worse than equal weight risk-adjusted" in verdict(worse)
    assert "no skill to deflate" in verdict(worse)  # a negative Sharpe ratio
    # as good as the market, and the best of 1000 tries: its Sharpe ratio is luck
    same = dataclasses.replace(synthetic(market + rng.normal(0, 0.002, 1000), market), trials=1000)
    assert "not significant" in verdict(same) and "includes zero" in verdict(same)
    assert "over 1000 trials" in verdict(same) and "luck alone could explain" in verdict(same)
    idle = synthetic(np.zeros(1000), market)
    assert "never changed" in verdict(idle) and "did not beat" in verdict(idle)
    text = render_html(idle)  # an agent in cash: no Sharpe, no drawdown, no holdings
    assert "never fell below a previous peak" in text


def test_a_four_year_report_renders_whole():
    # its rendering time is benchmarks/report_render.py's (1,008 days, every chart)
    rng = np.random.default_rng(1)
    market = rng.normal(0.0004, 0.012, 1008)
    res = synthetic(0.6 * market + rng.normal(0.0001, 0.005, 1008), market)
    text = render_html(res)
    assert text.count('src="data:image/png;base64,') == CHARTS
    caveats = text.split('id="caveats"')[1]
    assert "if these tickers were chosen as companies that exist today" in caveats
    assert "a flat 0.10% of the traded value" in caveats and "execution lag 1" in caveats


# -- what a newcomer tripped over (issue: report and verdict) ------------------------------
def test_a_segments_evaluate_at_the_end_sentinel_is_said_in_words(trained, tmp_path):
    """A tournament's segment sets ``eval_every_steps`` to 2**60 ("only at the end") on the
    pod's spec, which its checkpoint records: the report must not show the number."""
    _NO_EVAL_BEFORE_THE_END = 2**60  # what segments wrote into checkpoints before issue 33

    before = trained.spec
    trained.spec = dataclasses.replace(before, eval_every_steps=_NO_EVAL_BEFORE_THE_END)
    try:
        path = trained.save(tmp_path / "segment.pt")
    finally:
        trained.spec = before
    res = backtest(path, start="2016-01-04", end="2016-03-31")
    assert res.agent["spec"]["eval_every_steps"] == 2**60  # the data keeps its value
    text = render_html(res)
    assert str(2**60) not in text and "1152921504606846976" not in text
    spec = text.split("<pre id='spec'>")[1].split("</pre>")[0]
    assert "&quot;eval_every_steps&quot;: &quot;at the end of each segment&quot;" in spec
    # an ordinary value stays a number
    every = dataclasses.replace(res, agent={**res.agent, "spec": {"eval_every_steps": 5000}})
    assert "&quot;eval_every_steps&quot;: 5000" in render_html(every)


def test_scores_and_mutations_read_as_numbers_with_a_legend(result):
    lineage = [
        {"pod": "p007", "parent": "p002", "algo": "ppo",
         "mutation": {"lr": [0.001, 0.0008], "gamma": [0.99, 0.98765432109], EVIL: [1, 2]}},
        {"pod": "p002", "parent": None, "algo": "ppo", "mutation": {}},
    ]  # fmt: skip
    agent = {**result.agent, "score": 1.5530007792009537, "lineage": lineage}
    text = render_html(dataclasses.replace(result, agent=agent))
    facts = text.split('<table id="agent">')[1].split("</table>")[0]
    assert '<td class="name">1.553</td>' in facts and "1.5530007" not in text
    table = text.split('<table id="lineage">')[1].split("</table>")[0]
    assert "Mutation (old &rarr; new)" in table
    assert "lr 0.001 \u2192 0.0008, gamma 0.99 \u2192 0.9877" in table
    assert "&lt;script&gt;alert(1)&lt;/script&gt; 1 \u2192 2" in table  # escaped
    assert "[0.001, 0.0008]" not in text and "0.98765432109" not in text
    assert "old &rarr; new" in text.split("<h3>Lineage</h3>")[1].split("<table")[0]


def test_the_header_and_the_trades_count_the_same_trading_days(result):
    text = render_html(result)
    days = len(result.dates)
    assert f"({days:,} trading days, " in text
    trades = text.split('id="trade-days">')[1].split("</p>")[0]
    assert f" of the {days:,} trading days (none can fill on the first:" in trades
    assert f" of {days - 1} " not in trades
    filled = int(re.search(r"filled on ([\d,]+) of", trades).group(1).replace(",", ""))
    assert filled == result.trades["date"].nunique() and result.dates[0] not in set(
        result.trades["date"]
    )  # execution lag 1: nothing fills on the first day
    lag0 = render_html(dataclasses.replace(result, execution_lag=0))
    assert "none can fill on the last: the backtest ends at its close" in lag0
