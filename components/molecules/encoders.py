"""The base encoders (ECFP-MLP, GIN) and the network with the three heads of the LAC reconstruction.

``CliffNet(cfg)`` maps a batch of molecules to an embedding ``z [B, embed]`` with one of two encoders
(the same signature, chosen by name from :data:`ENCODERS`):

* ``ecfp_mlp``: ECFP bits ``[B, n_bits]`` -> Linear(n_bits, hidden) -> ReLU -> Linear(hidden, embed) -> ReLU
  (the brief's 2048 -> 256 -> 128 MLP, on MoleculeACE's 1024 bits by default);
* ``gin``: ``from_smiles`` atoms -> :class:`AtomEncoder` (gin_dim) -> torch-geometric's ``GIN``
  (gin_layers GINConv layers, width gin_dim) -> sum pooling per molecule -> Linear(gin_dim, embed) -> ReLU.

and three heads on ``z``:

* regression: ``y_hat = y_mean + y_std * Linear(embed, 1)(z)`` (the label scale is part of the model, so the
  saved weights predict in MoleculeACE's units, -log10 nM);
* node task: ``Linear(embed, n_bins)`` logits of the ordinal potency bin;
* edge task: ``g(z_i, z_j) = (h([z_i, z_j, |z_i - z_j|]) + h([z_j, z_i, |z_i - z_j|])) / 2`` with ``h`` a
  one-hidden-layer MLP: the logit that the similar pair (i, j) is an activity cliff, symmetric in i and j.

``forward(inputs) -> (y_hat [B], z [B, embed])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from components.molecules.graphs import AtomEncoder

EncoderName = Literal["ecfp_mlp", "gin"]


@dataclass(frozen=True)
class CliffNetConfig:
    """Shape of :class:`CliffNet` (saved with its weights)."""

    encoder: EncoderName
    n_bits: int = 1024
    hidden: int = 256
    embed: int = 128
    gin_dim: int = 64
    gin_layers: int = 3
    n_bins: int = 8
    edge_hidden: int = 64
    y_mean: float = 0.0
    y_std: float = 1.0

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {sorted(ENCODERS)}, got {self.encoder!r}")
        for name in ("n_bits", "hidden", "embed", "gin_dim", "gin_layers", "edge_hidden"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"CliffNetConfig.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if self.n_bins < 2:
            raise ValueError(f"CliffNetConfig.n_bins must be >= 2, got {self.n_bins}")
        if not self.y_std > 0:
            raise ValueError(f"CliffNetConfig.y_std must be > 0, got {self.y_std}")


class EcfpMLP(nn.Module):
    """``{"bits": [B, n_bits]} -> z [B, embed]``."""

    def __init__(self, cfg: CliffNetConfig) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(cfg.n_bits, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.embed), nn.ReLU()
        )

    def forward(self, inputs: dict[str, Tensor]) -> Tensor:
        return self.net(inputs["bits"].float())


class GINEncoder(nn.Module):
    """``{"atoms" [n, 9], "edge_index" [2, e], "graph" [n]} -> z [B, embed]``, B = number of molecules."""

    def __init__(self, cfg: CliffNetConfig) -> None:
        super().__init__()
        from torch_geometric.nn.models import GIN

        self.atoms = AtomEncoder(cfg.gin_dim)
        self.gin = GIN(cfg.gin_dim, cfg.gin_dim, num_layers=cfg.gin_layers)
        self.out = nn.Sequential(nn.Linear(cfg.gin_dim, cfg.embed), nn.ReLU())

    def forward(self, inputs: dict[str, Tensor]) -> Tensor:
        from torch_geometric.nn import global_add_pool

        graph = inputs["graph"]
        h = self.gin(self.atoms(inputs["atoms"]), inputs["edge_index"])
        return self.out(global_add_pool(h, graph, size=int(graph.max()) + 1))


ENCODERS: dict[str, type[nn.Module]] = {"ecfp_mlp": EcfpMLP, "gin": GINEncoder}


class CliffNet(nn.Module):
    """Encoder + regression, node (ordinal bin) and edge (cliff) heads; see the module docstring."""

    def __init__(self, cfg: CliffNetConfig, seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        state = torch.random.get_rng_state()
        if seed is not None:
            torch.manual_seed(seed)
        try:
            self.encoder = ENCODERS[cfg.encoder](cfg)
            self.regress = nn.Linear(cfg.embed, 1)
            self.node = nn.Linear(cfg.embed, cfg.n_bins)
            self.edge = nn.Sequential(
                nn.Linear(3 * cfg.embed, cfg.edge_hidden), nn.ReLU(), nn.Linear(cfg.edge_hidden, 1)
            )
        finally:
            if seed is not None:
                torch.random.set_rng_state(state)

    def forward(self, inputs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        z = self.encoder(inputs)
        return self.cfg.y_mean + self.cfg.y_std * self.regress(z).squeeze(-1), z

    def node_logits(self, z: Tensor) -> Tensor:
        """``[B, n_bins]`` logits of the ordinal potency bin."""
        return self.node(z)

    def edge_logits(self, z_i: Tensor, z_j: Tensor) -> Tensor:
        """``[E]`` logits that each pair is a cliff; symmetric: ``edge_logits(a, b) == edge_logits(b, a)``."""
        gap = (z_i - z_j).abs()
        return 0.5 * (self.edge(torch.cat([z_i, z_j, gap], -1)) + self.edge(torch.cat([z_j, z_i, gap], -1))).squeeze(-1)
