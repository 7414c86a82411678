"""A local judge that knows no caption grammar: sentence units, matched and verified by sentence-embedding cosine.

DCScore's judge is an LLM. Offline, the rule judge of the synthetic world parses captions with the simulator's own
grammar and verifies them against its scene graph, so it reads the very facts the synthetic human score is computed
from. This judge reads only text, as an LLM judge of real captions does, with a frozen sentence encoder
(all-MiniLM-L6-v2 by default, :func:`components.llm.encoder.load_encoder`):

* ``decompose``: the caption's sentences (split after ``.``, ``!`` or ``?``) are its units; a unit is relevant
  (relevance 1, image content) when its cosine with some sentence of the reference (the oracle caption's sentences
  and the oracle facts) reaches ``relevance_threshold``, else an inference or embellishment (relevance 0);
* ``match``: a unit maps to the oracle fact of highest cosine when that cosine reaches ``match_threshold``, else to
  None;
* ``verify``: a unit is supported (1) when its cosine with some reference sentence reaches ``verify_threshold``.

The judge is deterministic: its ``n`` samples are equal (an LLM judge samples; DCScore's 3 x 3 trials then agree).
The thresholds are fixed settings, not fitted to any human score. Embeddings are cached per distinct text, so the
templated oracle facts of a benchmark are encoded once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from components.captions.dcscore import CaptionItem, OracleId, Unit

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class EmbedJudgeConfig:
    match_threshold: float = 0.5
    verify_threshold: float = 0.6
    relevance_threshold: float = 0.3

    def __post_init__(self) -> None:
        for name in ("match_threshold", "verify_threshold", "relevance_threshold"):
            if not -1 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a cosine in [-1, 1], got {getattr(self, name)}")


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after ``.``, ``!`` or ``?`` followed by white space), stripped, none empty."""
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


class EmbedJudge:
    """The grammar-free judge of the module docstring; ``encode`` maps a list of texts to unit rows [N, d]."""

    name = "minilm"

    def __init__(
        self, encode: Callable[[list[str]], np.ndarray], cfg: EmbedJudgeConfig = EmbedJudgeConfig(), name: str = ""
    ) -> None:
        self._encode, self.cfg = encode, cfg
        self._cache: dict[str, np.ndarray] = {}
        if name:
            self.name = name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows of ``texts`` [N, d] (each distinct text encoded once per judge)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            for text, row in zip(new, np.asarray(self._encode(new), dtype=np.float32)):
                self._cache[text] = row
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def prepare(self, items: Sequence[CaptionItem]) -> None:
        """Encode every sentence the judge will read of ``items`` in one call (faster than caption by caption)."""
        texts = [t for item in items for t in (*sentences(item.caption), *self._reference(item))]
        self.embed(texts)

    def _reference(self, item: CaptionItem) -> list[str]:
        return list(dict.fromkeys([*sentences(item.oracle_caption), *item.oracle_facts]))

    def _support(self, item: CaptionItem, texts: Sequence[str]) -> np.ndarray:
        """Per text, its highest cosine with a reference sentence (-1 without a reference)."""
        reference = self._reference(item)
        if not texts or not reference:
            return np.full(len(texts), -1.0)
        return (self.embed(texts) @ self.embed(reference).T).max(axis=1)

    def decompose(self, item: CaptionItem) -> tuple[list[Unit], int]:
        units = sentences(item.caption)
        support = self._support(item, units)
        return [Unit(u, int(s >= self.cfg.relevance_threshold)) for u, s in zip(units, support)], 0

    def exact_mapping(self, item: CaptionItem, units: Sequence[Unit]) -> list[OracleId]:
        if not units or not item.oracle_facts:
            return [None] * len(units)
        cos = self.embed([u.fact for u in units]) @ self.embed(list(item.oracle_facts)).T
        best = cos.argmax(axis=1)
        return [int(j) if cos[i, j] >= self.cfg.match_threshold else None for i, j in enumerate(best)]

    def exact_verification(self, item: CaptionItem, units: Sequence[Unit]) -> list[int]:
        support = self._support(item, [u.fact for u in units])
        return [int(s >= self.cfg.verify_threshold) for s in support]

    def match(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[OracleId]], int]:
        mapping = self.exact_mapping(item, units)
        return [list(mapping) for _ in range(n)], 0

    def verify(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[int]], int]:
        verified = self.exact_verification(item, units)
        return [list(verified) for _ in range(n)], 0
