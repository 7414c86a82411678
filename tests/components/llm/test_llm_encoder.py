"""The "tiny" hashed n-gram encoder against an independent implementation of its formula, and top_k."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from components.llm import ENCODER_NAMES, load_encoder, top_k


def reference_tiny(text: str, dim: int = 256) -> np.ndarray:
    """The documented formula written out: signed blake2b feature hashing of char 2/3/4-grams."""
    words = " ".join(text.casefold().split())
    vec = np.zeros(dim)
    if not words:
        return vec
    padded = f" {words} "
    for n in (2, 3, 4):
        for i in range(len(padded) - n + 1):
            h = int.from_bytes(hashlib.blake2b(padded[i : i + n].encode(), digest_size=8).digest(), "little")
            vec[h % dim] += 1.0 if h >> 63 else -1.0
    return vec / np.linalg.norm(vec)


@pytest.fixture(scope="module")
def tiny():
    return load_encoder("tiny")


def test_names_and_unknown_name():
    assert ENCODER_NAMES == ("minilm", "tiny")
    with pytest.raises(ValueError, match=r"unknown encoder name 'bert'.*minilm.*tiny"):
        load_encoder("bert")


def test_tiny_matches_the_formula_and_is_unit_norm(tiny):
    texts = ["A bowl of oatmeal with banana", "two slices of toast", "x", "Ünïcode café ☕"]
    emb = tiny.encode(texts, batch_size=2)
    assert emb.shape == (4, 256) and emb.dtype == np.float32 and tiny.dim == 256 and tiny.name == "tiny"
    np.testing.assert_allclose(emb, np.stack([reference_tiny(t) for t in texts]), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-6)


def test_tiny_is_deterministic_case_and_space_insensitive_and_ranks_by_overlap(tiny):
    emb = tiny.encode(
        ["Grilled chicken salad", "  grilled   CHICKEN salad ", "grilled chicken sandwich", "quantum chromodynamics"]
    )
    np.testing.assert_allclose(emb[0], emb[1], atol=1e-7)
    np.testing.assert_array_equal(tiny.encode(["Grilled chicken salad"])[0], emb[0])
    assert emb[0] @ emb[2] > emb[0] @ emb[3] + 0.3


def test_tiny_edge_cases(tiny):
    assert tiny.encode([]).shape == (0, 256)
    assert not tiny.encode(["   "]).any()
    with pytest.raises(TypeError, match="list of strings"):
        tiny.encode("just a string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        tiny.encode(["ok", None])
    with pytest.raises(ValueError, match="batch_size"):
        tiny.encode(["ok"], batch_size=0)


def test_top_k_known_answer_and_tie_order():
    corpus = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    query = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    scores, indices = top_k(query, corpus, 3)
    assert indices.tolist() == [[0, 3, 2], [1, 2, 0]]  # rows 0 and 3 tie: lower index first
    np.testing.assert_allclose(scores, [[1.0, 1.0, 0.6], [1.0, 0.8, 0.0]], atol=1e-7)
    assert scores.dtype == np.float32 and indices.dtype == np.int64


def test_top_k_retrieves_the_matching_text(tiny):
    corpus = ["white rice, cooked", "apple pie", "scrambled eggs", "orange juice"]
    _, indices = top_k(tiny.encode(["a cup of orange juice", "eggs, scrambled"]), tiny.encode(corpus), 1)
    assert indices[:, 0].tolist() == [3, 2]


def test_top_k_rejects_bad_input():
    corpus = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 3\]"):
        top_k(np.zeros((1, 4)), corpus, 4)
    with pytest.raises(ValueError, match="same d"):
        top_k(np.zeros((1, 5)), corpus, 1)
