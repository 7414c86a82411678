"""The alignment methods behind one interface, and the unimodal PCA they all start from.

Every method is fitted on the same N row-aligned pairs and returns an :class:`Embedded` pair of maps:
``embed_a`` [n, d1] -> [n, m], ``embed_b`` [n, d2] -> [n, m] and per-dimension weights w [m], so that

    sim(a_i, b_j) = sum_k w_k embed_a(a)_ik embed_b(b)_jk

- ``csa``: CCA canonical variables, first s, unit-normalised, weighted by rho (canonical similarity analysis);
- ``cca``: the same vectors with w = 1 (plain cosine);
- ``asif``: relative representations against the N anchor pairs, w = 1;
- ``contrastive``: two linear maps trained with InfoNCE on the pairs (CLIP-like), w = 1; with a
  ``contrastive_grid`` its learning rate, weight decay, embedding size and steps are first chosen by K-fold
  held-out InfoNCE on the same N pairs (:func:`~components.alignment.contrastive.select_linear_pair`).

``fit_pca`` reduces each modality on its own (unpaired) data before alignment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from components.alignment.asif import fit_asif
from components.alignment.cca import csa_embed, csa_weights, fit_cca


@dataclass(frozen=True)
class AlignConfig:
    """Settings of all methods: CCA ridge (relative) and CSA dimension s; ASIF k and p; the contrastive
    model's embedding size, steps, learning rate and batch, or (``contrastive_grid`` non-empty) the
    (lr, weight decay, embedding size) candidates and step counts it is tuned over by
    ``contrastive_folds``-fold held-out InfoNCE on the pairs."""

    ridge: float = 0.1
    sim_dim: int = 16
    asif_k: int = 800
    asif_p: float = 8.0
    embed_dim: int = 16
    steps: int = 300
    lr: float = 1e-2
    batch_size: int = 256
    contrastive_grid: tuple[tuple[float, float, int], ...] = ()
    contrastive_checkpoints: tuple[int, ...] = (100, 300)
    contrastive_folds: int = 3


@dataclass(frozen=True)
class Embedded:
    """The two fitted maps and the weights of the similarity (see the module docstring)."""

    embed_a: Callable[[np.ndarray], np.ndarray]
    embed_b: Callable[[np.ndarray], np.ndarray]
    weights: np.ndarray | None = None
    chosen: dict[str, float] = field(default_factory=dict)  # settings a method chose on its pairs (tuning)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """[n_a, n_b] similarities of every a row with every b row."""
        ea, eb = self.embed_a(a), self.embed_b(b)
        return (ea * (1.0 if self.weights is None else self.weights)) @ eb.T

    def paired(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """[n] similarity of each aligned pair (a[i], b[i])."""
        ea, eb = self.embed_a(a), self.embed_b(b)
        return (ea * (1.0 if self.weights is None else self.weights) * eb).sum(1)


def _cca_method(equal_weights: bool) -> Callable[[np.ndarray, np.ndarray, AlignConfig, int], Embedded]:
    def fit(a: np.ndarray, b: np.ndarray, cfg: AlignConfig, seed: int) -> Embedded:
        model = fit_cca(a, b, ridge=cfg.ridge)
        s = min(cfg.sim_dim, len(model.rho))
        return Embedded(
            lambda x: csa_embed(model, a=x, sim_dim=s),
            lambda x: csa_embed(model, b=x, sim_dim=s),
            csa_weights(model, s, equal_weights),
        )

    return fit


def _asif(a: np.ndarray, b: np.ndarray, cfg: AlignConfig, seed: int) -> Embedded:
    model = fit_asif(a, b, k=cfg.asif_k, p=cfg.asif_p)
    return Embedded(model.embed_a, model.embed_b)


def _contrastive(a: np.ndarray, b: np.ndarray, cfg: AlignConfig, seed: int) -> Embedded:
    import torch

    from components.alignment.contrastive import PairSetting, select_linear_pair, train_linear_pair

    setting = PairSetting(cfg.lr, 0.0, cfg.embed_dim, cfg.steps)
    if cfg.contrastive_grid:
        setting, _ = select_linear_pair(
            a,
            b,
            cfg.contrastive_grid,
            cfg.contrastive_checkpoints,
            folds=cfg.contrastive_folds,
            batch_size=cfg.batch_size,
            seed=seed,
        )
    model = train_linear_pair(
        a,
        b,
        embed_dim=setting.embed_dim,
        steps=setting.steps,
        lr=setting.lr,
        batch_size=cfg.batch_size,
        weight_decay=setting.weight_decay,
        seed=seed,
    )

    def wrap(fn: Callable) -> Callable[[np.ndarray], np.ndarray]:
        def embed(x: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return fn(torch.as_tensor(x, dtype=torch.float32)).double().numpy()

        return embed

    chosen = {"lr": setting.lr, "weight_decay": setting.weight_decay, "embed_dim": setting.embed_dim}
    return Embedded(wrap(model.embed_a), wrap(model.embed_b), chosen={**chosen, "steps": setting.steps})


METHODS: dict[str, Callable[[np.ndarray, np.ndarray, AlignConfig, int], Embedded]] = {
    "csa": _cca_method(equal_weights=False),
    "cca": _cca_method(equal_weights=True),
    "asif": _asif,
    "contrastive": _contrastive,
}


def fit_method(name: str, a: np.ndarray, b: np.ndarray, cfg: AlignConfig, seed: int = 0) -> Embedded:
    """Fit method ``name`` (a key of :data:`METHODS`) on the pairs (a[i], b[i])."""
    if name not in METHODS:
        raise ValueError(f"unknown alignment method {name!r}; expected one of {tuple(METHODS)}")
    return METHODS[name](a, b, cfg, seed)


@dataclass(frozen=True)
class PCA:
    """Mean [d] and components [k, d] of one modality; ``apply`` gives (x - mean) components^T."""

    mean: np.ndarray
    components: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.mean) @ self.components.T


def fit_pca(x: np.ndarray, dim: int) -> PCA:
    """The top ``dim`` principal directions of ``x`` [n, d] (SVD of the centred data; at most min(n, d))."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(0)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    # a deterministic sign: the largest-magnitude entry of each direction is positive
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(1)])
    return PCA(mean=mean, components=(vt * signs[:, None])[: min(dim, len(vt))])
