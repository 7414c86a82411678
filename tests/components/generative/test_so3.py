"""SO(3) maps: hat/vee, exp/log round trips (near 0 and near pi), geodesic interpolant, Riemannian Euler."""

import math

import pytest
import torch

from components.generative.so3 import (
    determinant_error,
    euler_step,
    exp_map,
    geodesic_distance,
    geodesic_interpolant,
    hat,
    log_map,
    nearest_geodesic_distance,
    orthogonality_error,
    perturb_rotations,
    random_rotations,
    sample_so3,
    vee,
    velocity_loss,
)


def _rotvecs(n: int, max_angle: float, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    axis = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    return axis * (max_angle * torch.rand(n, 1, generator=gen, dtype=torch.float64))


def test_hat_is_cross_product_and_vee_inverts_it():
    w, x = _rotvecs(8, 3.0), _rotvecs(8, 2.0, seed=1)
    torch.testing.assert_close((hat(w) @ x[..., None]).squeeze(-1), torch.linalg.cross(w, x))
    torch.testing.assert_close(vee(hat(w)), w)
    torch.testing.assert_close(hat(w).transpose(-1, -2), -hat(w))


def test_exp_known_value_and_matches_matrix_exponential():
    quarter = exp_map(torch.tensor([0.0, 0.0, math.pi / 2], dtype=torch.float64))
    torch.testing.assert_close(
        quarter, torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    )
    w = torch.cat([_rotvecs(16, 3.1), _rotvecs(4, 1e-6, seed=2), torch.zeros(1, 3, dtype=torch.float64)])
    torch.testing.assert_close(exp_map(w), torch.linalg.matrix_exp(hat(w)), atol=1e-12, rtol=0)
    r = exp_map(w)
    assert float(orthogonality_error(r).max()) < 1e-13
    torch.testing.assert_close(torch.linalg.det(r), torch.ones(21, dtype=torch.float64))


@pytest.mark.parametrize("max_angle", [1e-7, 1e-3, 1.0, 3.0, math.pi - 1e-4])
def test_log_of_exp_is_identity_below_pi(max_angle):
    w = _rotvecs(64, max_angle)
    torch.testing.assert_close(log_map(exp_map(w)), w, atol=1e-9, rtol=0)


def test_exp_of_log_is_identity_on_random_rotations_including_near_pi():
    gen = torch.Generator().manual_seed(3)
    near_pi = exp_map(_rotvecs(16, 1.0) / _rotvecs(16, 1.0).norm(dim=-1, keepdim=True) * (math.pi - 1e-7))
    r = torch.cat([random_rotations(256, gen), near_pi, torch.eye(3, dtype=torch.float64)[None]])
    w = log_map(r)
    assert float(w.norm(dim=-1).max()) <= math.pi + 1e-12
    torch.testing.assert_close(exp_map(w), r, atol=1e-9, rtol=0)


def test_log_gradient_is_finite_at_identity_and_pi():
    w = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, math.pi]], dtype=torch.float64)
    r = exp_map(w).requires_grad_(True)
    d = geodesic_distance(torch.eye(3, dtype=torch.float64).expand(2, 3, 3), r)
    (grad,) = torch.autograd.grad(d.sum(), r)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(d, torch.tensor([0.0, math.pi], dtype=torch.float64), atol=1e-7, rtol=0)


def test_geodesic_interpolant_endpoints_velocity_and_constant_speed():
    gen = torch.Generator().manual_seed(4)
    r0, r1 = random_rotations(32, gen), random_rotations(32, gen)
    zeros, ones = torch.zeros(32, dtype=torch.float64), torch.ones(32, dtype=torch.float64)
    start, v = geodesic_interpolant(r0, r1, zeros)
    end, _ = geodesic_interpolant(r0, r1, ones)
    torch.testing.assert_close(start, r0)
    torch.testing.assert_close(end, r1, atol=1e-9, rtol=0)
    # dR_t/dt = R_t hat(v) (central differences) and the distance travelled is linear in t
    t, eps = torch.full((32,), 0.3, dtype=torch.float64), 1e-6
    r_t, _ = geodesic_interpolant(r0, r1, t)
    deriv = (geodesic_interpolant(r0, r1, t + eps)[0] - geodesic_interpolant(r0, r1, t - eps)[0]) / (2 * eps)
    torch.testing.assert_close(deriv, r_t @ hat(v), atol=1e-7, rtol=0)
    torch.testing.assert_close(geodesic_distance(r0, r_t), 0.3 * geodesic_distance(r0, r1), atol=1e-9, rtol=0)


def test_riemannian_euler_stays_on_so3_and_is_exact_for_constant_velocity():
    gen = torch.Generator().manual_seed(5)
    r0 = random_rotations(16, gen)
    w = _rotvecs(16, 3.0)
    result = sample_so3(lambda r, t: w, r0, 50, return_trajectory=True)
    assert result.nfe == 50 and result.trajectory.shape == (51, 16, 3, 3)
    torch.testing.assert_close(result.x, r0 @ exp_map(w), atol=1e-12, rtol=0)  # exp(w) = exp(w/50)^50
    assert float(orthogonality_error(result.trajectory).max()) < 1e-12
    # the Euclidean step on matrix entries leaves the group: (I + hK)^T (I + hK) - I = h^2 K^T K
    naive = r0 + 0.1 * r0 @ hat(w)
    torch.testing.assert_close(
        orthogonality_error(naive), 0.01 * (hat(w).transpose(-1, -2) @ hat(w)).flatten(-2).norm(dim=-1)
    )
    assert float(orthogonality_error(euler_step(r0, w, 0.1)).max()) < 1e-13


def test_perturbed_clusters_stay_close_to_their_centers():
    gen = torch.Generator().manual_seed(6)
    centers = random_rotations(1, gen).expand(500, 3, 3)
    samples = perturb_rotations(centers, 0.1, gen)
    d = geodesic_distance(centers, samples)
    # |xi| for xi ~ N(0, 0.1^2 I_3) has mean 0.1 * 2 sqrt(2/pi) ~ 0.16
    assert abs(float(d.mean()) - 0.1 * 2 * math.sqrt(2 / math.pi)) < 0.01


def test_manifold_errors_nearest_rotation_and_velocity_loss_known_values():
    z = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    rz = exp_map(torch.stack([0.3 * z, 1.2 * z]))  # rotations by 0.3 and 1.2 rad about z
    assert float(determinant_error(rz).max()) < 1e-15
    torch.testing.assert_close(
        determinant_error(2 * torch.eye(3, dtype=torch.float64)), torch.tensor(7.0, dtype=torch.float64)
    )
    data = torch.stack([torch.eye(3, dtype=torch.float64), exp_map(1.0 * z)])
    torch.testing.assert_close(nearest_geodesic_distance(rz, data), torch.tensor([0.3, 0.2], dtype=torch.float64))
    model = lambda r, t: r.flatten(1)[:, :3] + t[:, None]
    r_t, t = torch.eye(3).expand(2, 3, 3), torch.tensor([0.0, 1.0])
    v = torch.tensor([[1.0, 0.0, 0.0], [2.0, 1.0, 1.0]])  # model: [1, 0, 0] and [2, 1, 1] -> loss 0
    assert float(velocity_loss(model, (r_t, t, v))) == 0.0
    assert float(velocity_loss(model, (r_t, t, v + 1.0))) == pytest.approx(1.0)
