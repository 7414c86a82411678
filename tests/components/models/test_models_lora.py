"""peft LoRA helpers: targeting, factor extraction vs merge_and_unload, safetensors round trip."""

import pytest
import torch

from components.merging import MergeConfig, baseline_merge
from components.models.lora import (
    LoraSpec,
    apply_deltas,
    attach_lora,
    group_factors_by_layer,
    load_factors,
    lora_factors,
    save_factors,
)
from components.models.vit import TinyViT, TinyViTConfig

SPEC = LoraSpec(r=2, alpha=4)  # scale 2, so a forgotten alpha/r shows up


def trained_lora(base, seed):
    """A LoRA model whose B is non-zero (as after training)."""
    peft_model = attach_lora(base, SPEC, seed=seed)
    g = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(0.1 * torch.randn(param.shape, generator=g))
    return peft_model


@pytest.fixture(scope="module")
def base():
    return TinyViT(TinyViTConfig(), seed=0).eval()


def test_only_lora_parameters_are_trainable_and_base_is_untouched(base):
    peft_model = attach_lora(base, LoraSpec())
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A.default." in n or ".lora_B.default." in n for n in trainable)
    assert len(trainable) == 2 * 4 * 2  # A and B x 4 projections x 2 blocks
    assert not any("lora" in n for n, _ in base.named_parameters())
    x = torch.rand(3, 8, 8)
    torch.testing.assert_close(peft_model(x), base(x))  # B = 0 at init


def test_factors_reproduce_the_merged_peft_model(base):
    peft_model = trained_lora(base, seed=1)
    factors = lora_factors(peft_model)
    assert set(factors) == {
        f"blocks.{i}.attn.{p}" for i in range(2) for p in ("q_proj", "k_proj", "v_proj", "out_proj")
    }
    f = factors["blocks.0.attn.q_proj"]
    assert f.B.shape == (32, 2) and f.A.shape == (2, 32) and f.scale == pytest.approx(2.0)
    x = torch.rand(4, 8, 8)
    with torch.no_grad():
        expected = peft_model.merge_and_unload()(x)
        rebuilt = apply_deltas(base, {n: f.delta() for n, f in factors.items()})(x)
    torch.testing.assert_close(rebuilt, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(base(x), expected, atol=1e-3)


def test_grouped_factors_feed_the_mergers(base):
    per_task = [lora_factors(trained_lora(base, seed=s)) for s in (2, 3)]
    layer_factors, scale = group_factors_by_layer(per_task)
    assert scale == pytest.approx(2.0) and len(layer_factors["blocks.1.attn.v_proj"]) == 2
    deltas = baseline_merge(layer_factors, "ta", MergeConfig(lam=1.0), scale=scale)
    expected = per_task[0]["blocks.1.attn.v_proj"].delta() + per_task[1]["blocks.1.attn.v_proj"].delta()
    torch.testing.assert_close(deltas["blocks.1.attn.v_proj"], expected, atol=1e-6, rtol=1e-6)


def test_apply_deltas_checks_names_and_shapes(base):
    with pytest.raises(KeyError, match="nope"):
        apply_deltas(base, {"nope": torch.zeros(1, 1)})
    with pytest.raises(ValueError, match="shape"):
        apply_deltas(base, {"blocks.0.attn.q_proj": torch.zeros(3, 3)})


def test_save_load_round_trip(base, tmp_path):
    factors = lora_factors(trained_lora(base, seed=4))
    save_factors(factors, tmp_path / "lora.safetensors")
    loaded = load_factors(tmp_path / "lora.safetensors")
    assert set(loaded) == set(factors)
    for name, f in factors.items():
        torch.testing.assert_close(loaded[name].B, f.B)
        torch.testing.assert_close(loaded[name].A, f.A)
        assert loaded[name].scale == f.scale
