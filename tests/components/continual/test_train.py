"""A stream learned through the one training loop: matrix shapes, steps, determinism, and the property every
continual-learning benchmark rests on (fine-tuning forgets old classes in Class-IL; replay keeps some)."""

from __future__ import annotations

import math

import pytest
import torch

from components.continual import (
    REHEARSAL,
    ContinualConfig,
    MLPClassifier,
    MLPClassifierConfig,
    StarConfig,
    final_average_accuracy,
    split_by_class,
    train_stream,
    with_star,
)
from components.data.images import load_digits_dataset


@pytest.fixture(scope="module")
def digits_stream():
    x_train, y_train = load_digits_dataset("train")
    x_test, y_test = load_digits_dataset("test")
    return split_by_class("split-digits", x_train, y_train, x_test, y_test, classes_per_task=2, train_per_task=120)


def seed_of(*names: object) -> int:
    return sum(ord(c) for c in ":".join(map(str, names))) * 7919 % 2**31


def run(stream, name: str, star: StarConfig | None = None, buffer: int = 100) -> tuple[object, MLPClassifier]:
    model = MLPClassifier(MLPClassifierConfig(in_features=64), seed=0)
    method = REHEARSAL[name] if star is None else with_star(REHEARSAL[name], star, seed=1)
    cfg = ContinualConfig(lr=0.1, batch_size=10, minibatch_size=10, buffer_size=buffer, log_every=4)
    return train_stream(model, stream, method, cfg, seed_of), model


def test_matrices_steps_and_determinism(digits_stream) -> None:
    logged: list[tuple[int, int]] = []
    model = MLPClassifier(MLPClassifierConfig(in_features=64), seed=0)
    result = train_stream(
        model,
        digits_stream,
        REHEARSAL["derpp"],
        ContinualConfig(batch_size=10, log_every=5),
        seed_of,
        callback=lambda task, step, metrics: logged.append((task, step)),
    )
    assert [len(row) for row in result.class_il] == [1, 2, 3, 4, 5] == [len(row) for row in result.task_il]
    assert result.steps == 5 * math.ceil(120 / 10)
    assert logged[:5] == [(0, 5), (0, 10), (0, 12), (1, 17), (1, 22)] and {t for t, _ in logged} == {0, 1, 2, 3, 4}
    assert len(result.buffer) == 200 and set(result.buffer.task.tolist()) <= {0, 1, 2, 3, 4}
    assert "logit_mse" in result.history[1][-1]  # DER++'s replay terms reach the loop's log
    again, _ = run(digits_stream, "derpp")
    once_more, _ = run(digits_stream, "derpp")
    assert again.class_il == once_more.class_il and again.task_il == once_more.task_il
    assert all(t >= c for row_c, row_t in zip(again.class_il, again.task_il) for c, t in zip(row_c, row_t))


def test_fine_tuning_forgets_and_replay_remembers(digits_stream) -> None:
    finetune, _ = run(digits_stream, "sgd")
    # Class-IL after the last task: fine-tuning predicts only the newest classes
    assert finetune.class_il[-1][:4] == [0.0, 0.0, 0.0, 0.0] and finetune.class_il[-1][-1] > 50
    for name in ("er", "derpp", "er_ace"):
        replay, _ = run(digits_stream, name)
        assert final_average_accuracy(replay.class_il) > final_average_accuracy(finetune.class_il) + 20, name


def test_star_runs_inside_the_loop_and_is_applied(digits_stream) -> None:
    result, model = run(digits_stream, "er", StarConfig(gamma=0.01, lam=0.1))
    applied = [h["star_applied"] for task in result.history[1:] for h in task]
    assert applied and min(applied) > 0.5 and all(math.isfinite(v) for row in result.class_il for v in row)
    assert next(model.parameters()).device.type == "cpu"


def test_star_leaves_the_base_methods_replay_batches_unchanged(digits_stream) -> None:
    """STAR's extra buffer draw comes from a generator of its own: with lambda = 0 its term adds nothing, so the
    run must be bit-for-bit the base run (it would not be if STAR's draw advanced the base method's sampler)."""
    base, base_model = run(digits_stream, "er")
    silent, silent_model = run(digits_stream, "er", StarConfig(gamma=0.01, lam=0.0))
    assert silent.class_il == base.class_il and silent.task_il == base.task_il
    assert all(torch.equal(a, b) for a, b in zip(base_model.parameters(), silent_model.parameters()))
    assert torch.equal(silent.buffer.x, base.buffer.x)
