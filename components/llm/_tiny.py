"""The ``"tiny"`` causal LM: a randomly initialised 2-layer Llama with a byte-level tokenizer built in process.

It has the same interface as the real model (Llama architecture, ChatML-style chat template with
``<|im_start|>``/``<|im_end|>`` markers, pad = eos = ``<|im_end|>``), needs no files, loads in well under a
second and is a deterministic function of ``seed``, so tests across the project run against it.

Tokenizer: every UTF-8 byte is one token (a BPE model with the 256-symbol byte-level alphabet and no
merges), plus three special tokens, so ids are 0..258 and ``len(text.encode()) == len(ids)`` for text
without special markers.
"""

from __future__ import annotations

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2 as in SmolLM2
UNK, BOS, EOS = SPECIAL_TOKENS

# ChatML as SmolLM2 uses it, without SmolLM2's default system prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: 3 special tokens (ids 0-2) + 256 byte symbols (ids 3-258), no merges."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({symbol: len(SPECIAL_TOKENS) + i for i, symbol in enumerate(alphabet)})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
    )


def build_tiny_model(vocab_size: int, seed: int) -> LlamaForCausalLM:
    """2 layers, hidden 64, 4 query / 2 key-value heads, tied embeddings; weights drawn from ``seed``.

    ``initializer_range`` is 0.2 (not Llama's 0.02) so that logits are peaked enough for greedy
    decoding to be far from ties, which keeps batch-invariance checks meaningful on a random model.
    """
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.2,
        tie_word_embeddings=True,
        unk_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.to(torch.float32)
