"""ASIF relative representations and the contrastive pair: known answers on small hand-made inputs."""

from __future__ import annotations

import numpy as np
import torch

from components.alignment import fit_asif, fit_pca
from components.alignment.contrastive import LinearPair, LinearPairConfig, info_nce_loss, train_linear_pair


def test_asif_relative_representation_by_hand() -> None:
    anchors_a = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])  # mean 0
    anchors_b = anchors_a * 5.0
    model = fit_asif(anchors_a, anchors_b, k=2, p=1.0)
    r = model.embed_a(np.array([[2.0, 1.0]]))
    # cosines to the anchors: 2/sqrt5, 1/sqrt5, -2/sqrt5, -1/sqrt5; keep top 2, normalise
    np.testing.assert_allclose(r, [[2 / np.sqrt(5), 1 / np.sqrt(5), 0.0, 0.0]], atol=1e-12)
    # a text equal to the image's scaled copy gets the same relative vector: similarity 1
    np.testing.assert_allclose(model.embed_b(np.array([[10.0, 5.0]])) @ r.T, [[1.0]], atol=1e-12)
    # the power sharpens: p = 3 favours the nearest anchor more
    sharp = fit_asif(anchors_a, anchors_b, k=2, p=3.0).embed_a(np.array([[2.0, 1.0]]))
    assert sharp[0, 0] / sharp[0, 1] > r[0, 0] / r[0, 1]


def test_info_nce_of_perfectly_aligned_maps_is_small() -> None:
    model = LinearPair(LinearPairConfig(3, 3, 3))
    with torch.no_grad():
        model.w_a.copy_(torch.eye(3)), model.w_b.copy_(torch.eye(3)), model.log_scale.fill_(np.log(100.0))
    a = torch.eye(3)
    loss, extras = info_nce_loss(model, (a, a))
    # logits 100 on the diagonal, 0 elsewhere: loss = log(1 + 2 e^-100) ~ 0
    assert float(loss.detach()) < 1e-6 and float(extras["acc"]) == 1.0


def test_contrastive_training_aligns_linked_views() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((200, 4))
    a, b = z @ rng.standard_normal((4, 6)), z @ rng.standard_normal((4, 5))
    untrained = LinearPair(LinearPairConfig(6, 5, 4))
    with torch.no_grad():
        pair = (torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32))
        loss0 = float(info_nce_loss(untrained, pair)[0])
    model = train_linear_pair(a, b, embed_dim=4, steps=150, lr=0.05, batch_size=64)
    ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
    loss, extras = info_nce_loss(model, (ta, tb))
    assert float(loss.detach()) < loss0 / 2 and float(extras["acc"]) > 0.5


def test_pca_keeps_the_top_directions() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 3)) * np.array([10.0, 3.0, 0.1])
    pca = fit_pca(x, 2)
    np.testing.assert_allclose(np.abs(pca.components), [[1, 0, 0], [0, 1, 0]], atol=0.02)
    assert pca.apply(x).shape == (500, 2) and abs(pca.apply(x).mean()) < 1e-9


def test_swap_captions_and_evaluate_on_a_perfect_aligner() -> None:
    from components.alignment.evaluate import evaluate, swap_captions
    from components.alignment.methods import Embedded

    labels = np.repeat(np.arange(4), 10)
    source, swapped = swap_captions(labels, 0.25, np.random.default_rng(0))
    assert swapped.sum() == 10 and np.all(labels[source[swapped]] != labels[swapped])
    assert np.array_equal(source[~swapped], np.flatnonzero(~swapped))
    # an aligner that maps both views to the one-hot label (plus a per-item code) is perfect
    onehot = np.eye(4)[labels]
    item = np.eye(40) * 0.1
    image = text = np.hstack([onehot, item])
    ident = Embedded(lambda x: x, lambda x: x)
    scores = evaluate(ident, image, text, labels, np.hstack([np.eye(4), np.zeros((4, 40))]), source, swapped, [1, 5])
    assert scores == {"zero_shot": 1.0, "mislabel_auc": 1.0, "recall@1": 1.0, "recall@5": 1.0}


def test_tuning_on_held_out_pairs_picks_a_setting_that_learns() -> None:
    from components.alignment.contrastive import PairSetting, heldout_info_nce, select_linear_pair

    rng = np.random.default_rng(1)
    z = rng.standard_normal((60, 4))
    a, b = z @ rng.standard_normal((4, 6)), z @ rng.standard_normal((4, 5))
    grid = [(1e-6, 0.0, 4), (0.05, 0.0, 4)]  # a learning rate that cannot move the maps, and one that can
    best, means = select_linear_pair(a, b, grid, checkpoints=(20, 60), folds=3, batch_size=64, seed=0)
    assert best == PairSetting(0.05, 0.0, 4, 60) and len(means) == 4
    assert means[PairSetting(0.05, 0.0, 4, 60)] < 0.8 * means[PairSetting(1e-6, 0.0, 4, 60)]
    # a checkpoint of a longer run is the shorter run (constant learning rate, same batches): early stopping is exact
    from components.alignment.contrastive import _train

    ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
    held, train = torch.arange(0, 60, 3), torch.tensor([i for i in range(60) if i % 3])
    seen: dict[int, float] = {}
    _train(
        ta[train],
        tb[train],
        4,
        60,
        0.05,
        64,
        0.0,
        0,
        "cpu",
        lambda m, step: seen.update({step: heldout_info_nce(m, ta[held], tb[held])}),
        20,
    )
    short = train_linear_pair(a[train.numpy()], b[train.numpy()], embed_dim=4, steps=20, lr=0.05, batch_size=64, seed=0)
    assert sorted(seen) == [20, 40, 60] and seen[20] == heldout_info_nce(short, ta[held], tb[held])
