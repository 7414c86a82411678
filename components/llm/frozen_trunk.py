"""A causal LM whose lower decoder layers are frozen, with their outputs computed once per token row.

When adapters sit only in the top layers of a Llama-style model (`LocalLM.with_lora(layers=...)`), the
hidden state that enters the lowest adapted layer ``split`` is a fixed function of a row's tokens: the
layers below do not train. `FrozenTrunkLM` wraps such a model and keeps those hidden states in a memo keyed
by the row's real token ids (pads removed), so each distinct row passes through the frozen trunk (embedding
+ layers ``0..split-1``) once, and every later forward pass -- training steps, scoring, evaluation of every
model that shares the trunk -- runs only layers ``split..L-1``, the final norm and the head. The result equals
the wrapped model's output up to float rounding (the trunk is the same computation, with each row's own
positions ``cumsum(mask) - 1``); nothing is approximated. The wrapper takes the keyword arguments that
`components.llm.scoring.sequence_scores` passes (``input_ids, attention_mask, position_ids, use_cache,
logits_to_keep``), so it drops into `sequence_scores`, `precompute_scores` and `components.training.fit`.

Why: on a CPU the trunk is most of the cost. For SmolLM2-135M (30 layers) with adapters in the top 2, a
training step or a scoring pass over rows already seen costs about 2/30 of the decoder plus the head.

`FrozenTrunkLM.greedy` decodes greedily in the same spirit: the trunk's key/value cache of a set of prompts
is computed once and reused for every model; per call only the top layers prefill, then each new token runs
through the whole model with the combined cache (decoding itself cannot skip the trunk: new tokens are new
rows).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from types import SimpleNamespace

import torch
from torch import Tensor, nn
from transformers import DynamicCache

from components.llm.scoring import PairTokens


def _causal_lm(model: nn.Module) -> nn.Module:
    """The transformers CausalLM inside a peft model (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _sub_model(body: nn.Module, layers: Iterable[nn.Module], *, final_norm: bool) -> nn.Module:
    """A shallow copy of a decoder body (LlamaModel) that runs only ``layers`` (shared modules, not copies)."""
    sub = copy.copy(body)
    sub._modules = dict(body._modules)
    sub.layers = nn.ModuleList(list(layers))
    sub.config = copy.copy(body.config)
    sub.config.num_hidden_layers = len(sub.layers)
    if not final_norm:
        sub.norm = nn.Identity()
    return sub


def _left_pad(rows: Sequence[Tensor], pad: int) -> tuple[Tensor, Tensor, Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, width - len(row) :] = row
        mask[b, width - len(row) :] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


class FrozenTrunkLM(nn.Module):
    """``model`` (a transformers Llama-style CausalLM, plain or peft) with layers below ``split`` memoised.

    Args:
        model: the causal LM; no parameter of its embedding or of layers ``0..split-1`` may require grad.
        split: index of the lowest decoder layer that runs per call (the lowest adapted layer; 0 memoises only
            the token embeddings).
        pad_id: id used for padding when the trunk runs a batch of rows it has not seen.
        batch_size: rows per trunk pass when filling the memo.
    """

    def __init__(self, model: nn.Module, split: int, *, pad_id: int = 0, batch_size: int = 32) -> None:
        super().__init__()
        causal = _causal_lm(model)
        body = causal.model
        total = len(body.layers)
        if not isinstance(split, int) or not 0 <= split < total:
            raise ValueError(f"split must be an int in [0, {total}), got {split!r}")
        frozen = [body.embed_tokens, *body.layers[:split]]
        trained = [n for part in frozen for n, p in part.named_parameters() if p.requires_grad]
        if trained:
            raise ValueError(f"FrozenTrunkLM: layers below split={split} must be frozen; trainable: {trained[:3]}")
        self.model = model
        self.split, self.pad_id, self.batch_size = split, pad_id, batch_size
        self._trunk = _sub_model(body, body.layers[:split], final_norm=False)
        self._tail = _sub_model(body, body.layers[split:], final_norm=True)
        self._head = causal.lm_head
        self._memo: dict[tuple[int, ...], Tensor] = {}
        self._prompt_caches: dict[tuple[tuple[int, ...], ...], list[tuple[Tensor, Tensor]]] = {}

    # ------------------------------------------------------------------ the trunk memo
    @property
    def memo_size(self) -> int:
        """Distinct rows whose trunk states are held."""
        return len(self._memo)

    @staticmethod
    def _real(ids: Tensor, mask: Tensor) -> list[Tensor]:
        return [row[m.bool()] for row, m in zip(ids.cpu(), mask.cpu())]

    @torch.no_grad()
    def _fill(self, rows: list[Tensor]) -> None:
        missing = list({tuple(r.tolist()): r for r in rows if tuple(r.tolist()) not in self._memo}.items())
        missing.sort(key=lambda item: len(item[1]))  # batches of similar length: little padding to run
        device = self._head.weight.device
        for i in range(0, len(missing), self.batch_size):
            chunk = missing[i : i + self.batch_size]
            ids, mask, pos = _left_pad([r for _, r in chunk], self.pad_id)
            hidden = self._trunk(
                input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device), use_cache=False
            ).last_hidden_state
            for b, (key, row) in enumerate(chunk):
                self._memo[key] = hidden[b, hidden.shape[1] - len(row) :].detach().to("cpu", copy=True)

    def prime(self, tokens: PairTokens | Tensor, attention_mask: Tensor | None = None) -> None:
        """Compute and keep the trunk states of every row of ``tokens`` (a `PairTokens`, or ids + mask)."""
        if isinstance(tokens, PairTokens):
            tokens, attention_mask = tokens.ids, tokens.attention_mask
        self._fill(self._real(tokens, attention_mask))

    def trunk_states(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Hidden states entering layer ``split``: [B, L, d] in the model's dtype, zeros on pads (the memo filled
        as needed)."""
        rows = self._real(input_ids, attention_mask)
        self._fill(rows)
        width = input_ids.shape[1]
        states = torch.zeros((len(rows), width, self._head.weight.shape[1]), dtype=self._head.weight.dtype)
        for b, row in enumerate(rows):
            if len(row):
                states[b, width - len(row) :] = self._memo[tuple(row.tolist())]
        return states.to(self._head.weight.device)

    # ------------------------------------------------------------------ the forward pass
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
        logits_to_keep: int = 0,
        **_: object,
    ) -> SimpleNamespace:
        """Logits [B, K, V] of the last ``logits_to_keep`` positions (all positions for 0), as ``.logits``.

        Rows must be left-padded (real tokens last), as `LocalLM.tokenize_pairs` writes them."""
        if use_cache:
            raise ValueError("FrozenTrunkLM.forward does not return a cache; use greedy() to decode")
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        states = self.trunk_states(input_ids, attention_mask)
        hidden = self._tail(
            inputs_embeds=states, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
        return SimpleNamespace(logits=self._project(hidden))

    def _project(self, hidden: Tensor) -> Tensor:
        """The head's logits of [B, K, d] states as one [B*K, d] matrix product: with gradients flowing, a
        sliced (non-contiguous) 3-D input sends ``linear`` to a batched product against the weight expanded
        B times, several times slower on a CPU for a 49k-token vocabulary."""
        batch, keep, width = hidden.shape
        return self._head(hidden.reshape(batch * keep, width)).view(batch, keep, -1)

    # ------------------------------------------------------------------ greedy decoding
    @torch.no_grad()
    def _trunk_cache(self, rows: list[Tensor]) -> list[tuple[Tensor, Tensor]]:
        """The trunk layers' (keys, values) of the left-padded prompt batch, computed once per prompt set."""
        key = tuple(tuple(r.tolist()) for r in rows)
        if key not in self._prompt_caches:
            device = self._head.weight.device
            ids, mask, pos = _left_pad(rows, self.pad_id)
            cache = DynamicCache()
            self._trunk(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=pos.to(device),
                cache=cache,
                use_cache=True,
            )
            self._prompt_caches[key] = [(layer.keys, layer.values) for layer in cache.layers[: self.split]]
        return self._prompt_caches[key]

    @torch.no_grad()
    def greedy(
        self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, eos_ids: Iterable[int], batch_size: int = 64
    ) -> list[list[int]]:
        """Greedy continuation token ids of each prompt (without the eos token), at most ``max_new_tokens``.

        Equal to greedy decoding with the wrapped model (the trunk's prompt cache is reused across calls)."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        eos = set(eos_ids)
        out: list[list[int]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for i in range(0, len(prompts), batch_size):
                out += self._greedy_batch(
                    [torch.as_tensor(list(p), dtype=torch.long) for p in prompts[i : i + batch_size]],
                    max_new_tokens,
                    eos,
                )
        finally:
            self.model.train(was_training)
        return out

    def _greedy_batch(self, rows: list[Tensor], max_new_tokens: int, eos: set[int]) -> list[list[int]]:
        device = self._head.weight.device
        ids, mask, pos = (t.to(device) for t in _left_pad(rows, self.pad_id))
        self._fill(rows)
        trunk_kv = self._trunk_cache(rows)
        tail_cache = DynamicCache()
        hidden = self._tail(
            inputs_embeds=self.trunk_states(ids, mask),
            attention_mask=mask,
            position_ids=pos,
            cache=tail_cache,
            use_cache=True,
        ).last_hidden_state
        cache = DynamicCache(
            ddp_cache_data=[(k.clone(), v.clone()) for k, v in trunk_kv]
            + [(layer.keys, layer.values) for layer in tail_cache.layers[self.split :]]
        )
        next_ids = self._head(hidden[:, -1]).argmax(-1)
        new: list[list[int]] = [[] for _ in rows]
        done = [False] * len(rows)
        position = pos[:, -1:]
        filler = min(eos) if eos else self.pad_id
        for step in range(max_new_tokens):
            for b, token in enumerate(next_ids.tolist()):
                if done[b]:
                    continue
                if token in eos:
                    done[b] = True
                else:
                    new[b].append(token)
            if all(done) or step == max_new_tokens - 1:
                break
            feed = torch.tensor([filler if d else t for d, t in zip(done, next_ids.tolist())], device=device)
            mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=device)], dim=1)
            position = position + 1
            logits = self.model(
                input_ids=feed[:, None],
                attention_mask=mask,
                position_ids=position,
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits
            next_ids = logits[:, -1].argmax(-1)
        return new
