"""TinyViT shapes, patch order, determinism and module names."""

import pytest
import torch

from components.models.vit import TinyViT, TinyViTConfig


def test_digits_shapes_and_attention_names():
    model = TinyViT(TinyViTConfig(), seed=0)
    x = torch.rand(5, 8, 8)
    assert model.patchify(x).shape == (5, 16, 4)
    assert model.features(x).shape == (5, 32)
    assert model(x).shape == (5, 10)
    assert isinstance(model.head, torch.nn.Linear)
    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert {"q_proj", "k_proj", "v_proj", "out_proj", "head"} <= names
    assert sum(1 for n, _ in model.named_modules() if n.endswith("q_proj")) == 2  # one per block


def test_mnist_sized_config_with_mean_pool():
    cfg = TinyViTConfig(image_size=28, patch_size=7, n_heads=4, pool="mean")
    model = TinyViT(cfg, seed=0)
    x = torch.rand(3, 1, 28, 28)
    assert cfg.n_patches == 16 and model.pos_embed.shape == (1, 16, 32)
    assert model(x).shape == (3, 10)


def test_patchify_row_major_2x2_blocks():
    model = TinyViT(TinyViTConfig(image_size=4, patch_size=2), seed=0)
    x = torch.arange(16.0).reshape(1, 4, 4)
    expected = torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]).float()
    torch.testing.assert_close(model.patchify(x)[0], expected)


def test_init_depends_only_on_seed():
    torch.manual_seed(123)
    a = TinyViT(TinyViTConfig(), seed=7)
    torch.manual_seed(456)
    b = TinyViT(TinyViTConfig(), seed=7)
    c = TinyViT(TinyViTConfig(), seed=8)
    for (name, pa), (_, pb), (_, _pc) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.blocks[0].attn.q_proj.weight, c.blocks[0].attn.q_proj.weight)


def test_bad_inputs_fail_with_shape_message():
    with pytest.raises(ValueError, match="multiple"):
        TinyViTConfig(image_size=8, patch_size=3)
    with pytest.raises(ValueError, match=r"\[B, 1, 8, 8\]"):
        TinyViT(TinyViTConfig())(torch.rand(2, 28, 28))
