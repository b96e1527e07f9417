"""Buy-and-hold baselines on a leaderboard's range: API, static view, dashboard, CLI."""

from __future__ import annotations

import numpy as np
import pytest

from elegantpod import Tournament
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.market.prices import load, sp500_index
from elegantpod.finance.stats import metrics
from elegantpod.finance.trading.baselines import INDEX_NAME, baseline_scores, baseline_values
from elegantpod.widgets.dashboard import Dashboard
from elegantpod.widgets.html import baselines_html

VALIDATION = {"data": "sp500", "start": "2017-01-03", "end": "2018-12-31"}


def test_equal_weight_and_the_index_on_the_validation_range():
    values = baseline_values(VALIDATION)
    market = load("sp500")
    rows = (market.dates >= "2017-01-03") & (market.dates <= "2018-12-31")
    close = market.close[rows]
    # by hand: equal money in every stock on the first day, less 0.1% costs, then held
    shares = 1e6 * (1 - 1e-3) / close.shape[1] / close[0]
    np.testing.assert_allclose(values[EQUAL_WEIGHT], close @ shares)
    index = sp500_index()
    index = index[(index.index >= "2017-01-03") & (index.index <= "2018-12-31")]
    np.testing.assert_allclose(values[INDEX_NAME][-1] / 1e6, index.iloc[-1] / index.iloc[0])
    scores = baseline_scores(VALIDATION, "sharpe")
    want = metrics.sharpe_ratio(metrics.returns_from_values(close @ shares), periods_per_year=252)
    assert scores[EQUAL_WEIGHT] == pytest.approx(float(want))
    ret = baseline_scores(VALIDATION, "return")[EQUAL_WEIGHT]
    assert ret == pytest.approx(((close @ shares)[-1] - 1e6) / 1e6 * 100)
    with pytest.raises(ValueError, match="unknown fitness 'alpha'"):
        baseline_scores(VALIDATION, "alpha")


def test_a_trading_tournament_shows_its_baselines_everywhere(tmp_path):
    t = Tournament(
        env="StockTrading-v0",
        algos=["ppo"],
        pods=1,
        max_steps=10,
        fitness="sharpe",
        env_kwargs={"data": "sp500", "end": "2016-12-30"},
        eval_env_kwargs=dict(VALIDATION, episode_days=None),
        store=tmp_path / "s",
    )
    assert t.baselines() == baseline_scores(VALIDATION, "sharpe")
    html = t._repr_html_()
    assert "Baselines on the validation range (sharpe)" in html and "Equal-weight" in html
    d = Dashboard(t, refresh_seconds=0)
    d.refresh()
    assert "Equal-weight buy &amp; hold" in d.baselines.value
    d.close()
    other = Tournament(env="CartPole-v1", pods=1, max_steps=10, store=tmp_path / "c")
    assert other.baselines() == {} and "Baselines" not in other._repr_html_()


def test_the_baseline_line_says_whether_an_agent_beats_them_and_escapes_names():
    out = baselines_html({"<script>x</script>": 1.0}, 1.5, "sharpe")
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "the best agent beats them" in out
    assert "no agent beats them" in baselines_html({"EW": 1.0}, 0.5, "sharpe")
    assert baselines_html({}, 0.5, "sharpe") == ""
    # the env's notes on its added columns follow, escaped; alone when there is no baseline
    explained = baselines_html({"EW": 1.0}, 0.5, "sharpe", ["validation_dsr: <b>12</b>"])
    assert "<br>validation_dsr: &lt;b&gt;12&lt;/b&gt;" in explained
    assert "Baselines" not in baselines_html({}, 0.5, "sharpe", ["a note"])


@pytest.mark.slow
def test_the_cli_prints_the_baselines_under_the_leaderboard(tmp_path):
    import subprocess
    import sys

    args = ["tournament", "--env", "StockTrading-v0", "--algos", "ppo", "--pods", "1"]
    args += ["--workers", "1", "--max-steps", "2048", "--segment-steps", "2048"]
    args += ["--fitness", "sharpe", "--env-arg", "data=sp500", "--env-arg", "end=2016-12-30"]
    args += ["--eval-env-arg", "start=2017-01-03", "--eval-env-arg", "end=2018-12-31"]
    args += ["--eval-env-arg", "episode_days=null"]  # one episode over the whole range
    args += ["--store", str(tmp_path / "s")]
    p = subprocess.run(
        [sys.executable, "-m", "elegantpod.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    want = baseline_scores(VALIDATION, "sharpe")[EQUAL_WEIGHT]
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("baseline  Equal-weight")]
    assert line == [f"baseline  Equal-weight buy & hold: {want:.4g} (sharpe)"], p.stderr[-2000:]
    assert any(ln.startswith(f"baseline  {INDEX_NAME}: ") for ln in p.stderr.splitlines())
    assert "validation_dsr: probability that the true Sharpe ratio beats the best of" in p.stderr
