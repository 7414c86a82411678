"""Class-incremental task streams and their evaluation in the Class-IL and Task-IL settings.

A stream cuts a labelled dataset into tasks by class, in class order (mammoth's ``ContinualDataset``):
task ``t`` holds classes ``t*c .. t*c + c - 1`` with ``c`` classes per task, e.g. seq-MNIST's five tasks
{0,1}, {2,3}, ..., {8,9}. Both settings are evaluated from the same network and the same pass:

* **Class-IL**: the prediction is the argmax over every class seen so far (the logits of classes of later
  tasks are ignored, as mammoth's ``evaluate`` does with ``outputs[:, :n_seen]``);
* **Task-IL**: the task of a test image is given, and the argmax runs over that task's classes only
  (:func:`task_il_logits` sets every other logit to -inf, mammoth's ``mask_classes``).

After each task the accuracy on every task seen so far is recorded: row ``t`` of the accuracy matrix
(:mod:`components.continual.metrics` turns it into final average accuracy and forgetting).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from components.data.stream_arrays import task_count

__all__ = [
    "Task",
    "TaskStream",
    "class_il_logits",
    "evaluate_stream",
    "split_by_class",
    "stream_from_indices",
    "task_il_logits",
    "task_indices",
]


@dataclass(frozen=True)
class Task:
    """One task: its classes and its train / test images ([N, ...] float) and labels ([N] int64)."""

    index: int
    classes: tuple[int, ...]
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


@dataclass(frozen=True)
class TaskStream:
    """The tasks in order; ``n_classes`` logits in all, ``classes_per_task`` per task."""

    name: str
    tasks: tuple[Task, ...]
    n_classes: int
    classes_per_task: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.tasks[0].x_train.shape[1:])

    def seen_classes(self, task: int) -> int:
        """Number of classes seen once task ``task`` (0-based) is learned."""
        return (task + 1) * self.classes_per_task


def task_indices(
    y_train: Tensor,
    y_test: Tensor,
    *,
    classes_per_task: int = 2,
    n_tasks: int | None = None,
    train_per_task: int | None = None,
    test_per_task: int | None = None,
    seed: int = 0,
    name: str = "dataset",
) -> list[tuple[tuple[int, ...], Tensor, Tensor]]:
    """Which images each class-incremental task holds, classes in increasing order.

    Args:
        y_train, y_test: labels [N] in ``0..K-1``.
        classes_per_task: classes per task (2 for seq-MNIST).
        n_tasks: number of tasks (the first ``n_tasks * classes_per_task`` classes); default: every class,
            ``K / classes_per_task`` tasks, which :func:`~components.data.stream_arrays.task_count` checks (at
            least 2 tasks, no class left over).
        train_per_task, test_per_task: keep at most this many images of a task (a random subset drawn with
            ``seed``; a task's classes keep their shares in expectation); ``None`` keeps all.
        seed: seed of those subsets.
        name: the dataset's name, for error messages.

    Returns:
        Per task: its classes, and the sorted indices of its training and test images.

    Raises:
        ValueError: negative labels, a task without training or test images, or too few classes.
    """
    if int(min(int(y_train.min()), int(y_test.min()))) < 0:
        raise ValueError(f"{name}: labels must be >= 0")
    n_classes = int(max(int(y_train.max()), int(y_test.max()))) + 1
    if n_tasks is None:  # every class, in tasks of classes_per_task: the rule the params are checked with
        n_tasks = task_count(n_classes, classes_per_task, name)
    elif classes_per_task < 1 or n_tasks < 1 or n_tasks > n_classes // classes_per_task:
        raise ValueError(f"{name}: {n_classes} classes cannot make {n_tasks} tasks of {classes_per_task} classes")
    generator = torch.Generator().manual_seed(seed)
    out = []
    for t in range(n_tasks):
        classes = tuple(range(t * classes_per_task, (t + 1) * classes_per_task))
        parts = []
        for split, y, cap in (("train", y_train, train_per_task), ("test", y_test, test_per_task)):
            index = torch.nonzero((y >= classes[0]) & (y <= classes[-1])).flatten()
            if index.numel() == 0:
                raise ValueError(f"{name}: task {t} (classes {list(classes)}) has no {split} images")
            if cap is not None and index.numel() > cap:
                index = index[torch.randperm(index.numel(), generator=generator)[:cap]].sort().values
            parts.append(index)
        out.append((classes, parts[0], parts[1]))
    return out


def stream_from_indices(
    name: str,
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    indices: list[tuple[tuple[int, ...], Tensor, Tensor]],
) -> TaskStream:
    """The :class:`TaskStream` whose task ``t`` holds the images ``indices[t]`` (see :func:`task_indices`)."""
    if x_train.shape[0] != y_train.shape[0] or x_test.shape[0] != y_test.shape[0]:
        raise ValueError(
            f"{name}: images and labels disagree on N: train {x_train.shape[0]} vs "
            f"{y_train.shape[0]}, test {x_test.shape[0]} vs {y_test.shape[0]}"
        )
    tasks = tuple(
        Task(t, classes, x_train[tr], y_train[tr].long(), x_test[te], y_test[te].long())
        for t, (classes, tr, te) in enumerate(indices)
    )
    per_task = len(indices[0][0])
    return TaskStream(name, tasks, len(tasks) * per_task, per_task)


def split_by_class(
    name: str,
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    *,
    classes_per_task: int = 2,
    n_tasks: int | None = None,
    train_per_task: int | None = None,
    test_per_task: int | None = None,
    seed: int = 0,
) -> TaskStream:
    """Cut a labelled dataset (images [N, ...], labels [N]) into class-incremental tasks, classes in
    increasing order: :func:`task_indices` then :func:`stream_from_indices`."""
    indices = task_indices(
        y_train,
        y_test,
        classes_per_task=classes_per_task,
        n_tasks=n_tasks,
        train_per_task=train_per_task,
        test_per_task=test_per_task,
        seed=seed,
        name=name,
    )
    return stream_from_indices(name, x_train, y_train, x_test, y_test, indices)


def task_il_logits(logits: Tensor, task: int, classes_per_task: int) -> Tensor:
    """Task-IL: ``logits`` [N, K] with every class outside task ``task`` set to -inf (a new tensor)."""
    masked = torch.full_like(logits, -torch.inf)
    lo, hi = task * classes_per_task, (task + 1) * classes_per_task
    masked[:, lo:hi] = logits[:, lo:hi]
    return masked


def class_il_logits(logits: Tensor, n_seen: int) -> Tensor:
    """Class-IL: the logits of the ``n_seen`` classes seen so far, [N, n_seen]."""
    return logits[:, :n_seen]


@torch.no_grad()
def evaluate_stream(
    model: nn.Module, stream: TaskStream, upto: int, batch_size: int = 4096
) -> tuple[list[float], list[float]]:
    """Accuracy (%) on the test images of tasks ``0..upto`` after learning task ``upto``.

    Returns:
        ``(class_il, task_il)``: one accuracy per task seen so far, in task order.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    n_seen = stream.seen_classes(upto)
    class_il, task_il = [], []
    try:
        for task in stream.tasks[: upto + 1]:
            hits_class = hits_task = 0
            for start in range(0, task.x_test.shape[0], batch_size):
                x = task.x_test[start : start + batch_size].to(device)
                y = task.y_test[start : start + batch_size].to(device)
                logits = model(x)
                hits_class += int((class_il_logits(logits, n_seen).argmax(1) == y).sum())
                hits_task += int((task_il_logits(logits, task.index, stream.classes_per_task).argmax(1) == y).sum())
            n = task.x_test.shape[0]
            class_il.append(100.0 * hits_class / n)
            task_il.append(100.0 * hits_task / n)
    finally:
        model.train(was_training)
    return class_il, task_il
