"""Hierarchical rectified flow: level states, loss, nested sampler (NFE, reductions to RF) and the
closed-form Gaussian-mixture oracle."""

from functools import partial

import pytest
import torch

from components.generative.flow_matching import flow_matching_loss
from components.generative.hierarchical import (
    draw_velocities,
    exact_mixture_field,
    gaussian_mixture_velocity_law,
    hierarchical_batch,
    hierarchical_batch_loss,
    hierarchical_loss,
    hierarchical_states,
    mixture_field_model,
    mixture_velocity_law_samples,
    sample_hierarchical,
    sample_schedule,
    sample_velocity,
)
from components.generative.samplers import sample
from components.metrics.distributions import wasserstein_1d
from components.models.mlp import MLPVelocity, MLPVelocityConfig

WEIGHTS = torch.tensor([0.5, 0.5], dtype=torch.float64)
MEANS = torch.tensor([-1.0, 1.0], dtype=torch.float64)
VARIANCES = torch.tensor([0.02, 0.02], dtype=torch.float64)
ORACLE = partial(exact_mixture_field, weights=WEIGHTS, means=MEANS, variances=VARIANCES)


def _mixture(n: int, gen: torch.Generator) -> torch.Tensor:
    comp = torch.randint(0, 2, (n,), generator=gen)
    return (MEANS[comp] + VARIANCES[comp].sqrt() * torch.randn(n, generator=gen, dtype=torch.float64))[:, None]


# ---- training states and loss --------------------------------------------------------------------
def test_states_known_values_depth_two():
    """HRF2: s_0 = x_t, s_1 = v_tau = (1 - tau) v0 + tau (x1 - x0), target = (x1 - x0) - v0."""
    x0, x1, v0 = torch.tensor([[1.0]]), torch.tensor([[3.0]]), torch.tensor([[[-2.0]]])
    states, target = hierarchical_states(x0, x1, v0, torch.tensor([[0.25, 0.5]]))
    torch.testing.assert_close(states, torch.tensor([[[1.5], [0.0]]]))  # 0.75*1 + 0.25*3; 0.5*(-2) + 0.5*2
    torch.testing.assert_close(target, torch.tensor([[4.0]]))  # (3 - 1) - (-2)


def test_states_depth_three_and_endpoints():
    gen = torch.Generator().manual_seed(0)
    x0, x1, noise = (
        torch.randn(5, 2, generator=gen),
        torch.randn(5, 2, generator=gen),
        torch.randn(5, 2, 2, generator=gen),
    )
    z = torch.cat([x0[:, None], noise], dim=1)
    s_zero, target = hierarchical_states(x0, x1, noise, torch.zeros(5, 3))
    torch.testing.assert_close(s_zero, z)  # every level starts at its own noise
    s_one, _ = hierarchical_states(x0, x1, noise, torch.ones(5, 3))
    torch.testing.assert_close(s_one[:, 0], x1)
    torch.testing.assert_close(s_one[:, 1], x1 - x0)  # v1
    torch.testing.assert_close(s_one[:, 2], x1 - x0 - noise[:, 0])  # a1 = v1 - v0
    torch.testing.assert_close(target, x1 - z.sum(1))


def test_depth_one_loss_is_the_flow_matching_loss():
    gen = torch.Generator().manual_seed(1)
    model = MLPVelocity(MLPVelocityConfig(data_dim=3, levels=1, hidden=16), seed=0)
    x0, x1, t = torch.randn(8, 3, generator=gen), torch.randn(8, 3, generator=gen), torch.rand(8, generator=gen)
    with torch.no_grad():
        hrf = hierarchical_loss(model, x0, x1, torch.empty(8, 0, 3), t[:, None])
        assert float(hrf) == pytest.approx(float(flow_matching_loss(model, x0, x1, t)), rel=1e-6)


def test_loss_is_zero_for_the_oracle_of_a_point_mass_and_checks_shapes():
    """x1 = c: the acceleration target (c - x0) - v0 is linear in the states; a model that knows it is exact."""
    gen = torch.Generator().manual_seed(2)
    c = torch.tensor([0.5, -1.0])
    x0 = torch.randn(16, 2, generator=gen)
    noise = torch.randn(16, 1, 2, generator=gen)
    times = torch.rand(16, 2, generator=gen)

    def oracle(s, t):  # recover x0 and v0 from the states: x0 = (x_t - t c)/(1 - t), v0 from v_tau
        tb, taub = t[:, :1], t[:, 1:]
        z0 = (s[:, 0] - tb * c) / (1 - tb)
        v0 = (s[:, 1] - taub * (c - z0)) / (1 - taub)
        return c - z0 - v0

    assert float(hierarchical_loss(oracle, x0, c.expand(16, 2), noise, times)) < 1e-8
    with pytest.raises(ValueError, match="times must be"):
        hierarchical_states(x0, x0, noise, torch.rand(16, 3))
    with pytest.raises(ValueError, match="model returned shape"):
        hierarchical_loss(lambda s, t: s[:, 0, :1], x0, x0, noise, times)


# ---- nested sampler ------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [[3], [2, 5], [5, 2], [1, 2, 5], [2, 2, 2, 2]])
def test_nfe_is_the_product_of_the_step_counts(steps):
    depth = len(steps)
    model = MLPVelocity(MLPVelocityConfig(data_dim=2, levels=depth, hidden=8), seed=0)
    with torch.no_grad():
        result = sample_hierarchical(
            model, torch.randn(4, 2), steps, torch.Generator().manual_seed(0), return_trajectory=True
        )
    assert result.nfe == torch.tensor(steps).prod().item()
    assert result.trajectory.shape == (steps[0] + 1, 4, 2) and result.velocities.shape == (steps[0], 4, 2)
    torch.testing.assert_close(result.trajectory[-1], result.x)
    with pytest.raises(ValueError, match="steps must be"):
        sample_hierarchical(model, torch.randn(4, 2), [2, 0])


def test_depth_one_is_the_euler_sampler_exactly():
    model = MLPVelocity(MLPVelocityConfig(data_dim=2, levels=1, hidden=16), seed=3)
    x0 = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        rf = sample(model, x0, 7, "euler", return_trajectory=True)
        hrf = sample_hierarchical(model, x0, [7], return_trajectory=True)
    assert torch.equal(rf.x, hrf.x) and torch.equal(rf.trajectory, hrf.trajectory) and rf.nfe == hrf.nfe == 7


def test_one_inner_step_with_the_ideal_acceleration_is_the_rf_update():
    """u(x, t, v0, tau=0) = f(x, t) - v0 (the ideal acceleration at tau = 0 for RF field f): one inner
    Euler step gives v = f(x, t), whatever v0 was drawn, so HRF2 (N_x, 1) reproduces RF's N_x Euler steps."""
    field = MLPVelocity(MLPVelocityConfig(data_dim=1, levels=1, hidden=16), seed=4).double()

    def acceleration(states, times):
        return field(states[:, 0], times[:, 0]) - states[:, 1]

    x0 = torch.randn(64, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.no_grad():
        rf = sample(field, x0, 5, "euler")
        for noise_seed in (0, 1):
            hrf = sample_hierarchical(acceleration, x0, [5, 1], torch.Generator().manual_seed(noise_seed))
            torch.testing.assert_close(hrf.x, rf.x, rtol=0, atol=1e-12)
            assert hrf.nfe == rf.nfe == 5


def test_oracle_one_inner_step_reduces_to_rf_at_every_depth():
    x0 = torch.randn(256, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    rf = sample(ORACLE, x0, 5, "euler")
    for steps in ([5, 1], [5, 1, 1]):
        hrf = sample_hierarchical(ORACLE, x0, steps, torch.Generator().manual_seed(1))
        torch.testing.assert_close(hrf.x, rf.x, rtol=0, atol=1e-10)


# ---- the closed-form oracle ----------------------------------------------------------------------
def test_velocity_law_at_time_zero_is_the_target_and_matches_monte_carlo():
    w, m, var = gaussian_mixture_velocity_law(
        torch.tensor([0.0, 2.0], dtype=torch.float64), 0.0, WEIGHTS, MEANS, VARIANCES
    )
    # at t = 0, x_t = x0, so v = x1 - x: the target shifted by -x
    torch.testing.assert_close(w, WEIGHTS.expand(2, 2))
    torch.testing.assert_close(m, MEANS - torch.tensor([[0.0], [2.0]], dtype=torch.float64))
    torch.testing.assert_close(var, VARIANCES.expand(2, 2))
    # at t = 0.5, x = 0.3: compare the mixture's mean and variance with samples conditioned on x_t ~ x
    gen = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(400_000, 1, generator=gen, dtype=torch.float64), _mixture(400_000, gen)
    x_t = 0.5 * x0 + 0.5 * x1
    near = (x_t[:, 0] - 0.3).abs() < 0.01
    v = (x1 - x0)[near, 0]
    w, m, var = gaussian_mixture_velocity_law(torch.tensor([0.3], dtype=torch.float64), 0.5, WEIGHTS, MEANS, VARIANCES)
    mean = (w * m).sum()
    second = (w * (var + m**2)).sum()
    assert float(mean) == pytest.approx(float(v.mean()), abs=0.05)
    assert float(second - mean**2) == pytest.approx(float(v.var()), rel=0.05)


@pytest.mark.parametrize("steps", [[20], [5, 4], [2, 2, 5]])
def test_oracle_hierarchies_sample_the_target(steps):
    gen = torch.Generator().manual_seed(0)
    x0, target = torch.randn(2000, 1, generator=gen, dtype=torch.float64), _mixture(2000, gen)
    result = sample_hierarchical(ORACLE, x0, steps, torch.Generator().manual_seed(1))
    assert wasserstein_1d(result.x, target) < 0.06
    assert wasserstein_1d(x0, target) > 0.4  # the source is far from it


def test_sampled_velocity_at_the_origin_is_bimodal():
    v, nfe = sample_velocity(
        ORACLE, torch.zeros(2000, 1, dtype=torch.float64), 0.0, [20], torch.Generator().manual_seed(0)
    )
    assert nfe == 20
    for mode in (-1.0, 1.0):
        assert float(((v - mode).abs() < 0.3).double().mean()) > 0.4
    assert wasserstein_1d(v, _mixture(2000, torch.Generator().manual_seed(1))) < 0.06
    with pytest.raises(ValueError, match="inner_steps"):
        sample_velocity(ORACLE, torch.zeros(2, 1), 0.0, [])


def test_mixture_velocity_law_samples_at_time_zero_are_the_target():
    """At t = 0 and x = 0 the law of x1 - x0 is the target 1/2 N(-1, 0.02) + 1/2 N(1, 0.02)."""
    v, modes = mixture_velocity_law_samples(0.0, 0.0, [-1.0, 1.0], 0.02, 20_000, torch.Generator().manual_seed(0))
    assert v.shape == (20_000, 1) and v.dtype == torch.float32 and modes == [-1.0, 1.0]
    assert float((v > 0).float().mean()) == pytest.approx(0.5, abs=0.02)
    assert float(v.abs().mean()) == pytest.approx(1.0, abs=0.01)
    assert float(v[v > 0].var()) == pytest.approx(0.02, rel=0.05)
    # x = 2 at t = 0: the law is shifted by -2; a far component (weight < min_weight) is not a mode
    base, _ = mixture_velocity_law_samples(0.0, 0.0, [-1.0, 1.0], 0.02, 1000, torch.Generator().manual_seed(0))
    shifted, _ = mixture_velocity_law_samples(2.0, 0.0, [-1.0, 1.0], 0.02, 1000, torch.Generator().manual_seed(0))
    torch.testing.assert_close(shifted, base - 2.0, rtol=0, atol=1e-5)
    _, near_one = mixture_velocity_law_samples(0.9, 0.9, [-1.0, 1.0], 0.02, 10, torch.Generator().manual_seed(0))
    assert len(near_one) == 1  # at t = 0.9 the point 0.9 is explained by the +1 component only
    with pytest.raises(ValueError, match="variance > 0"):
        mixture_velocity_law_samples(0.0, 0.0, [], 0.02, 10, torch.Generator())


# ---- training batches, sampling by schedule, velocities at a point -------------------------------
def test_hierarchical_batch_draws_in_order_and_its_loss_dispatches():
    x1 = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
    x0, same, t = hierarchical_batch(x1, 1, torch.Generator().manual_seed(5))
    ref = torch.Generator().manual_seed(5)
    assert (
        same is x1
        and torch.equal(x0, torch.randn(8, 3, generator=ref))
        and torch.equal(t, torch.rand(8, generator=ref))
    )
    batch = hierarchical_batch(x1, 3, torch.Generator().manual_seed(5))
    assert [tuple(b.shape) for b in batch] == [(8, 3), (8, 3), (8, 2, 3), (8, 3)]
    assert torch.equal(batch[0], x0) and float(batch[3].min()) >= 0 and float(batch[3].max()) <= 1
    rf = MLPVelocity(MLPVelocityConfig(data_dim=3, levels=1, hidden=8), seed=0)
    hrf = MLPVelocity(MLPVelocityConfig(data_dim=3, levels=3, hidden=8), seed=0)
    with torch.no_grad():
        assert torch.equal(hierarchical_batch_loss(rf, (x0, x1, t)), flow_matching_loss(rf, x0, x1, t))
        assert torch.equal(hierarchical_batch_loss(hrf, batch), hierarchical_loss(hrf, *batch))
    with pytest.raises(ValueError, match="depth must be"):
        hierarchical_batch(x1, 0, torch.Generator())
    with pytest.raises(ValueError, match="hierarchical batch"):
        hierarchical_batch_loss(rf, (x0, x1))


def test_a_batch_can_draw_x0_from_another_source():
    from components.data.toy import eight_gaussians

    x1 = torch.randn(4000, 2, generator=torch.Generator().manual_seed(0))
    x0, _, noise, _ = hierarchical_batch(x1, 2, torch.Generator().manual_seed(1), source=eight_gaussians)
    assert torch.equal(x0, eight_gaussians(4000, torch.Generator().manual_seed(1)))
    radius = x0.norm(dim=1)
    assert abs(float(radius.mean()) - 5.0) < 0.1 and abs(float(noise.std()) - 1.0) < 0.05  # noise stays N(0, I)
    angles = torch.atan2(x0[:, 1], x0[:, 0]) / (torch.pi / 4)
    assert float((angles - angles.round()).abs().max()) < 0.45  # every point near one of the 8 centres
    counts = torch.bincount(angles.round().long() % 8, minlength=8)
    assert int(counts.min()) > 400  # equal weights
    with pytest.raises(ValueError, match="source gave shape"):
        hierarchical_batch(torch.randn(5, 3), 1, torch.Generator(), source=eight_gaussians)


def test_sample_schedule_is_euler_for_rf_and_nested_otherwise():
    x0 = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    rf = MLPVelocity(MLPVelocityConfig(data_dim=2, levels=1, hidden=8), seed=1)
    with torch.no_grad():
        euler = sample(rf, x0, 4, "euler", return_trajectory=True)
    got = sample_schedule(rf, x0, [4], return_trajectory=True)
    assert torch.equal(got.x, euler.x) and torch.equal(got.trajectory, euler.trajectory) and got.nfe == 4
    assert not got.x.requires_grad
    hrf = MLPVelocity(MLPVelocityConfig(data_dim=2, levels=2, hidden=8), seed=1)
    with torch.no_grad():
        nested = sample_hierarchical(hrf, x0, [2, 3], torch.Generator().manual_seed(7))
    got = sample_schedule(hrf, x0, [2, 3], torch.Generator().manual_seed(7))
    assert torch.equal(got.x, nested.x) and got.nfe == 6 and got.trajectory is None


def test_draw_velocities_rf_is_one_value_hrf_samples_the_law():
    rf = MLPVelocity(MLPVelocityConfig(data_dim=1, levels=1, hidden=8), seed=0)
    v = draw_velocities(rf, torch.zeros(50, 1), 0.5, 1, 10)
    assert v.shape == (50, 1) and float(v.std()) < 1e-6  # one value (up to batched float rounding)
    with torch.no_grad():
        torch.testing.assert_close(v[:1], rf(torch.zeros(1, 1), torch.full((1,), 0.5)))
    v = draw_velocities(ORACLE, torch.zeros(2000, 1, dtype=torch.float64), 0.0, 2, 20, torch.Generator().manual_seed(0))
    for mode in (-1.0, 1.0):  # the ideal HRF2 field: half of the velocities near each mode
        assert float(((v - mode).abs() < 0.3).double().mean()) > 0.4


def test_mixture_field_model_known_answers() -> None:
    """At t = 0 (x_t = x0) the ideal RF velocity of a symmetric mixture is E[x1] - x = -x, and HRF2's ideal
    acceleration at tau = 0 (v_tau = v0) is E[v1 | x] - v = -x - v."""
    field = mixture_field_model([-1.0, 1.0], 0.02)
    x = torch.tensor([[-0.7], [0.0], [1.3]])
    assert torch.allclose(field(x, torch.zeros(3)), -x, atol=1e-6)
    v = torch.tensor([[0.5], [-2.0], [0.1]])
    states, times = torch.stack([x, v], dim=1), torch.zeros(3, 2)
    assert torch.allclose(field(states, times), -x - v, atol=1e-6)
    assert field(x, torch.zeros(3)).dtype == torch.float32
    with pytest.raises(ValueError, match="variance > 0"):
        mixture_field_model([0.0], 0.0)
