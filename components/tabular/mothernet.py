"""MotherNet: a transformer over a dataset's training rows that writes the weights of a small child MLP.

Shapes (B datasets, n training rows, m held-out rows, F padded features, C = ``max_classes``, E = ``emsize``):

* **embedding**: every training row is one token, ``Linear(x) + OneHotLinear(y)`` -> ``(B, n, E)``; no positional
  encoding, so the encoder is permutation-equivariant over rows;
* **encoder**: ``layers`` post-norm transformer layers (``heads`` heads, feed-forward ``ff``, no dropout), the
  attention and feed-forward output projections zero-initialised (TabPFN's init: every layer starts as the
  identity);
* **class-average decoder**: the mean token of every class (an absent class: zeros) -> ``(B, C, E)``, flattened,
  then ``Linear -> GELU -> Linear`` (hidden ``decoder_hidden``) emits the flat child-weight vector;
* **child** (one hidden layer of ``child_hidden`` units, ReLU): a low-rank first layer
  ``W1 = A @ S`` with the per-dataset factor ``A (F, rank)`` written by the decoder and the learned shared
  factor ``S (rank, child_hidden)``; bias ``b1``, output layer ``W2 (child_hidden, C)``, ``b2`` written too.

Training loss (:func:`prior_loss`): cross-entropy of the generated child on each dataset's held-out rows, the
logits of classes the dataset lacks masked out, backpropagated through the generated weights into the
hypernetwork. :func:`write_child` turns one dataset's generated weights into a :class:`ChildMLP`, a plain
``nn.Module`` that carries its input preprocessing as buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

MASKED_LOGIT = -1e4  # logit of a class the dataset does not have (finite, so bf16 stays finite)


@dataclass(frozen=True)
class MotherNetConfig:
    """Sizes of the hypernetwork and of the child it writes."""

    max_features: int = 10
    max_classes: int = 10
    emsize: int = 64
    layers: int = 2
    heads: int = 2
    ff: int = 128
    decoder_hidden: int = 256
    child_hidden: int = 32
    rank: int = 8

    def __post_init__(self) -> None:
        for name in ("max_features", "emsize", "layers", "heads", "ff", "decoder_hidden", "child_hidden", "rank"):
            if getattr(self, name) < 1:
                raise ValueError(f"MotherNetConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_classes < 2:
            raise ValueError(f"MotherNetConfig.max_classes must be >= 2, got {self.max_classes}")
        if self.emsize % self.heads:
            raise ValueError(f"emsize {self.emsize} is not divisible by heads {self.heads}")

    @property
    def generated_sizes(self) -> dict[str, tuple[int, ...]]:
        """The per-dataset tensors the decoder writes, in the order of its flat output."""
        return {
            "factor": (self.max_features, self.rank),
            "b1": (self.child_hidden,),
            "w2": (self.child_hidden, self.max_classes),
            "b2": (self.max_classes,),
        }

    @property
    def n_generated(self) -> int:
        return sum(math.prod(s) for s in self.generated_sizes.values())


class MotherNet(nn.Module):
    """The hypernetwork; ``forward(x_train, y_train)`` returns the child weights of every dataset."""

    def __init__(self, cfg: MotherNetConfig = MotherNetConfig(), seed: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        if seed is not None:
            torch.manual_seed(seed)
        self.x_embed = nn.Linear(cfg.max_features, cfg.emsize)
        self.y_embed = nn.Embedding(cfg.max_classes, cfg.emsize)  # a one-hot linear map without bias
        layer = nn.TransformerEncoderLayer(
            cfg.emsize, cfg.heads, cfg.ff, dropout=0.0, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        for block in self.encoder.layers:  # TabPFN's zero-init of the output projections
            nn.init.zeros_(block.self_attn.out_proj.weight), nn.init.zeros_(block.self_attn.out_proj.bias)
            nn.init.zeros_(block.linear2.weight), nn.init.zeros_(block.linear2.bias)
        self.decoder = nn.Sequential(
            nn.Linear(cfg.max_classes * cfg.emsize, cfg.decoder_hidden),
            nn.GELU(),
            nn.Linear(cfg.decoder_hidden, cfg.n_generated),
        )
        self.shared_factor = nn.Parameter(torch.randn(cfg.rank, cfg.child_hidden) / math.sqrt(cfg.rank))

    def forward(self, x_train: Tensor, y_train: Tensor) -> dict[str, Tensor]:
        """``x_train (B, n, F)`` float, ``y_train (B, n)`` int in ``0..C-1`` -> ``{"w1" (B, F, H), "b1" (B, H),
        "w2" (B, H, C), "b2" (B, C)}`` with H = ``child_hidden``."""
        cfg = self.cfg
        tokens = self.x_embed(x_train) + self.y_embed(y_train)
        encoded = self.encoder(tokens)
        onehot = F.one_hot(y_train, cfg.max_classes).to(encoded.dtype)  # (B, n, C)
        counts = onehot.sum(dim=1).clamp(min=1.0)  # (B, C)
        means = torch.einsum("bnc,bne->bce", onehot, encoded) / counts[..., None]
        flat = self.decoder(means.flatten(1))
        parts, start = {}, 0
        for name, shape in cfg.generated_sizes.items():
            size = math.prod(shape)
            parts[name] = flat[:, start : start + size].reshape(flat.shape[0], *shape)
            start += size
        return {"w1": parts["factor"] @ self.shared_factor, "b1": parts["b1"], "w2": parts["w2"], "b2": parts["b2"]}


def child_logits(weights: dict[str, Tensor], x: Tensor, n_classes: Tensor | None = None) -> Tensor:
    """The generated children applied to ``x (B, m, F)`` -> logits ``(B, m, C)``; with ``n_classes (B,)`` the
    logits of classes ``>= n_classes`` are :data:`MASKED_LOGIT`."""
    hidden = torch.relu(torch.baddbmm(weights["b1"][:, None, :], x, weights["w1"]))
    logits = torch.baddbmm(weights["b2"][:, None, :], hidden, weights["w2"])
    if n_classes is not None:
        absent = torch.arange(logits.shape[-1], device=x.device)[None, None, :] >= n_classes[:, None, None]
        logits = logits.masked_fill(absent, MASKED_LOGIT)
    return logits


def prior_loss(model: MotherNet, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
    """Cross-entropy of the generated children on the held-out rows of a prior batch (the training loss),
    with the held-out accuracy as an extra metric."""
    weights = model(batch["x_train"], batch["y_train"])
    logits = child_logits(weights, batch["x_test"], batch["n_classes"]).float()
    loss = F.cross_entropy(logits.flatten(0, 1), batch["y_test"].flatten())
    accuracy = (logits.argmax(-1) == batch["y_test"]).float().mean()
    return loss, {"accuracy": accuracy.detach()}


@dataclass(frozen=True)
class ChildConfig:
    """A child MLP: ``n_inputs`` raw features -> affine preprocessing to ``width`` -> ``hidden`` ReLU units ->
    ``n_classes`` logits; preprocessed values are clipped to ``±clip``."""

    n_inputs: int
    width: int
    hidden: int
    n_classes: int
    clip: float = 100.0


class ChildMLP(nn.Module):
    """The network MotherNet writes: ``logits = W2 relu(W1 clip((x - center) @ projection) + b1) + b2``.

    ``center`` and ``projection`` (buffers) hold the training rows' standardisation (and, when there are more
    features than the hypernetwork reads, the PCA projection) and the zero padding; it is a plain module whose
    ``state_dict`` is all there is to save."""

    def __init__(self, cfg: ChildConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.register_buffer("center", torch.zeros(cfg.n_inputs))
        self.register_buffer("projection", torch.zeros(cfg.n_inputs, cfg.width))
        self.hidden = nn.Linear(cfg.width, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.n_classes)

    def forward(self, x: Tensor) -> Tensor:
        z = ((x - self.center) @ self.projection).clamp(-self.cfg.clip, self.cfg.clip)
        return self.out(torch.relu(self.hidden(z)))

    @torch.no_grad()
    def predict_proba(self, x: Tensor) -> Tensor:
        return torch.softmax(self.forward(x), dim=-1)


def write_child(
    weights: dict[str, Tensor], index: int, n_classes: int, center: Tensor, projection: Tensor, clip: float = 100.0
) -> ChildMLP:
    """Dataset ``index``'s generated weights as a :class:`ChildMLP` over its first ``n_classes`` classes, with the
    preprocessing ``center (d,)`` / ``projection (d, F)``."""
    w1, w2 = weights["w1"][index].detach(), weights["w2"][index].detach()
    child = ChildMLP(
        ChildConfig(n_inputs=center.shape[0], width=w1.shape[0], hidden=w1.shape[1], n_classes=n_classes, clip=clip)
    )
    child.load_state_dict(
        {
            "center": center.float(),
            "projection": projection.float(),
            "hidden.weight": w1.T.contiguous().float(),
            "hidden.bias": weights["b1"][index].detach().float(),
            "out.weight": w2[:, :n_classes].T.contiguous().float(),
            "out.bias": weights["b2"][index, :n_classes].detach().float(),
        }
    )
    return child.eval()
