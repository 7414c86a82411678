"""Scores of generated samples against a reference: distance between sample sets, mass near known modes,
and classifier-feature image scores.

* ``sample_distance``: the exact Wasserstein-1 distance for 1-D points (``[N, 1]``), the sliced
  Wasserstein-2 distance over random directions otherwise (:mod:`components.metrics.distributions`).
* ``mode_fractions``: for 1-D samples and a list of modes, the fraction of samples within ``radius`` of
  each mode (a bimodal law with equal modes puts about 1/2 near each; a point mass puts all of its mass
  near at most the modes it sits close to).
* ``velocity_law_scores``: what is measured of a set of velocities drawn at one point: distance to the
  true law's samples, spread, mean norm, and the mode fractions.
* ``feature_scores``: FID-style Fréchet distance of classifier features to a reference feature set, the
  mean top-class confidence, and the Inception-style score of the class probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from components.metrics.distributions import frechet_distance, inception_score, sliced_wasserstein, wasserstein_1d

__all__ = ["feature_scores", "mode_fractions", "sample_distance", "velocity_law_scores"]


def sample_distance(a: Tensor, b: Tensor, n_projections: int = 200, generator: torch.Generator | None = None) -> float:
    """W1 between ``a [N, 1]`` and ``b [M, 1]`` (exact); sliced W2 for ``[N, D]``, ``D > 1`` (``n_projections``
    random directions from ``generator``)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"point sets must be [N, D] and [M, D] with one D, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] == 1:
        return wasserstein_1d(a, b)
    return sliced_wasserstein(a, b, n_projections, generator=generator)


def mode_fractions(samples: Tensor, modes: Sequence[float], radius: float) -> list[float]:
    """Fraction of the 1-D ``samples [N]`` (or ``[N, 1]``) within ``radius`` of each of ``modes``."""
    x = samples.reshape(-1) if samples.ndim == 1 or (samples.ndim == 2 and samples.shape[1] == 1) else None
    if x is None or x.numel() == 0:
        raise ValueError(f"samples must be a non-empty [N] or [N, 1] tensor, got {tuple(samples.shape)}")
    if radius <= 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    return [float(((x - mu).abs() <= radius).float().mean()) for mu in modes]


def velocity_law_scores(
    v: Tensor,
    truth: Tensor | None,
    modes: Sequence[float],
    radius: float,
    n_projections: int = 200,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Scores of velocities ``v [N, D]`` drawn at one point against the true law there.

    Returns ``distance_to_true`` (:func:`sample_distance` to the samples ``truth``; NaN when the law is not
    known, ``truth`` None), ``spread`` (mean per-coordinate standard deviation; 0 for one sample),
    ``mean_norm`` (norm of the mean velocity), ``min_mode_fraction`` and ``mode_fraction`` (the smallest and
    the summed :func:`mode_fractions` of the first coordinate; NaN without modes).
    """
    near = mode_fractions(v[:, 0], modes, radius) if modes else []
    return {
        "distance_to_true": (
            sample_distance(v, truth, n_projections, generator) if truth is not None else float("nan")
        ),
        "spread": float(v.std(0).mean()) if v.shape[0] > 1 else 0.0,
        "mean_norm": float(v.mean(0).norm()),
        "min_mode_fraction": min(near) if near else float("nan"),
        "mode_fraction": sum(near) if near else float("nan"),
    }


def feature_scores(features: Tensor, logits: Tensor, reference_features: Tensor) -> dict[str, float]:
    """Scores of generated images from a classifier's view of them.

    Args:
        features: ``[N, F]`` the classifier's features of the generated images.
        logits: ``[N, C]`` its class logits for them.
        reference_features: ``[M, F]`` its features of real reference images.

    Returns:
        ``fid`` (:func:`frechet_distance` of the two feature sets), ``confidence`` (mean largest class
        probability) and ``inception_score`` (:func:`inception_score` of the probabilities).
    """
    probs = torch.softmax(logits, dim=1)
    return {
        "fid": frechet_distance(features, reference_features),
        "confidence": float(probs.max(1).values.mean()),
        "inception_score": inception_score(probs),
    }
