"""Known answers for the topological masks and the attention variants."""

from __future__ import annotations

import pytest
import torch

from components.attention import (
    ATTENTIONS,
    Graph,
    GraphBatch,
    GrfMask,
    PerformerFeatures,
    exact_mask,
    exact_masked_linear_attention,
    exact_masks,
    grf_masked_linear_attention,
    grid_edge_index,
    knn_edge_index,
    knn_neighbours,
    linear_attention,
    modulation_alpha,
    sample_grf,
)
from components.attention.points import TopoPointConfig, TopoPointNet
from components.attention.vit import TopoViT, TopoViTConfig


def _grid(h: int = 3, w: int = 4) -> Graph:
    return Graph.from_edge_index(grid_edge_index(h, w), h * w)


def test_grid_graph_follows_edge_index_conventions() -> None:
    ei = grid_edge_index(2, 3)
    assert ei.shape == (2, 14)  # 7 undirected edges, both directions
    pairs = {tuple(p) for p in ei.T.tolist()}
    assert (0, 1) in pairs and (1, 0) in pairs and (0, 3) in pairs and (0, 4) not in pairs
    g = Graph.from_edge_index(ei, 6)
    assert g.degree.tolist() == [2, 3, 2, 2, 3, 2]
    w = g.dense_w()
    assert torch.allclose(w, w.T) and torch.allclose(w.sum(1), g.degree / 3.0)


def test_knn_graph_is_symmetric_without_self_loops() -> None:
    pts = torch.tensor([[0.0, 0], [1, 0], [0, 1], [5, 5], [6, 5]])
    ei = knn_edge_index(pts, 1)
    pairs = {tuple(p) for p in ei.T.tolist()}
    assert (3, 4) in pairs and (4, 3) in pairs and all(a != b for a, b in pairs)
    Graph.from_edge_index(ei, 5)  # symmetric, else this raises


def test_alpha_is_the_self_convolution_and_the_exact_mask_the_power_series() -> None:
    f = torch.tensor([1.0, 2.0, 3.0])
    assert modulation_alpha(f).tolist() == [1.0, 4.0, 10.0, 12.0, 9.0]
    g = _grid()
    w = g.dense_w()
    expected = sum(a * torch.linalg.matrix_power(w, k) for k, a in enumerate(modulation_alpha(f)))
    assert torch.allclose(exact_mask(g, f), expected, atol=1e-5)
    p = sum(fk * torch.linalg.matrix_power(w, k) for k, fk in enumerate(f))
    assert torch.allclose(exact_mask(g, f), p @ p, atol=1e-5)  # M = (sum f_k W^k)^2 for symmetric W


def test_grf_mask_estimate_is_unbiased() -> None:
    g, f = _grid(), torch.tensor([1.0, 0.7, 0.4, 0.2])
    gen = torch.Generator().manual_seed(0)
    total, trials = torch.zeros(g.n, g.n), 600
    for _ in range(trials):
        a, b = sample_grf(g, 4, 0.3, 3, gen, block=5), sample_grf(g, 4, 0.3, 3, gen)  # several blocks, one
        total += a.dense(f) @ b.dense(f).T
    exact = exact_mask(g, f)
    err = (total / trials - exact).abs().max()
    assert err < 0.05 * exact.max(), (float(err), float(exact.max()))
    # a single estimate is far from exact: the average is what converges
    single = a.dense(f) @ b.dense(f).T
    assert (single - exact).abs().max() > 2 * err


def test_grf_features_have_linear_many_nonzeros() -> None:
    g = _grid(10, 10)
    feats = sample_grf(g, 8, 0.5, 4, torch.Generator().manual_seed(1), block=7)
    assert feats.nnz <= g.n * (1 + 8 * 4)
    keys = feats.rows * g.n + feats.cols
    assert bool((keys[1:] > keys[:-1]).all())  # blocks in node order: sorted, unique pairs, no global sort
    assert torch.allclose(feats.loads[:, 0], (feats.rows == feats.cols).float())  # f_0 at the start node


def test_grf_attention_equals_the_dense_computation_with_the_estimated_mask() -> None:
    g, f = _grid(4, 5), torch.tensor([1.0, 0.5, 0.25])
    gen = torch.Generator().manual_seed(2)
    a, b = sample_grf(g, 6, 0.3, 2, gen), sample_grf(g, 6, 0.3, 2, gen)
    q, k, v = torch.randn(3, 2, 3, g.n, 8, generator=gen).unbind(0)
    dense = a.dense(f) @ b.dense(f).T
    for features in (None, PerformerFeatures(torch.randn(8, 16, generator=gen))):
        slow = exact_masked_linear_attention(q, k, v, dense, features)
        for chunk in (1, 3, 64):  # feature dimensions per sparse product: same result
            fast = grf_masked_linear_attention(q, k, v, GrfMask(a.matrix(f), b.matrix(f)), features, chunk=chunk)
            assert torch.allclose(fast, slow, atol=1e-5, rtol=1e-4), chunk
        # dense features (small graphs) go through the estimate itself: the same output
        small = grf_masked_linear_attention(q, k, v, GrfMask(a.dense(f), b.dense(f)), features)
        assert torch.allclose(small, slow, atol=1e-5, rtol=1e-4)


def _clouds(b: int = 3, n: int = 12, k: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    points = torch.randn(b, n, 3, generator=torch.Generator().manual_seed(seed))
    return points, torch.from_numpy(__import__("numpy").stack([knn_neighbours(p, k) for p in points]))


def test_graph_batch_is_the_disjoint_union_of_the_per_cloud_graphs() -> None:
    points, nbrs = _clouds()
    batch = GraphBatch.from_neighbours(nbrs)
    assert batch.union.n == 36 and batch.dense_w.shape == (3, 12, 12)
    union_w = batch.union.dense_w()
    for i, cloud in enumerate(points):
        alone = Graph.from_edge_index(knn_edge_index(cloud, 3), 12)  # W = A / this cloud's max degree
        assert torch.allclose(batch.dense_w[i], alone.dense_w())
        assert torch.allclose(union_w[12 * i : 12 * (i + 1), 12 * i : 12 * (i + 1)], alone.dense_w())
    assert float(union_w[:12, 12:].abs().sum()) == 0.0  # no edge between clouds
    f = torch.tensor([1.0, 0.5, 0.25])
    masks = exact_masks(batch, f)
    for i, cloud in enumerate(points):
        assert torch.allclose(masks[i], exact_mask(Graph.from_edge_index(knn_edge_index(cloud, 3), 12), f), atol=1e-6)
    with pytest.raises(ValueError, match="outside"):
        GraphBatch.from_neighbours(nbrs + 12)


def test_grf_blocks_are_the_diagonal_blocks_of_the_union_features() -> None:
    _, nbrs = _clouds()
    batch, f = GraphBatch.from_neighbours(nbrs), torch.tensor([1.0, 0.6, 0.3], requires_grad=True)
    feats = sample_grf(batch.union, 4, 0.3, 2, torch.Generator().manual_seed(4))
    blocks, dense = feats.blocks(f, 3), feats.dense(f)
    for i in range(3):
        assert torch.allclose(blocks[i], dense[12 * i : 12 * (i + 1), 12 * i : 12 * (i + 1)])
    blocks.sum().backward()
    assert f.grad is not None and bool((f.grad > 0).all())  # differentiable in the modulation
    with pytest.raises(ValueError, match="disjoint blocks"):
        sample_grf(_grid(3, 4), 4, 0.3, 2, torch.Generator().manual_seed(0)).blocks(f, 2)


def test_point_net_is_invariant_to_the_order_of_the_points() -> None:
    points, nbrs = _clouds(2, 10, 3, seed=1)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(0))
    inverse = torch.argsort(perm)
    p2, n2 = points[:, perm], inverse[nbrs[:, perm]]  # relabel the neighbour ids too
    models = {
        a: TopoPointNet(TopoPointConfig(attention=a, d_model=16, n_heads=2, k_max=2, n_classes=3), seed=2)
        for a in ATTENTIONS
    }
    ref = models["softmax"].blocks[0].attn.q_proj.weight
    assert all(torch.equal(m.blocks[0].attn.q_proj.weight, ref) for m in models.values())
    with torch.no_grad():
        for name in ("linear", "exact_mask", "softmax"):
            m = models[name].eval()
            assert torch.allclose(m(points, nbrs), m(p2, n2), atol=1e-5), name
        # the exact mask sees each cloud's own graph only: a cloud scores the same alone and in a batch
        exact = models["exact_mask"]
        assert torch.allclose(exact(points[:1], nbrs[:1]), exact(points, nbrs)[:1], atol=1e-6)
    grf = models["grf_mask"].train()
    torch.nn.functional.cross_entropy(grf(points, nbrs), torch.tensor([0, 2])).backward()
    assert grf.blocks[1].attn.f_raw.grad is not None and grf.blocks[1].attn.f_raw.grad.abs().sum() > 0


def test_all_ones_mask_is_unmasked_linear_attention_and_registry_signature() -> None:
    q, k, v = torch.randn(3, 1, 2, 7, 4, generator=torch.Generator().manual_seed(3)).unbind(0)
    assert torch.allclose(
        exact_masked_linear_attention(q, k, v, torch.ones(7, 7)), linear_attention(q, k, v), atol=1e-5
    )
    assert set(ATTENTIONS) == {"softmax", "linear", "exact_mask", "grf_mask"}
    out = ATTENTIONS["softmax"](q, k, v, None, None)
    assert torch.allclose(out, torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1) @ v, atol=1e-5)


def test_topo_vit_variants_share_initial_weights_and_learn_the_modulation() -> None:
    x, y = torch.rand(4, 8, 8), torch.tensor([0, 1, 2, 3])
    models = {
        a: TopoViT(TopoViTConfig(image_size=8, patch_size=2, attention=a, k_max=2, n_walks=4), seed=5)
        for a in ATTENTIONS
    }
    ref = models["softmax"].vit.blocks[0].attn.q_proj.weight
    assert all(torch.equal(m.vit.blocks[0].attn.q_proj.weight, ref) for m in models.values())
    for name in ("exact_mask", "grf_mask"):
        m = models[name]
        torch.nn.functional.cross_entropy(m(x), y).backward()
        assert m.vit.blocks[0].attn.f_raw.grad is not None and m.vit.blocks[0].attn.f_raw.grad.abs().sum() > 0
    grf = models["grf_mask"].eval()
    with torch.no_grad():
        assert torch.equal(grf(x), grf(x))  # eval walks come from a fixed generator
