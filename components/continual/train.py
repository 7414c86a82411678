"""Learning a task stream with a rehearsal method: one :func:`components.training.fit` call per task.

For task ``t`` the stream's training images are shuffled once per epoch and cut into minibatches of
``batch_size`` (the last one smaller, as a data loader without ``drop_last``); step ``s`` of the fit reads
minibatch ``s``. Before each step the batch function draws the method's buffer minibatches (``draws`` of them,
``minibatch_size`` each, without replacement, from the loop's generator), and the loss function, after the
method's forward pass, offers the stream batch to the reservoir with its logits and task id, as mammoth's
``observe`` does after its update (the logits are those computed before the step). A wrapper's own draws
(STAR's, ``method.side_draws``) come from a second generator seeded per task, so a run with STAR and its base
run replay the very same base batches (the seed pairs them draw for draw, not only through the reservoir). The
optimiser is plain SGD (mammoth's default: no momentum, no weight decay, no clipping), made afresh for each
task. After each task every task seen so far is evaluated in the Class-IL and Task-IL settings: one row of each
accuracy matrix.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from components.continual.buffer import ReservoirBuffer
from components.continual.rehearsal import Rehearsal, ReplayWeights, Step
from components.continual.streams import TaskStream, evaluate_stream
from components.training import TrainConfig, fit

__all__ = ["ContinualConfig", "StreamResult", "train_stream"]


@dataclass(frozen=True)
class ContinualConfig:
    """Mammoth's training arguments (``--lr``, ``--batch_size``, ``--minibatch_size``, ``--n_epochs``,
    ``--buffer_size``) plus the replay weights, the device and the loop's logging."""

    lr: float = 0.1
    batch_size: int = 10
    minibatch_size: int = 10
    epochs: int = 1
    buffer_size: int = 200
    weights: ReplayWeights = ReplayWeights()
    device: str = "cpu"
    log_every: int = 50
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_size", "minibatch_size", "epochs", "buffer_size", "log_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"ContinualConfig.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not self.lr > 0:
            raise ValueError(f"ContinualConfig.lr must be > 0, got {self.lr}")


@dataclass
class StreamResult:
    """Accuracy matrices (%): ``class_il[i][j]`` / ``task_il[i][j]`` on task ``j`` after task ``i``; the
    loop's history per task; steps and seconds; the buffer as it is after the last task."""

    buffer: ReservoirBuffer
    class_il: list[list[float]] = field(default_factory=list)
    task_il: list[list[float]] = field(default_factory=list)
    history: list[list[dict[str, float]]] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0


def train_stream(
    model: nn.Module,
    stream: TaskStream,
    method: Rehearsal,
    cfg: ContinualConfig,
    seed_of: Callable[..., int],
    *,
    desc: str = "continual",
    callback: Callable[[int, int, dict[str, float]], None] | None = None,
) -> StreamResult:
    """Learn ``stream`` task by task with ``method``; returns both accuracy matrices.

    Args:
        model: the network, trained in place (left on the CPU).
        stream: the tasks, in order.
        method: a rehearsal plug-in (or one wrapped by STAR).
        cfg: the training arguments.
        seed_of: ``seed_of(purpose, *names) -> int``, a seed per purpose (buffer, epoch order, loop).
        desc: label of the loop's progress.
        callback: ``callback(task, step, metrics)`` at the loop's log steps, ``step`` counted over the whole
            stream (the steps of earlier tasks included).
    """
    started = time.perf_counter()
    buffer = ReservoirBuffer(cfg.buffer_size, stream.input_shape, stream.n_classes, seed=seed_of("reservoir"))
    result = StreamResult(buffer)
    for task in stream.tasks:
        n = task.x_train.shape[0]
        per_epoch = math.ceil(n / cfg.batch_size)
        orders = [
            torch.randperm(n, generator=torch.Generator().manual_seed(seed_of("order", task.index, epoch)))
            for epoch in range(cfg.epochs)
        ]
        first_class = task.classes[0]
        side_generator = torch.Generator().manual_seed(seed_of("side", task.index))

        def batches(
            step: int, generator: torch.Generator, task=task, orders=orders, per_epoch=per_epoch, side=side_generator
        ) -> dict[str, Any]:
            epoch, i = divmod(step - 1, per_epoch)
            index = orders[epoch][i * cfg.batch_size : (i + 1) * cfg.batch_size]
            replays, extra = (), ()
            if len(buffer):
                replays = tuple(buffer.sample(cfg.minibatch_size, generator) for _ in range(method.draws))
                extra = tuple(buffer.sample(cfg.minibatch_size, side) for _ in range(method.side_draws))
            return {"x": task.x_train[index], "y": task.y_train[index], "replays": replays, "side": extra}

        def loss_fn(
            model: nn.Module, batch: dict[str, Any], t: int = task.index, first: int = first_class
        ) -> tuple[torch.Tensor, dict[str, Any]]:
            out = method.loss(
                model, Step(batch["x"], batch["y"], t, first, batch["replays"], batch["side"]), cfg.weights
            )
            buffer.add(batch["x"], batch["y"], out.stream_logits, task=t)
            return out.loss, out.metrics

        log = (
            None
            if callback is None
            else (lambda step, metrics, t=task.index, before=result.steps: callback(t, before + step, metrics))
        )
        fitted = fit(
            model,
            loss_fn,
            batches,
            TrainConfig(
                steps=cfg.epochs * per_epoch,
                lr=cfg.lr,
                optimizer="sgd",
                weight_decay=0.0,
                grad_clip=None,
                seed=seed_of("fit", task.index),
                device=cfg.device,
                log_every=cfg.log_every,
                progress=cfg.progress,
                desc=f"{desc} task {task.index + 1}/{len(stream.tasks)}",
            ),
            callback=log,
        )
        class_il, task_il = evaluate_stream(model, stream, task.index)
        result.class_il.append(class_il)
        result.task_il.append(task_il)
        result.history.append(fitted.history)
        result.steps += fitted.steps_done
    result.seconds = time.perf_counter() - started
    return result
