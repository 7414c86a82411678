"""Scoring given continuations with gradients, for fine-tuning a causal LM through `components.training.fit`.

`LocalLM.tokenize_pairs` turns (prompt, continuation) pairs into one left-padded `PairTokens` table once;
a training step takes rows of it (`pair_batches`), and its loss reads the rows' scores under the model being
trained (`sequence_scores`, with grad) and, for objectives anchored to a frozen model, the scores that model
gave the same rows, computed once before training (`precompute_scores` on a `frozen_copy`).

Layout. Row b of a `PairTokens` is ``[pads | prompt tokens | continuation tokens]``; ``attention_mask`` is 0 on
the pads, ``position_ids`` count real tokens from 0 (``cumsum(mask) - 1``), so a row's logits do not depend on
the batch it is in, and ``target_mask`` is True on the continuation tokens (the prompt/continuation split of
`LocalLM.token_logprobs`: a token that straddles the boundary counts as a continuation token). Continuation
tokens are the last tokens of each row, so the logits of the last W + 1 positions suffice, W being the
longest continuation of the batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from components.preference.objectives import SequenceScores


class PairTokens(NamedTuple):
    """Left-padded (prompt + continuation) token rows, each field [N, L] (a NamedTuple, so `fit` moves it).

    Attributes:
        ids: token ids (int64).
        attention_mask: 1 on real tokens, 0 on pads (int64).
        position_ids: position of each real token in its own row (int64; 0 on pads).
        target_mask: True on the continuation tokens (bool).
    """

    ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    target_mask: Tensor

    def __len__(self) -> int:  # rows, not fields
        return int(self.ids.shape[0])

    @property
    def width(self) -> int:
        """The longest continuation of the rows (tokens)."""
        return int(self.target_mask.sum(1).max()) if self.ids.shape[0] else 0

    def rows(self, index: Tensor | list[int]) -> PairTokens:
        """The rows at ``index``, with the leading columns that are padding in every one of them removed."""
        index = torch.as_tensor(index, dtype=torch.long)
        picked = [t[index] for t in (self.ids, self.attention_mask, self.position_ids, self.target_mask)]
        keep = int(picked[1].sum(1).max()) if len(index) else 0
        return PairTokens(*(t[:, t.shape[1] - keep :] for t in picked))


def _window_logits(model: nn.Module, tokens: PairTokens) -> tuple[Tensor, Tensor, int]:
    """Logits [B, W, V] predicting the last W tokens of each row and those token ids [B, W] (W = the longest
    continuation), from the logits of the last W + 1 positions only."""
    width = tokens.width
    if width == 0:
        raise ValueError("every row has an empty continuation; nothing to score")
    if width >= tokens.ids.shape[1]:
        raise ValueError("a continuation needs at least one context token before it")
    out = model(
        input_ids=tokens.ids,
        attention_mask=tokens.attention_mask,
        position_ids=tokens.position_ids,
        use_cache=False,
        logits_to_keep=width + 1,
    )
    return out.logits[:, :-1, :].float(), tokens.ids[:, -width:], width  # position t predicts token t + 1


def _continuation_window(model: nn.Module, tokens: PairTokens) -> tuple[Tensor, int]:
    """Log-probabilities [B, W] of the last W tokens of each row given the tokens before them (W = the
    longest continuation), computed from the logits of the last W + 1 positions only."""
    logits, targets, width = _window_logits(model, tokens)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]
    return logp, width


def continuation_logprobs(model: nn.Module, tokens: PairTokens) -> Tensor:
    """log p(token t | tokens < t) at every continuation token, 0 elsewhere: [B, L], differentiable."""
    logp, width = _continuation_window(model, tokens)
    full = torch.zeros(tokens.ids.shape, dtype=logp.dtype, device=logp.device)
    full[:, -width:] = logp
    return full * tokens.target_mask


def sequence_scores(model: nn.Module, tokens: PairTokens) -> SequenceScores:
    """Each row's summed log-probability, token count and summed token probability of its continuation,
    differentiable (call it inside a ``loss_fn`` of `components.training.fit`)."""
    logp, width = _continuation_window(model, tokens)
    mask = tokens.target_mask[:, -width:].to(logp.dtype)
    return SequenceScores(
        logp=(logp * mask).sum(1),
        n_tokens=mask.sum(1),
        prob_sum=(logp.exp() * mask).sum(1),
        width=int(tokens.ids.shape[1]),
    )


@torch.no_grad()
def precompute_scores(model: nn.Module, tokens: PairTokens, batch_size: int = 16) -> SequenceScores:
    """`sequence_scores` of every row in batches, without gradients and in eval mode (the frozen reference
    model of NPO / DPO scores a fixed dataset once, before training). The model's mode is restored."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    was_training = model.training
    model.eval()
    try:
        groups = width_batches(tokens, batch_size)
        parts = [sequence_scores(model, tokens.rows(group)) for group in groups]
    finally:
        model.train(was_training)
    return SequenceScores.cat(parts).select(_inverse(groups)).detach()


def width_batches(tokens: PairTokens, batch_size: int) -> list[Tensor]:
    """Row indices in batches of at most ``batch_size`` rows of similar continuation width.

    A batch's logits cover its widest continuation at every row, so rows are taken in order of width and a
    batch closes early when the next row is over twice as wide as its first row plus 2: one long text among
    short answers no longer sets the width of all of them."""
    widths = tokens.target_mask.sum(1)
    order = torch.argsort(widths, stable=True)
    groups, start = [], 0
    for i in range(1, len(order) + 1):
        if i == len(order) or i - start == batch_size or widths[order[i]] > 2 * widths[order[start]] + 2:
            groups.append(order[start:i])
            start = i
    return groups


def _inverse(groups: list[Tensor]) -> Tensor:
    """Positions, in the concatenated batches, of rows 0..N-1."""
    order = torch.cat(groups) if groups else torch.zeros(0, dtype=torch.long)
    back = torch.empty_like(order)
    back[order] = torch.arange(len(order))
    return back


def pair_batches(tokens: PairTokens, *extras: Any, size: int) -> Callable[[int, torch.Generator], tuple[Any, ...]]:
    """A ``batches(step, generator)`` for `fit`: ``size`` rows drawn with replacement (``min(size, N)``), as
    ``(tokens.rows(idx), *[extra rows])``; an extra is a tensor with N rows, another `PairTokens` table with N
    rows (e.g. the rejected answers of DPO pairs, drawn with the same indices as the chosen ones), or anything
    with ``select(idx)`` (e.g. precomputed reference `SequenceScores`)."""
    n = len(tokens)
    if n == 0:
        raise ValueError("pair_batches needs at least one row")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"pair_batches: size must be an int >= 1, got {size!r}")
    for i, extra in enumerate(extras):
        rows = (
            extra.shape[0]
            if isinstance(extra, Tensor)
            else len(extra)
            if isinstance(extra, PairTokens)
            else len(extra.logp)
            if hasattr(extra, "logp")
            else None
        )
        if rows != n:
            raise ValueError(f"pair_batches: extra {i} has {rows} rows, the tokens have {n}")

    def pick(extra: Any, idx: Tensor) -> Any:
        return (
            extra[idx]
            if isinstance(extra, Tensor)
            else extra.rows(idx)
            if isinstance(extra, PairTokens)
            else extra.select(idx)
        )

    def draw(step: int, generator: torch.Generator) -> tuple[Any, ...]:
        idx = torch.randint(0, n, (min(size, n),), generator=generator)
        return (tokens.rows(idx), *(pick(e, idx) for e in extras))

    return draw


def frozen_copy(model: nn.Module) -> nn.Module:
    """A deep copy in eval mode with no parameter requiring grad: the reference of KL-anchored objectives."""
    ref = copy.deepcopy(model)
    ref.eval()
    ref.requires_grad_(False)
    return ref


def trainable_state(model: nn.Module) -> dict[str, Tensor]:
    """The parameters that train (``requires_grad``: LoRA A/B, value heads), as CPU copies keyed by name."""
    state = {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}
    if not state:
        raise ValueError(f"{type(model).__name__} has no trainable parameter")
    return state


@torch.no_grad()
def scores_and_greedy_hits(model: nn.Module, tokens: PairTokens, batch_size: int = 16) -> tuple[SequenceScores, Tensor]:
    """`precompute_scores` plus, per row, the number of continuation tokens that are the argmax of their position
    given the true tokens before them (teacher forced) [N]. A row whose hits equal its token count is exactly
    what greedy decoding produces (by induction over its tokens), so ``hits == n_tokens`` is an exact match
    without decoding. One forward pass per batch (`width_batches`), in eval mode (the model's mode is restored)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    was_training = model.training
    model.eval()
    parts, hits = [], []
    groups = width_batches(tokens, batch_size)
    try:
        for group in groups:
            rows = tokens.rows(group)
            logits, targets, width = _window_logits(model, rows)
            logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]
            mask = rows.target_mask[:, -width:].to(logp.device)
            parts.append(
                SequenceScores(
                    logp=(logp * mask).sum(1),
                    n_tokens=mask.sum(1).to(logp.dtype),
                    prob_sum=(logp.exp() * mask).sum(1),
                    width=int(rows.ids.shape[1]),
                )
            )
            hits.append(((logits.argmax(-1) == targets) & mask).sum(1).cpu())
    finally:
        model.train(was_training)
    back = _inverse(groups)
    return SequenceScores.cat(parts).select(back).detach(), torch.cat(hits)[back]
