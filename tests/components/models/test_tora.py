"""ToRA known answers: exact identity at G = 0, dW_t against the official einsum by hand, the multi-task
(task-major) forward, parameter counts, the orthogonality regulariser, LoRA-pair factors through KnOTS."""

import math

import pytest
import torch
from torch import nn

from components.merging import MergeConfig, knots_merge
from components.models.lora import group_factors_by_layer
from components.models.tora import (
    MULTI_TASK,
    ToraSpec,
    attach_tora,
    load_tora,
    merged_model,
    orthogonality_loss,
    save_tora,
    tora_deltas,
    tora_factors,
    tora_parameter_count,
    tora_parameters,
    tora_tensors,
    use_task,
)


class Attn(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.q_proj(x) * torch.sigmoid(self.k_proj(x)) + self.v_proj(x))


class Net(nn.Module):
    def __init__(self, d: int = 6, layers: int = 2) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(Attn(d) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = x + b(x)
        return x


SPEC = ToraSpec(ranks=(3, 2, 2), n_tasks=3, scaling=0.5, dropout=0.0)


def _randomise_core(model: nn.Module, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in tora_tensors(model):
            t.G.copy_(torch.randn(t.G.shape, generator=gen))


def test_at_init_the_adapted_model_equals_the_frozen_one_exactly_for_every_task_and_in_training_mode():
    net, x = Net(), torch.randn(5, 4, 6)
    adapted = attach_tora(net, ToraSpec(ranks=(3, 2, 2), n_tasks=3, dropout=0.5), seed=0)
    adapted.train()  # dropout active: still exact, since G = 0 makes every update exactly 0
    for task in range(3):
        with use_task(adapted, task):
            assert torch.equal(adapted(x), net(x))
    assert all(bool((t.G == 0).all()) for t in tora_tensors(adapted))


def test_attach_copies_and_freezes_everything_but_the_factors():
    net = Net()
    adapted = attach_tora(net, SPEC, seed=0)
    trainable = {n for n, p in adapted.named_parameters() if p.requires_grad}
    assert trainable == {f"blocks.{i}.tora.{f}" for i in range(2) for f in ("G", "U1", "U2", "U3")}
    assert all(p.requires_grad for p in net.parameters())  # the original is untouched
    assert type(net.blocks[0].q_proj) is nn.Linear


def test_delta_matches_the_official_einsum_by_hand():
    adapted = attach_tora(Net(), SPEC, seed=3)
    _randomise_core(adapted)
    tensor = adapted.blocks[0].tora
    # the official generate_tensor: einsum over (G, U1, U2, U3), permuted to [T, d_out, d_in], times s
    full = torch.einsum("pqv,ip->iqv", tensor.G, tensor.U1)
    full = torch.einsum("iqv,jq->ijv", full, tensor.U2)
    full = torch.einsum("ijv,kv->ijk", full, tensor.U3).permute(2, 1, 0) * 0.5  # [T, 3d, d]
    for task in range(3):
        deltas = tora_deltas(adapted, task)
        fused = torch.cat([deltas[f"blocks.0.{n}"] for n in ("q_proj", "k_proj", "v_proj")])
        torch.testing.assert_close(fused, full[task], rtol=1e-5, atol=1e-5)


def test_forward_is_the_frozen_linear_plus_the_task_update_and_the_multi_task_batch_is_task_major():
    net = Net()
    adapted = attach_tora(net, SPEC, seed=4)
    _randomise_core(adapted)
    adapted.eval()
    x = torch.randn(2, 5, 6)
    outs = []
    for task in range(3):
        with use_task(adapted, task):
            outs.append(adapted(x))
        torch.testing.assert_close(outs[-1], merged_model(adapted, task)(x), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(outs[0], outs[1])  # the task rows of U3 differ
    with use_task(adapted, MULTI_TASK):
        torch.testing.assert_close(adapted(x.repeat(3, 1, 1)), torch.cat(outs), rtol=1e-5, atol=1e-5)
    with use_task(adapted, MULTI_TASK), pytest.raises(ValueError, match="T \\* B rows"):
        adapted(x)


def test_parameter_counts_follow_the_formula_fused_and_per_linear():
    assert tora_parameter_count(384, 1152, (32, 32, 4), 3) == 384 * 32 + 1152 * 32 + 32 * 32 * 4 + 3 * 4
    fused = attach_tora(Net(d=6, layers=2), SPEC)
    assert sum(p.numel() for p in tora_parameters(fused)) == 2 * tora_parameter_count(6, 18, (3, 2, 2), 3)
    single = attach_tora(Net(d=6, layers=2), ToraSpec(ranks=(3, 2, 2), n_tasks=3, fuse=False))
    assert sum(p.numel() for p in tora_parameters(single)) == 6 * tora_parameter_count(6, 6, (3, 2, 2), 3)


def test_at_init_only_the_core_receives_a_gradient_from_the_task_loss():
    adapted = attach_tora(Net(), SPEC, seed=0)
    with use_task(adapted, 1):
        adapted(torch.randn(4, 3, 6)).square().sum().backward()
    tensor = adapted.blocks[0].tora
    assert tensor.G.grad.abs().sum() > 0
    assert all(float(p.grad.abs().max()) == 0.0 for p in (tensor.U1, tensor.U2, tensor.U3))


def test_orthogonality_regulariser_known_values():
    adapted = attach_tora(Net(layers=1), SPEC)
    tensor = tora_tensors(adapted)[0]
    with torch.no_grad():  # orthonormal columns: their terms vanish; G = 0 leaves ||-I||_F = sqrt(R2) per slice
        tensor.U1.copy_(torch.linalg.qr(torch.randn(6, 3))[0])
        tensor.U2.copy_(torch.linalg.qr(torch.randn(18, 2))[0])
    r3, r2 = 2, 2
    assert float(orthogonality_loss(adapted).detach()) == pytest.approx(r3 * math.sqrt(r2) / (2 + r3), abs=1e-6)
    with torch.no_grad():
        tensor.G.zero_()
        tensor.G[0, 0, :], tensor.G[1, 1, :] = 1.0, 1.0  # every slice G[:, :, r] has orthonormal columns
    assert float(orthogonality_loss(adapted).detach()) == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():
        tensor.U1.mul_(2.0)  # U1^T U1 = 4 I: ||3 I_3||_F = 3 sqrt(3)
    assert float(orthogonality_loss(adapted).detach()) == pytest.approx(3 * math.sqrt(3) / 4, abs=1e-5)


def test_factors_are_lora_pairs_of_each_task_update_and_knots_merges_them():
    adapted = attach_tora(Net(), SPEC, seed=5)
    _randomise_core(adapted)
    per_task = tora_factors(adapted)
    assert len(per_task) == 3
    for task, factors in enumerate(per_task):
        deltas = tora_deltas(adapted, task)
        for name, f in factors.items():
            assert f.B.shape == (6, 3) and f.A.shape == (3, 6)
            torch.testing.assert_close(f.delta(), deltas[name], rtol=1e-5, atol=1e-6)
    layer_factors, scale = group_factors_by_layer(per_task)
    merged = knots_merge(layer_factors, "ta", MergeConfig(lam=1.0, merge="sum"), scale=scale)
    for name, dw in merged.items():  # KnOTS-TA is task arithmetic: the sum of the task updates
        expected = sum(tora_deltas(adapted, t)[name] for t in range(3))
        torch.testing.assert_close(dw, expected, rtol=1e-4, atol=1e-5)
    ties = knots_merge(layer_factors, "ties", MergeConfig(lam=1.0, top_k=50.0), scale=scale)
    assert set(ties) == set(merged) and all(torch.isfinite(v).all() for v in ties.values())


def test_save_and_load_round_trip_only_the_factors(tmp_path):
    adapted = attach_tora(Net(), SPEC, seed=6)
    _randomise_core(adapted)
    save_tora(adapted, tmp_path / "tora.safetensors")
    fresh = attach_tora(Net(), SPEC, seed=7)
    load_tora(fresh, tmp_path / "tora.safetensors")
    for a, b in zip(tora_parameters(adapted), tora_parameters(fresh)):
        assert torch.equal(a, b)
    other = attach_tora(Net(), ToraSpec(ranks=(2, 2, 2), n_tasks=3))
    with pytest.raises(ValueError, match="shape"):
        load_tora(other, tmp_path / "tora.safetensors")


def test_task_selection_errors_are_named():
    adapted = attach_tora(Net(), SPEC)
    with pytest.raises(RuntimeError, match="no ToRA task is set"):
        adapted(torch.randn(1, 2, 6))
    with pytest.raises(ValueError, match="task must be in"):
        with use_task(adapted, 3):
            pass
    with pytest.raises(ValueError, match="no nn.Linear named"):
        attach_tora(Net(), ToraSpec(targets=("qkv",)))


def test_orthonormal_start_is_the_q_factor_of_the_official_draw() -> None:
    import dataclasses

    official = tora_tensors(attach_tora(Net(), SPEC, seed=3))
    ortho = tora_tensors(attach_tora(Net(), dataclasses.replace(SPEC, init="orthonormal"), seed=3))
    for a, b in zip(official, ortho):
        for name in ("U1", "U2"):
            u, q = getattr(a, name).detach(), getattr(b, name).detach()
            assert torch.allclose(q.T @ q, torch.eye(q.shape[1]), atol=1e-5)  # orthonormal columns
            assert torch.allclose(q @ (q.T @ u), u, atol=1e-4)  # spanning the official draw's columns
            assert (torch.diagonal(q.T @ u) > 0).all()  # signs fixed: diag R > 0
        assert torch.equal(a.U3, b.U3) and torch.equal(a.G, b.G)  # the same draws otherwise
        terms = b.orthogonality_terms()
        assert float(terms[0]) < 1e-5 and float(terms[1]) < 1e-5  # the regulariser's U terms start at 0
    with pytest.raises(ValueError, match="ToraSpec.init"):
        ToraSpec(init="uniform")
