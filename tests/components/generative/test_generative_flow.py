"""Interpolants, flow-matching loss, ODE samplers (exactness and NFE) and training-time samplers."""

import math

import pytest
import torch

from components.generative import (
    INTERPOLANTS,
    flow_matching_loss,
    interpolate,
    sample,
    sample_time,
    sinusoidal_time_embedding,
)


@pytest.mark.parametrize("name", sorted(INTERPOLANTS))
def test_interpolant_endpoints_and_target_is_time_derivative(name):
    gen = torch.Generator().manual_seed(0)
    x0, x1 = (
        torch.randn(3, 4, 2, generator=gen, dtype=torch.float64),
        torch.randn(3, 4, 2, generator=gen, dtype=torch.float64),
    )
    xt0, _ = interpolate(x0, x1, torch.zeros(3, dtype=torch.float64), name)
    xt1, _ = interpolate(x0, x1, torch.ones(3, dtype=torch.float64), name)
    torch.testing.assert_close(xt0, x0)
    torch.testing.assert_close(xt1, x1)
    t = torch.tensor([0.1, 0.5, 0.8], dtype=torch.float64)
    h = 1e-6
    x_plus, _ = interpolate(x0, x1, t + h, name)
    x_minus, _ = interpolate(x0, x1, t - h, name)
    _, target = interpolate(x0, x1, t, name)
    torch.testing.assert_close(target, (x_plus - x_minus) / (2 * h), atol=1e-7, rtol=1e-6)


def test_linear_interpolant_known_values():
    x0, x1 = torch.zeros(2, 3), torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]])
    x_t, target = interpolate(x0, x1, torch.tensor([0.25, 0.5]))
    torch.testing.assert_close(x_t, torch.tensor([[0.25, 0.5, 0.75], [2.0, 2.0, 2.0]]))
    torch.testing.assert_close(target, x1 - x0)
    with pytest.raises(ValueError, match="unknown interpolant"):
        interpolate(x0, x1, torch.zeros(2), "spline")


def test_loss_is_zero_for_oracle_and_positive_otherwise():
    gen = torch.Generator().manual_seed(1)
    x0 = torch.randn(6, 5, 3, generator=gen)
    shift = torch.tensor([1.0, -2.0, 0.5])
    x1 = x0 + shift  # straight lines with one constant velocity
    t = torch.rand(6, generator=gen)
    oracle = lambda x, t: shift.expand_as(x)  # noqa: E731
    assert float(flow_matching_loss(oracle, x0, x1, t)) < 1e-12  # float rounding of x1 - x0 only
    zero = lambda x, t: torch.zeros_like(x)  # noqa: E731
    assert float(flow_matching_loss(zero, x0, x1, t)) == pytest.approx(float(shift.pow(2).mean()))
    # Conditioning reaches the model.
    cond = lambda x, t, c: c.expand_as(x)  # noqa: E731
    assert float(flow_matching_loss(cond, x0, x1, t, model_kwargs={"c": shift})) < 1e-12


def test_loss_gradient_flows_and_checks_model_output_shape():
    lin = torch.nn.Linear(3, 3)
    x0, x1, t = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4)
    flow_matching_loss(lambda x, t: lin(x), x0, x1, t).backward()
    assert lin.weight.grad is not None and float(lin.weight.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="model returned shape"):
        flow_matching_loss(lambda x, t: x[:, :2], x0, x1, t)


def test_euler_is_exact_for_constant_velocity_in_one_step():
    x0 = torch.randn(4, 3)
    c = torch.tensor([0.5, -1.0, 2.0])
    res = sample(lambda x, t: c.expand_as(x), x0, n_steps=1, method="euler")
    torch.testing.assert_close(res.x, x0 + c)
    assert res.nfe == 1 and res.trajectory is None
    back = sample(lambda x, t: c.expand_as(x), res.x, n_steps=3, t0=1.0, t1=0.0)  # backward integration
    torch.testing.assert_close(back.x, x0)


def test_heun_is_exact_for_velocity_linear_in_time():
    # v(x, t) = a + b t  =>  x(1) = x0 + a + b / 2. Euler with one step misses the b / 2 term.
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 4.0])

    def field(x, t):
        return (a + b * t[:, None]).expand_as(x)

    x0 = torch.zeros(2, 2)
    torch.testing.assert_close(sample(field, x0, 1, "heun").x, x0 + a + b / 2)
    torch.testing.assert_close(sample(field, x0, 1, "euler").x, x0 + a)


def test_heun_is_second_order_on_exponential_growth():
    x0 = torch.ones(1, 1, dtype=torch.float64)
    exact = math.e
    err = {m: abs(float(sample(lambda x, t: x, x0, 10, m).x) - exact) for m in ("euler", "heun")}
    assert err["heun"] < err["euler"] / 20
    err_heun_20 = abs(float(sample(lambda x, t: x, x0, 20, "heun").x) - exact)
    assert err["heun"] / err_heun_20 == pytest.approx(4.0, rel=0.1)  # halving h quarters the error


@pytest.mark.parametrize("n_steps", [1, 3, 7])
def test_nfe_counts_model_calls(n_steps):
    calls = []

    def model(x, t):
        calls.append(float(t[0]))
        assert t.shape == (x.shape[0],)
        return torch.zeros_like(x)

    x0 = torch.randn(2, 3)
    res = sample(model, x0, n_steps, "euler", return_trajectory=True)
    assert res.nfe == n_steps == len(calls)
    assert calls == pytest.approx([k / n_steps for k in range(n_steps)])
    assert res.trajectory.shape == (n_steps + 1, 2, 3) and torch.equal(res.trajectory[0], x0)
    calls.clear()
    res = sample(model, x0, n_steps, "heun")
    assert res.nfe == 2 * n_steps == len(calls)
    assert calls[-1] == pytest.approx(1.0)  # the last corrector is evaluated at t1


def test_sampler_argument_errors():
    with pytest.raises(ValueError, match="unknown sampler"):
        sample(lambda x, t: x, torch.zeros(1, 1), 2, "rk45")
    with pytest.raises(ValueError, match="n_steps"):
        sample(lambda x, t: x, torch.zeros(1, 1), 0)


def test_sample_time_schedules():
    t = sample_time(4000, torch.Generator().manual_seed(0))
    assert t.shape == (4000,) and float(t.min()) >= 0.0 and float(t.max()) < 1.0
    assert torch.equal(t, sample_time(4000, torch.Generator().manual_seed(0)))
    assert float(t.mean()) == pytest.approx(0.5, abs=0.02)
    ln = sample_time(4000, torch.Generator().manual_seed(0), "logit_normal")
    assert float(ln.min()) > 0.0 and float(ln.max()) < 1.0
    assert float(ln.mean()) == pytest.approx(0.5, abs=0.02)
    middle = lambda s: float(((s > 0.25) & (s < 0.75)).float().mean())  # noqa: E731
    assert middle(ln) > middle(t) + 0.1  # logit-normal concentrates on mid times
    with pytest.raises(ValueError, match="unknown time schedule"):
        sample_time(3, torch.Generator(), "cosine")


def test_sinusoidal_time_embedding():
    emb = sinusoidal_time_embedding(torch.tensor([0.0, 0.5, 1.0]), 16)
    assert emb.shape == (3, 16)
    torch.testing.assert_close(emb[0], torch.cat([torch.ones(8), torch.zeros(8)]))
    assert float((emb[1] - emb[2]).abs().max()) > 0.1
    with pytest.raises(ValueError, match="even"):
        sinusoidal_time_embedding(torch.zeros(2), 7)


def test_the_package_names_load_from_their_modules_and_match_its_import_statements():
    import ast
    import importlib
    from pathlib import Path

    import components.generative as package

    source = ast.parse(Path(package.__file__).read_text())
    declared = {
        (alias.name, node.module.rsplit(".", 1)[1])
        for node in ast.walk(source)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("components.generative.")
        for alias in node.names
    }
    assert declared == set(package._API.items())  # the statements codedeps reads = what loads at run time
    assert sorted(package.__all__) == sorted(package._API)
    for name, module in package._API.items():
        assert getattr(package, name) is getattr(importlib.import_module(f"components.generative.{module}"), name)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        package.missing  # noqa: B018
