"""Quality of generated grey-scale clips against real ones, without a video benchmark.

Clips are ``[N, T, H, W]`` pixels in [0, 1].

* :func:`blockiness`: mean |neighbour difference| across 2x2-block boundaries over that within blocks;
  1 for content without block structure, > 1 when 2x2 blocks show (nearest-neighbour upsampling);
* :func:`motion_error`: mean over consecutive frames of the smallest MSE between frame f+1 and frame f
  shifted by at most one pixel per axis (compared on the interior); 0 for a digit translating by <= 1 px;
* :func:`fit_pixel_pca` / :func:`project_frames`: the top principal components of real frames, the space
  of a pixel-statistics Fréchet distance;
* :class:`ClipScorer`: every metric of a generated set against a fixed real reference set: pixel FD,
  pixel FD of the frames after the first, classifier-feature FD, the classifier's accuracy on the
  conditioning labels (percent) and its mean confidence, blockiness and motion error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from components.metrics.classification import accuracy
from components.metrics.distributions import frechet_distance

__all__ = ["ClipScorer", "blockiness", "fit_pixel_pca", "motion_error", "project_frames"]


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
    target = nxt[..., 1:h - 1, 1:w - 1]
    errors = torch.stack([(prev[..., 1 - dy:h - 1 - dy, 1 - dx:w - 1 - dx] - target).pow(2).mean(dim=(-2, -1))
                          for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
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


@dataclass
class ClipScorer:
    """Scores generated clips against ``reference`` clips ``[M, T, H, W]``.

    ``features(frames [B, H, W]) -> [B, F]`` is a frame classifier's penultimate layer and
    ``head(features) -> logits [B, n_classes]`` its last layer.
    """

    reference: Tensor
    pca: dict[str, Tensor]
    features: Callable[[Tensor], Tensor]
    head: Callable[[Tensor], Tensor]
    _ref: dict[str, Tensor] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ref = self.reference
        self._ref = {"pixels": project_frames(self.pca, ref), "features": self.features(ref.flatten(0, 1))}
        if ref.shape[1] > 1:
            self._ref["later"] = project_frames(self.pca, ref[:, 1:])

    def score(self, clips: Tensor, labels: Tensor) -> dict[str, float]:
        """Every metric of ``clips [N, T, H, W]`` generated for class ``labels [N]``."""
        t = clips.shape[1]
        feats = self.features(clips.flatten(0, 1))
        probs = self.head(feats).softmax(-1)
        later = (frechet_distance(project_frames(self.pca, clips[:, 1:]), self._ref["later"])
                 if t > 1 and "later" in self._ref else float("nan"))
        return {
            "fd_pixels": frechet_distance(project_frames(self.pca, clips), self._ref["pixels"]),
            "fd_pixels_later": later,
            "fd_classifier": frechet_distance(feats, self._ref["features"]),
            "accuracy": 100 * accuracy(probs, labels.repeat_interleave(t)),
            "confidence": float(probs.max(-1).values.mean()),
            "blockiness": blockiness(clips),
            "motion_error": motion_error(clips),
        }
