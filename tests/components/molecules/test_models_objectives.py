"""Molecule graphs, the two encoders with their heads, and the three objectives with hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from components.molecules.encoders import CliffNet, CliffNetConfig
from components.molecules.featurize import ecfp_bits, parse_smiles
from components.molecules.graphs import AtomEncoder, atom_feature_sizes, graph_batch, molecule_graphs
from components.molecules.lac import (
    AcaConfig,
    CliffBatches,
    LacConfig,
    bin_labels,
    make_objective,
    predict,
    quantile_bin_edges,
)
from components.training import TrainConfig, fit

SMILES = ["CCO", "OCC", "c1ccccc1O", "CC(=O)N", "CCN"]


def gin_inputs(smiles: list[str]):
    graphs = molecule_graphs(smiles)
    return lambda index: graph_batch(graphs, index)


def test_from_smiles_graphs_and_their_batch() -> None:
    graphs = molecule_graphs(["CCO", "c1ccccc1"])
    assert graphs[0].x.shape == (3, 9) and graphs[0].edge_index.shape == (2, 4)  # 2 bonds, both directions
    assert graphs[1].edge_index.shape == (2, 12) and len(atom_feature_sizes()) == 9
    batch = graph_batch(graphs, torch.tensor([1, 0, 1]))
    assert batch["graph"].tolist() == [0] * 6 + [1] * 3 + [2] * 6
    assert batch["edge_index"].shape == (2, 28) and int(batch["edge_index"].max()) == 14


def test_atom_encoder_sums_one_embedding_per_feature() -> None:
    enc = AtomEncoder(2, sizes=[3, 2])
    with torch.no_grad():
        enc.tables[0].weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]]))
        enc.tables[1].weight.copy_(torch.tensor([[10.0, 20.0], [30.0, 40.0]]))
    assert enc(torch.tensor([[2, 1], [0, 0]])).tolist() == [[33.0, 44.0], [10.0, 20.0]]
    with pytest.raises(ValueError, match="expected atom features"):
        enc(torch.zeros(3, 5, dtype=torch.long))


def test_gin_embedding_ignores_atom_order_and_heads_are_shaped() -> None:
    net = CliffNet(CliffNetConfig(encoder="gin", gin_dim=16, embed=8, n_bins=4), seed=0)
    pred, z = net(gin_inputs(SMILES)(torch.arange(5)))
    assert pred.shape == (5,) and z.shape == (5, 8)
    assert torch.allclose(z[0], z[1], atol=1e-5)  # ethanol written CCO and OCC: the same graph
    assert net.node_logits(z).shape == (5, 4)
    edge = net.edge_logits(z[:3], z[2:])
    assert edge.shape == (3,) and torch.allclose(edge, net.edge_logits(z[2:], z[:3]))  # symmetric in i, j


def test_mlp_prediction_is_in_label_units() -> None:
    cfg = CliffNetConfig(encoder="ecfp_mlp", n_bits=64, hidden=16, embed=8, y_mean=-2.5, y_std=1.5)
    net = CliffNet(cfg, seed=1)
    with torch.no_grad():
        net.regress.weight.zero_()
        net.regress.bias.fill_(2.0)
    bits = torch.as_tensor(ecfp_bits(parse_smiles(SMILES), n_bits=64))
    pred, _ = net({"bits": bits})
    assert pred.tolist() == pytest.approx([-2.5 + 1.5 * 2.0] * 5)
    same = CliffNet(cfg, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(CliffNet(cfg, seed=1).parameters(), same.parameters()))
    with pytest.raises(ValueError, match="encoder must be one of"):
        CliffNetConfig(encoder="transformer")


def test_quantile_bins_are_ordinal() -> None:
    y = np.arange(8.0)
    edges = quantile_bin_edges(y, 4)
    assert edges.tolist() == [1.75, 3.5, 5.25]
    assert bin_labels(y, edges).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert bin_labels(np.array([-10.0, 100.0]), edges).tolist() == [0, 3]


def _batches(n_bits: int = 32, edge_batch: int = 2) -> tuple[CliffBatches, torch.Tensor, np.ndarray]:
    bits = torch.as_tensor(ecfp_bits(parse_smiles(SMILES), n_bits=n_bits)).float()
    y = np.array([-1.0, -1.2, -3.0, -2.0, -0.5])
    bins = bin_labels(y, quantile_bin_edges(y, 2))
    src, dst, cliff = np.array([0, 2]), np.array([1, 3]), np.array([False, True])
    return CliffBatches(lambda i: {"bits": bits[i]}, y, bins, src, dst, cliff, 3, edge_batch, edge_seed=5), bits, y


def test_batches_hold_uniform_molecules_then_both_ends_of_edges() -> None:
    batches, _, y = _batches()
    batch = batches(1, torch.Generator().manual_seed(0))
    assert batch["uniform"].tolist() == [True] * 3 + [False] * 4
    src, dst = batch["edge_src"], batch["edge_dst"]
    assert src.tolist() == [3, 4] and dst.tolist() == [5, 6]
    ys, pairs = batch["y"].tolist(), {(-1.0, -1.2): 0.0, (-3.0, -2.0): 1.0}  # the two edges and their flags
    for a, b, c in zip(src.tolist(), dst.tolist(), batch["edge_cliff"].tolist()):
        assert pairs[(round(ys[a], 4), round(ys[b], 4))] == c
    # the molecules of a step do not depend on whether edges are drawn: objectives stay paired
    plain, _, _ = _batches(edge_batch=0)
    with_edges = batches(3, torch.Generator().manual_seed(7))["y"][:3]
    assert torch.equal(plain(3, torch.Generator().manual_seed(7))["y"], with_edges)


def test_objectives_by_hand() -> None:
    batches, _, _ = _batches()
    batch = next(
        b
        for b in (batches(step, torch.Generator().manual_seed(0)) for step in range(1, 50))
        if 0 < b["edge_cliff"].sum() < 2
    )  # one cliff edge and one other edge
    cfg = CliffNetConfig(encoder="ecfp_mlp", n_bits=32, hidden=8, embed=4, n_bins=2, y_mean=-1.5, y_std=2.0)
    net = CliffNet(cfg, seed=0)
    pred, z = net(batch["inputs"])
    u = batch["uniform"]
    mse = (((pred[u] - batch["y"][u]) / 2.0) ** 2).mean()
    loss, extras = make_objective("mse")(net, batch)
    assert loss.item() == pytest.approx(mse.item(), rel=1e-6) and extras["mse"].item() == pytest.approx(mse.item())

    ce = torch.nn.functional.cross_entropy(net.node_logits(z[u]), batch["bin"][u])
    s, d, c = batch["edge_src"], batch["edge_dst"], batch["edge_cliff"]
    bce = torch.nn.functional.binary_cross_entropy_with_logits(net.edge_logits(z[s], z[d]), c)
    unit = torch.nn.functional.normalize(z, dim=-1)
    gaps = (unit[s] - unit[d]).norm(dim=-1)[c > 0.5]
    push = torch.clamp(0.5 - gaps, min=0).mean()
    lac = make_objective("lac", LacConfig(lambda_node=0.3, lambda_edge=2.0, margin=0.5))
    loss, extras = lac(net, batch)
    assert loss.item() == pytest.approx((mse + 0.3 * ce + 2.0 * (bce + push)).item(), rel=1e-5)
    assert set(extras) == {"mse", "node_ce", "node_acc", "edge_bce", "margin", "edge_acc"}
    plain, _ = make_objective("lac", LacConfig(lambda_node=0.0, lambda_edge=0.0))(net, batch)
    assert plain.item() == pytest.approx(mse.item(), rel=1e-6)

    # clsar's ACA loss with alpha 0 is its MAE term; with alpha > 0 it adds the mined triplet term
    aca0, _ = make_objective("aca", aca=AcaConfig(alpha=0.0))(net, batch)
    assert aca0.item() == pytest.approx((pred[u] - batch["y"][u]).abs().mean().item(), rel=1e-6)
    aca1, _ = make_objective("aca", aca=AcaConfig(alpha=1.0))(net, batch)
    assert aca1.item() >= aca0.item()
    with pytest.raises(ValueError, match="unknown objective"):
        make_objective("focal")


def test_lac_trains_through_the_shared_loop_and_separates_cliff_pairs() -> None:
    batches, bits, y = _batches(n_bits=64, edge_batch=2)
    cfg = CliffNetConfig(
        encoder="ecfp_mlp", n_bits=64, hidden=32, embed=16, n_bins=2, y_mean=float(y.mean()), y_std=float(y.std())
    )
    net = CliffNet(cfg, seed=0)
    result = fit(
        net, make_objective("lac"), batches, TrainConfig(steps=200, lr=3e-3, seed=0, progress=False, log_every=50)
    )
    assert result.history[-1]["mse"] < 0.05 < result.history[0]["mse"]
    assert result.history[-1]["edge_acc"] == 1.0
    pred = predict(net, lambda i: {"bits": bits[i]}, len(y), chunk=2)
    assert np.abs(pred - y).max() < 0.3 and net.training  # predict leaves the training mode as it was
    _, z = net({"bits": bits})
    gap = (torch.nn.functional.normalize(z[2], dim=0) - torch.nn.functional.normalize(z[3], dim=0)).norm()
    assert gap.item() >= 0.5 - 1e-3 and math.isfinite(result.final_loss)


def test_importing_clsar_leaves_matplotlib_settings_alone() -> None:
    """clsar's package __init__ calls seaborn.set(font_scale=2); the loss is loaded without that side effect."""
    import sys

    import matplotlib

    from components.molecules.lac import _clsar_loss

    for name in [m for m in sys.modules if m == "clsar" or m.startswith("clsar.")]:
        del sys.modules[name]  # run clsar's __init__ again, seaborn.set included
    before = dict(matplotlib.rcParams)
    assert _clsar_loss().__name__ == "ACALoss"
    assert "clsar.main" in sys.modules and dict(matplotlib.rcParams) == before
