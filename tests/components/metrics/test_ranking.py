"""Ranking metrics against hand counts: roc_auc (also against scikit-learn), and full-ranking Recall@k / NDCG@k
(RecBole's definitions, one target)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from components.metrics.ranking import ranking_metrics, roc_auc, target_ranks


def test_roc_auc_counts_ordered_pairs_and_half_ties() -> None:
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert roc_auc(np.array([1.0, 1.0]), np.array([1, 0])) == pytest.approx(0.5)
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 200).astype(float), rng.integers(0, 2, 200)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([1, 1])))  # one class empty: undefined


def test_known_answer_two_users() -> None:
    # column 0 is padding (-inf); user A's target (item 3) is beaten by item 1 only -> rank 2;
    # user B's target (item 2) is beaten by items 1, 3, 4 -> rank 4
    scores = torch.tensor([[-math.inf, 0.9, 0.1, 0.5, 0.3], [-math.inf, 0.9, 0.1, 0.5, 0.3]])
    targets = torch.tensor([3, 2])
    assert target_ranks(scores, targets).tolist() == [2, 4]
    m = ranking_metrics(scores, targets, ks=(1, 3, 5))
    assert m["recall@1"] == 0.0
    assert m["recall@3"] == pytest.approx(0.5) and m["recall@5"] == pytest.approx(1.0)
    assert m["ndcg@3"] == pytest.approx((1 / math.log2(3)) / 2)  # 0.3155
    assert m["ndcg@5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / 2)  # (0.6309 + 0.4307) / 2


def test_ties_count_against_the_target_and_padding_never_wins() -> None:
    flat = torch.zeros(1, 6)
    flat[0, 0] = -math.inf
    assert target_ranks(flat, torch.tensor([2])).tolist() == [5]  # all five real items tie: rank 5
    assert ranking_metrics(flat, torch.tensor([2]), ks=(4,))["recall@4"] == 0.0
    best = torch.tensor([[-math.inf, 0.0, 2.0]])
    m = ranking_metrics(best, torch.tensor([2]), ks=(1,))
    assert m == {"recall@1": 1.0, "ndcg@1": 1.0}


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="expected scores"):
        target_ranks(torch.zeros(3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="ks"):
        ranking_metrics(torch.zeros(1, 3), torch.tensor([1]), ks=())


def test_full_ranking_metrics_match_cornac() -> None:
    """Recall@k and NDCG@k of a random full ranking (no ties) against cornac's own metrics, user by user."""
    import cornac.metrics as metrics  # a dev dependency: the reference must be there, not skipped

    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(200, 300, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 300, (200,), generator=gen)
    ours = ranking_metrics(scores, targets, ks=(5, 10, 50))
    order = torch.argsort(scores, dim=1, descending=True).numpy()
    for k in (5, 10, 50):
        for name, metric in (("recall", metrics.Recall(k=k)), ("ndcg", metrics.NDCG(k=k))):
            theirs = np.mean(
                [metric.compute(gt_pos=np.array([t]), pd_rank=order[u]) for u, t in enumerate(targets.tolist())]
            )
            assert ours[f"{name}@{k}"] == pytest.approx(theirs, abs=1e-12), (name, k)
