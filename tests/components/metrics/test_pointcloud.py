"""Chamfer / EMD known answers, pairwise matrices, and 1-NNA / COV / MMD on hand-built examples."""

import itertools

import pytest
import torch

from components.metrics.pointcloud import (
    chamfer_distance,
    coverage,
    emd,
    mmd,
    one_nna,
    pairwise_chamfer,
    pairwise_emd,
    point_cloud_metrics,
)


def test_chamfer_hand_examples():
    a = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
    b = torch.tensor([[[0.0, 0.0]]])
    # a -> b: (0 + 1) / 2 = 0.5 ; b -> a: 0  =>  0.5
    torch.testing.assert_close(chamfer_distance(a, b), torch.tensor([0.5]))
    a = torch.tensor([[[0.0, 0.0, 0.0]]])
    b = torch.tensor([[[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]]])
    # a -> b: 1 ; b -> a: (1 + 9) / 2 = 5  =>  6 ; symmetric
    torch.testing.assert_close(chamfer_distance(a, b), torch.tensor([6.0]))
    torch.testing.assert_close(chamfer_distance(b, a), torch.tensor([6.0]))
    x = torch.randn(2, 5, 3)
    torch.testing.assert_close(chamfer_distance(x, x[:, torch.randperm(5)]), torch.zeros(2))


def test_emd_hand_example_and_brute_force():
    a = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
    b = torch.tensor([[[1.0, 1.0], [0.0, 1.0]]])
    torch.testing.assert_close(emd(a, b), torch.tensor([1.0]))  # straight up, not crossing (sqrt 2)
    gen = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(2, 5, 3, generator=gen, dtype=torch.float64),
        torch.randn(2, 5, 3, generator=gen, dtype=torch.float64),
    )
    out = emd(a, b)
    for k in range(2):
        d = (a[k][:, None] - b[k][None]).norm(dim=-1)
        best = min(float(d[torch.arange(5), torch.tensor(p)].mean()) for p in itertools.permutations(range(5)))
        assert float(out[k]) == pytest.approx(best, rel=1e-9)
    with pytest.raises(ValueError, match="equal point counts"):
        emd(torch.zeros(1, 3, 2), torch.zeros(1, 4, 2))


@pytest.mark.parametrize("pairwise,single", [(pairwise_chamfer, chamfer_distance), (pairwise_emd, emd)])
def test_pairwise_matrices_match_single_calls(pairwise, single):
    gen = torch.Generator().manual_seed(1)
    A, B = torch.randn(3, 6, 3, generator=gen), torch.randn(5, 6, 3, generator=gen)
    d = pairwise(A, B, batch=2)  # batch smaller than Q exercises the chunking
    assert d.shape == (3, 5)
    for p in range(3):
        for q in range(5):
            assert float(d[p, q]) == pytest.approx(float(single(A[p : p + 1], B[q : q + 1])[0]), rel=1e-5)


def test_one_nna_hand_examples():
    def dists(x, y):
        return (x[:, None] - x[None]).abs(), (y[:, None] - y[None]).abs(), (x[:, None] - y[None]).abs()

    # Separated sets: every nearest neighbour has the same label.
    assert one_nna(*dists(torch.tensor([0.0, 1.0]), torch.tensor([10.0, 11.0]))) == 1.0
    # Interleaved X = {0, 2}, Y = {1, 3}: every nearest neighbour (ties -> lower index) has the other label.
    assert one_nna(*dists(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 3.0]))) == 0.0
    # Same distribution: about chance.
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(300, generator=gen), torch.randn(300, generator=gen)
    assert 0.4 < one_nna(*dists(x, y)) < 0.6
    with pytest.raises(ValueError, match="inconsistent"):
        one_nna(torch.zeros(2, 2), torch.zeros(3, 3), torch.zeros(2, 2))


def test_coverage_and_mmd_hand_example():
    d = torch.tensor([[1.0, 5.0, 9.0], [2.0, 0.5, 9.0]])  # 2 generated x 3 reference
    assert coverage(d) == pytest.approx(2 / 3)  # references 0 and 1 are matched, 2 is not
    assert mmd(d) == pytest.approx((1.0 + 0.5 + 9.0) / 3)  # per reference: min over generated
    # Mode collapse: all 3 generated clouds are nearest to reference 0 (counting per reference
    # instead, argmin over generated, would wrongly give 1.0).
    assert coverage(torch.tensor([[1.0, 5.0], [2.0, 3.0], [3.0, 4.0]])) == 0.5


@pytest.mark.parametrize("metric", ["cd", "emd"])
def test_point_cloud_metrics(metric):
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(6, 8, 3, generator=gen)
    far = torch.randn(6, 8, 3, generator=gen) + 20.0
    out = point_cloud_metrics(far, ref, metric=metric)
    assert set(out) == {f"1nna_{metric}", f"cov_{metric}", f"mmd_{metric}"}
    assert out[f"1nna_{metric}"] == 1.0
    assert out[f"mmd_{metric}"] > 100.0 if metric == "cd" else out[f"mmd_{metric}"] > 10.0
    near = ref + 0.01 * torch.randn(6, 8, 3, generator=gen)
    close = point_cloud_metrics(near, ref, metric=metric)
    assert close[f"cov_{metric}"] == 1.0 and close[f"mmd_{metric}"] < 0.1
    with pytest.raises(ValueError, match="unknown metric"):
        point_cloud_metrics(near, ref, metric="hausdorff")


def test_pairwise_emd_within_one_set_is_symmetric_and_matches_the_full_solve():
    gen = torch.Generator().manual_seed(4)
    A = torch.randn(5, 7, 3, generator=gen, dtype=torch.float64)
    within = pairwise_emd(A, A)  # the same object: only p < q is solved, then mirrored
    full = pairwise_emd(A, A.clone())  # a copy: every pair solved
    torch.testing.assert_close(within, full)
    torch.testing.assert_close(within, within.T)
    assert float(within.diagonal().abs().max()) == 0.0 and float(within[0, 1]) > 0.0
    # hand example: a unit square's corners against the same corners shifted by (3, 4): every point moves 5
    sq = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
    assert float(pairwise_emd(sq, sq + torch.tensor([3.0, 4.0], dtype=torch.float64))[0, 0]) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="equal point counts"):
        pairwise_emd(A, A[:, :5])
    with pytest.raises(ValueError, match="NaN or inf"):
        pairwise_emd(A, torch.full_like(A, float("nan")))
