"""The judge of the synthetic world: regex decomposer, canonical-tuple matcher, scene-graph verifier.

* ``decompose``: :func:`components.captions.parsing.parse_caption` (one sample, deterministic);
* ``match``: a unit's canonical tuple maps to the oracle fact with the same tuple (oracle fact sentences are
  parsed by the same grammar), or to None (a false fact, or a true detail the oracle does not list); a unit
  the grammar does not cover falls back to difflib: the oracle fact whose text is most similar, when the
  ratio reaches ``fuzzy_cutoff``;
* ``verify``: a tuple is checked against the scene graph (:meth:`Scene.holds`); a unit without a tuple is
  correct when it fuzzily matches an oracle fact (supported by the reference), else 0.

The rule judge is exact. An LLM judge samples (temperature 1 for matching, 0.3 for verification), which is
why DCScore averages 3 x 3 trials; ``flip_rate`` emulates that sampling noise: in every sample, each mapping
is dropped (-> None) and each verification flipped with that probability, drawn from a generator seeded by
(seed, caption index, step, sample), so scores do not depend on the order captions are scored in.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from components.captions.dcscore import CaptionItem, OracleId, Unit
from components.captions.parsing import parse_caption
from components.captions.world import Fact, Scene


@dataclass(frozen=True)
class RuleJudgeConfig:
    flip_rate: float = 0.0
    fuzzy_cutoff: float = 0.8
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.flip_rate <= 0.5 or not 0 < self.fuzzy_cutoff <= 1:
            raise ValueError(f"flip_rate must be in [0, 0.5] and fuzzy_cutoff in (0, 1], got {self}")


@functools.lru_cache(maxsize=65536)
def unit_fact(text: str) -> Fact | None:
    """The canonical tuple of a unit's text (a single-fact sentence), or None."""
    units = parse_caption(text)
    return units[0].fact if len(units) == 1 else None


@functools.lru_cache(maxsize=4096)
def _oracle_index(oracle_facts: tuple[str, ...]) -> dict[Fact, int]:
    index: dict[Fact, int] = {}
    for i, text in enumerate(oracle_facts):
        fact = unit_fact(text)
        if fact is not None:
            index.setdefault(fact, i)
    return index


def fuzzy_match(text: str, candidates: Sequence[str], cutoff: float) -> int | None:
    """Index of the candidate most similar to ``text`` (difflib ratio, case-insensitive) if >= cutoff."""
    best, best_ratio = None, cutoff
    matcher = difflib.SequenceMatcher(a=text.lower())
    for i, candidate in enumerate(candidates):
        matcher.set_seq2(candidate.lower())
        if matcher.real_quick_ratio() >= best_ratio and matcher.quick_ratio() >= best_ratio:
            ratio = matcher.ratio()
            if ratio >= best_ratio and (best is None or ratio > best_ratio):
                best, best_ratio = i, ratio
    return best


class RuleJudge:
    """The judge of the synthetic world (module docstring); ``scenes`` maps image names to scene graphs."""

    name = "rule"

    def __init__(self, scenes: Mapping[str, Scene], cfg: RuleJudgeConfig = RuleJudgeConfig()) -> None:
        self.scenes, self.cfg = scenes, cfg

    def _rng(self, item: CaptionItem, step: int, sample: int) -> np.random.Generator:
        return np.random.default_rng([self.cfg.seed, item.index, step, sample])

    def decompose(self, item: CaptionItem) -> tuple[list[Unit], int]:
        return [Unit(u.text, u.relevance, u.identifier) for u in parse_caption(item.caption)], 0

    def exact_mapping(self, item: CaptionItem, units: Sequence[Unit]) -> list[OracleId]:
        index = _oracle_index(tuple(item.oracle_facts))
        out: list[OracleId] = []
        for unit in units:
            fact = unit_fact(unit.fact)
            out.append(
                index.get(fact)
                if fact is not None
                else fuzzy_match(unit.fact, item.oracle_facts, self.cfg.fuzzy_cutoff)
            )
        return out

    def exact_verification(self, item: CaptionItem, units: Sequence[Unit]) -> list[int]:
        scene = self.scenes[item.image]
        out = []
        for unit in units:
            fact = unit_fact(unit.fact)
            if fact is not None:
                out.append(int(scene.holds(fact)))
            else:
                out.append(int(fuzzy_match(unit.fact, item.oracle_facts, self.cfg.fuzzy_cutoff) is not None))
        return out

    def match(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[OracleId]], int]:
        exact = self.exact_mapping(item, units)
        samples = []
        for s in range(n):
            drop = self._rng(item, 1, s).random(len(exact)) < self.cfg.flip_rate
            samples.append([None if d else m for m, d in zip(exact, drop)])
        return samples, 0

    def verify(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[int]], int]:
        exact = self.exact_verification(item, units)
        samples = []
        for s in range(n):
            flip = self._rng(item, 2, s).random(len(exact)) < self.cfg.flip_rate
            samples.append([1 - v if f else v for v, f in zip(exact, flip)])
        return samples, 0
