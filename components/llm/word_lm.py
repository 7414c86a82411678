"""A small causal LM over a closed word vocabulary, trained from scratch, with the `LocalLM` interface.

For models that only ever see a fixed vocabulary (a tiny captioner over scene words, a test model over
templated QA words), a word-level tokenizer keeps sequences short and every token meaningful. The tokenizer
splits on whitespace and punctuation (`tokenizers` ``Whitespace``: ``\\w+|[^\\w\\s]+``), maps words outside the
vocabulary to ``<unk>``, and decodes by joining tokens with spaces. The chat template is ChatML-like as in the
other local models (role names are part of the vocabulary). Write continuations that start with a space (or
follow the generation prompt) so the prompt's last word and the continuation's first word stay separate.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from components.llm.lm import LocalLM

SPECIALS = ("<unk>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2: unk, bos, eos = pad
ROLES = ("system", "user", "assistant")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def word_tokenizer(vocabulary: Sequence[str]) -> PreTrainedTokenizerFast:
    """Word-level tokenizer: the specials (ids 0-2), the role names, then ``vocabulary`` in first-seen order."""
    words: dict[str, int] = {}
    for word in (*SPECIALS, *ROLES, *vocabulary):
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise ValueError(f"vocabulary entries must be non-empty strings without spaces, got {word!r}")
        words.setdefault(word, len(words))
    backend = Tokenizer(models.WordLevel(vocab=words, unk_token=SPECIALS[0]))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=SPECIALS[0],
        bos_token=SPECIALS[1],
        eos_token=SPECIALS[2],
        pad_token=SPECIALS[2],
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
    )


def word_lm(
    vocabulary: Sequence[str],
    *,
    layers: int = 2,
    hidden: int = 128,
    heads: int = 4,
    seed: int = 0,
    max_positions: int = 512,
    name: str = "word",
) -> LocalLM:
    """A randomly initialised Llama (``layers`` x ``hidden``, ``heads`` heads, tied embeddings, MLP 4x hidden)
    over a word-level tokenizer of ``vocabulary``, as a `LocalLM` on the CPU in eval mode; weights depend only
    on ``seed``."""
    for key, value in (("layers", layers), ("hidden", hidden), ("heads", heads), ("max_positions", max_positions)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"word_lm: {key} must be an int >= 1, got {value!r}")
    if hidden % heads:
        raise ValueError(f"word_lm: hidden ({hidden}) must be a multiple of heads ({heads})")
    tokenizer = word_tokenizer(vocabulary)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        unk_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.float32)
    return LocalLM(name=name, model=model.eval(), tokenizer=tokenizer, device=torch.device("cpu"), seed=seed)
