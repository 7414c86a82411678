"""Shared transformer layers: patches, the seeded initialisation, the time embedding; and the two models built
on them (TinyDiT, TinyViT) keep exactly the weights and outputs they had before the layers were shared."""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch import nn

from components.generative import sinusoidal_time_embedding as from_generative
from components.generative.time import sinusoidal_time_embedding as from_time
from components.models.dit import DiTConfig, TinyDiT
from components.models.layers import init_transformer_weights, patchify, sinusoidal_time_embedding, unpatchify
from components.models.vit import TinyViT, TinyViTConfig


def test_patchify_known_answer_and_inverse() -> None:
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)  # 2 channels, 4x4
    tokens = patchify(x, 2)
    assert tokens.shape == (1, 4, 8)
    # patch (0, 1): channel 0 pixels (0,2) (0,3) (1,2) (1,3), then channel 1 the same pixels
    assert tokens[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    assert tokens[0, 2].tolist() == [8, 9, 12, 13, 24, 25, 28, 29]
    assert torch.equal(unpatchify(tokens, 2, 2, 4, 4), x)
    wide = torch.randn(3, 1, 4, 8)
    assert torch.equal(unpatchify(patchify(wide, 2), 2, 1, 4, 8), wide)
    with pytest.raises(ValueError, match="multiple of the patch size"):
        patchify(torch.zeros(1, 1, 5, 4), 2)


def test_init_transformer_weights_rule_and_seed() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Embedding(5, 16))
    init_transformer_weights(model, torch.Generator().manual_seed(0))
    assert torch.count_nonzero(model[0].bias) == 0 and torch.count_nonzero(model[1].bias) == 0
    assert torch.equal(model[1].weight, torch.ones(16))
    for weight in (model[0].weight.detach(), model[2].weight.detach()):
        assert float(weight.abs().max()) <= 0.04 and 0.01 < float(weight.std()) < 0.03
    again = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Embedding(5, 16))
    torch.manual_seed(99)  # the global RNG plays no part
    init_transformer_weights(again, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_sinusoidal_time_embedding_known_values_and_re_exports() -> None:
    emb = sinusoidal_time_embedding(torch.tensor([0.0, 0.001]), 4)
    # frequencies 1 and 10000^(-1/2) = 0.01, times scaled by 1000
    expected = torch.tensor(
        [
            [1.0, 1.0, 0.0, 0.0],
            [
                torch.cos(torch.tensor(1.0)),
                torch.cos(torch.tensor(0.01)),
                torch.sin(torch.tensor(1.0)),
                torch.sin(torch.tensor(0.01)),
            ],
        ]
    )
    torch.testing.assert_close(emb, expected)
    assert from_generative is sinusoidal_time_embedding and from_time is sinusoidal_time_embedding


# --------------------------------------------------------------------------------------------------
# the models are unchanged: state-dict checksums and outputs recorded before the layers were shared
# --------------------------------------------------------------------------------------------------
def _state_hash(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, value in model.state_dict().items():
        digest.update(name.encode())
        digest.update(value.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


VIT_CASES = {
    "default": (
        TinyViTConfig(),
        "fbaa6bfa957c74c69c0f5a294e854e53cb32b2b95c0d18811a579412ef780081",
        [0.05095032975077629, 0.06854410469532013, 0.16059660911560059, 0.06385305523872375],
        [-0.9406251907348633, -0.4668917655944824, 0.7127370834350586, -0.2733320891857147],
    ),
    "mean_pool_28": (
        TinyViTConfig(image_size=28, patch_size=7, d_model=32, n_heads=2, pool="mean"),
        "a2e1278224b1c69f06c8027053f2c53664db90c72fc6ce68c6303ed39276f0da",
        [-0.021171296015381813, 0.017728425562381744, -0.10017649829387665, -0.08477699756622314],
        [-0.8201426267623901, -0.806198000907898, 0.19277209043502808, 0.5486210584640503],
    ),
}
DIT_CASES = {
    "default": (
        DiTConfig(),
        "b00f5a14b42f96fce7fc269671ee5b17c6d859e1024efcd924e5dcf919fa646f",
        [-0.021097950637340546, 0.1877269446849823, -0.6637316346168518, 0.3457391858100891],
    ),
    "pyramid_flow": (
        DiTConfig(d_model=48, n_layers=2),
        "0e33d36d962619b85a96692f39fa0c53c4ff9a9f5654b7d99d5f2cfcf809a1d4",
        [0.004566952586174011, 0.12185540050268173, -0.4465789198875427, 0.50160813331604],
    ),
}


@pytest.mark.parametrize("case", sorted(VIT_CASES))
def test_tiny_vit_weights_and_outputs_unchanged(case: str) -> None:
    cfg, state, logits, features = VIT_CASES[case]
    model = TinyViT(cfg, seed=0).eval()
    assert _state_hash(model) == state
    x = torch.rand(3, cfg.image_size, cfg.image_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(x)[0, :4], torch.tensor(logits), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(model.features(x)[0, :4], torch.tensor(features), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(DIT_CASES))
def test_tiny_dit_weights_and_outputs_unchanged(case: str) -> None:
    cfg, state, first = DIT_CASES[case]
    model = TinyDiT(cfg, seed=0)
    assert _state_hash(model) == state
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():  # fill the zero-initialised layers too, so every path shows in the output
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=gen))
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 1, 8, 8, generator=gen)
    history = [torch.randn(3, 1, 4, 4, generator=gen), torch.randn(3, 1, 16, 16, generator=gen)]
    tau = torch.rand(3, generator=gen)
    with torch.no_grad():
        out = model.eval()(x, tau, history=history, stage=1, labels=torch.tensor([0, 3, 10]))
    torch.testing.assert_close(out[0, 0, 0, :4], torch.tensor(first), rtol=1e-5, atol=1e-6)
