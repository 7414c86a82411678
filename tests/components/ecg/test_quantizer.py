"""NormEMA quantiser: nearest code by cosine, the EMA step against a hand computation, k-means init, gradients."""

from __future__ import annotations

import torch

from components.ecg.quantizer import NormEMAQuantizer, l2norm


def _quantizer(decay: float = 0.5) -> NormEMAQuantizer:
    q = NormEMAQuantizer(3, 2, decay=decay, beta=1.0)
    q.embedding.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]))
    q.initted.fill_(True)
    return q


def test_codes_are_nearest_by_cosine() -> None:
    q = _quantizer()
    z = torch.tensor([[5.0, 0.1], [0.2, 0.3], [-0.1, 0.05], [3.0, 2.9]])
    assert q.codes(z).tolist() == [0, 1, 2, 0]
    random = torch.randn(50, 2)
    expected = (l2norm(random) @ q.embedding.T).argmax(-1)
    assert torch.equal(q.codes(random), expected)


def test_ema_update_matches_a_hand_computation() -> None:
    q = _quantizer(decay=0.5)
    z = l2norm(torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    codes = torch.tensor([0, 0, 1])
    q.ema_update(z, codes)
    # code 0: mean of (1,1)/sqrt2 and (1,0) = (0.8536, 0.3536), normalised (0.9239, 0.3827);
    # 0.5 (1, 0) + 0.5 (0.9239, 0.3827) = (0.9619, 0.1913), normalised (0.9808, 0.1951)
    assert torch.allclose(q.embedding[0], torch.tensor([0.98079, 0.19509]), atol=1e-4)
    assert torch.allclose(q.embedding[1], torch.tensor([0.0, 1.0]))  # its mean equals it
    assert torch.equal(q.embedding[2], torch.tensor([-1.0, 0.0]))  # unused: unchanged
    assert torch.allclose(q.cluster_size, torch.tensor([1.0, 0.5, 0.0]))
    assert torch.allclose(q.embedding.norm(dim=-1), torch.ones(3))


def test_first_training_batch_initialises_by_kmeans_and_gradients_pass_straight_through() -> None:
    torch.manual_seed(0)
    q = NormEMAQuantizer(4, 3, decay=0.9)
    z = torch.randn(64, 3, requires_grad=True)
    z_q, loss, codes = q(z)
    assert bool(q.initted) and codes.shape == (64,) and z_q.shape == (64, 3)
    assert torch.allclose(q.embedding.norm(dim=-1), torch.ones(4))
    (z_q.sum() + loss).backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()
    before = q.embedding.clone()
    q.eval()
    q(torch.randn(8, 3))
    assert torch.equal(q.embedding, before)  # no update in eval mode


def test_padding_does_not_move_the_codebook() -> None:
    q = _quantizer(decay=0.5)
    z = torch.tensor([[[0.0, 1.0], [-1.0, 0.0]]])
    q(z, mask=torch.tensor([[True, False]]))
    assert torch.equal(q.embedding[2], torch.tensor([-1.0, 0.0])) and q.cluster_size[2] == 0


def test_commitment_is_the_mean_over_vectors_and_dimensions() -> None:
    q = _quantizer(decay=0.5).eval()  # no EMA step, so the codebook stays the one the loss was taken against
    z = torch.tensor([[0.6, 0.8], [1.0, 0.0]])  # unit vectors; their codes are the nearest unit rows
    _, loss, codes = q(z)
    expected = ((q.embedding[codes] - z) ** 2).mean()  # official: F.mse_loss(quantize.detach(), z)
    torch.testing.assert_close(loss, expected)
