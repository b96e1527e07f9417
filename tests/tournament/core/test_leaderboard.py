import math

import pytest

from elegantpod.tournament.core.leaderboard import Entry, rank, update


def e(pod, score, std=1.0, steps=100, seg=1):
    return Entry(
        pod_id=pod,
        algo="ppo",
        hparams={"lr": 1e-3},
        score_mean=score,
        score_std=std,
        env_steps=steps,
        wall_seconds=1.0,
        checkpoint=f"/c/{pod}/{seg}",
        segment=seg,
    )


def test_rank_orders_by_score_then_std_then_steps_then_id():
    entries = [
        e("a", 1.0, 2.0),
        e("b", 3.0),
        e("c", 1.0, 1.0, 200),
        e("d", 1.0, 1.0, 100),
        e("e", 1.0, 1.0, 100),
    ]
    assert [x.pod_id for x in rank(entries)] == ["b", "d", "e", "c", "a"]


def test_update_inserts_into_top_k_and_truncates():
    board = []
    for pod, score in [("a", 1), ("b", 5), ("c", 3)]:
        board, inserted = update(board, e(pod, score), k=2)
        assert inserted is (pod != "a" or True)
    assert [x.pod_id for x in board] == ["b", "c"]
    board, inserted = update(board, e("d", 2), k=2)
    assert not inserted and [x.pod_id for x in board] == ["b", "c"]
    board, inserted = update(board, e("f", 4), k=2)
    assert inserted and [x.pod_id for x in board] == ["b", "f"]


def test_one_entry_per_pod_keeps_its_best_segment():
    board, _ = update([], e("a", 5, seg=1), k=3)
    board, inserted = update(board, e("a", 4, seg=2), k=3)
    assert not inserted and board[0].segment == 1
    board, inserted = update(board, e("a", 6, seg=3), k=3)
    assert inserted and len(board) == 1 and board[0].segment == 3


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinite_scores_never_enter(bad):
    board, inserted = update([e("a", 1)], e("b", bad), k=5)
    assert not inserted and [x.pod_id for x in board] == ["a"]


def test_nan_std_ranks_after_finite_std_on_equal_scores():
    assert [x.pod_id for x in rank([e("a", 1, math.nan), e("b", 1, 5.0)])] == ["b", "a"]


def test_bad_k():
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        update([], e("a", 1), k=0)


def test_entry_round_trip():
    x = e("a", 1)
    assert Entry.from_dict({**x.to_dict(), "unknown": 1}) == x
