"""STAR's invariants, exactly: ||delta_l|| = gamma ||theta_l||, biases untouched, the module's weights bit-for-bit
unchanged, a non-zero gradient whenever >= 2 samples are still classified correctly, the gradient taken at
theta + delta (checked against a copy whose weights are shifted in place), and the ascent direction against
a brute-force recomputation."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from components.continual import (
    REHEARSAL,
    MLPClassifier,
    MLPClassifierConfig,
    ReplayWeights,
    StarConfig,
    Step,
    star_term,
    with_star,
)
from components.continual.buffer import BufferBatch
from components.continual.star import EPS, masked_kl, perturbed_names, star_perturbation

CFG = MLPClassifierConfig(in_features=12, hidden=(9, 7), n_classes=5)


def setup(seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A small MLP and 16 inputs labelled with its own predictions (all correct) but for 4 flipped ones."""
    model = MLPClassifier(CFG, seed=seed)
    with torch.no_grad():
        for p in model.parameters():  # non-zero biases, so that "untouched" means something
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 1)))
    x = torch.randn(16, 12, generator=torch.Generator().manual_seed(seed + 2))
    with torch.no_grad():
        y = model(x).argmax(1)
    y[:4] = (y[:4] + 1) % 5
    return model, x, y


def test_masked_kl_known_answer() -> None:
    p0 = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    log_q = torch.log(torch.tensor([[0.25, 0.75], [0.5, 0.5]]))
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert masked_kl(log_q, p0, torch.tensor([1.0, 0.0])).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("init", ["official", "random"])
@pytest.mark.parametrize("gamma", [0.01, 0.05])
def test_one_step_perturbation_has_norm_gamma_times_weight_norm(init: str, gamma: float) -> None:
    model, x, y = setup()
    term = star_term(model, x, y, StarConfig(gamma=gamma, lam=0.1, init=init), torch.Generator().manual_seed(0))
    assert term.mask.sum() == 12 and term.loss is not None
    params = dict(model.named_parameters())
    assert (
        sorted(term.delta)
        == sorted(perturbed_names(model))
        == ["classifier.weight", "features.0.weight", "features.2.weight"]
    )  # no bias is perturbed
    for name, delta in term.delta.items():
        assert delta.norm().item() == pytest.approx(gamma * params[name].norm().item(), rel=1e-5), name


def test_several_steps_stay_inside_the_ball() -> None:
    model, x, y = setup()
    with torch.no_grad():
        p0 = F.softmax(model(x), dim=1)
    mask = (p0.argmax(1) == y).float()
    delta = star_perturbation(
        model, x, p0, mask, StarConfig(gamma=0.05, steps=3, init="random"), torch.Generator().manual_seed(0)
    )
    for name, d in delta.items():
        assert d.norm().item() <= 0.05 * dict(model.named_parameters())[name].norm().item() * (1 + 1e-5)


@pytest.mark.parametrize("init", ["official", "random"])
def test_weights_bit_exact_and_gradient_nonzero(init: str) -> None:
    model, x, y = setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    term = star_term(model, x, y, StarConfig(gamma=0.05, lam=1.0, init=init), torch.Generator().manual_seed(0))
    term.loss.backward()
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    grads = {name: p.grad for name, p in model.named_parameters()}
    assert all(g is not None and g.abs().sum() > 0 for name, g in grads.items() if "weight" in name)


def test_fewer_than_two_correct_samples_skip_the_term() -> None:
    model, x, y = setup()
    with torch.no_grad():
        wrong = (model(x).argmax(1) + 1) % 5
    wrong[0] = model(x[:1]).argmax(1)  # exactly one sample still right
    term = star_term(model, x, wrong, StarConfig(), torch.Generator())
    assert term.loss is None and term.mask.sum() == 1 and term.delta == {}
    # two right samples are enough for a term with a non-zero gradient
    wrong[1] = model(x[1:2]).argmax(1)
    term = star_term(model, x, wrong, StarConfig(init="random"), torch.Generator())
    term.loss.backward()
    assert model.features[0].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("init", ["official", "random"])
def test_gradient_is_taken_at_theta_plus_delta(init: str) -> None:
    """Brute force, as the official code does it: add delta into a copy's weights in place, backpropagate the
    KL there; the functional STAR term's gradient must be the same."""
    model, x, y = setup()
    cfg = StarConfig(gamma=0.05, lam=0.7, init=init)
    term = star_term(model, x, y, cfg, torch.Generator().manual_seed(0))
    term.loss.backward()
    shifted = copy.deepcopy(model)
    shifted.zero_grad()
    with torch.no_grad():
        p0 = F.softmax(model(x), dim=1)
        for name, p in shifted.named_parameters():
            if name in term.delta:
                p.add_(term.delta[name])
    loss = cfg.lam * masked_kl(F.log_softmax(shifted(x), dim=1), p0, term.mask)
    loss.backward()
    assert loss.item() == pytest.approx(term.loss.item(), rel=1e-5)
    for (name, p), (_, q) in zip(model.named_parameters(), shifted.named_parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-8), name


def test_random_init_direction_is_the_normalised_kl_gradient_at_the_start_point() -> None:
    model, x, y = setup()
    gamma = 0.05
    term = star_term(model, x, y, StarConfig(gamma=gamma, init="random"), torch.Generator().manual_seed(5))
    generator = torch.Generator().manual_seed(5)  # the same draws, in the same order
    start = copy.deepcopy(model)
    with torch.no_grad():
        p0 = F.softmax(model(x), dim=1)
        params = dict(start.named_parameters())
        for name in perturbed_names(model):
            z = torch.randn(params[name].shape, generator=generator)
            params[name].add_(z / z.norm() * params[name].norm() * gamma)
    masked_kl(F.log_softmax(start(x), dim=1), p0, term.mask).backward()
    for name in perturbed_names(model):
        g = params[name].grad
        theta = dict(model.named_parameters())[name]
        expected = gamma * g * theta.norm() / (g.norm() + EPS)
        assert torch.allclose(term.delta[name], expected, rtol=1e-4, atol=1e-9), name


def test_official_start_offset_is_below_float32_resolution() -> None:
    model, _, _ = setup()
    weight = model.features[0].weight.detach()
    offset = torch.randn(weight.shape) * weight.norm() * EPS
    assert torch.equal(weight + offset, weight)  # the official "random init" is a no-op on non-zero weights


def test_wrapper_adds_lambda_kl_to_the_unchanged_base_method() -> None:
    model, x, y = setup()
    stream = Step(x[:4], y[:4], 1, 2)
    star_draw = BufferBatch(x, y, torch.zeros(16, 5), torch.zeros(16).long())
    base_draw = BufferBatch(x[8:], y[8:], torch.zeros(8, 5), torch.zeros(8).long())
    wrapped = with_star(REHEARSAL["er"], StarConfig(gamma=0.05, lam=0.3), seed=0)
    assert (wrapped.draws, wrapped.side_draws, wrapped.name) == (1, 1, "er+star")
    out = wrapped.loss(model, Step(stream.x, stream.y, 1, 2, (base_draw,), (star_draw,)), ReplayWeights())
    base = REHEARSAL["er"].loss(model, Step(stream.x, stream.y, 1, 2, (base_draw,)), ReplayWeights())
    assert out.loss.item() == pytest.approx(base.loss.item() + 0.3 * out.metrics["star_kl"], rel=1e-6)
    assert out.metrics["star_applied"] == 1.0 and out.metrics["star_mask"] == 12.0
    assert torch.equal(out.stream_logits, base.stream_logits)
    empty = wrapped.loss(model, stream, ReplayWeights())  # empty buffer: the base method alone
    assert empty.loss.item() == pytest.approx(REHEARSAL["er"].loss(model, stream, ReplayWeights()).loss.item())


def test_config_refuses_bad_values() -> None:
    for bad in ({"gamma": 0.0}, {"lam": -1.0}, {"steps": 0}, {"init": "zeros"}):
        with pytest.raises(ValueError, match="STAR"):
            StarConfig(**bad)


def test_measured_invariants_hold_and_catch_a_broken_perturbation(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure_invariants reports the invariants of the real term, and each flag turns False when the term is
    broken the way it would be by an in-place edit that is not undone, or by perturbing the biases."""
    from components.continual import invariants, star

    model, x, y = setup()
    good = invariants.measure_invariants(model, x, y, StarConfig(gamma=0.05, lam=0.5, init="random"), seed=0)
    assert good["applied"] and good["mask"] == 12 and good["max_norm_error"] < 1e-5
    assert good["biases_untouched"] and good["bit_exact"] and good["grad_nonzero"] and good["skips_below_two"]
    assert good["grad_rel_diff"] < 1e-5 and good["perturbed"] == sorted(perturbed_names(model))

    real = star.star_term

    def leaky(model, x, y, cfg, generator):  # leaves the first weight shifted, as an unrestored in-place add
        term = real(model, x, y, cfg, generator)
        if term.loss is not None:
            with torch.no_grad():
                model.features[0].weight.add_(term.delta["features.0.weight"])
        return term

    monkeypatch.setattr(invariants, "star_term", leaky)
    assert not invariants.measure_invariants(*setup(), StarConfig(init="random"))["bit_exact"]

    def with_bias(model, x, y, cfg, generator):  # perturbs a bias too, scaled wrongly
        term = real(model, x, y, cfg, generator)
        if term.loss is not None:
            term.delta["features.0.bias"] = torch.ones_like(model.features[0].bias)
            term.delta["classifier.weight"] = 2 * term.delta["classifier.weight"]
        return term

    monkeypatch.setattr(invariants, "star_term", with_bias)
    broken = invariants.measure_invariants(*setup(), StarConfig(init="random"))
    assert not broken["biases_untouched"] and broken["norm_ratio"]["classifier.weight"] == pytest.approx(2.0, rel=1e-4)
    assert broken["max_norm_error"] > 0.5
