"""Continual learning: class-incremental task streams, a reservoir buffer, rehearsal methods as plug-ins,
and STAR as a wrapper that adds its weight-perturbation term to any of them.

* :mod:`~components.continual.streams`: tasks cut by class (seq-MNIST: 5 x 2 classes); Class-IL and Task-IL
  evaluation (Task-IL masks the logits to the task's classes);
* :mod:`~components.continual.buffer`: reservoir sampling of inputs, labels, logits and task ids;
* :mod:`~components.continual.rehearsal`: ER, DER++ and ER-ACE with one signature, in ``REHEARSAL``;
* :mod:`~components.continual.star`: STAR's perturbation and loss, ``with_star(method, cfg)``;
* :mod:`~components.continual.train`: a stream learned through :func:`components.training.fit`, one call per
  task; :mod:`~components.continual.metrics`: final average accuracy, forgetting, backward transfer;
* :mod:`~components.continual.backbone`: mammoth's MNIST MLP (784-100-100-10).
"""

from components.continual.backbone import MLPClassifier, MLPClassifierConfig
from components.continual.buffer import BufferBatch, ReservoirBuffer, reservoir_slot
from components.continual.metrics import backward_transfer, final_average_accuracy, forgetting
from components.continual.rehearsal import REHEARSAL, Rehearsal, ReplayWeights, Step, StepLoss
from components.continual.star import StarConfig, star_term, with_star
from components.continual.streams import (
    Task,
    TaskStream,
    evaluate_stream,
    split_by_class,
    stream_from_indices,
    task_il_logits,
    task_indices,
)
from components.continual.train import ContinualConfig, StreamResult, train_stream

__all__ = [
    "REHEARSAL",
    "BufferBatch",
    "ContinualConfig",
    "MLPClassifier",
    "MLPClassifierConfig",
    "Rehearsal",
    "ReplayWeights",
    "ReservoirBuffer",
    "StarConfig",
    "Step",
    "StepLoss",
    "StreamResult",
    "Task",
    "TaskStream",
    "backward_transfer",
    "evaluate_stream",
    "final_average_accuracy",
    "forgetting",
    "reservoir_slot",
    "split_by_class",
    "star_term",
    "stream_from_indices",
    "task_il_logits",
    "task_indices",
    "train_stream",
    "with_star",
]
