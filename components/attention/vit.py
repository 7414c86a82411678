"""The tiny ViT of :mod:`components.models.vit` with its attention replaced by a topologically masked one.

``TopoViT(cfg, seed)`` builds ``TinyViT`` (mean pooling: no CLS token, so the tokens are exactly the nodes of the
patch grid) from ``seed`` and swaps each block's attention for ``GraphSelfAttention``, copying its q/k/v/out
projections, so every variant with the same seed starts from the same weights. Per layer, the mask's modulation
``f = softplus(f_raw)`` (shared by the heads, ``f >= 0`` so the mask is nonnegative) is learned, starting at
``f_k = 2^-k``. GRF walks are drawn afresh at every training forward (from torch's global RNG, seeded by the
training loop) and from a fixed generator in eval mode, so evaluation is deterministic.

``GraphSelfAttention`` also takes a ``GraphBatch`` per forward (one graph per sample, as for point clouds): the
exact mask is then one [n, n] block per sample, and the GRF variant walks the batch's disjoint union at once
(no walk leaves its own graph; the two walk sets are sampled once per batch and shared by the layers, each
applying its own modulation) and applies its features as one dense [n, n] block per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.attention.graphs import Graph, GraphBatch, grid_edge_index
from components.attention.linear import ATTENTIONS, GrfMask, PerformerFeatures, ReluFeatures
from components.attention.masks import exact_mask, exact_masks, sample_grf
from components.models.vit import TinyViT, TinyViTConfig

__all__ = ["FEATURE_MAPS", "GraphSelfAttention", "MaskedAttentionConfig", "TopoViT", "TopoViTConfig"]

FEATURE_MAPS = ("relu", "performer")
#: up to this many nodes the GRF features are applied densely (through the estimated mask): the same output,
#: faster than the sparse products for a few dozen tokens.
DENSE_GRF_NODES = 256


@dataclass(frozen=True)
class MaskedAttentionConfig:
    """The transformer and attention settings every topologically masked model shares."""

    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    mlp_ratio: int = 2
    n_classes: int = 10
    attention: str = "grf_mask"  # a key of ATTENTIONS
    feature_map: str = "relu"  # "relu" or "performer" (linear variants only)
    n_features: int = 32  # Performer random features per head
    k_max: int = 4  # modulation f_0 .. f_K (mask degree 2K)
    n_walks: int = 16
    p_halt: float = 0.3
    eval_seed: int = 0

    def __post_init__(self) -> None:
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {tuple(ATTENTIONS)}, got {self.attention!r}")
        if self.feature_map not in FEATURE_MAPS:
            raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {self.feature_map!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")


@dataclass(frozen=True)
class TopoViTConfig(MaskedAttentionConfig):
    image_size: int = 28
    patch_size: int = 4
    channels: int = 1

    @property
    def grid(self) -> int:
        return self.image_size // self.patch_size

    def vit(self) -> TinyViTConfig:
        return TinyViTConfig(
            image_size=self.image_size,
            patch_size=self.patch_size,
            channels=self.channels,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            mlp_ratio=self.mlp_ratio,
            n_classes=self.n_classes,
            pool="mean",
        )


class GraphSelfAttention(nn.Module):
    """Multi-head self-attention over the nodes of ``graph`` (or of the ``GraphBatch`` given to ``forward``),
    computed by ``ATTENTIONS[cfg.attention]``."""

    def __init__(self, cfg: MaskedAttentionConfig, graph: Graph | None, seed: int) -> None:
        super().__init__()
        self.cfg, self.graph, self.n_heads = cfg, graph, cfg.n_heads
        d = cfg.d_model
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)
        f0 = torch.tensor([2.0**-k for k in range(cfg.k_max + 1)])
        self.f_raw = nn.Parameter(torch.log(torch.expm1(f0)))
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("projection", torch.randn(d // cfg.n_heads, cfg.n_features, generator=gen))

    def modulation(self) -> Tensor:
        return F.softplus(self.f_raw)

    def features(self) -> ReluFeatures | PerformerFeatures:
        return PerformerFeatures(self.projection) if self.cfg.feature_map == "performer" else ReluFeatures()

    def mask(self, device: torch.device, graphs: GraphBatch | None = None) -> object:
        """The layer's mask for one forward, built on the CPU (walks, power series) and moved to ``device``:
        [N, N] for the fixed graph, [B, 1, n, n] for a batch (exact); the GRF factors of the fixed graph or of
        the batch's disjoint union."""
        cfg, f = self.cfg, self.modulation().cpu()
        if cfg.attention not in ("exact_mask", "grf_mask"):
            return None
        if graphs is None and self.graph is None:
            raise ValueError("GraphSelfAttention without a fixed graph needs the batch's graphs")
        if cfg.attention == "exact_mask":
            return (
                exact_mask(self.graph, f).to(device)
                if graphs is None
                else exact_masks(graphs, f).unsqueeze(1).to(device)
            )
        else:
            graph = self.graph if graphs is None else graphs.union
            gen = None if self.training else torch.Generator().manual_seed(cfg.eval_seed)
            if graphs is not None:  # one pair of walk sets per batch, shared by the layers
                key = (cfg.n_walks, cfg.p_halt, cfg.k_max, self.training)
                if key not in graphs.walks:
                    graphs.walks[key] = [sample_grf(graph, cfg.n_walks, cfg.p_halt, cfg.k_max, gen) for _ in range(2)]
                a, b = graphs.walks[key]
                return GrfMask(a.blocks(f, graphs.size).to(device), b.blocks(f, graphs.size).to(device))
            a, b = (sample_grf(graph, cfg.n_walks, cfg.p_halt, cfg.k_max, gen) for _ in range(2))
            if graph.n <= DENSE_GRF_NODES:
                return GrfMask(a.dense(f).to(device), b.dense(f).to(device))
            return GrfMask(a.matrix(f).to(device), b.matrix(f).to(device))

    def forward(self, h: Tensor, graphs: GraphBatch | None = None) -> Tensor:
        b, t, d = h.shape

        def heads(x: Tensor) -> Tensor:
            return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)

        out = ATTENTIONS[self.cfg.attention](
            heads(self.q_proj(h)),
            heads(self.k_proj(h)),
            heads(self.v_proj(h)),
            self.mask(h.device, graphs),
            self.features(),
        )
        return self.out_proj(out.transpose(1, 2).reshape(b, t, d))


class TopoViT(nn.Module):
    """``TinyViT`` on the patch grid with graph-masked attention: ``forward(x)`` -> logits [B, n_classes]."""

    def __init__(self, cfg: TopoViTConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.vit = TinyViT(cfg.vit(), seed=seed)
        graph = Graph.from_edge_index(grid_edge_index(cfg.grid, cfg.grid), cfg.grid**2)
        for i, block in enumerate(self.vit.blocks):
            attn = GraphSelfAttention(cfg, graph, seed=seed * 1000 + i)
            attn.load_state_dict(block.attn.state_dict(), strict=False)
            block.attn = attn

    def masks(self) -> list[Tensor]:
        """Each layer's modulation ``f`` (detached)."""
        return [block.attn.modulation().detach() for block in self.vit.blocks]

    def forward(self, x: Tensor) -> Tensor:
        return self.vit(x)
