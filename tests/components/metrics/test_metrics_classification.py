"""Accuracy, normalised accuracy and joint accuracy on hand-made logits."""

import pytest
import torch

from components.metrics.classification import accuracy, joint_accuracy, mean_normalized_accuracy, normalized_accuracy


def test_accuracy_from_logits_and_from_predictions():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
    labels = torch.tensor([0, 1, 1, 2])
    assert accuracy(logits, labels) == pytest.approx(0.5)
    assert accuracy(torch.tensor([0, 1, 1, 2]), labels) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="do not match"):
        accuracy(logits, labels[:3])


def test_normalized_accuracy():
    assert normalized_accuracy(0.45, 0.9) == pytest.approx(50.0)
    assert mean_normalized_accuracy({"a": 0.45, "b": 0.8}, {"a": 0.9, "b": 0.8}) == pytest.approx(75.0)
    with pytest.raises(ValueError):
        normalized_accuracy(0.5, 0.0)


def test_joint_accuracy_uses_offsets_of_concatenated_heads():
    head_a = torch.tensor([[5.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # task 0, 2 classes
    head_b = torch.tensor([[0.0, 0.0, 0.0], [0.0, 9.0, 0.0], [0.0, 0.0, 2.0]])  # task 1, 3 classes
    # joint argmax: [0, 3, 4] ; targets: ex0 task0 y0 -> 0 ; ex1 task0 y1 -> 1 ; ex2 task1 y2 -> 2+2 = 4
    task_ids = torch.tensor([0, 0, 1])
    labels = torch.tensor([0, 1, 2])
    assert joint_accuracy([head_a, head_b], task_ids, labels) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="outside"):
        joint_accuracy([head_a, head_b], task_ids, torch.tensor([0, 2, 2]))
