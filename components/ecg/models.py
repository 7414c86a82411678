"""HeartLang's models at any size: the heartbeat-token transformer, VQ-HBR and the masked ECG-sentence model.

`TokenTransformer` embeds every heartbeat token (a linear map of its ``token_len`` samples) and adds a position,
a lead (``in_chans``) and a time (``in_times``) embedding, then runs pre-norm transformer encoder layers with
padding (``in_chans == 0``) masked out of attention.

`VQHBR` (the tokenizer model): encoder transformer -> 2-layer MLP to ``code_dim`` -> NormEMA quantiser ->
linear up-projection -> decoder transformer -> linear head reconstructing each token's samples;
loss = commitment + MSE on the non-padding tokens. With ``VQHBRConfig.content_only`` the encoder adds no
position, lead or time embedding (it sees the heartbeats and, through attention, the sentence's other beats),
so a code says what a beat looks like, not where it sits: the official pretraining codes its targets without
lead or time inputs (``get_codebook_indices(samples)``), and codes computed with them follow almost entirely
from the side inputs at small scale (H(code | lead, time) 0.67 of 5.17 bits), which makes the masked task
solvable without reading a heartbeat. The decoder keeps the side inputs.

`MaskedSentenceModel` ("HeartLang"): the same transformer; a random ``mask_ratio`` of every sentence's real tokens
have their token embedding replaced by a learned mask token, and a linear head predicts the frozen VQ-HBR code
of each masked token (cross-entropy). `features` mean-pools the final states over the real tokens (the linear
probe's input).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from components.ecg.quantizer import NormEMAQuantizer
from components.ecg.tokenizer import TIME_VOCAB, TOKEN_LEN


@dataclass(frozen=True)
class TransformerConfig:
    dim: int = 64
    depth: int = 2
    heads: int = 2
    mlp: int = 128
    dropout: float = 0.0
    max_len: int = 256
    token_len: int = TOKEN_LEN
    leads: int = 12


class TokenTransformer(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.token = nn.Linear(cfg.token_len, cfg.dim)
        self.pos = nn.Embedding(cfg.max_len, cfg.dim)
        self.lead = nn.Embedding(cfg.leads + 1, cfg.dim)
        self.time = nn.Embedding(TIME_VOCAB, cfg.dim)
        layer = nn.TransformerEncoderLayer(cfg.dim, cfg.heads, cfg.mlp, cfg.dropout, batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, cfg.depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.dim)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.token(tokens)

    def forward(
        self, h: torch.Tensor, in_chans: torch.Tensor, in_times: torch.Tensor, side: bool = True
    ) -> torch.Tensor:
        """``h`` (B, L, dim) token embeddings -> final states (B, L, dim); ``side=False`` leaves out the position,
        lead and time embeddings (``in_chans`` still marks the padding)."""
        if side:
            pos = torch.arange(h.shape[1], device=h.device)
            h = h + self.pos(pos)[None] + self.lead(in_chans.long()) + self.time(in_times.long())
        pad = in_chans == 0
        pad = pad & ~pad.all(-1, keepdim=True)  # an all-padding sentence attends to itself (no NaN)
        return self.norm(self.layers(h, src_key_padding_mask=pad))


@dataclass(frozen=True)
class VQHBRConfig:
    encoder: TransformerConfig = TransformerConfig()
    decoder_depth: int = 2
    num_codes: int = 64
    code_dim: int = 16
    decay: float = 0.99
    beta: float = 1.0
    content_only: bool = False  # the encoder (and so the codes) without position, lead and time embeddings


class VQHBR(nn.Module):
    def __init__(self, cfg: VQHBRConfig) -> None:
        super().__init__()
        self.cfg = cfg
        e = cfg.encoder
        self.encoder = TokenTransformer(e)
        self.to_code = nn.Sequential(nn.Linear(e.dim, e.dim), nn.Tanh(), nn.Linear(e.dim, cfg.code_dim))
        self.quantizer = NormEMAQuantizer(cfg.num_codes, cfg.code_dim, cfg.decay, cfg.beta)
        self.from_code = nn.Linear(cfg.code_dim, e.dim)
        self.decoder = TokenTransformer(TransformerConfig(**{**e.__dict__, "depth": cfg.decoder_depth}))
        self.head = nn.Linear(e.dim, e.token_len)

    def encode(self, data: torch.Tensor, in_chans: torch.Tensor, in_times: torch.Tensor):
        h = self.encoder(self.encoder.embed(data), in_chans, in_times, side=not self.cfg.content_only)
        return self.quantizer(self.to_code(h), in_chans > 0)

    def forward(self, data, in_chans, in_times) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(reconstruction, commitment loss, codes)``."""
        z_q, commit, codes = self.encode(data, in_chans, in_times)
        return self.head(self.decoder(self.from_code(z_q), in_chans, in_times)), commit, codes

    @torch.no_grad()
    def tokenize(self, data, in_chans, in_times) -> torch.Tensor:
        """Code index of every token (B, L); -1 on padding."""
        was = self.training
        self.eval()
        _, _, codes = self.encode(data, in_chans, in_times)
        self.train(was)
        return torch.where(in_chans > 0, codes, -1)


def vqhbr_loss(model: VQHBR, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Commitment + MSE over the real tokens; logs both and the share of codes used in the batch."""
    data, chans, times = batch
    recon, commit, codes = model(data, chans, times)
    real = chans > 0
    mse = ((recon.float() - data) ** 2).mean(-1)[real].mean()
    used = torch.unique(codes[real]).numel() / model.cfg.num_codes
    return commit + mse, {"mse": mse.detach(), "commit": commit.detach(), "code_usage": used}


@dataclass(frozen=True)
class MaskedConfig:
    backbone: TransformerConfig = TransformerConfig()
    num_codes: int = 64
    mask_ratio: float = 0.5


class MaskedSentenceModel(nn.Module):
    def __init__(self, cfg: MaskedConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = TokenTransformer(cfg.backbone)
        self.mask_token = nn.Parameter(torch.zeros(cfg.backbone.dim))
        nn.init.trunc_normal_(self.mask_token, std=0.02)
        self.head = nn.Linear(cfg.backbone.dim, cfg.num_codes)

    def forward(self, data, in_chans, in_times, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.backbone.embed(data)
        if mask is not None:
            h = torch.where(mask[..., None], self.mask_token.to(h.dtype), h)
        return self.head(self.backbone(h, in_chans, in_times))

    @torch.no_grad()
    def features(self, data, in_chans, in_times) -> torch.Tensor:
        """Mean of the final states over the real tokens (B, dim)."""
        was = self.training
        self.eval()
        h = self.backbone(self.backbone.embed(data), in_chans, in_times)
        self.train(was)
        real = (in_chans > 0).to(h.dtype)[..., None]
        return (h * real).sum(1) / real.sum(1).clamp(min=1)


def random_mask(in_chans: torch.Tensor, ratio: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Mask exactly round(ratio * n_real) of each sentence's real tokens (at least one), uniformly at random."""
    real = in_chans > 0
    noise = torch.rand(in_chans.shape, generator=generator, device="cpu").to(in_chans.device)
    noise = torch.where(real, noise, torch.full_like(noise, 2.0))
    rank = noise.argsort(-1).argsort(-1)
    k = (real.sum(-1, keepdim=True).float() * ratio).round().clamp(min=1)
    return real & (rank < k)


def masked_loss(model: MaskedSentenceModel, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Cross-entropy on the masked tokens' VQ-HBR codes; ``batch = (data, chans, times, codes, mask)``."""
    data, chans, times, codes, mask = batch
    logits = model(data, chans, times, mask)
    loss = F.cross_entropy(logits[mask].float(), codes[mask].long())
    accuracy = (logits[mask].argmax(-1) == codes[mask]).float().mean()
    return loss, {"masked_accuracy": accuracy.detach()}


@torch.no_grad()
def batched(fn, sentences, batch: int = 256) -> torch.Tensor:
    """``fn(data, chans, times)`` over a `Sentences` in batches, concatenated."""
    out = []
    for i in range(0, len(sentences), batch):
        out.append(
            fn(
                torch.from_numpy(sentences.data[i : i + batch]),
                torch.from_numpy(sentences.in_chans[i : i + batch]),
                torch.from_numpy(sentences.in_times[i : i + batch]),
            )
        )
    return torch.cat(out) if out else torch.zeros(0)


def load_vqhbr(path) -> VQHBR:
    """A `VQHBR` rebuilt from a `components.io.save_model` file."""
    import json

    from components.io import load_tensors, safetensors_metadata

    raw = json.loads(safetensors_metadata(path)["model.config"])
    model = VQHBR(VQHBRConfig(**{**raw, "encoder": TransformerConfig(**raw["encoder"])}))
    model.load_state_dict(load_tensors(path))
    return model


def load_masked(path) -> MaskedSentenceModel:
    """A `MaskedSentenceModel` rebuilt from a `components.io.save_model` file."""
    import json

    from components.io import load_tensors, safetensors_metadata

    raw = json.loads(safetensors_metadata(path)["model.config"])
    model = MaskedSentenceModel(MaskedConfig(**{**raw, "backbone": TransformerConfig(**raw["backbone"])}))
    model.load_state_dict(load_tensors(path))
    return model
