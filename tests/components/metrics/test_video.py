"""Video quality metrics: blockiness and motion error on frames with known answers, the pixel PCA, and the
clip scorer against its own reference."""

from __future__ import annotations

import math

import pytest
import torch

from components.metrics.distributions import frechet_distance
from components.metrics.video import (
    ClipScorer,
    blockiness,
    class_frechet_distance,
    fit_pixel_pca,
    mnist_view,
    motion_error,
    project_frames,
)


def test_blockiness_known_answers() -> None:
    ramp = torch.arange(4.0).expand(4, 4)  # every horizontal step 1, vertical 0: no block structure
    assert blockiness(ramp) == pytest.approx(1.0)
    stairs = (torch.arange(4.0) + torch.arange(4.0).div(2, rounding_mode="floor")).expand(4, 4)
    # horizontal steps 1, 2, 1: the step across the block boundary is twice the ones inside
    assert blockiness(stairs) == pytest.approx(2.0)
    blocks = torch.rand(3, 4, 4).repeat_interleave(2, -1).repeat_interleave(2, -2)  # constant 2x2 blocks
    assert blockiness(blocks) > 1e3
    noise = torch.rand(8, 64, 64, generator=torch.Generator().manual_seed(0))
    assert blockiness(noise) == pytest.approx(1.0, abs=0.02)


def test_motion_error_known_answers() -> None:
    frame = torch.rand(6, 6, generator=torch.Generator().manual_seed(1))
    moving = torch.stack([torch.roll(frame, shifts=(k, -k), dims=(0, 1)) for k in range(3)])[None]
    assert motion_error(moving) == pytest.approx(0.0, abs=1e-12)  # one pixel per axis per frame
    assert motion_error(moving[:, :1]) == 0.0
    brighter = torch.stack([torch.zeros(6, 6), torch.full((6, 6), 0.5)])[None]
    assert motion_error(brighter) == pytest.approx(0.25)
    jump = torch.stack([frame, torch.roll(frame, shifts=(3, 0), dims=(0, 1))])[None]
    assert motion_error(jump) > 0.01  # three pixels: beyond the allowed shift


def test_pixel_pca_finds_the_directions_of_variance() -> None:
    gen = torch.Generator().manual_seed(2)
    basis, _ = torch.linalg.qr(torch.randn(16, 2, generator=gen, dtype=torch.float64))
    raw = torch.randn(500, 2, generator=gen, dtype=torch.float64)
    ortho, _ = torch.linalg.qr(raw - raw.mean(0))  # zero-mean, uncorrelated coordinates
    coords = ortho * torch.tensor([30.0, 10.0], dtype=torch.float64)
    offset = torch.rand(16, generator=gen, dtype=torch.float64)
    frames = (coords @ basis.T + offset).view(500, 4, 4)
    pca = fit_pixel_pca(frames, 2)
    comps = pca["components"]
    assert comps.shape == (16, 2) and comps.is_contiguous()
    torch.testing.assert_close(comps.T @ comps, torch.eye(2, dtype=torch.float64))
    torch.testing.assert_close(pca["mean"], frames.flatten(1).mean(0))
    assert abs(float(comps[:, 0] @ basis[:, 0])) == pytest.approx(1.0, abs=1e-6)  # the larger variance first
    projected = project_frames(pca, frames[:, None])
    torch.testing.assert_close(projected.abs(), coords.abs(), atol=1e-9, rtol=1e-9)
    with pytest.raises(ValueError, match="components asked"):
        fit_pixel_pca(frames[:5], 6)


def test_clip_scorer_against_its_own_reference() -> None:
    gen = torch.Generator().manual_seed(3)
    reference = torch.rand(40, 3, 4, 4, generator=gen)
    pca = fit_pixel_pca(reference.flatten(0, 1), 5)

    def head(feats: torch.Tensor) -> torch.Tensor:  # always says "digit 2"
        return torch.nn.functional.one_hot(torch.full((feats.shape[0],), 2), 10).float() * 10

    scorer = ClipScorer(reference, pca, features=lambda x: x.flatten(1)[:, :6], head=head)
    labels = torch.arange(40) % 10
    same = scorer.score(reference, labels)
    assert same["fd_pixels"] == pytest.approx(0.0, abs=1e-9) and same["fd_classifier"] == pytest.approx(0.0, abs=1e-9)
    assert same["fd_pixels_later"] == pytest.approx(0.0, abs=1e-9)
    assert same["accuracy"] == pytest.approx(10.0)  # labels are 2 for a tenth of the clips
    assert same["confidence"] == pytest.approx(float(torch.softmax(head(torch.zeros(1, 6)), -1).max()))
    assert same["blockiness"] == pytest.approx(blockiness(reference))
    assert same["motion_error"] == pytest.approx(motion_error(reference))
    assert scorer.score(reference.flip(-1) * 0.5, labels)["fd_pixels"] > 0.1
    single = ClipScorer(reference[:, :1], pca, lambda x: x.flatten(1)[:, :6], head).score(reference[:, :1], labels)
    assert math.isnan(single["fd_pixels_later"]) and math.isnan(single["fd_class"])
    aware = ClipScorer(
        reference,
        pca,
        lambda x: x.flatten(1)[:, :6],
        head,
        class_features=lambda x: x.flatten(1),
        reference_labels=labels,
    )
    assert aware.score(reference, labels)["fd_class"] == pytest.approx(0.0, abs=1e-9)
    assert aware.score(reference, labels.roll(1))["fd_class"] > 0.01  # the right frames for the wrong digits
    with pytest.raises(ValueError, match="both"):
        ClipScorer(reference, pca, lambda x: x, head, class_features=lambda x: x)


def test_class_frechet_distance_known_answers() -> None:
    gen = torch.Generator().manual_seed(0)
    feats, labels = torch.randn(400, 5, generator=gen), torch.arange(400) % 4
    assert class_frechet_distance(feats, labels, feats, labels) == pytest.approx(0.0, abs=1e-9)
    # one of four classes moved by a vector of length 2: within-class covariances unchanged, |d|^2 / 4 = 1
    moved = feats.clone()
    moved[labels == 0] += torch.tensor([2.0, 0, 0, 0, 0])
    assert class_frechet_distance(moved, labels, feats, labels) == pytest.approx(1.0, rel=1e-6)
    # classes swapped: the unconditional FD cannot tell, the class-aware one does
    shifted = feats + 3.0 * torch.nn.functional.one_hot(labels, 5)[:, :5].float()
    swapped = (labels + 1) % 4  # every sample relabelled as another class
    assert frechet_distance(shifted, shifted) == pytest.approx(0.0, abs=1e-9)
    assert class_frechet_distance(shifted, swapped, shifted, labels) > 5.0
    with pytest.raises(ValueError, match="no reference"):
        class_frechet_distance(feats, labels, feats[labels < 2], labels[labels < 2])


def test_mnist_view_centres_the_mass_and_scales_the_digit() -> None:
    frame = torch.zeros(1, 28, 28)
    frame[0, 10:18, 9:19] = 1.0  # centre of mass (13.5, 13.5), already MNIST-placed at scale 1
    assert torch.allclose(mnist_view(frame, digit_size=20), frame)
    dot = torch.zeros(1, 16, 16)
    dot[0, 2, 11] = 1.0  # one pixel off-centre: moved to the canvas centre, spread over the middle 2x2
    out = mnist_view(dot, digit_size=10)
    assert out.shape == (1, 28, 28) and out.sum().item() == pytest.approx(4.0, rel=1e-5)  # area x (20/10)^2
    rows, cols = torch.arange(28.0), torch.arange(28.0)
    mass = out[0].sum()
    assert (out[0].sum(1) * rows).sum() / mass == pytest.approx(13.5, abs=1e-4)
    assert (out[0].sum(0) * cols).sum() / mass == pytest.approx(13.5, abs=1e-4)
    assert mnist_view(torch.zeros(2, 16, 16), 12).abs().max() == 0
