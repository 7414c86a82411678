"""Quality of generated grey-scale clips against real ones, without a video benchmark.

Clips are ``[N, T, H, W]`` pixels in [0, 1].

* :func:`blockiness`: mean |neighbour difference| across 2x2-block boundaries over that within blocks;
  1 for content without block structure, > 1 when 2x2 blocks show (nearest-neighbour upsampling);
* :func:`motion_error`: mean over consecutive frames of the smallest MSE between frame f+1 and frame f
  shifted by at most one pixel per axis (compared on the interior); 0 for a digit translating by <= 1 px;
* :func:`fit_pixel_pca` / :func:`project_frames`: the top principal components of real frames, the space
  of a pixel-statistics Fréchet distance;
* :func:`class_frechet_distance`: a class-aware Fréchet distance, the mean over classes of the FD between
  the generated and the real features of that class (class means, covariances pooled within classes);
  a generator that ignores its label scores badly even when its frames are, as a set, realistic;
* :func:`mnist_view`: frames resized and placed as MNIST's own digits are (a 20 px digit whose centre of
  mass sits at the centre of a 28x28 canvas), the input a frozen MNIST classifier expects;
* :class:`ClipScorer`: every metric of a generated set against a fixed real reference set: pixel FD,
  pixel FD of the frames after the first, classifier-feature FD, the class-aware FD (when a class feature
  map and the reference labels are given), the classifier's accuracy on the conditioning labels (percent)
  and its mean confidence, blockiness and motion error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from components.metrics.classification import accuracy
from components.metrics.distributions import frechet_distance, frechet_distance_from_stats

__all__ = [
    "ClipScorer",
    "blockiness",
    "class_frechet_distance",
    "fit_pixel_pca",
    "mnist_view",
    "motion_error",
    "project_frames",
]


def blockiness(frames: Tensor) -> float:
    """Across-block over within-block mean |difference| of horizontally and vertically neighbouring pixels
    (pairs pooled), 2x2 blocks aligned at (0, 0); any leading dims."""
    dh = (frames[..., :, 1:] - frames[..., :, :-1]).abs()
    dv = (frames[..., 1:, :] - frames[..., :-1, :]).abs()
    across = torch.cat([dh[..., :, 1::2].flatten(), dv[..., 1::2, :].flatten()]).mean()
    within = torch.cat([dh[..., :, 0::2].flatten(), dv[..., 0::2, :].flatten()]).mean()
    return float(across / within.clamp_min(1e-8))


def motion_error(clips: Tensor) -> float:
    """Temporal coherence of ``clips [N, T, H, W]`` (0 for a single frame), see the module docstring."""
    if clips.shape[1] < 2:
        return 0.0
    prev, nxt = clips[:, :-1], clips[:, 1:]
    h, w = clips.shape[-2:]
    target = nxt[..., 1 : h - 1, 1 : w - 1]
    errors = torch.stack(
        [
            (prev[..., 1 - dy : h - 1 - dy, 1 - dx : w - 1 - dx] - target).pow(2).mean(dim=(-2, -1))
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
        ]
    )
    return float(errors.min(dim=0).values.mean())


def fit_pixel_pca(frames: Tensor, dim: int) -> dict[str, Tensor]:
    """``{"mean": [H W], "components": [H W, dim]}``: the mean and top ``dim`` principal directions of
    ``frames [N, H, W]`` (columns orthonormal, by decreasing variance)."""
    flat = frames.flatten(1)
    mean = flat.mean(0)
    _, _, vh = torch.linalg.svd(flat - mean, full_matrices=False)
    if dim > vh.shape[0]:
        raise ValueError(f"{dim} components asked of {vh.shape[0]} available")
    return {"mean": mean, "components": vh[:dim].T.contiguous()}


def project_frames(pca: dict[str, Tensor], clips: Tensor) -> Tensor:
    """Frames of ``clips [N, T, H, W]`` -> principal-component coordinates ``[N T, dim]``."""
    return (clips.flatten(0, 1).flatten(1) - pca["mean"]) @ pca["components"]


def class_frechet_distance(feats: Tensor, labels: Tensor, ref_feats: Tensor, ref_labels: Tensor) -> float:
    """Mean over the classes of ``labels`` of ``FD(N(mu_c, S), N(mu_c^ref, S^ref))``: ``mu_c`` the mean
    feature of class c, ``S`` the within-class covariance pooled over the classes (deviations from each
    sample's class mean), so a few samples per class suffice. Every class of ``labels`` needs reference
    samples; features ``[N, F]``, labels ``[N]``."""
    feats, ref_feats = feats.double(), ref_feats.double()
    classes = labels.unique()
    missing = [int(c) for c in classes if not (ref_labels == c).any()]
    if missing:
        raise ValueError(f"classes {missing} have no reference samples")

    def stats(x: Tensor, y: Tensor) -> tuple[dict[int, Tensor], Tensor]:
        means = {int(c): x[y == c].mean(0) for c in y.unique()}
        centred = x - torch.stack([means[int(c)] for c in y])
        return means, centred.T @ centred / max(1, x.shape[0] - len(means))

    mu, cov = stats(feats, labels)
    mu_ref, cov_ref = stats(ref_feats, ref_labels)
    return sum(frechet_distance_from_stats(mu[int(c)], cov, mu_ref[int(c)], cov_ref) for c in classes) / len(classes)


def mnist_view(frames: Tensor, digit_size: int, size: int = 28, box: int = 20) -> Tensor:
    """Frames ``[N, H, W]`` in [0, 1] holding one digit of side ``digit_size`` -> ``[N, size, size]``: scaled
    by ``box / digit_size`` and translated so that the centre of mass lands on the canvas centre (MNIST's
    preprocessing), by one bilinear resampling; an empty frame is taken about its own centre."""
    n, h, w = frames.shape
    scale = box / digit_size
    mass = frames.sum((1, 2))
    rows, cols = torch.arange(h, dtype=frames.dtype), torch.arange(w, dtype=frames.dtype)
    safe = mass.clamp_min(1e-8)
    cy = torch.where(mass > 0, (frames.sum(2) * rows).sum(1) / safe, torch.full_like(mass, (h - 1) / 2))
    cx = torch.where(mass > 0, (frames.sum(1) * cols).sum(1) / safe, torch.full_like(mass, (w - 1) / 2))
    offset = (torch.arange(size, dtype=frames.dtype) - (size - 1) / 2) / scale  # source pixels from the centre
    src_y = cy[:, None] + offset[None]  # [N, size], in source pixel indices
    src_x = cx[:, None] + offset[None]
    grid = torch.stack(
        [
            ((2 * src_x + 1) / w - 1)[:, None, :].expand(n, size, size),
            ((2 * src_y + 1) / h - 1)[:, :, None].expand(n, size, size),
        ],
        dim=-1,
    )
    return F.grid_sample(frames[:, None], grid, mode="bilinear", padding_mode="zeros", align_corners=False)[:, 0]


@dataclass
class ClipScorer:
    """Scores generated clips against ``reference`` clips ``[M, T, H, W]``.

    ``features(frames [B, H, W]) -> [B, F]`` is a frame classifier's penultimate layer and
    ``head(features) -> logits [B, n_classes]`` its last layer. ``class_features(frames) -> [B, G]`` with
    the ``reference_labels [M]`` of the reference clips give the class-aware FD ``fd_class`` (NaN without).
    """

    reference: Tensor
    pca: dict[str, Tensor]
    features: Callable[[Tensor], Tensor]
    head: Callable[[Tensor], Tensor]
    class_features: Callable[[Tensor], Tensor] | None = None
    reference_labels: Tensor | None = None
    _ref: dict[str, Tensor] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ref = self.reference
        self._ref = {"pixels": project_frames(self.pca, ref), "features": self.features(ref.flatten(0, 1))}
        if ref.shape[1] > 1:
            self._ref["later"] = project_frames(self.pca, ref[:, 1:])
        if (self.class_features is None) != (self.reference_labels is None):
            raise ValueError("the class-aware FD needs both class_features and reference_labels")
        if self.class_features is not None:
            self._ref["class"] = self.class_features(ref.flatten(0, 1))
            self._ref["labels"] = self.reference_labels.repeat_interleave(ref.shape[1])

    def score(self, clips: Tensor, labels: Tensor) -> dict[str, float]:
        """Every metric of ``clips [N, T, H, W]`` generated for class ``labels [N]``."""
        t = clips.shape[1]
        feats = self.features(clips.flatten(0, 1))
        probs = self.head(feats).softmax(-1)
        later = (
            frechet_distance(project_frames(self.pca, clips[:, 1:]), self._ref["later"])
            if t > 1 and "later" in self._ref
            else float("nan")
        )
        fd_class = float("nan")
        if self.class_features is not None:
            fd_class = class_frechet_distance(
                self.class_features(clips.flatten(0, 1)),
                labels.repeat_interleave(t),
                self._ref["class"],
                self._ref["labels"],
            )
        return {
            "fd_pixels": frechet_distance(project_frames(self.pca, clips), self._ref["pixels"]),
            "fd_pixels_later": later,
            "fd_classifier": frechet_distance(feats, self._ref["features"]),
            "fd_class": fd_class,
            "accuracy": 100 * accuracy(probs, labels.repeat_interleave(t)),
            "confidence": float(probs.max(-1).values.mean()),
            "blockiness": blockiness(clips),
            "motion_error": motion_error(clips),
        }
