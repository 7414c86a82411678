"""The hypernetwork and the child it writes: shapes, the low-rank first layer, row-order invariance, masked
classes, a hand-computed child, the loss's gradient reaching every parameter."""

from __future__ import annotations

import math

import pytest
import torch

from components.tabular.mothernet import (
    MASKED_LOGIT,
    ChildMLP,
    MotherNet,
    MotherNetConfig,
    child_logits,
    prior_loss,
    write_child,
)

CFG = MotherNetConfig(
    max_features=5, max_classes=4, emsize=16, layers=2, heads=2, ff=32, decoder_hidden=24, child_hidden=7, rank=2
)


def _data(b: int = 3, n: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, 5, generator=gen), torch.randint(0, 3, (b, n), generator=gen)


def test_written_weights_have_the_child_shapes_and_a_low_rank_first_layer() -> None:
    model = MotherNet(CFG, seed=0)
    x, y = _data()
    w = model(x, y)
    assert w["w1"].shape == (3, 5, 7) and w["b1"].shape == (3, 7) and w["w2"].shape == (3, 7, 4)
    assert w["b2"].shape == (3, 4)
    assert CFG.n_generated == 5 * 2 + 7 + 7 * 4 + 4
    assert all(int(torch.linalg.matrix_rank(w["w1"][i])) <= 2 for i in range(3))
    # the shared factor is learned, the per-dataset factor written: w1 = A @ S
    assert model.shared_factor.shape == (2, 7)


def test_child_does_not_depend_on_the_order_of_training_rows() -> None:
    model = MotherNet(CFG, seed=1).eval()
    x, y = _data(b=1, n=30)
    order = torch.randperm(30, generator=torch.Generator().manual_seed(2))
    a, b = model(x, y), model(x[:, order], y[:, order])
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-5, rtol=1e-5)
    x2 = x.clone()
    x2[0, 0] += 1.0
    assert not torch.allclose(model(x2, y)["w1"], a["w1"])  # but it does depend on the rows


def test_child_logits_by_hand_and_masked_classes() -> None:
    w = {
        "w1": torch.tensor([[[1.0, -1.0], [0.0, 2.0]]]),
        "b1": torch.tensor([[0.0, -1.0]]),
        "w2": torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 3.0]]]),
        "b2": torch.tensor([[0.5, 0.0, 0.0]]),
    }
    x = torch.tensor([[[1.0, 1.0]]])  # hidden = relu([1, -1 + 2 - 1]) = [1, 0]
    torch.testing.assert_close(child_logits(w, x), torch.tensor([[[1.5, 0.0, 0.0]]]))
    masked = child_logits(w, x, torch.tensor([2]))
    assert masked[0, 0, 2] == MASKED_LOGIT and masked[0, 0, 0] == 1.5


def test_write_child_is_a_plain_mlp_with_the_same_outputs() -> None:
    model = MotherNet(CFG, seed=3).eval()
    x, y = _data(b=2)
    with torch.no_grad():
        w = model(x, y)
    center, projection = torch.zeros(5), torch.eye(5)
    child = write_child(w, 1, 3, center, projection)
    assert isinstance(child, ChildMLP) and child.cfg.n_classes == 3
    assert {type(m).__name__ for m in child.children()} == {"Linear"}
    test = torch.randn(6, 5)
    torch.testing.assert_close(child(test), child_logits(w, test[None].expand(2, 6, 5))[1, :, :3])
    proba = child.predict_proba(test)
    torch.testing.assert_close(proba.sum(-1), torch.ones(6))


def test_prior_loss_trains_every_parameter() -> None:
    model = MotherNet(CFG, seed=4)
    x, y = _data(b=2, n=16)
    xt, yt = _data(b=2, n=8, seed=5)
    loss, extras = prior_loss(
        model, {"x_train": x, "y_train": y, "x_test": xt, "y_test": yt, "n_classes": torch.tensor([3, 3])}
    )
    assert math.isfinite(float(loss.detach())) and 0 <= float(extras["accuracy"]) <= 1
    loss.backward()
    # with zero-initialised output projections, the first layer's inner weights get no gradient at step 0
    # (they only feed the zeroed projection), so check the parameters the signal must reach
    for name in (
        "x_embed.weight",
        "y_embed.weight",
        "decoder.0.weight",
        "decoder.2.weight",
        "shared_factor",
        "encoder.layers.0.self_attn.out_proj.weight",
        "encoder.layers.1.linear2.weight",
    ):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and float(grad.abs().sum()) > 0, name


def test_bad_config() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MotherNetConfig(emsize=10, heads=3)
    with pytest.raises(ValueError, match="max_classes"):
        MotherNetConfig(max_classes=1)
