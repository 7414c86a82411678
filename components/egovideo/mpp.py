"""Memory Pointer Prompting (MM-Ego §3) on a tiny transformer, and the frame-selection baselines.

One transformer (``n_layers`` pre-norm blocks, width ``d_model``) reads, for a question ``q`` with
options ``o_1..o_4`` and a clip of ``T`` frames of ``P`` patch tokens each:

* **global glimpse** ``[q tokens; c_1..c_T; POINTER]`` where ``c_t = W_f mean_p(x_{t,p}) + e_comp + e_time(t)``
  is frame ``t`` compressed to one token. The pointer scores are

      s_t = <W_s h_POINTER, c_t> / sqrt(d_model)              (one logit per frame)

* **fallback to full resolution**: the ``k`` frames of highest ``s_t`` (in time order) are read at all
  their patch tokens ``W_f x_{t,p} + e_patch(p) + e_time(t)``: ``[q tokens; k*P frame tokens; ANSWER]``;
  option ``j`` scores ``<W_a h_ANSWER, mean(word embeddings of o_j)>``.

Training: cross-entropy on the option scores plus ``pointer_weight`` x a class-balanced BCE of ``s``
against the evidence frames (top-k is not differentiable, so the pointer learns from the evidence the
QA engine recorded). With probability ``teacher_forcing`` a training example reads its evidence frames
(filled up with the pointer's best others) instead of the pointer's own top-k.

The compared methods share the network and differ only in which visual tokens the answer pass reads
(:data:`METHODS`): ``mpp`` (pointer top-k, full tokens), ``uniform`` (k evenly spaced frames, full tokens),
``compressed`` (all T compressed tokens), ``blind`` (no visual token: the text-only model). At evaluation,
``oracle`` reads an MPP model's answer pass on the evidence frames instead of the pointer's top-k, which
separates the pointer's errors from the answer step's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from components.egovideo.stats import pointer_hits

PAD, UNK = 0, 1


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass(frozen=True)
class Vocab:
    """Word-level vocabulary: index 0 pads, 1 is unknown."""

    tokens: tuple[str, ...]

    @classmethod
    def build(cls, texts: Iterable[str]) -> Vocab:
        counts = Counter(w for t in texts for w in words(t))
        return cls(("<pad>", "<unk>", *sorted(counts)))

    def encode(self, text: str, length: int) -> list[int]:
        index = {w: i for i, w in enumerate(self.tokens)}
        ids = [index.get(w, UNK) for w in words(text)][:length]
        return ids + [PAD] * (length - len(ids))


@dataclass(frozen=True)
class MPPConfig:
    """Sizes of the network and of the selection."""

    vocab_size: int
    d_feat: int = 32
    patches: int = 4
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    k: int = 8
    time_freqs: int = 8

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"MPPConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.k < 1 or self.vocab_size < 3:
            raise ValueError(f"MPPConfig needs k >= 1 and vocab_size >= 3, got {self.k}, {self.vocab_size}")


# --------------------------------------------------------------------------------------------------
# frame selection
# --------------------------------------------------------------------------------------------------
def topk_frames(scores: Tensor, k: int) -> Tensor:
    """``[B, min(k, T)]`` indices of the highest scores per row, sorted in time order."""
    k = min(k, scores.shape[1])
    return torch.topk(scores, k, dim=1).indices.sort(dim=1).values


def uniform_frames(n_frames: int, k: int) -> Tensor:
    """``[min(k, T)]`` evenly spaced frame indices: the centres of ``k`` equal segments."""
    k = min(k, n_frames)
    return ((torch.arange(k, dtype=torch.float64) + 0.5) * n_frames / k).floor().long()


# --------------------------------------------------------------------------------------------------
# the network
# --------------------------------------------------------------------------------------------------
class EgoQAModel(nn.Module):
    """Question/frames/pointer transformer with a multiple-choice head (see the module docstring)."""

    def __init__(self, cfg: MPPConfig, max_question: int = 16, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        d = cfg.d_model
        self.cfg = cfg
        self.words = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD)
        nn.init.normal_(self.words.weight, std=0.1)  # small option scores at the start
        with torch.no_grad():
            self.words.weight[PAD].zero_()
        self.question_pos = nn.Parameter(torch.randn(max_question, d) * 0.02)
        self.frame_in = nn.Linear(cfg.d_feat, d)
        self.patch = nn.Parameter(torch.randn(cfg.patches, d) * 0.02)
        self.compressed = nn.Parameter(torch.randn(d) * 0.02)
        self.time = nn.Linear(2 * cfg.time_freqs, d)
        self.pointer = nn.Parameter(torch.randn(d) * 0.02)
        self.answer = nn.Parameter(torch.randn(d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, cfg.n_heads, cfg.d_ff, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.score_proj = nn.Linear(d, d, bias=False)
        self.answer_proj = nn.Linear(d, d)

    @torch.no_grad()
    def align_codes(self, vocab: Vocab, codes: dict[str, np.ndarray], scale: float, seed: int) -> int:
        """Aligned initialisation (the role of a pretrained vision-language projector): ``frame_in`` becomes
        ``scale`` x a random ``[d_model, d_feat]`` matrix ``R`` with orthonormal columns (no bias), and the embedding
        of every vocabulary word in ``codes`` becomes ``scale R codes[word]``, so a frame token holding that word's
        code points along the word's embedding. Returns the number of words aligned."""
        gen = torch.Generator().manual_seed(seed)
        R = torch.linalg.qr(torch.randn(self.cfg.d_model, self.cfg.d_feat, generator=gen))[0]
        self.frame_in.weight.copy_(scale * R)
        self.frame_in.bias.zero_()
        n = 0
        for i, word in enumerate(vocab.tokens):
            if word in codes:
                self.words.weight[i] = scale * R @ torch.as_tensor(codes[word], dtype=torch.float32)
                n += 1
        return n

    def time_features(self, t_rel: Tensor) -> Tensor:
        """``[B, N] -> [B, N, d]`` from sin/cos of the relative time ``t / T`` at octave frequencies."""
        freqs = math.pi * 2.0 ** torch.arange(self.cfg.time_freqs, dtype=t_rel.dtype, device=t_rel.device)
        angles = t_rel[..., None] * freqs
        return self.time(torch.cat([angles.sin(), angles.cos()], dim=-1))

    def compressed_tokens(self, frames: Tensor) -> Tensor:
        """``[B, T, P, F] -> [B, T, d]``: each frame pooled to one token (mean of its patch tokens)."""
        B, T = frames.shape[:2]
        t_rel = ((torch.arange(T, device=frames.device) + 0.5) / T).expand(B, T)
        return self.frame_in(frames.mean(dim=2)) + self.compressed + self.time_features(t_rel)

    def full_tokens(self, frames: Tensor, idx: Tensor) -> Tensor:
        """Frames ``idx [B, k]`` of ``frames [B, T, P, F]`` at all patch tokens: ``[B, k*P, d]``."""
        B, T, P, Fd = frames.shape
        picked = frames.gather(1, idx[:, :, None, None].expand(B, idx.shape[1], P, Fd))
        t_rel = (idx.to(frames.dtype) + 0.5) / T
        tokens = self.frame_in(picked) + self.patch + self.time_features(t_rel)[:, :, None, :]
        return tokens.reshape(B, idx.shape[1] * P, -1)

    def _run(self, question: Tensor, visual: Tensor | None, special: Tensor) -> tuple[Tensor, Tensor]:
        """Encode ``[q; visual; special]``; returns (special token's output [B, d], visual outputs)."""
        B, Lq = question.shape
        parts = [self.words(question) + self.question_pos[:Lq]]
        n_visual = 0
        if visual is not None:
            parts.append(visual)
            n_visual = visual.shape[1]
        parts.append(special.expand(B, 1, -1))
        # no padding mask: questions always have the same padded length, pads embed as zeros plus their
        # position, and attention without a mask runs the fused kernel (a mask costs a [B, H, L, L] tensor)
        out = self.norm(self.encoder(torch.cat(parts, dim=1)))
        return out[:, -1], out[:, Lq : Lq + n_visual]

    def pointer_scores(self, question: Tensor, frames: Tensor) -> Tensor:
        """Global glimpse: ``[B, T]`` pointer logits over all frames (compressed)."""
        comp = self.compressed_tokens(frames)
        h, _ = self._run(question, comp, self.pointer)
        return torch.einsum("bd,btd->bt", self.score_proj(h), comp) / math.sqrt(self.cfg.d_model)

    def option_logits(self, question: Tensor, visual: Tensor | None, options: Tensor) -> Tensor:
        """``[B, n_options]`` scores of the options ``[B, n_options, Lo]`` given the visual tokens."""
        h, _ = self._run(question, visual, self.answer)
        emb = self.words(options)  # [B, O, Lo, d]
        mask = (options != PAD).unsqueeze(-1).to(emb.dtype)
        opt = (emb * mask).sum(2) / mask.sum(2).clamp_min(1.0)
        return torch.einsum("bd,bod->bo", self.answer_proj(h), opt)


# --------------------------------------------------------------------------------------------------
# methods: which visual tokens the answer pass reads
# --------------------------------------------------------------------------------------------------
@dataclass
class Forward:
    """One method's pass over a batch: option logits, and for MPP the pointer logits and frames read."""

    logits: Tensor
    pointer: Tensor | None = None
    selected: Tensor | None = None


def _mpp(model: EgoQAModel, batch: dict[str, Tensor], teacher_forcing: float, gen: torch.Generator | None) -> Forward:
    scores = model.pointer_scores(batch["question"], batch["frames"])
    choose = scores.detach()
    if teacher_forcing > 0 and gen is not None:
        forced = torch.rand(scores.shape[0], generator=gen) < teacher_forcing
        choose = torch.where(forced[:, None], choose + 1e4 * batch["evidence"], choose)
    idx = topk_frames(choose, model.cfg.k)
    logits = model.option_logits(batch["question"], model.full_tokens(batch["frames"], idx), batch["options"])
    return Forward(logits, scores, idx)


def _uniform(
    model: EgoQAModel, batch: dict[str, Tensor], teacher_forcing: float, gen: torch.Generator | None
) -> Forward:
    B, T = batch["frames"].shape[:2]
    idx = uniform_frames(T, model.cfg.k).expand(B, -1)
    logits = model.option_logits(batch["question"], model.full_tokens(batch["frames"], idx), batch["options"])
    return Forward(logits, None, idx)


def _compressed(
    model: EgoQAModel, batch: dict[str, Tensor], teacher_forcing: float, gen: torch.Generator | None
) -> Forward:
    visual = model.compressed_tokens(batch["frames"])
    return Forward(model.option_logits(batch["question"], visual, batch["options"]))


def _blind(model: EgoQAModel, batch: dict[str, Tensor], teacher_forcing: float, gen: torch.Generator | None) -> Forward:
    return Forward(model.option_logits(batch["question"], None, batch["options"]))


def _oracle(
    model: EgoQAModel, batch: dict[str, Tensor], teacher_forcing: float, gen: torch.Generator | None
) -> Forward:
    """An MPP model whose answer pass reads the evidence frames (filled up to k with the pointer's best others):
    what the answer step achieves with a perfect pointer."""
    scores = model.pointer_scores(batch["question"], batch["frames"])
    idx = topk_frames(scores.detach() + 1e4 * batch["evidence"], model.cfg.k)
    logits = model.option_logits(batch["question"], model.full_tokens(batch["frames"], idx), batch["options"])
    return Forward(logits, scores, idx)


METHODS: dict[str, Callable[[EgoQAModel, dict[str, Tensor], float, torch.Generator | None], Forward]] = {
    "mpp": _mpp,
    "uniform": _uniform,
    "compressed": _compressed,
    "blind": _blind,
}
# evaluation only: ``oracle`` runs a model trained as ``mpp`` with its pointer replaced by the evidence frames
EVAL_METHODS = {**METHODS, "oracle": _oracle}


def balanced_bce(scores: Tensor, evidence: Tensor) -> Tensor:
    """Mean over the batch of (BCE over evidence frames + BCE over the other frames) / 2."""
    losses = F.binary_cross_entropy_with_logits(scores, evidence, reduction="none")
    pos = (losses * evidence).sum(1) / evidence.sum(1).clamp_min(1.0)
    neg = (losses * (1 - evidence)).sum(1) / (1 - evidence).sum(1).clamp_min(1.0)
    return ((pos + neg) / 2).mean()


def make_loss(
    method: str, pointer_weight: float, teacher_forcing: float, seed: int
) -> Callable[[EgoQAModel, dict[str, Tensor]], tuple[Tensor, dict[str, Tensor]]]:
    """``loss_fn(model, batch)`` for :func:`components.training.fit`: CE (+ pointer BCE for ``mpp``)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {list(METHODS)}")
    forward = METHODS[method]
    gen = torch.Generator().manual_seed(seed)

    def loss_fn(model: EgoQAModel, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        out = forward(model, batch, teacher_forcing, gen)
        ce = F.cross_entropy(out.logits, batch["answer"])
        extras = {"ce": ce.detach(), "acc": (out.logits.argmax(1) == batch["answer"]).float().mean()}
        if out.pointer is None:
            return ce, extras
        bce = balanced_bce(out.pointer, batch["evidence"])
        extras["pointer_bce"] = bce.detach()
        return ce + pointer_weight * bce, extras

    return loss_fn


@torch.no_grad()
def predict(model: EgoQAModel, method: str, batch: dict[str, Tensor]) -> Forward:
    """Inference pass (pure top-k for MPP; ``oracle``: an MPP model on the evidence frames); eval mode."""
    model.eval()
    return EVAL_METHODS[method](model, batch, 0.0, None)


# --------------------------------------------------------------------------------------------------
# tensors for questions and batches
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QATensors:
    """Encoded questions: ids ``[N, Lq]``, option ids ``[N, O, Lo]``, answers ``[N]``, clip index ``[N]``,
    and the evidence frame ids per question."""

    question: Tensor
    options: Tensor
    answer: Tensor
    clip: Tensor
    evidence: tuple[tuple[int, ...], ...]


def encode_rows(
    rows: Sequence[dict], vocab: Vocab, clip_index: dict[str, int], max_question: int = 16, max_option: int = 4
) -> QATensors:
    missing = sorted({r["clip_id"] for r in rows} - set(clip_index))
    if missing:
        raise KeyError(f"questions refer to clips without frames: {missing[:5]}")
    return QATensors(
        question=torch.tensor([vocab.encode(r["question"], max_question) for r in rows], dtype=torch.long),
        options=torch.tensor([[vocab.encode(o, max_option) for o in r["options"]] for r in rows], dtype=torch.long),
        answer=torch.tensor([r["answer_idx"] for r in rows], dtype=torch.long),
        clip=torch.tensor([clip_index[r["clip_id"]] for r in rows], dtype=torch.long),
        evidence=tuple(tuple(int(f) for f in r["evidence_frames"]) for r in rows),
    )


def make_batch(data: QATensors, frames: Sequence[Tensor], idx: Sequence[int]) -> dict[str, Tensor]:
    """A batch of questions ``idx`` whose clips all have the same number of frames."""
    clips = [frames[int(data.clip[i])] for i in idx]
    T = clips[0].shape[0]
    if any(c.shape[0] != T for c in clips):
        raise ValueError("a batch needs clips of one length; group questions by length bucket")
    evidence = torch.zeros(len(idx), T)
    for row, i in enumerate(idx):
        evidence[row, list(data.evidence[i])] = 1.0
    index = torch.as_tensor(list(idx), dtype=torch.long)
    return {
        "question": data.question[index],
        "options": data.options[index],
        "answer": data.answer[index],
        "frames": torch.stack(clips),
        "evidence": evidence,
    }


def length_groups(data: QATensors, frames: Sequence[Tensor]) -> dict[int, list[int]]:
    """Question indices grouped by their clip's frame count."""
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(data.clip.tolist()):
        groups.setdefault(frames[c].shape[0], []).append(i)
    return groups


def batch_sampler(
    data: QATensors, frames: Sequence[Tensor], batch_size: int
) -> Callable[[int, torch.Generator], dict[str, Tensor]]:
    """``batches(step, gen)`` for ``fit``: a length group drawn in proportion to its size, then a batch in it."""
    groups = list(length_groups(data, frames).values())
    sizes = torch.tensor([len(g) for g in groups], dtype=torch.float)

    def draw(step: int, gen: torch.Generator) -> dict[str, Tensor]:
        g = groups[int(torch.multinomial(sizes, 1, generator=gen))]
        pick = torch.randint(0, len(g), (min(batch_size, len(g)),), generator=gen)
        return make_batch(data, frames, [g[int(i)] for i in pick])

    return draw


def predict_all(
    model: EgoQAModel, method: str, data: QATensors, frames: Sequence[Tensor], batch: int = 64
) -> tuple[np.ndarray, list[dict]]:
    """The chosen option of every question, and for a method with a pointer one record per question:
    ``{"q", "recall", "evidence_rank", "scores"}`` (see :func:`components.egovideo.stats.pointer_hits`)."""
    choice = np.zeros(len(data.answer), dtype=np.int64)
    pointer: list[dict] = []
    for _, group in sorted(length_groups(data, frames).items()):
        for start in range(0, len(group), batch):
            idx = group[start : start + batch]
            out = predict(model, method, make_batch(data, frames, idx))
            choice[idx] = out.logits.argmax(1).numpy()
            if out.pointer is None:
                continue
            for row, i in enumerate(idx):
                scores = out.pointer[row].numpy()
                recall, rank = pointer_hits(scores, data.evidence[i], out.selected[row].tolist())
                pointer.append({"q": i, "recall": recall, "evidence_rank": rank, "scores": scores})
    return choice, pointer
