"""The rehearsal plug-ins on a network whose logits are all zero: every loss is a hand-computed constant."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from components.continual import REHEARSAL, BufferBatch, ReplayWeights, Step


class ZeroLogits(nn.Module):
    """Logits 0 for all 10 classes (through a parameter, so losses have gradients)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


def draw(n: int, label: int, logit: float) -> BufferBatch:
    return BufferBatch(torch.ones(n, 4), torch.full((n,), label), torch.full((n, 10), logit), torch.zeros(n).long())


def test_every_plugin_has_the_same_signature_and_declares_its_draws() -> None:
    assert {name: m.draws for name, m in REHEARSAL.items()} == {"sgd": 0, "er": 1, "derpp": 2, "er_ace": 1}
    model, step = ZeroLogits(), Step(torch.ones(3, 4), torch.tensor([2, 3, 2]), 1, 2)
    for method in REHEARSAL.values():  # without replays (empty buffer): the stream term alone
        out = method.loss(model, step, ReplayWeights())
        assert out.stream_logits.shape == (3, 10) and out.loss.requires_grad
        expected = math.log(8) if method.name == "er_ace" else math.log(10)  # ER-ACE masks classes 0, 1
        assert out.loss.item() == pytest.approx(expected, abs=1e-6), method.name


def test_er_is_one_mean_over_stream_and_replay() -> None:
    model = ZeroLogits()
    out = REHEARSAL["er"].loss(
        model, Step(torch.ones(3, 4), torch.tensor([2, 3, 2]), 1, 2, (draw(5, 0, 0.0),)), ReplayWeights()
    )
    assert out.loss.item() == pytest.approx(math.log(10), abs=1e-6) and out.stream_logits.shape == (3, 10)
    out.loss.backward()
    # d mean CE / d logit_k = (softmax_k - 1[k = y]) / 8 summed over the 8 rows, times x = 1:
    # class 0: 8 * 0.1 - 5 (replayed label 0) -> (0.8 - 5) / 8; class 2: (0.8 - 2) / 8; class 9: 0.8 / 8
    assert model.w.grad[0, [0, 2, 9]].tolist() == pytest.approx([-4.2 / 8, -1.2 / 8, 0.1], abs=1e-6)


def test_derpp_adds_weighted_logit_mse_and_replay_ce() -> None:
    weights = ReplayWeights(alpha=0.3, beta=0.5)
    step = Step(torch.ones(2, 4), torch.tensor([4, 5]), 2, 4, (draw(3, 1, 2.0), draw(3, 0, -1.0)))
    out = REHEARSAL["derpp"].loss(ZeroLogits(), step, weights)
    # CE of zero logits = ln 10; MSE of zero logits against stored logits 2.0 = 4
    assert out.loss.item() == pytest.approx(math.log(10) + 0.3 * 4.0 + 0.5 * math.log(10), abs=1e-5)
    assert out.metrics["logit_mse"].item() == pytest.approx(4.0)


def test_er_ace_masks_absent_old_classes_on_later_tasks_only() -> None:
    model = ZeroLogits()
    # task 2 (classes 4, 5); the batch holds a replayed-looking old label 1: classes 0, 2, 3 masked -> 7 left
    step = Step(torch.ones(2, 4), torch.tensor([4, 1]), 2, 4, (draw(3, 0, 0.0),))
    out = REHEARSAL["er_ace"].loss(model, step, ReplayWeights())
    assert out.loss.item() == pytest.approx(math.log(7) + math.log(10), abs=1e-5)
    assert torch.count_nonzero(out.stream_logits) == 0  # the stored logits are the unmasked ones
    first_task = Step(torch.ones(2, 4), torch.tensor([0, 1]), 0, 0, (draw(3, 0, 0.0),))
    assert REHEARSAL["er_ace"].loss(model, first_task, ReplayWeights()).loss.item() == pytest.approx(math.log(10))
