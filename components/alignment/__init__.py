"""Aligning two frozen unimodal feature spaces from few pairs: CCA and CSA's rho-weighted canonical similarity
(:mod:`components.alignment.cca`), ASIF's relative representations (:mod:`~components.alignment.asif`), a
CLIP-like pair of linear maps trained contrastively (:mod:`~components.alignment.contrastive`), and the common
interface the pipeline fits them through (:mod:`~components.alignment.methods`)."""

from components.alignment.asif import Asif, fit_asif
from components.alignment.cca import CCAModel, csa_embed, csa_similarity, csa_weights, fit_cca, inverse_sqrt
from components.alignment.methods import METHODS, PCA, AlignConfig, Embedded, fit_method, fit_pca

__all__ = [
    "METHODS",
    "PCA",
    "AlignConfig",
    "Asif",
    "CCAModel",
    "Embedded",
    "csa_embed",
    "csa_similarity",
    "csa_weights",
    "fit_asif",
    "fit_cca",
    "fit_method",
    "fit_pca",
    "inverse_sqrt",
]
