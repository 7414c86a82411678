"""NYUv2 dense metrics and the multi-task summaries on hand-computed values."""

import math

import pytest
import torch

from components.metrics.dense import (
    confusion_matrix,
    delta_m,
    delta_p,
    depth_errors,
    normal_angles,
    normal_errors,
    relative_improvement,
    segmentation_scores,
)


def test_segmentation_scores_ignore_unlabelled_pixels_and_absent_classes():
    label = torch.tensor([[0, 0, 1, -1], [1, 1, 2, 2]])
    pred = torch.tensor([[0, 1, 1, 3], [1, 0, 2, 2]])
    h = confusion_matrix(pred, label, n_classes=4)
    assert h.tolist() == [[1, 1, 0, 0], [1, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]
    scores = segmentation_scores(h)
    # IoU: class 0: 1 / (2 + 2 - 1) = 1/3; class 1: 2 / (3 + 3 - 2) = 1/2; class 2: 1; class 3 absent everywhere
    assert scores["miou"] == pytest.approx(100 * (1 / 3 + 1 / 2 + 1) / 3)
    assert scores["pix_acc"] == pytest.approx(100 * 5 / 7)


def test_depth_errors_over_measured_pixels_only():
    depth = torch.tensor([[2.0, 4.0], [0.0, 1.0]])
    pred = torch.tensor([[3.0, 3.0], [9.0, 1.5]])
    out = depth_errors(pred, depth)
    assert out["abs_err"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert out["rel_err"] == pytest.approx((1 / 2 + 1 / 4 + 0.5) / 3)
    assert all(math.isnan(v) for v in depth_errors(pred, torch.zeros(2, 2)).values())


def test_normal_angles_and_thresholds_known_values():
    gt = torch.zeros(1, 3, 1, 5)
    gt[0, :, 0, 0] = torch.tensor([1.0, 0, 0])
    gt[0, :, 0, 1] = torch.tensor([1.0, 0, 0])
    gt[0, :, 0, 2] = torch.tensor([0, 1.0, 0])
    gt[0, :, 0, 3] = torch.tensor([0, 0, 1.0])  # pixel 4 has no normal: ignored
    pred = torch.zeros(1, 3, 1, 5)
    pred[0, :, 0, 0] = torch.tensor([5.0, 0, 0])  # 0 deg (predictions are normalised)
    pred[0, :, 0, 1] = torch.tensor([1.0, 1.0, 0])  # 45 deg
    pred[0, :, 0, 2] = torch.tensor([1.0, 0, 0])  # 90 deg
    pred[0, :, 0, 3] = torch.tensor([0, math.tan(math.radians(20)), 1.0])  # 20 deg
    angles = normal_angles(pred, gt)
    torch.testing.assert_close(angles, torch.tensor([0.0, 45.0, 90.0, 20.0], dtype=torch.float64), atol=1e-4, rtol=0)
    out = normal_errors(angles)
    assert out["mean_angle"] == pytest.approx(155 / 4, abs=1e-4)
    assert out["median_angle"] == pytest.approx(20.0, abs=1e-4)  # torch's median: the lower middle value
    assert (out["within_11"], out["within_22"], out["within_30"]) == (25.0, 50.0, 50.0)


def test_delta_m_is_metric_balanced_and_delta_p_task_balanced():
    higher = {"a": True, "b": False, "c": True}
    base, method = {"a": 50.0, "b": 2.0, "c": 10.0}, {"a": 55.0, "b": 1.0, "c": 9.0}
    gains = relative_improvement(method, base, higher)
    assert gains == pytest.approx({"a": 10.0, "b": 50.0, "c": -10.0})
    assert delta_m(method, base, higher) == pytest.approx(50 / 3)
    assert delta_p(method, base, higher, {"t1": ("a", "b"), "t2": ("c",)}) == pytest.approx((30.0 - 10.0) / 2)
    assert delta_m(base, base, higher) == 0.0
    with pytest.raises(ValueError, match="baseline b is 0"):
        delta_m(method, {**base, "b": 0.0}, higher)
