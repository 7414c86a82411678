"""The tiny DiT: shapes at every pyramid level, adaLN-Zero start, seeded weights, the block-causal temporal
mask, conditioning, and the FLOP count against torch's own counter."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from components.models.dit import DiTConfig, TinyDiT, forward_flops

CFG = DiTConfig(frame_size=16, patch_size=2, d_model=32, n_heads=4, n_layers=2, max_frames=4, n_stages=3)


def _randomised(cfg: DiTConfig = CFG, seed: int = 0) -> TinyDiT:
    """A model whose zero-initialised layers are filled too, so every input path shows in the output."""
    model = TinyDiT(cfg, seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(0.2 * torch.randn(param.shape, generator=gen))
    return model.eval()


def _history() -> list[torch.Tensor]:
    return [torch.randn(2, 1, 4, 4), torch.randn(2, 1, 8, 8), torch.randn(2, 1, 16, 16)]


@pytest.mark.parametrize("size", [4, 8, 16])
def test_output_has_the_shape_of_the_generated_frame_and_starts_at_zero(size: int) -> None:
    model = TinyDiT(CFG)
    x = torch.randn(2, 1, size, size)
    out = model(x, torch.rand(2), history=_history()[:2], stage=1, labels=torch.tensor([3, 10]))
    assert out.shape == x.shape
    assert torch.count_nonzero(out) == 0  # adaLN-Zero: the untrained model predicts zero velocity


def test_weights_come_from_the_seed_alone() -> None:
    torch.manual_seed(123)
    a = TinyDiT(CFG, seed=5).state_dict()
    torch.manual_seed(456)
    b = TinyDiT(CFG, seed=5).state_dict()
    c = TinyDiT(CFG, seed=6).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_history_tokens_never_see_later_frames_under_the_causal_mask() -> None:
    model = _randomised()
    history, x, tau = _history(), torch.randn(2, 1, 16, 16), torch.rand(2)
    h1, ids, _ = model.encode(x, tau, history, stage=2)
    changed = [*history[:2], history[2] + 1.0]  # change the most recent history frame
    h2, _, _ = model.encode(x + 1.0, tau, changed, stage=2)
    assert torch.allclose(h1[:, ids < 2], h2[:, ids < 2], atol=1e-6)  # earlier frames untouched
    assert not torch.allclose(h1[:, ids >= 2], h2[:, ids >= 2])
    open_model = _randomised(DiTConfig(**{**CFG.__dict__, "causal": False}))
    g1, _, _ = open_model.encode(x, tau, history, stage=2)
    g2, _, _ = open_model.encode(x + 1.0, tau, changed, stage=2)
    assert not torch.allclose(g1[:, ids < 2], g2[:, ids < 2])  # without the mask they would see them


def test_the_generated_frame_is_conditioned_on_history_time_stage_and_label() -> None:
    model = _randomised()
    x, tau, hist = torch.randn(2, 1, 8, 8), torch.rand(2), _history()[:1]
    base = model(x, tau, history=hist, stage=1, labels=torch.tensor([1, 2]))
    assert not torch.allclose(base, model(x, tau, history=[hist[0] + 1], stage=1, labels=torch.tensor([1, 2])))
    assert not torch.allclose(base, model(x, tau + 0.3, history=hist, stage=1, labels=torch.tensor([1, 2])))
    assert not torch.allclose(base, model(x, tau, history=hist, stage=0, labels=torch.tensor([1, 2])))
    assert not torch.allclose(base, model(x, tau, history=hist, stage=1, labels=torch.tensor([3, 2])))
    assert torch.allclose(
        model(x, tau, stage=1), model(x, tau, stage=torch.tensor([1, 1]), labels=torch.tensor([10, 10]))
    )


def test_bad_inputs_are_refused() -> None:
    model = TinyDiT(CFG)
    with pytest.raises(ValueError, match="max_frames"):
        model(torch.randn(1, 1, 16, 16), torch.rand(1), history=[torch.randn(1, 1, 16, 16)] * 4)
    with pytest.raises(ValueError, match="does not fit"):
        model(torch.randn(1, 1, 7, 7), torch.rand(1))
    with pytest.raises(ValueError, match="patch_size"):
        DiTConfig(frame_size=15, patch_size=2)


@pytest.mark.parametrize("frames", [[4], [64], [4, 16, 64, 64], [64, 64, 64, 16]])
def test_forward_flops_equals_torch_flop_counter(frames: list[int]) -> None:
    model = TinyDiT(CFG).eval()
    sides = [int(n**0.5) * CFG.patch_size for n in frames]
    history = [torch.randn(1, 1, s, s) for s in sides[:-1]]
    x = torch.randn(1, 1, sides[-1], sides[-1])
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x, torch.rand(1), history=history, stage=1, labels=torch.tensor([4]))
    # torch counts every linear layer (addmm); its CPU attention kernel is not registered with the
    # counter, so the attention products (QK^T and AV: 2 x 2 L^2 d per block) are added by hand
    counted = counter.get_flop_counts()["Global"]
    assert set(map(str, counted)) == {"aten.addmm"}
    length = sum(frames)
    assert forward_flops(CFG, frames) == counter.get_total_flops() + CFG.n_layers * 4 * length**2 * CFG.d_model
    with pytest.raises(ValueError):
        forward_flops(CFG, [])
