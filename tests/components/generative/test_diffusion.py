"""Linear-beta diffusion: the schedule, forward noising, the DDIM grid and update by hand, and x0 guidance."""

from __future__ import annotations

import math

import pytest
import torch

from components.generative.diffusion import cfg_x0, ddim_grid, ddim_sample, linear_beta_schedule, q_sample


def test_linear_schedule_by_hand() -> None:
    s = linear_beta_schedule(3, 0.1, 0.3)
    assert s.betas.tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert s.alpha_bar.tolist() == pytest.approx([0.9, 0.72, 0.504])
    official = linear_beta_schedule(2000)
    assert official.alpha_bar[-1] < 1e-8 and official.betas[0] == pytest.approx(1e-4)
    with pytest.raises(ValueError):
        linear_beta_schedule(10, 0.3, 0.1)


def test_q_sample_by_hand() -> None:
    s = linear_beta_schedule(3, 0.1, 0.3)
    x0, noise = torch.tensor([[1.0, 2.0], [1.0, 2.0]]), torch.tensor([[0.5, -1.0], [0.5, -1.0]])
    x = q_sample(s, x0, torch.tensor([0, 2]), noise)
    assert x[0].tolist() == pytest.approx([math.sqrt(0.9) + math.sqrt(0.1) * 0.5, 2 * math.sqrt(0.9) - math.sqrt(0.1)])
    assert x[1].tolist() == pytest.approx(
        [math.sqrt(0.504) + math.sqrt(0.496) * 0.5, 2 * math.sqrt(0.504) - math.sqrt(0.496)], rel=1e-6
    )


def test_ddim_grid_matches_the_official_step_count() -> None:
    assert len(ddim_grid(2000, 100)) == 21 and ddim_grid(2000, 100)[:3] == [1999, 1900, 1800]
    assert ddim_grid(200, 10)[-2:] == [10, 0] and ddim_grid(5, 10) == [4, 0] and ddim_grid(1, 3) == [0]


def test_ddim_update_by_hand_and_exact_for_a_constant_x0() -> None:
    s = linear_beta_schedule(3, 0.1, 0.3)  # grid with stride 2: [2, 0]
    c = torch.tensor([[1.0, -1.0]])
    x_start = torch.tensor([[0.3, 0.7]])
    out = ddim_sample(lambda x, n: c.expand_as(x), x_start, s, stride=2, return_trajectory=True)
    assert out.nfe == 2 and out.trajectory.shape == (3, 1, 2)
    eps = (x_start - math.sqrt(0.504) * c) / math.sqrt(0.496)
    middle = math.sqrt(0.9) * c + math.sqrt(0.1) * eps
    assert torch.allclose(out.trajectory[1], middle, atol=1e-6)
    assert torch.equal(out.x, c)  # the last step returns the model's x0


def test_classifier_free_guidance_of_x0() -> None:
    cond = lambda x, n: torch.full_like(x, 2.0)  # noqa: E731
    uncond = lambda x, n: torch.full_like(x, 0.5)  # noqa: E731
    x, n = torch.zeros(1, 3), torch.zeros(1, dtype=torch.long)
    assert cfg_x0(cond, uncond, 2.0)(x, n).tolist() == [[5.0, 5.0, 5.0]]  # 3 * 2 - 2 * 0.5
    assert cfg_x0(cond, uncond, 0.0) is cond
