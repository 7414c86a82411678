"""The word-level LM: tokenizer over a closed vocabulary, the LocalLM interface, and learning a caption."""

from __future__ import annotations

import pytest
import torch

from components.llm import sequence_scores, word_lm
from components.training import TrainConfig, fit

WORDS = "a the red blue cube ball left of is .".split()


def test_tokenizer_known_answer_and_unknown_words() -> None:
    lm = word_lm(WORDS, seed=0)
    ids = lm.tokenizer("a red cube, zebra.")["input_ids"]
    vocab = lm.tokenizer.get_vocab()
    assert ids == [vocab["a"], vocab["red"], vocab["cube"], vocab["<unk>"], vocab["<unk>"], vocab["."]]
    assert lm.tokenizer.decode(ids[:3]) == "a red cube"
    chat = lm.chat([{"role": "user", "content": "red cube"}])
    assert lm.tokenizer.convert_ids_to_tokens(lm.tokenizer(chat)["input_ids"]) == [
        "<|im_start|>",
        "user",
        "red",
        "cube",
        "<|im_end|>",
        "<|im_start|>",
        "assistant",
    ]
    with pytest.raises(ValueError, match="without spaces"):
        word_lm(["two words"])
    with pytest.raises(ValueError, match="multiple of heads"):
        word_lm(WORDS, hidden=30, heads=4)


def test_seeded_weights_and_learning_a_continuation() -> None:
    a, b = word_lm(WORDS, seed=1, hidden=32, heads=2), word_lm(WORDS, seed=1, hidden=32, heads=2)
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))
    prompt = a.chat([{"role": "user", "content": "red cube"}])
    tokens = a.tokenize_pairs([prompt], ["a red cube is left of a blue ball ."], append_eos=True)
    fit(
        a.model,
        lambda m, batch: -sequence_scores(m, batch).logp.mean(),
        lambda step, g: tokens,
        TrainConfig(steps=60, lr=1e-2, seed=0, progress=False),
    )
    assert a.generate([prompt], max_new_tokens=12) == ["a red cube is left of a blue ball ."]
