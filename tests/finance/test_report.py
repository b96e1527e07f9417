"""The HTML report: self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from elegantpod.config import PodSpec
from elegantpod.finance import backtest
from elegantpod.pod import Pod
from tests.finance.test_backtest import write_market
from tests.helpers import open_report

EVIL = "<script>alert(1)</script>"
EVIL_NAME = '<img src=x onerror="alert(2)">'


@pytest.fixture(scope="module")
def result(tmp_path_factory):
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
    pod = Pod(spec)
    pod.run()
    return backtest(pod, start="2016-01-04", end="2016-03-31", name=EVIL_NAME)


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
    assert text.count('src="data:image/png;base64,') == 2  # equity and drawdown charts
    assert not re.search(r"(src|href)=\"(https?:)?//", text)  # nothing fetched
    assert "@import" not in text and "url(" not in text
    for section in ("metrics", "monthly", "trades", "agent", "spec"):
        assert f'id="{section}"' in text or f"id='{section}'" in text
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


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")
def test_report_in_headless_chromium(result, tmp_path):
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
    assert text.count('src="data:image/png;base64,') == 2
