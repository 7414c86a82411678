"""Moving-MNIST synthesis: shapes and range, seeding, exact frames from the recorded positions, bouncing
trajectories, compositing, and config validation (synthetic digits; one check on real MNIST)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from components.data.moving_mnist import MovingMnistConfig, moving_mnist, resize_digits


def _digits(n: int = 20, size: int = 28) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.rand(n, size, size, generator=gen), torch.arange(n) % 10


def test_shapes_range_and_labels() -> None:
    images, labels = _digits()
    cfg = MovingMnistConfig(canvas=16, digit_size=12, n_frames=4)
    made = moving_mnist(images, labels, 50, cfg, seed=1)
    assert made.clips.shape == (50, 4, 16, 16) and made.clips.dtype == torch.float32
    assert made.clips.min() >= 0 and made.clips.max() <= 1
    assert made.labels.shape == (50, 1) and torch.equal(made.labels, labels[made.sources])
    assert made.positions.shape == (50, 1, 4, 2)


def test_same_seed_same_clips_other_seed_other_clips() -> None:
    images, labels = _digits()
    a = moving_mnist(images, labels, 30, seed=3)
    b = moving_mnist(images, labels, 30, seed=3)
    c = moving_mnist(images, labels, 30, seed=4)
    assert torch.equal(a.clips, b.clips) and torch.equal(a.positions, b.positions)
    assert not torch.equal(a.clips, c.clips)


def test_every_frame_is_the_resized_digit_at_its_recorded_position() -> None:
    images, labels = _digits()
    cfg = MovingMnistConfig(canvas=16, digit_size=12, n_frames=5)
    made = moving_mnist(images, labels, 10, cfg, seed=0)
    digits = resize_digits(images[made.sources[:, 0]], 12)
    for i in range(10):
        for f in range(5):
            r, c = made.positions[i, 0, f].tolist()
            expected = torch.zeros(16, 16)
            expected[r : r + 12, c : c + 12] = digits[i]
            assert torch.equal(made.clips[i, f], expected)


def test_digits_move_every_frame_within_the_canvas_and_bounce() -> None:
    images, labels = _digits()
    cfg = MovingMnistConfig(canvas=16, digit_size=14, n_frames=6, speed=1)  # free range [0, 2]
    made = moving_mnist(images, labels, 200, cfg, seed=0)
    pos = made.positions[:, 0]
    assert pos.min() >= 0 and pos.max() <= 2
    steps = pos[:, 1:] - pos[:, :-1]
    assert steps.abs().max() <= 1
    assert (steps.abs().sum(-1) > 0).all()  # the velocity is never zero, so every frame moves
    # a coordinate that would leave the range reverses: from 2 with +1 it goes to 1
    at_top = (pos[:, :-2, 0] == 1) & (pos[:, 1:-1, 0] == 2)
    assert at_top.any() and (pos[:, 2:, 0][at_top] == 1).all()


def test_two_digits_are_composited_with_a_max() -> None:
    images, labels = _digits()
    cfg = MovingMnistConfig(canvas=16, digit_size=8, n_frames=2, n_digits=2)
    made = moving_mnist(images, labels, 5, cfg, seed=2)
    assert made.labels.shape == (5, 2)
    for i in range(5):
        layers = []
        for d in range(2):
            layer = torch.zeros(2, 16, 16)
            digit = resize_digits(images[made.sources[i, d]][None], 8)[0]
            for f in range(2):
                r, c = made.positions[i, d, f].tolist()
                layer[f, r : r + 8, c : c + 8] = digit
            layers.append(layer)
        assert torch.equal(made.clips[i], torch.maximum(*layers))


def test_resize_is_area_averaging() -> None:
    images, _ = _digits(3, 28)
    assert torch.allclose(resize_digits(images, 14), F.avg_pool2d(images[:, None], 2)[:, 0])
    assert torch.equal(resize_digits(images, 28), images)
    with pytest.raises(ValueError, match=r"\[N, H, W\]"):
        resize_digits(images[0], 14)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"digit_size": 20}, "digit_size"), ({"n_frames": 0}, "n_frames"), ({"digit_size": 16, "n_frames": 2}, "speed")],
)
def test_invalid_configs_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MovingMnistConfig(**{"canvas": 16, **kwargs})


def test_bad_inputs_are_refused() -> None:
    images, labels = _digits()
    with pytest.raises(ValueError, match="labels"):
        moving_mnist(images, labels[:3], 4)
    with pytest.raises(ValueError, match="at least one"):
        moving_mnist(images, labels, 0)


def test_real_mnist_digits() -> None:
    pytest.importorskip("mnist")
    from components.data.images import load_mnist

    images, labels = load_mnist("test")
    made = moving_mnist(images[:100], labels[:100], 8, seed=0)
    assert made.clips.shape == (8, 4, 16, 16)
    assert (made.clips.flatten(1).max(1).values > 0.5).all()  # every clip shows a bright digit
