"""Task streams (class order, subsets), Class-IL / Task-IL evaluation on hand-built logits, and the accuracy-
matrix metrics on hand-computed matrices."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from components.continual import (
    backward_transfer,
    evaluate_stream,
    final_average_accuracy,
    forgetting,
    split_by_class,
    task_il_logits,
)


def labelled(n_per_class: int, n_classes: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs that carry their label: x[i] = [label], labels 0..n_classes-1, n_per_class each."""
    y = torch.arange(n_classes).repeat_interleave(n_per_class)
    return y.float()[:, None], y


def test_split_by_class_cuts_tasks_in_class_order_and_caps_them() -> None:
    x, y = labelled(5)
    stream = split_by_class("toy", x, y, x[::5], y[::5], classes_per_task=2)
    assert [t.classes for t in stream.tasks] == [(0, 1), (2, 3), (4, 5)]
    assert stream.n_classes == 6 and stream.input_shape == (1,) and stream.seen_classes(1) == 4
    for task in stream.tasks:
        assert set(task.y_train.tolist()) == set(task.classes) and len(task.y_train) == 10
        assert task.y_test.tolist() == list(task.classes)
        assert torch.equal(task.x_train[:, 0].long(), task.y_train)  # images stay with their labels
    capped = split_by_class("toy", x, y, x, y, classes_per_task=3, train_per_task=4, seed=1)
    assert [len(t.y_train) for t in capped.tasks] == [4, 4] and [len(t.y_test) for t in capped.tasks] == [15, 15]
    assert capped.tasks[0].y_train.max() <= 2 <= capped.tasks[1].y_train.min()
    again = split_by_class("toy", x, y, x, y, classes_per_task=3, train_per_task=4, seed=1)
    assert torch.equal(capped.tasks[1].x_train, again.tasks[1].x_train)  # the seed fixes the subset


def test_split_refuses_impossible_streams() -> None:
    x, y = labelled(2, n_classes=4)
    with pytest.raises(ValueError, match="cannot make 3 tasks"):
        split_by_class("toy", x, y, x, y, classes_per_task=2, n_tasks=3)
    with pytest.raises(ValueError, match="task 1 .* no test images"):
        split_by_class("toy", x, y, x[y < 2], y[y < 2], classes_per_task=2)


def test_task_il_mask_keeps_only_the_task_classes() -> None:
    logits = torch.tensor([[5.0, 1.0, 2.0, 3.0, 9.0, 0.0]])
    masked = task_il_logits(logits, 1, 2)
    assert masked[0, 2:4].tolist() == [2.0, 3.0]
    assert torch.isinf(masked[0, [0, 1, 4, 5]]).all() and masked.argmax(1).item() == 3
    assert logits[0, 0] == 5.0  # the input is not modified


class FixedLogits(nn.Module):
    """Logits from the label carried in x: a bonus on ``wrong_class`` (if given) beats the true class,
    and the class ``future`` (not yet seen) always gets the largest logit of all."""

    def __init__(self, n_classes: int, wrong_class: int | None = None, future: int | None = None) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))
        self.n, self.wrong, self.future = n_classes, wrong_class, future

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = nn.functional.one_hot(x[:, 0].long(), self.n).float() * self.scale
        if self.wrong is not None:
            logits[:, self.wrong] += 2.0
        if self.future is not None:
            logits[:, self.future] += 10.0
        return logits


def test_evaluation_knows_the_answer_for_fixed_logits() -> None:
    x, y = labelled(3)
    stream = split_by_class("toy", x, y, x, y, classes_per_task=2)
    # the largest logit is always class 5, which is unseen after task 0: Class-IL ignores it
    perfect = evaluate_stream(FixedLogits(6, future=5), stream, 0)
    assert perfect == ([100.0], [100.0])
    # class 0 gets a bonus: Class-IL predicts 0 for every image, so only class 0 is right (half of task 0,
    # none of tasks 1 and 2); Task-IL masks class 0 away on tasks 1-2 and finds their classes
    class_il, task_il = evaluate_stream(FixedLogits(6, wrong_class=0), stream, 2)
    assert class_il == [50.0, 0.0, 0.0] and task_il == [50.0, 100.0, 100.0]


def test_metrics_on_hand_computed_matrices() -> None:
    matrix = [[90.0], [80.0, 95.0], [70.0, 85.0, 99.0]]
    assert final_average_accuracy(matrix) == pytest.approx((70 + 85 + 99) / 3)
    assert forgetting(matrix) == pytest.approx(((90 - 70) + (95 - 85)) / 2)
    assert backward_transfer(matrix) == pytest.approx(((70 - 90) + (85 - 95)) / 2)
    # the best accuracy on task 0 came after task 1, not right after task 0
    late_peak = [[90.0], [95.0, 90.0], [80.0, 92.0, 99.0]]
    assert forgetting(late_peak) == pytest.approx(((95 - 80) + (92 - 92)) / 2)
    assert backward_transfer(late_peak) == pytest.approx(((80 - 90) + (92 - 90)) / 2)
    assert math.isnan(forgetting([[50.0]])) and final_average_accuracy([[50.0]]) == 50.0
    with pytest.raises(ValueError, match="rows"):
        forgetting([[1.0, 2.0]])
