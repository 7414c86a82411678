"""The reservoir buffer: slots filled in order, the replacement rule, uniform inclusion, consistent rows."""

from __future__ import annotations

import pytest
import torch

from components.continual import ReservoirBuffer, reservoir_slot


def test_reservoir_slot_rule() -> None:
    assert [reservoir_slot(seen, 3, 0.99) for seen in range(3)] == [0, 1, 2]  # not full: next slot
    # the 2nd example with capacity 1 replaces slot 0 when floor(2u) = 0, i.e. with probability 1/2
    assert reservoir_slot(1, 1, 0.49) == 0 and reservoir_slot(1, 1, 0.5) == -1
    # after 9 seen, r = floor(10 u) is uniform on 0..9: kept in one of 4 slots for u < 0.4
    assert [reservoir_slot(9, 4, u) for u in (0.0, 0.15, 0.39, 0.4, 0.99)] == [0, 1, 3, -1, -1]


def items(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = torch.arange(n)
    return ids.float()[:, None].repeat(1, 2), ids, ids.float()[:, None].repeat(1, 3)


def test_first_examples_fill_the_slots_in_order() -> None:
    buffer = ReservoirBuffer(5, (2,), 3, seed=0)
    x, y, z = items(3)
    buffer.add(x, y, z, task=7)
    assert len(buffer) == 3 and buffer.seen == 3
    assert buffer.y[:3].tolist() == [0, 1, 2] and buffer.task[:3].tolist() == [7, 7, 7]
    assert torch.equal(buffer.logits[:3], z)


def test_every_example_is_kept_with_probability_capacity_over_n() -> None:
    n, capacity, trials = 40, 8, 1500
    counts = torch.zeros(n)
    x, y, z = items(n)
    for seed in range(trials):
        buffer = ReservoirBuffer(capacity, (2,), 3, seed=seed)
        for start in range(0, n, 7):  # batches of 7, the last one smaller
            buffer.add(x[start : start + 7], y[start : start + 7], z[start : start + 7])
        assert len(buffer) == capacity and len(set(buffer.y.tolist())) == capacity  # distinct examples
        counts[buffer.y] += 1
    freq = counts / trials
    # each frequency is binomial with p = 0.2: sd = sqrt(0.2 * 0.8 / 1500) ~ 0.0103; 4.5 sd ~ 0.047
    assert torch.allclose(freq, torch.full((n,), capacity / n), atol=0.047), freq
    # and no position in the stream is favoured: first half vs second half
    assert abs(freq[:20].mean() - freq[20:].mean()) < 0.02


def test_rows_stay_consistent_when_a_batch_hits_one_slot_twice() -> None:
    buffer = ReservoirBuffer(2, (2,), 3, seed=3)
    x, y, z = items(400)
    buffer.add(x, y, z, task=torch.arange(400))  # one batch: many of its examples collide on 2 slots
    assert buffer.seen == 400 and len(buffer) == 2
    for slot in range(2):
        item = int(buffer.y[slot])
        assert buffer.x[slot].tolist() == [item, item] and buffer.logits[slot].tolist() == [item] * 3
        assert int(buffer.task[slot]) == item


def test_sample_draws_distinct_filled_slots() -> None:
    buffer = ReservoirBuffer(10, (2,), 3)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(4, torch.Generator())
    x, y, z = items(6)
    buffer.add(x, y, z)
    draw = buffer.sample(4, torch.Generator().manual_seed(0))
    assert len(set(draw.y.tolist())) == 4 and set(draw.y.tolist()) <= set(range(6))
    assert torch.equal(draw.x[:, 0].long(), draw.y) and draw.task.tolist() == [0] * 4
    assert len(buffer.sample(50, torch.Generator()).y) == 6  # never more than what is stored
