"""CCA / CSA known answers: canonical correlations of a constructed pair, whitening, the rho-weighting."""

from __future__ import annotations

import numpy as np
import pytest

from components.alignment import AlignConfig, csa_similarity, csa_weights, fit_cca, fit_method
from components.alignment.cca import inverse_sqrt

RHO = np.array([0.9, 0.6, 0.3])


def _constructed(n: int = 40_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Latent z [n, 3]; view A = [z, noise] mixed by a random invertible map; view B = rho z + sqrt(1-rho^2) e
    plus noise dims, mixed too. Population canonical correlations: exactly RHO (then zeros)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    a = np.hstack([z, rng.standard_normal((n, 2))]) @ _mixing(rng, 5) + 3.0
    b_lat = RHO * z + np.sqrt(1 - RHO**2) * rng.standard_normal((n, 3))
    b = np.hstack([b_lat, rng.standard_normal((n, 1))]) @ _mixing(rng, 4) - 1.0
    return a, b


def _mixing(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random invertible map with singular values in [1, 3] (well conditioned)."""
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.linspace(1.0, 3.0, d)


def test_canonical_correlations_of_a_constructed_pair() -> None:
    a, b = _constructed()
    model = fit_cca(a, b)
    assert model.rho.shape == (4,)
    np.testing.assert_allclose(model.rho[:3], RHO, atol=0.01)
    assert model.rho[3] < 0.03


def test_projections_whiten_each_view_and_correlate_pairwise_by_rho() -> None:
    a, b = _constructed(n=5000, seed=1)
    model = fit_cca(a, b)
    za, zb = model.transform_a(a), model.transform_b(b)
    n = len(a)
    np.testing.assert_allclose(za.T @ za / n, np.eye(4), atol=1e-4)  # U^T convention: view A is white
    np.testing.assert_allclose(zb.T @ zb / n, np.eye(4), atol=1e-4)
    np.testing.assert_allclose(za.T @ zb / n, np.diag(model.rho), atol=1e-4)
    # the U (not U^T) variant still whitens (U is square) but no longer pairs canonical variables by rho
    a0, b0 = a - a.mean(0), b - b.mean(0)
    r11 = inverse_sqrt(a0.T @ a0 / n + 1e-5 * np.eye(5))
    r22 = inverse_sqrt(b0.T @ b0 / n + 1e-5 * np.eye(4))
    u = np.linalg.svd(r11 @ (a0.T @ b0 / n) @ r22)[0]
    wrong = a0 @ (u @ r11).T
    cross = wrong.T @ zb / n  # [5, 4]
    assert np.abs(cross[:4] - np.diag(model.rho)).max() > 0.1


def test_matches_cca_zoo() -> None:
    cca_zoo = pytest.importorskip("cca_zoo.linear")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((300, 6))
    b = a[:, :3] @ rng.standard_normal((3, 5)) + rng.standard_normal((300, 5))
    ours = fit_cca(a, b, dims=3)
    ref = cca_zoo.CCA(n_components=3).fit([a, b])
    za, zb = ref.transform([a, b])
    ref_rho = [np.corrcoef(za[:, k], zb[:, k])[0, 1] for k in range(3)]
    np.testing.assert_allclose(ours.rho, ref_rho, atol=1e-4)
    # the same canonical directions up to sign
    for k in range(3):
        assert abs(np.corrcoef(ours.transform_a(a)[:, k], za[:, k])[0, 1]) > 0.9999


def test_rho_weighting_invariants() -> None:
    a, b = _constructed(n=2000, seed=3)
    model = fit_cca(a, b)
    sim = csa_similarity(model, a[:50], b[:60], sim_dim=3)
    cos = csa_similarity(model, a[:50], b[:60], sim_dim=3, equal_weights=True)
    assert sim.shape == (50, 60)
    assert np.all(np.abs(cos) <= 1 + 1e-9) and np.all(np.abs(sim) <= model.rho[0] + 1e-9)  # |sim| <= rho_1
    # equal weights = the plain cosine of the truncated canonical vectors
    za, zb = model.transform_a(a[:50])[:, :3], model.transform_b(b[:60])[:, :3]
    expected = (za / np.linalg.norm(za, axis=1, keepdims=True)) @ (zb / np.linalg.norm(zb, axis=1, keepdims=True)).T
    np.testing.assert_allclose(cos, expected, atol=1e-12)
    np.testing.assert_allclose(csa_weights(model, 3), model.rho[:3])
    # with s = 1 both similarities are +-1 times their weight: sign(z_a1 z_b1) * rho_1
    s1 = csa_similarity(model, a[:5], b[:5], sim_dim=1)
    np.testing.assert_allclose(np.abs(s1), model.rho[0], atol=1e-12)
    # CSA is invariant to an invertible affine change of either view's features (CCA is)
    rng = np.random.default_rng(4)
    t = _mixing(rng, 5)
    moved = fit_cca(a @ t + 7.0, b)
    np.testing.assert_allclose(csa_similarity(moved, a[:50] @ t + 7.0, b[:60], sim_dim=3), sim, atol=1e-4)


def test_methods_share_one_interface() -> None:
    a, b = _constructed(n=400, seed=5)
    cfg = AlignConfig(ridge=0.0, sim_dim=3, asif_k=50, steps=30, embed_dim=4)
    for name in ("csa", "cca", "asif", "contrastive"):
        fitted = fit_method(name, a, b, cfg, seed=0)
        sim = fitted.similarity(a[:20], b[:20])
        assert sim.shape == (20, 20)
        np.testing.assert_allclose(np.diag(sim), fitted.paired(a[:20], b[:20]), atol=1e-6)
        # aligned pairs score above shuffled ones on average: every method aligns the constructed views
        assert np.diag(sim).mean() > sim[~np.eye(20, dtype=bool)].mean(), name
    with pytest.raises(ValueError, match="unknown alignment method"):
        fit_method("clip", a, b, cfg)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="row-aligned"):
        fit_cca(np.zeros((5, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="NaN"):
        fit_cca(np.full((5, 2), np.nan), np.zeros((5, 2)))
