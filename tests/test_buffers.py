import pytest
import torch

from elegantpod.buffers import ReplayBuffer, RolloutBuffer
from elegantpod.types import Batch


def _batch(start, n):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return Batch(
        ids[:, None].repeat(1, 3),
        ids[:, None],
        ids,
        ids[:, None].repeat(1, 3) + 0.5,
        ids % 2 == 0,
        torch.zeros(n, dtype=torch.bool),
    )


def test_replay_wraps_around_and_keeps_newest():
    rb = ReplayBuffer(10, (3,), (1,), "cpu")
    rb.extend(_batch(0, 7))
    assert len(rb) == 7 and rb.ptr == 7
    rb.extend(_batch(7, 6))  # 7..12: wraps, overwriting 0, 1, 2
    assert len(rb) == 10 and rb.ptr == 3
    assert sorted(rb.reward.tolist()) == list(range(3, 13))
    assert rb.reward[:3].tolist() == [10, 11, 12]
    torch.testing.assert_close(rb.next_obs[:, 0], rb.reward + 0.5)
    assert torch.equal(rb.terminated, rb.reward % 2 == 0)


def test_replay_batch_larger_than_capacity_keeps_tail():
    rb = ReplayBuffer(4, (3,), (1,), "cpu")
    rb.extend(_batch(0, 9))
    assert sorted(rb.reward.tolist()) == [5, 6, 7, 8]


def test_sample_is_seeded_and_consistent():
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a, b = ReplayBuffer(50, (3,), (1,), "cpu", g1), ReplayBuffer(50, (3,), (1,), "cpu", g2)
    a.extend(_batch(0, 30))
    b.extend(_batch(0, 30))
    s, t = a.sample(16), b.sample(16)
    torch.testing.assert_close(s.reward, t.reward)
    torch.testing.assert_close(s.obs[:, 0], s.reward)  # rows stay aligned across fields
    assert s.reward.max() < 30


def test_sample_empty_and_bad_capacity():
    with pytest.raises(RuntimeError, match="empty"):
        ReplayBuffer(5, (3,), (1,), "cpu").sample(2)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, (3,), (1,), "cpu")


def test_rollout_buffer_is_preallocated_and_reused():
    rb = RolloutBuffer(4, 2, (3,), (), torch.int64, "cpu")
    ptr = rb.obs.data_ptr()
    for t in range(4):
        rb.write(
            t,
            torch.full((2, 3), t),
            torch.tensor([t, t]),
            torch.ones(2),
            torch.zeros(2, 3),
            torch.tensor([False, True]),
            torch.tensor([False, False]),
        )
    b = rb.batch()
    assert b.obs.shape == (4, 2, 3) and b.obs.data_ptr() == ptr
    assert b.flatten().obs.shape == (8, 3)
    assert b.done[:, 1].all() and not b.done[:, 0].any()
