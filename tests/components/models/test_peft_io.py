"""Our LoRA factors <-> peft adapter folders: both directions against peft itself, and the refusals."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from components.models.lora import LoraSpec, apply_deltas, attach_lora, lora_factors
from components.models.peft_io import CONFIG_FILE, WEIGHTS_FILE, load_peft_adapter, save_peft_adapter
from components.models.vit import TinyViT, TinyViTConfig

SPEC = LoraSpec(r=2, alpha=6.0, targets=("blocks.0.attn.q_proj", "blocks.1.attn.v_proj", "out_proj"))  # scale 3


@pytest.fixture(scope="module")
def base():
    return TinyViT(TinyViTConfig(), seed=0).eval()


@pytest.fixture(scope="module")
def trained(base):
    """Our attach_lora model with non-zero B (as after training)."""
    model = attach_lora(base, SPEC, seed=1)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(0.1 * torch.randn(param.shape, generator=g))
    return model.eval()


def test_our_factors_load_as_a_peft_adapter(base, trained, tmp_path):
    from peft import PeftModel

    factors = lora_factors(trained)
    folder = save_peft_adapter(factors, tmp_path / "adapter")
    config = json.loads((folder / CONFIG_FILE).read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 2 and config["lora_alpha"] == 6.0
    assert sorted(load_file(folder / WEIGHTS_FILE)) == sorted(
        f"base_model.model.{name}.lora_{part}.weight" for name in factors for part in "AB"
    )
    loaded = PeftModel.from_pretrained(TinyViT(TinyViTConfig(), seed=0).eval(), str(folder)).eval()
    x = torch.rand(5, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), trained(x), atol=1e-6, rtol=1e-6)
        assert not torch.allclose(loaded(x), base(x), atol=1e-3)
    assert set(lora_factors(loaded)) == set(factors)  # peft adapted exactly our modules


def test_a_peft_adapter_reads_back_as_its_merged_weights(base, trained, tmp_path):
    trained.save_pretrained(str(tmp_path / "peft"))  # written by peft itself
    factors = load_peft_adapter(tmp_path / "peft", base)
    assert set(factors) == set(lora_factors(trained)) and {f.scale for f in factors.values()} == {3.0}
    ours = apply_deltas(base, {name: f.delta() for name, f in factors.items()}).state_dict()
    merged = copy.deepcopy(trained).merge_and_unload().state_dict()
    assert ours.keys() == merged.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], merged[key], atol=1e-6, rtol=1e-6)


def test_round_trip_through_our_writer_is_exact(base, trained, tmp_path):
    factors = lora_factors(trained)
    back = load_peft_adapter(save_peft_adapter(factors, tmp_path / "a"), base)
    for name, f in factors.items():
        assert torch.equal(back[name].A, f.A) and torch.equal(back[name].B, f.B) and back[name].scale == f.scale


def _adapter(trained, tmp_path):
    folder = save_peft_adapter(lora_factors(trained), tmp_path / "bad")
    return folder, json.loads((folder / CONFIG_FILE).read_text()), load_file(folder / WEIGHTS_FILE)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f, c, t: (f / CONFIG_FILE).unlink(), "adapter_config.json: missing"),
        (lambda f, c, t: (f / CONFIG_FILE).write_text("{not json"), "adapter_config.json: not readable JSON"),
        (lambda f, c, t: (f / CONFIG_FILE).write_text(json.dumps({**c, "peft_type": "IA3"})), "peft_type"),
        (lambda f, c, t: (f / CONFIG_FILE).write_text(json.dumps({k: v for k, v in c.items() if k != "r"})), ": r "),
        (lambda f, c, t: (f / CONFIG_FILE).write_text(json.dumps({**c, "lora_alpha": None})), "lora_alpha"),
        (lambda f, c, t: (f / CONFIG_FILE).write_text(json.dumps({**c, "use_dora": True})), "use_dora"),
        (lambda f, c, t: (f / WEIGHTS_FILE).unlink(), "adapter_model.safetensors: missing"),
        (lambda f, c, t: (f / WEIGHTS_FILE).write_bytes(b"\x00" * 12), "not a readable safetensors"),
        (
            lambda f, c, t: save_file({k: v for k, v in t.items() if "q_proj.lora_B" not in k}, str(f / WEIGHTS_FILE)),
            "blocks.0.attn.q_proj.lora_B.weight is missing",
        ),
        (
            lambda f, c, t: save_file(
                {**t, "base_model.model.blocks.0.attn.q_proj.lora_A.weight": torch.zeros(3, 32)}, str(f / WEIGHTS_FILE)
            ),
            r"q_proj.lora_A.weight has shape \(3, 32\), expected \[r=2, in\]",
        ),
        (
            lambda f, c, t: save_file(
                {**t, "base_model.model.blocks.0.attn.q_proj.lora_A.weight": torch.zeros(2, 31)}, str(f / WEIGHTS_FILE)
            ),
            r"target 'blocks.0.attn.q_proj' has A \(2, 31\)",
        ),
        (
            lambda f, c, t: save_file(
                {
                    **t,
                    "base_model.model.nope.lora_A.weight": torch.zeros(2, 32),
                    "base_model.model.nope.lora_B.weight": torch.zeros(32, 2),
                },
                str(f / WEIGHTS_FILE),
            ),
            "target 'nope' is not a module",
        ),
        (lambda f, c, t: save_file({**t, "bias": torch.zeros(2)}, str(f / WEIGHTS_FILE)), "'bias' is not a LoRA"),
    ],
)
def test_malformed_adapters_are_refused_naming_file_and_field(base, trained, tmp_path, damage, message):
    folder, config, tensors = _adapter(trained, tmp_path)
    damage(folder, config, tensors)
    with pytest.raises(ValueError, match=message):
        load_peft_adapter(folder, base)


def test_a_pickled_adapter_is_never_loaded(base, trained, tmp_path):
    folder, _, _ = _adapter(trained, tmp_path)
    (folder / WEIGHTS_FILE).rename(folder / "adapter_model.bin")
    with pytest.raises(ValueError, match="pickle and is never loaded"):
        load_peft_adapter(folder, base)


def test_mixed_ranks_cannot_be_one_peft_folder(trained, tmp_path):
    factors = dict(lora_factors(trained))
    name = next(iter(factors))
    f = factors[name]
    factors[name] = f._replace(A=torch.zeros(3, f.A.shape[1]), B=torch.zeros(f.B.shape[0], 3))
    with pytest.raises(ValueError, match="one r and one alpha"):
        save_peft_adapter(factors, tmp_path / "x")
