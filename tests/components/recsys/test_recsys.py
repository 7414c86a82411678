"""SASRec's causal summary, the diffusion recommender's pieces (centroid negatives, per-row errors, the two
negative-noise switches, guided scores) and a tiny SASRec-CE fit through the one training loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from components.metrics.ranking import ranking_metrics
from components.recsys import (
    DiffRecConfig,
    DiffusionRecommender,
    SASRecConfig,
    SASRecEncoder,
    SASRecNextItem,
    error_scores,
    in_batch_centroids,
)
from components.recsys.diffrec import row_errors
from components.training import TrainConfig, fit


def test_summary_reads_the_last_real_item_and_ignores_padding_and_later_items() -> None:
    enc = SASRecEncoder(SASRecConfig(n_items=20, hidden=8, max_len=4, dropout=0.0), seed=0).eval()
    a = enc(torch.tensor([[3, 5, 0, 0]]))
    b = enc(torch.tensor([[3, 5, 9, 0]]))
    # causal: the state at position 1 does not see item 9 at position 2
    full = enc.norm(enc.blocks[0](enc.item_emb(torch.tensor([[3, 5, 9, 0]])) + enc.pos_emb))
    assert torch.allclose(a[0], full[0, 1], atol=1e-6) and not torch.allclose(a, b)
    with pytest.raises(ValueError, match="at least one item"):
        enc(torch.tensor([[0, 0, 0, 0]]))


def test_in_batch_centroids_by_hand() -> None:
    e = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    assert in_batch_centroids(e).tolist() == [[1.5, 3.0], [2.0, 2.0], [0.5, 1.0]]
    with pytest.raises(ValueError):
        in_batch_centroids(e[:1])


def test_row_errors_by_hand() -> None:
    x, e = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[0.0, 1.0], [2.0, 2.0]])
    assert row_errors(x, e, "cosine").tolist() == pytest.approx([1.0, 0.0], abs=1e-6)  # (0 - 1)^2, (1 - 1)^2
    assert row_errors(x, e, "mse").tolist() == pytest.approx([1.0, 1.0])
    s = error_scores(torch.tensor([0.25, 1.0]))
    assert s.logp_mean.tolist() == [-0.25, -1.0]


def _model(seed: int = 0) -> DiffusionRecommender:
    return DiffusionRecommender(DiffRecConfig(SASRecConfig(n_items=12, hidden=8, max_len=3), steps=50), seed=seed)


def test_negative_noise_switch() -> None:
    m = _model().eval()
    hist, tgt = torch.tensor([[1, 2, 0], [4, 0, 0], [5, 6, 7]]), torch.tensor([3, 5, 8])
    torch.manual_seed(0)
    pos, neg = m.errors(hist, tgt, "cosine", negatives=True, negative_noise="shared")
    torch.manual_seed(0)
    pos2, neg2 = m.errors(hist, tgt, "cosine", negatives=True, negative_noise="independent")
    assert torch.equal(pos, pos2) and not torch.equal(neg, neg2)
    assert m.errors(hist, tgt, "mse")[1] is None


def test_scores_rank_every_item_with_padding_last() -> None:
    m = _model().eval()
    s = m.scores(torch.tensor([[1, 2, 0]]), w=2.0, stride=10, generator=torch.Generator().manual_seed(0))
    assert s.shape == (1, 13) and s[0, 0] == -math.inf and torch.isfinite(s[0, 1:]).all()
    again = m.scores(torch.tensor([[1, 2, 0]]), w=2.0, stride=10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(s, again)


def test_sasrec_ce_learns_a_deterministic_successor_through_fit() -> None:
    # item i is always followed by item i + 1 (mod 6): a learnable next-item rule
    hist = torch.tensor([[i, 0] for i in range(1, 7)] * 8)
    tgt = torch.tensor([i % 6 + 1 for i in range(1, 7)] * 8)
    model = SASRecNextItem(SASRecConfig(n_items=6, hidden=16, max_len=2, dropout=0.0, item_init_std=0.3), seed=0)
    fit(
        model,
        lambda m, b: m.loss(*b),
        lambda step, g: (hist, tgt),
        TrainConfig(steps=150, lr=1e-2, device="cpu", progress=False, grad_clip=None),
    )
    assert ranking_metrics(model.eval().scores(hist), tgt, ks=(1,))["recall@1"] == 1.0


def _successor_task(n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """Item i is always followed by item i + 1 (mod n): one history per item, repeated."""
    return torch.tensor([[i, 0] for i in range(1, n + 1)] * 8), torch.tensor([i % n + 1 for i in range(1, n + 1)] * 8)


@pytest.mark.parametrize("objective", ["preferdiff", "mse"])
def test_a_diffusion_recommender_on_a_frozen_text_like_table_learns_a_deterministic_successor(objective: str) -> None:
    """What PreferDiff's claims need: the diffusion model generates the next item's embedding well enough to rank
    it first, from a frozen whitened table (the official text-embedding mode) within a few hundred steps."""
    from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss
    from components.recsys import whiten

    n, d = 24, 16
    table = torch.zeros(n + 1, d)
    table[1:] = torch.from_numpy(whiten(np.random.default_rng(0).standard_normal((n, 32)), d)).float()
    hist, tgt = _successor_task(n)
    cfg = DiffRecConfig(SASRecConfig(n_items=n, hidden=d, max_len=2, dropout=0.0, freeze_items=True), steps=200)
    model = DiffusionRecommender(cfg, seed=0, item_table=table)
    settings = ObjectiveConfig(beta=5.0, sft_weight=0.4, pairing="batch")

    def loss(m: DiffusionRecommender, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        if objective == "preferdiff":
            pos, neg = m.errors(*batch, "cosine", negatives=True)
            scores = PreferenceBatch(chosen=error_scores(pos), rejected=error_scores(neg))
            return objective_loss("preferdiff", scores, settings)
        pos, _ = m.errors(*batch, "mse")
        return objective_loss("denoise", PreferenceBatch(chosen=error_scores(pos)), settings)

    fit(model, loss, lambda step, g: (hist, tgt), TrainConfig(steps=300, lr=1e-2, device="cpu", progress=False))
    scores = model.eval().scores(hist[:n], w=2.0, stride=20, generator=torch.Generator().manual_seed(0))
    assert ranking_metrics(scores, tgt[:n], ks=(1,))["recall@1"] >= 0.9
    assert torch.equal(model.encoder.items, table)  # frozen: no loss moved (or shrank) the table


def test_whitening_and_the_text_table() -> None:
    from components.llm import load_encoder
    from components.recsys import text_item_table, whiten

    x = np.random.default_rng(1).standard_normal((200, 6)) @ np.random.default_rng(2).standard_normal((6, 6)) + 3.0
    white = whiten(x)
    np.testing.assert_allclose(white.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.cov(white, rowvar=False), np.eye(6), atol=1e-6)
    top = whiten(x, 2)  # the two directions of largest variance, in order
    np.testing.assert_allclose(top, white[:, :2], atol=1e-9)
    table = text_item_table([f"item {i} of kind {i % 3}" for i in range(40)], 8, load_encoder("tiny"))
    assert table.shape == (41, 8) and table.dtype == torch.float32 and not table[0].any()
    with pytest.raises(ValueError, match="width 300"):
        text_item_table(["a", "b", "c"], 300, load_encoder("tiny"))
