"""Guidance methods: the OC-Flow costate gradient against finite differences (Euclidean and SO(3)),
known answers on a zero field, FlowGrad = OC-Flow at gamma = 0, SO(3) guidance staying on the group, and
known values of the rewards and of the distance to the data."""

import pytest
import torch

from components.generative.guidance import (
    GUIDANCE,
    GuidanceConfig,
    control_energy,
    costates,
    guide,
    logistic_reward,
    nearest_distance,
    objective,
    oc_gradient,
    point_reward,
    rollout,
    rotation_reward,
)
from components.generative.so3 import exp_map, geodesic_distance, orthogonality_error, random_rotations
from components.models.velocity_mlp import VelocityMLP, VelocityMLPConfig


def _mlp(in_dim: int, out_dim: int | None = None) -> VelocityMLP:
    torch.manual_seed(0)
    return VelocityMLP(VelocityMLPConfig(in_dim=in_dim, out_dim=out_dim, hidden=16, depth=2, time_dim=8)).double()


def _finite_difference(fn, u: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    grad = torch.zeros_like(u)
    flat, out = u.reshape(-1), grad.reshape(-1)
    for i in range(flat.numel()):
        plus, minus = flat.clone(), flat.clone()
        plus[i] += eps
        minus[i] -= eps
        out[i] = (fn(plus.view_as(u)) - fn(minus.view_as(u))) / (2 * eps)
    return grad


@pytest.mark.parametrize("gamma", [0.0, 0.3])
def test_oc_gradient_matches_finite_differences_euclidean(gamma):
    model = _mlp(2)
    gen = torch.Generator().manual_seed(1)
    x0 = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    controls = 0.5 * torch.randn(5, 3, 2, generator=gen, dtype=torch.float64)
    target = torch.tensor([1.0, -0.5], dtype=torch.float64)
    reward = lambda x: -(x - target).pow(2).sum(-1)
    cfg = GuidanceConfig(n_steps=5, gamma=gamma)
    with torch.no_grad():
        fd = _finite_difference(lambda u: float(objective(model, x0, u, reward, cfg)), controls)
    torch.testing.assert_close(oc_gradient(model, x0, controls, reward, cfg), fd, atol=1e-7, rtol=1e-6)


def test_oc_gradient_matches_finite_differences_so3():
    net = _mlp(9, 3)
    field = lambda r, t: net(r, t)
    gen = torch.Generator().manual_seed(2)
    r0, target = random_rotations(2, gen), random_rotations(1, gen)
    reward = lambda r: -geodesic_distance(target, r).pow(2)
    controls = 0.3 * torch.randn(4, 2, 3, generator=gen, dtype=torch.float64)
    cfg = GuidanceConfig(n_steps=4, gamma=0.2, dynamics="so3")
    with torch.no_grad():
        fd = _finite_difference(lambda u: float(objective(field, r0, u, reward, cfg)), controls)
    torch.testing.assert_close(oc_gradient(field, r0, controls, reward, cfg), fd, atol=1e-7, rtol=1e-6)


def test_costates_equal_backprop_through_the_rollout():
    model = _mlp(2)
    gen = torch.Generator().manual_seed(3)
    x0 = torch.randn(4, 2, generator=gen, dtype=torch.float64)
    controls = torch.randn(6, 4, 2, generator=gen, dtype=torch.float64)
    reward = lambda x: -x.pow(2).sum(-1)
    cfg = GuidanceConfig(n_steps=6)
    traj = rollout(model, x0, controls, cfg).trajectory.detach()
    lambdas, grads = costates(model, traj, controls, reward, cfg)
    x0_req = x0.clone().requires_grad_(True)
    (lam0,) = torch.autograd.grad(-reward(rollout(model, x0_req, controls, cfg).x).sum(), x0_req)
    torch.testing.assert_close(lambdas[0], lam0)
    torch.testing.assert_close(grads, cfg.h * lambdas[1:])  # Euclidean: dL/du_k = h lambda_{k+1}


def test_known_answers_on_a_zero_field():
    zero = lambda x, t: torch.zeros_like(x)
    x0 = torch.tensor([[0.0, 0.0], [2.0, 1.0]], dtype=torch.float64)
    target = torch.tensor([1.0, 1.0], dtype=torch.float64)
    reward = lambda x: -(x - target).pow(2).sum(-1)
    torch.testing.assert_close(guide("unguided", zero, x0, reward, GuidanceConfig(n_steps=4)).x, x0)
    # D-Flow: grad_x0 L = 2 (x0 - c), so one step with eta = 1/2 lands on c
    result = guide("dflow", zero, x0, reward, GuidanceConfig(n_steps=4, iterations=1, lr=0.5))
    torch.testing.assert_close(result.x, target.expand(2, 2))
    # OC-Flow, gamma = 1 (beta = 0): every u_k = a_j (x0 - c) with x_N = x0 + u and lambda_N = 2 (x_N - c),
    # so a_j = -2 eta (1 + a_{j-1}): a = -0.5, -0.25, -0.375 for eta = 1/4
    result = guide("ocflow", zero, x0, reward, GuidanceConfig(n_steps=4, iterations=3, lr=0.25, gamma=1.0))
    torch.testing.assert_close(result.x, x0 - 0.375 * (x0 - target))
    torch.testing.assert_close(control_energy(result.controls, 0.25), (0.375 * (x0 - target)).pow(2).sum(-1))
    assert result.nfe == 3 * 2 * 4 + 4 and len(result.reward_history) == 4


def test_flowgrad_equals_ocflow_at_gamma_zero_and_decay_lowers_control_energy():
    model = _mlp(2)
    x0 = torch.randn(8, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    target = torch.tensor([0.0, 2.0], dtype=torch.float64)
    reward = lambda x: -(x - target).pow(2).sum(-1)
    cfg = GuidanceConfig(n_steps=10, iterations=5, lr=0.1)
    fg, oc = guide("flowgrad", model, x0, reward, cfg), guide("ocflow", model, x0, reward, cfg)
    torch.testing.assert_close(oc.controls, fg.controls)
    assert fg.reward_history[-1] > fg.reward_history[0]
    decayed = guide("ocflow", model, x0, reward, GuidanceConfig(n_steps=10, iterations=5, lr=0.1, gamma=0.5))
    assert float(control_energy(decayed.controls, cfg.h).mean()) < float(control_energy(oc.controls, cfg.h).mean())
    assert decayed.reward_history[-1] < oc.reward_history[-1]


@pytest.mark.parametrize("method", sorted(GUIDANCE))
def test_so3_guidance_stays_on_the_group(method):
    net = _mlp(9, 3)
    field = lambda r, t: net(r, t)
    gen = torch.Generator().manual_seed(5)
    r0 = random_rotations(6, gen)
    target = exp_map(torch.tensor([0.3, -0.2, 1.0], dtype=torch.float64))
    reward = lambda r: -geodesic_distance(target, r)
    result = guide(method, field, r0, reward, GuidanceConfig(n_steps=8, iterations=5, lr=0.3, dynamics="so3"))
    assert float(orthogonality_error(result.trajectory).max()) < 1e-12
    assert float(orthogonality_error(result.x0).max()) < 1e-12
    torch.testing.assert_close(torch.linalg.det(result.x), torch.ones(6, dtype=torch.float64))
    if method != "unguided":
        assert result.reward_history[-1] > result.reward_history[0]


def test_bad_config_and_unknown_method():
    with pytest.raises(ValueError, match="unknown guidance method"):
        guide("dps", lambda x, t: x, torch.zeros(1, 2), lambda x: x.sum(-1), GuidanceConfig())
    with pytest.raises(ValueError, match="unknown dynamics"):
        GuidanceConfig(dynamics="se3")
    with pytest.raises(ValueError, match="gamma"):
        GuidanceConfig(gamma=1.5)


def test_rewards_and_distance_to_data_known_values():
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    torch.testing.assert_close(point_reward(torch.tensor([0.0, 4.0]))(x), torch.tensor([-16.0, -9.0]))
    # log sigmoid(0) = -log 2; a confident classifier gives ~0 on its side
    clf = logistic_reward(torch.tensor([0.0, 10.0]), torch.tensor([-20.0]))
    expected = torch.tensor([-torch.log(torch.tensor(2.0)), -torch.log1p(torch.exp(torch.tensor(-20.0)))])
    torch.testing.assert_close(clf(torch.tensor([[5.0, 2.0], [0.0, 4.0]])), expected)
    data = torch.tensor([[0.0, 1.0], [3.0, 0.0]])
    torch.testing.assert_close(nearest_distance(x, data), torch.tensor([1.0, 4.0]))
    angle = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
    r = exp_map(torch.stack([torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), angle], -1))
    torch.testing.assert_close(rotation_reward(torch.eye(3, dtype=torch.float64))(r), -angle)


# --------------------------------------------------------------------------------------------------
# the official update (controls + x0 shift, per-sample clip) and the sliced-Wasserstein fidelity
# --------------------------------------------------------------------------------------------------
def _zero_field(x, t):
    return torch.zeros_like(x)


def test_clip_per_sample_scales_each_sample_over_all_tensors():
    from components.generative.guidance import clip_per_sample

    a = torch.tensor([[3.0, 0.0], [0.3, 0.0]])  # [B=2, 2]
    b = torch.tensor([[[0.0, 4.0], [0.0, 0.4]]])  # [N=1, B=2, 2]
    ca, cb = clip_per_sample([a, b], 1.0, [0, 1])
    torch.testing.assert_close(ca, torch.tensor([[0.6, 0.0], [0.3, 0.0]]))  # sample 0: norm 5 -> 1
    torch.testing.assert_close(cb, torch.tensor([[[0.0, 0.8], [0.0, 0.4]]]))  # sample 1: norm 0.5, unchanged
    assert clip_per_sample([a], None, [0])[0] is a


def test_official_update_on_a_zero_field_moves_the_source_and_the_controls():
    """f = 0, L = ||x_N - c||^2: lambda_k = 2 (x_N - c) at every k, so one step gives delta = -2 eta (x0 - c)
    and u_k = -2 eta h (x0 - c), hence x_N = x0 - 2 eta (x0 - c) (1 + h) (N h = 1)."""
    x0 = torch.tensor([[1.0, 2.0], [-1.0, 0.5]], dtype=torch.float64)
    c = torch.tensor([0.5, -0.5], dtype=torch.float64)
    cfg = GuidanceConfig(n_steps=4, iterations=1, lr=0.2, gamma=0.0, update="official")
    out = guide("ocflow", _zero_field, x0, point_reward(c), cfg)
    torch.testing.assert_close(out.x0, x0 - 0.4 * (x0 - c))
    torch.testing.assert_close(out.controls, (-0.4 * cfg.h * (x0 - c)).expand(4, 2, 2))
    torch.testing.assert_close(out.x, x0 - 0.4 * (x0 - c) * (1 + cfg.h))


def test_official_update_clips_each_sample_and_gamma_shrinks_the_controls():
    x0 = torch.tensor([[10.0, 0.0], [0.1, 0.0]], dtype=torch.float64)
    c = torch.zeros(2, dtype=torch.float64)
    cfg = GuidanceConfig(n_steps=5, iterations=1, lr=1.0, update="official", clip=1.0)
    out = guide("ocflow", _zero_field, x0, point_reward(c), cfg)
    step = torch.cat([(out.x0 - x0), out.controls.permute(1, 0, 2).reshape(2, -1)], dim=1).norm(dim=1)
    assert float(step[0]) == pytest.approx(1.0)  # ||grad|| ~ 20: clipped to 1
    assert float(step[1]) < 1.0  # ||grad|| ~ 0.2: left alone
    energies = [
        float(
            control_energy(
                guide(
                    "ocflow",
                    _zero_field,
                    x0,
                    point_reward(c),
                    GuidanceConfig(n_steps=5, iterations=5, lr=0.1, gamma=g, update="official"),
                ).controls,
                0.2,
            ).sum()
        )
        for g in (0.0, 10.0)
    ]
    assert energies[1] < energies[0]


def test_official_update_on_so3_keeps_the_source_a_rotation():
    net = _mlp(9, 3)
    gen = torch.Generator().manual_seed(5)
    r0, target = random_rotations(3, gen), random_rotations(1, gen)
    cfg = GuidanceConfig(n_steps=4, iterations=3, lr=0.5, update="official", clip=10.0, dynamics="so3")
    out = guide("ocflow", lambda r, t: net(r, t), r0, rotation_reward(target), cfg)
    assert float(orthogonality_error(out.x0).max()) < 1e-10 and float(orthogonality_error(out.x).max()) < 1e-10
    assert out.reward_history[-1] > out.reward_history[0]


def test_alg1_gamma_above_one_is_refused_but_official_accepts_it():
    with pytest.raises(ValueError, match="gamma"):
        GuidanceConfig(gamma=2.0, update="alg1")
    assert GuidanceConfig(gamma=2.0, update="official").gamma == 2.0
    with pytest.raises(ValueError, match="update"):
        GuidanceConfig(update="adjoint")


def test_sliced_wasserstein_penalises_collapse_where_the_nearest_point_distance_does_not():
    """The fidelity the claims use: samples piled on one data point are at nearest-point distance 0, yet far
    from the data distribution in sliced W2."""
    from components.metrics.distributions import sliced_wasserstein

    gen = torch.Generator().manual_seed(0)
    data = torch.randn(2000, 2, generator=gen)
    fresh = torch.randn(500, 2, generator=gen)
    collapsed = data[:1].expand(500, 2).clone()
    assert float(nearest_distance(collapsed, data).mean()) < float(nearest_distance(fresh, data).mean())
    sw = lambda x: sliced_wasserstein(x, data, 200, generator=torch.Generator().manual_seed(1))  # noqa: E731
    assert sw(collapsed) > 5 * sw(fresh)


def test_dflow_keeps_each_samples_best_source_as_the_official_code() -> None:
    """On a zero field x1 = x0, so D-Flow's steps move the samples themselves. An overlong step makes every
    later iterate worse for the sample that started at the target: it keeps its first source."""
    field = lambda x, t: torch.zeros_like(x)
    target = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x0 = torch.tensor([[1.0, 0.0], [-2.0, 0.0]], dtype=torch.float64)
    cfg = GuidanceConfig(n_steps=4, iterations=3, lr=0.4)
    out = guide("dflow", field, x0, point_reward(target), cfg)
    torch.testing.assert_close(out.x[0], target)  # already at the optimum: never moved away
    assert out.x[1, 0] > -2.0  # the other sample still improved
    best = guide("dflow", field, x0, point_reward(target), GuidanceConfig(n_steps=4, iterations=3, lr=3.0))
    assert float(point_reward(target)(best.x).min()) >= float(point_reward(target)(x0).min())  # never worse than x0
