"""Walk-forward evaluation: rolling windows, one real tournament per window, one table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from elegantpod.finance.backtests.walkforward import WalkForwardResult, rolling_splits, walk_forward
from elegantpod.finance.market.benchmarks import EQUAL_WEIGHT
from elegantpod.finance.market.splits import DateSplits


def test_rolling_windows_tile_the_calendar():
    splits = rolling_splits("2010-01-01", train_years=3, validation_years=1, windows=3)
    assert [s.train for s in splits] == [
        ("2010-01-01", "2012-12-31"),
        ("2011-01-01", "2013-12-31"),
        ("2012-01-01", "2014-12-31"),
    ]
    assert [s.validation for s in splits] == [
        ("2013-01-01", "2013-12-31"),
        ("2014-01-01", "2014-12-31"),
        ("2015-01-01", "2015-12-31"),
    ]
    # consecutive backtests follow each other without a gap or an overlap
    backtests = [s.backtest for s in splits]
    assert backtests == [
        ("2014-01-01", "2014-12-31"),
        ("2015-01-01", "2015-12-31"),
        ("2016-01-01", "2016-12-31"),
    ]
    for s in splits:  # within a window, each range starts the day after the last ends
        assert pd.Timestamp(s.validation[0]) - pd.Timestamp(s.train[1]) == pd.Timedelta(days=1)
        assert pd.Timestamp(s.backtest[0]) - pd.Timestamp(s.validation[1]) == pd.Timedelta(days=1)
    two_year_steps = rolling_splits("2010-01-01", train_years=1, windows=2, step_years=2)
    assert two_year_steps[1].train[0] == "2012-01-01"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"train_years": 0}, "train_years must be an integer >= 1, got 0"),
        ({"train_years": 2, "windows": 1.5}, "windows must be an integer >= 1, got 1.5"),
        ({"train_years": 2, "step_years": 0}, "step_years must be an integer >= 1, got 0"),
        ({"train_years": True}, "train_years must be an integer >= 1, got True"),
    ],
)
def test_bad_windows_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rolling_splits("2010-01-01", **kwargs)
    with pytest.raises(ValueError, match="start must be a date, got 'soon'"):
        rolling_splits("soon", train_years=1)


def test_bad_walk_forward_input_fails_before_any_cluster_work(tmp_path):
    with pytest.raises(ValueError, match="at least one window"):
        walk_forward([], store_dir=tmp_path)
    with pytest.raises(ValueError, match="DateSplits"):
        walk_forward([("2010-01-01", "2012-12-31")], store_dir=tmp_path)
    split = DateSplits(
        train=("2012-01-01", "2014-12-31"),
        validation=("2015-01-01", "2015-12-31"),
        backtest=("2016-01-01", "2016-12-31"),
    )
    with pytest.raises(ValueError, match="unknown algorithm"):
        walk_forward([split], store_dir=tmp_path, algos=["nope"], max_steps=10)
    assert not any(tmp_path.iterdir())  # nothing was written


def test_two_windows_each_train_a_tournament_and_backtest_out_of_sample(client, tmp_path):
    splits = rolling_splits("2012-01-01", train_years=2, validation_years=1, windows=2)
    result = walk_forward(
        splits,
        client=client,
        store_dir=tmp_path / "wf",
        env_kwargs={"data": "sp500", "tickers": ["AAPL", "KO", "XOM"], "episode_days": 63},
        algos=["ppo"],
        pods=2,
        max_steps=4_096,
        segment_steps=2_048,
        progress=False,
    )
    assert isinstance(result, WalkForwardResult) and len(result.backtests) == 2
    for split, res in zip(splits, result.backtests, strict=True):
        # each backtest covers its own window's held-out year, after its validation
        assert res.dates[0] >= pd.Timestamp(split.backtest[0])
        assert res.dates[-1] <= pd.Timestamp(split.backtest[1])
        # every evaluation of its tournament was a trial: at least one per pod
        assert not res.in_sample and res.trials >= 2
        assert EQUAL_WEIGHT in res.metrics().index
    table = result.table()
    assert list(table["backtest"]) == [f"{a}..{b}" for a, b in (s.backtest for s in splits)]
    assert table["trials"].tolist() == [r.trials for r in result.backtests]
    for row in table.to_dict("records"):
        assert 0.0 <= row["deflated_sharpe"] <= 1.0 or math.isnan(row["deflated_sharpe"])
        low, high = row["sharpe_difference_ci"]
        assert low <= row["agent_sharpe"] - row["equal_weight_sharpe"] <= high
    page = result.to_html(tmp_path / "wf.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "2 windows" in page
    assert "<script" not in page and "http" not in page  # self-contained
