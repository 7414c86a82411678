"""Training objectives for activity cliffs: plain MSE, the LAC recast (a reconstruction), and clsar's ACA loss.

All objectives share one signature, ``loss_fn(net, batch) -> (loss, extras)``, for
:func:`components.training.fit`; :func:`make_objective` picks one by name from :data:`OBJECTIVES`. A batch
(:class:`CliffBatches`) holds the inputs of M molecules: the first ``batch_size`` drawn uniformly from the
training set (``uniform`` marks them), then both ends of ``edge_batch`` edges drawn uniformly from the
training-only similarity graph. With ``r_i = (y_hat_i - y_i) / y_std`` (the label scale of the network):

* ``mse``:  ``L = mean_{i uniform} r_i^2``.
* ``lac`` (Learning with Activity Cliff as the brief reconstructs it; no official code was found):
  ``L = MSE + lambda_node * CE_node + lambda_edge * (BCE_edge + margin_term)`` where

  - node task: molecules are nodes; ``CE_node`` is the cross-entropy of the node head's logits against the
    molecule's ordinal potency bin (K quantile bins of the *training* labels, :func:`quantile_bin_edges`);
  - edge task: the edges are similar training pairs; ``BCE_edge`` is the binary cross-entropy of the edge
    head's logit against the pair's cliff flag (potency fold > 10), and for cliff edges
    ``margin_term = mean_{cliff edges} max(0, margin - ||z_i/|z_i| - z_j/|z_j| ||)`` pushes the normalised
    embeddings of a cliff pair at least ``margin`` apart (0 switches it off).
* ``aca``: clsar's activity-cliff-awareness loss (``clsar.model.loss.ACALoss``, the ACANet package): regression
  (MAE, or MSE with ``squared``) + ``alpha`` x a soft-margin triplet loss mined in the uniform batch, in
  MoleculeACE's label units; called as the package implements it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from components.molecules.encoders import CliffNet

Batch = dict[str, object]
LossFn = Callable[[nn.Module, Batch], tuple[Tensor, dict[str, Tensor]]]


# --------------------------------------------------------------------------------------------------
# node labels: ordinal potency bins
# --------------------------------------------------------------------------------------------------
def quantile_bin_edges(y: np.ndarray, n_bins: int) -> np.ndarray:
    """The ``n_bins - 1`` interior edges at the ``k / n_bins`` quantiles of ``y`` (the training labels)."""
    values = np.asarray(y, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or n_bins < 2:
        raise ValueError(f"need a non-empty 1-D array and n_bins >= 2, got shape {values.shape}, {n_bins}")
    return np.quantile(values, np.arange(1, n_bins) / n_bins)


def bin_labels(y: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each value: ``#{edges <= y}``, in ``0..len(edges)`` (ordinal: higher bin, higher potency label)."""
    return np.searchsorted(np.asarray(edges), np.asarray(y, dtype=np.float64), side="right").astype(np.int64)


# --------------------------------------------------------------------------------------------------
# batches: uniform molecules + edges of the training similarity graph
# --------------------------------------------------------------------------------------------------
class CliffBatches:
    """``batches(step, generator)`` for ``fit``: ``batch_size`` uniform training molecules and both ends of
    ``edge_batch`` uniform edges (none when ``edge_batch`` is 0 or the graph has no edge).

    The molecules come from ``fit``'s generator and the edges from a generator of their own, seeded by
    ``(edge_seed, step)``: objectives trained with the same seed see the same molecules at every step whether
    or not they draw edges, so their comparison is paired down to the batches.

    ``inputs(index)`` turns molecule indices into the encoder's input tensors (ECFP rows, or a graph batch);
    ``y``/``bins`` are the training labels and bins; ``src``/``dst``/``cliff`` the training graph's edges
    (indices into the training molecules)."""

    def __init__(
        self,
        inputs: Callable[[Tensor], dict[str, Tensor]],
        y: np.ndarray,
        bins: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        cliff: np.ndarray,
        batch_size: int,
        edge_batch: int,
        edge_seed: int = 0,
    ) -> None:
        self.inputs, self.n = inputs, len(y)
        self.y, self.bins = torch.as_tensor(y, dtype=torch.float32), torch.as_tensor(bins, dtype=torch.long)
        self.src, self.dst = torch.as_tensor(src, dtype=torch.long), torch.as_tensor(dst, dtype=torch.long)
        self.cliff = torch.as_tensor(cliff, dtype=torch.float32)
        if batch_size < 1 or edge_batch < 0:
            raise ValueError(f"batch_size must be >= 1 and edge_batch >= 0, got {batch_size}, {edge_batch}")
        self.batch_size = min(batch_size, self.n)
        self.edge_batch = edge_batch if self.src.numel() else 0
        self.edge_seed = edge_seed

    def __call__(self, step: int, generator: torch.Generator) -> Batch:
        uniform = torch.randint(0, self.n, (self.batch_size,), generator=generator)
        edge_generator = torch.Generator().manual_seed((self.edge_seed * 1_000_003 + step) % 2**63)
        edges = torch.randint(0, max(self.src.numel(), 1), (self.edge_batch,), generator=edge_generator)
        index = torch.cat([uniform, self.src[edges], self.dst[edges]])
        b, e = self.batch_size, self.edge_batch
        return {
            "inputs": self.inputs(index),
            "y": self.y[index],
            "bin": self.bins[index],
            "uniform": torch.arange(index.numel()) < b,
            "edge_src": torch.arange(b, b + e),
            "edge_dst": torch.arange(b + e, b + 2 * e),
            "edge_cliff": self.cliff[edges],
        }


# --------------------------------------------------------------------------------------------------
# objectives
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LacConfig:
    """Weights of the LAC tasks; ``margin`` on unit-normalised embeddings (in [0, 2]; 0: no push)."""

    lambda_node: float = 1.0
    lambda_edge: float = 1.0
    margin: float = 0.5


@dataclass(frozen=True)
class AcaConfig:
    """clsar's ``ACALoss`` arguments (its defaults: alpha 0.1, cliffs at 1 log unit, MAE regression)."""

    alpha: float = 0.1
    cliff_lower: float = 1.0
    cliff_upper: float = 1.0
    squared: bool = False


def _standard_residual(net: CliffNet, pred: Tensor, y: Tensor) -> Tensor:
    return (pred - y) / net.cfg.y_std


def mse_objective(net: CliffNet, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
    pred, _ = net(batch["inputs"])
    keep = batch["uniform"]
    mse = _standard_residual(net, pred[keep], batch["y"][keep]).pow(2).mean()
    return mse, {"mse": mse.detach()}


def lac_objective(cfg: LacConfig) -> LossFn:
    """MSE + node task + edge task (module docstring)."""

    def loss(net: CliffNet, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        pred, z = net(batch["inputs"])
        keep = batch["uniform"]
        mse = _standard_residual(net, pred[keep], batch["y"][keep]).pow(2).mean()
        logits = net.node_logits(z[keep])
        node_ce = nn.functional.cross_entropy(logits, batch["bin"][keep])
        total = mse + cfg.lambda_node * node_ce
        extras = {
            "mse": mse.detach(),
            "node_ce": node_ce.detach(),
            "node_acc": (logits.argmax(-1) == batch["bin"][keep]).float().mean(),
        }
        src, dst, cliff = batch["edge_src"], batch["edge_dst"], batch["edge_cliff"]
        if src.numel():
            edge_logit = net.edge_logits(z[src], z[dst])
            edge_bce = nn.functional.binary_cross_entropy_with_logits(edge_logit, cliff)
            gap = (nn.functional.normalize(z[src], dim=-1) - nn.functional.normalize(z[dst], dim=-1)).norm(dim=-1)
            push = torch.relu(cfg.margin - gap[cliff > 0.5])
            margin_term = push.mean() if push.numel() else gap.sum() * 0.0
            total = total + cfg.lambda_edge * (edge_bce + margin_term)
            extras |= {
                "edge_bce": edge_bce.detach(),
                "margin": margin_term.detach(),
                "edge_acc": ((edge_logit > 0).float() == cliff).float().mean(),
            }
        return total, extras

    return loss


def _clsar_loss() -> type[nn.Module]:
    """clsar's ``ACALoss``. Importing clsar runs its package ``__init__``, which calls
    ``seaborn.set(font_scale=2)`` and so restyles every later matplotlib figure of the process: matplotlib's
    settings are restored around the import."""
    import matplotlib

    saved = matplotlib.rcParams.copy()
    try:
        from clsar.model.loss import ACALoss
    finally:
        with warnings.catch_warnings():  # some saved keys are deprecated aliases
            warnings.simplefilter("ignore")
            matplotlib.rcParams.update(saved)
    return ACALoss


def aca_objective(cfg: AcaConfig) -> LossFn:
    """clsar's ``ACALoss`` on the uniform molecules (labels and predictions in -log10 nM)."""
    ACALoss = _clsar_loss()
    with warnings.catch_warnings():  # ACALoss hands alpha to torch's _Loss as its legacy size_average argument
        warnings.simplefilter("ignore", UserWarning)
        aca = ACALoss(alpha=cfg.alpha, cliff_lower=cfg.cliff_lower, cliff_upper=cfg.cliff_upper, squared=cfg.squared)

    def loss(net: CliffNet, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        pred, z = net(batch["inputs"])
        keep = batch["uniform"]
        total = aca(labels=batch["y"][keep], predictions=pred[keep], embeddings=z[keep])
        mse = _standard_residual(net, pred[keep], batch["y"][keep]).pow(2).mean()
        return total, {"mse": mse.detach()}

    return loss


OBJECTIVES: dict[str, Callable[[LacConfig, AcaConfig], LossFn]] = {
    "mse": lambda lac, aca: mse_objective,
    "lac": lambda lac, aca: lac_objective(lac),
    "aca": lambda lac, aca: aca_objective(aca),
}
USES_EDGES = frozenset({"lac"})  # objectives that read the similarity graph's edges


def make_objective(name: str, lac: LacConfig = LacConfig(), aca: AcaConfig = AcaConfig()) -> LossFn:
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; known: {sorted(OBJECTIVES)}")
    return OBJECTIVES[name](lac, aca)


@torch.no_grad()
def predict(net: CliffNet, inputs: Callable[[Tensor], dict[str, Tensor]], n: int, chunk: int = 512) -> np.ndarray:
    """``[n]`` predictions (-log10 nM) of molecules ``0..n-1`` in eval mode, ``chunk`` at a time."""
    was = net.training
    net.eval()
    try:
        out = [net(inputs(torch.arange(i, min(i + chunk, n))))[0] for i in range(0, n, chunk)]
    finally:
        net.train(was)
    return torch.cat(out).double().numpy() if out else np.zeros(0)
