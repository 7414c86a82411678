"""Dense multi-task metrics as NYUv2 papers report them (MTAN / LibMTL / MTSAM), and the multi-task summaries.

Segmentation (labels -1 ignored), from the confusion matrix H accumulated over the whole test set:

    IoU_c = H_cc / (sum_k H_ck + sum_k H_kc - H_cc),  mIoU = mean of IoU_c over the classes present in the
    labels or the predictions (a class absent from both has no IoU: the official ``torch.mean`` would
    return NaN),  pixel accuracy = trace(H) / sum(H)

Depth (pixels with ground truth != 0): absolute error mean |p - g|, relative error mean |p - g| / g.

Normals (pixels whose ground-truth vector is not 0; predictions normalised): the angle
acos(clamp(<p, g>, -1, 1)) in degrees; its mean and median and the % of pixels within 11.25, 22.5 and 30.

Every mean is over the pixels of the whole test set (the official loop averages per-batch values).

Summaries against single-task baselines B, for a method M with metrics m_k and directions l_k (1 if lower
is better):

    Δm = 100 / K  sum_k (-1)^{l_k} (M_k - B_k) / B_k            metric-balanced (MTAN, MTSAM)
    Δp = 100 / T  sum_t 1/K_t sum_{k in t} (-1)^{l_k} (M_k - B_k) / B_k   task-balanced (LibMTL)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

THRESHOLDS = (11.25, 22.5, 30.0)


def confusion_matrix(pred: Tensor, label: Tensor, n_classes: int) -> Tensor:
    """H [C, C] (int64; row = label, column = prediction) over the pixels with 0 <= label < C."""
    keep = (label >= 0) & (label < n_classes)
    index = n_classes * label[keep].long() + pred[keep].long()
    return torch.bincount(index, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def segmentation_scores(confusion: Tensor) -> dict[str, float]:
    """{"miou", "pix_acc"} in % from a confusion matrix (mIoU over the classes with a non-empty union)."""
    h = confusion.double()
    union = h.sum(0) + h.sum(1) - h.diag()
    present = union > 0
    miou = float((h.diag()[present] / union[present]).mean()) if present.any() else float("nan")
    total = float(h.sum())
    return {"miou": 100 * miou, "pix_acc": 100 * float(h.diag().sum()) / total if total else float("nan")}


def depth_errors(pred: Tensor, depth: Tensor) -> dict[str, float]:
    """{"abs_err", "rel_err"} over the pixels with depth != 0 (pred, depth of one shape)."""
    mask = depth != 0
    diff = (pred[mask] - depth[mask]).abs().double()
    if diff.numel() == 0:
        return {"abs_err": float("nan"), "rel_err": float("nan")}
    return {"abs_err": float(diff.mean()), "rel_err": float((diff / depth[mask].double()).mean())}


def normal_angles(pred: Tensor, normal: Tensor) -> Tensor:
    """Angles in degrees [M] between normalised predictions and targets [B, 3, H, W] at the target's pixels."""
    mask = (normal != 0).any(dim=1)
    unit = pred / pred.norm(dim=1, keepdim=True).clamp_min(1e-12)
    cos = (unit * normal).sum(dim=1)[mask].clamp(-1, 1)
    return torch.rad2deg(torch.acos(cos.double()))


def normal_errors(angles: Tensor) -> dict[str, float]:
    """{"mean_angle", "median_angle", "within_11", "within_22", "within_30"} (degrees, %) from the angles."""
    if angles.numel() == 0:
        return {k: float("nan") for k in ("mean_angle", "median_angle", "within_11", "within_22", "within_30")}
    out = {"mean_angle": float(angles.mean()), "median_angle": float(angles.median())}
    for key, t in zip(("within_11", "within_22", "within_30"), THRESHOLDS):
        out[key] = 100 * float((angles < t).double().mean())
    return out


def relative_improvement(
    method: Mapping[str, float], baseline: Mapping[str, float], higher_is_better: Mapping[str, bool]
) -> dict[str, float]:
    """Per metric 100 (-1)^{l_k} (M_k - B_k) / B_k (l_k = 1 when lower is better)."""
    out = {}
    for key, higher in higher_is_better.items():
        if baseline[key] == 0:
            raise ValueError(f"baseline {key} is 0: the relative improvement is undefined")
        sign = 1.0 if higher else -1.0
        out[key] = 100 * sign * (method[key] - baseline[key]) / baseline[key]
    return out


def delta_m(method: Mapping[str, float], baseline: Mapping[str, float], higher_is_better: Mapping[str, bool]) -> float:
    """Metric-balanced Δm (%): the mean relative improvement over all metrics."""
    gains = relative_improvement(method, baseline, higher_is_better)
    return sum(gains.values()) / len(gains)


def delta_p(
    method: Mapping[str, float],
    baseline: Mapping[str, float],
    higher_is_better: Mapping[str, bool],
    task_metrics: Mapping[str, Sequence[str]],
) -> float:
    """Task-balanced Δp (%), LibMTL's ``count_improvement``: the mean over tasks of each task's mean gain."""
    gains = relative_improvement(method, baseline, higher_is_better)
    per_task = [sum(gains[k] for k in keys) / len(keys) for keys in task_metrics.values()]
    return sum(per_task) / len(per_task)
