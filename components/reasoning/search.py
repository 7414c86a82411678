"""Answer selection and verifier-guided search over a step-wise sampling policy.

* `majority_vote`: the most frequent answer (ties: the one seen first); None answers never win over a real one.
* `best_of_n`: the answer of the highest-scored complete solution (ties: the first).
* `step_beam_search`: the paper's step-by-step beam search, for many questions at once. Keep b beams; every
  unfinished beam draws K one-step continuations (the empty start draws b * K); candidates identical in text
  to another are dropped; every candidate is scored by the verifier at its last token (a step delimiter);
  finished beams stay in the pool with their score; the top b are kept; the search stops when all b kept
  beams are finished, and answers with the top-scored finished one. Generated tokens count every drawn line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

S = TypeVar("S")


def majority_vote(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most common non-None answer (first seen among equals); None if every answer is None."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == top)


def best_of_n(scores: Sequence[float], answers: Sequence[Hashable | None]) -> Hashable | None:
    """The answer of the highest score (the first among equal scores)."""
    if len(scores) != len(answers) or not answers:
        raise ValueError(f"best_of_n needs as many scores as answers (>= 1), got {len(scores)} and {len(answers)}")
    return answers[int(np.argmax(np.asarray(scores, dtype=float)))]


@dataclass
class SearchResult(Generic[S]):
    """The chosen finished path per question, its score, tokens generated and verifier calls."""

    best: list[S]
    scores: list[float]
    tokens: list[int]
    expansions: int


def step_beam_search(
    roots: Sequence[S],
    expand: Callable[[int, S, np.random.Generator], S],
    is_done: Callable[[S], bool],
    key: Callable[[S], Hashable],
    new_tokens: Callable[[S, S], int],
    score: Callable[[Sequence[tuple[int, S]]], np.ndarray],
    *,
    beams: int,
    per_beam: int,
    rng: np.random.Generator,
    max_depth: int = 64,
) -> SearchResult[S]:
    """Step beam search over questions ``0..len(roots)-1`` (see the module docstring).

    ``expand(q, state, rng)`` draws one more step of question q; ``score`` maps (question, state) pairs to
    verifier values (higher is better), one call per depth for all questions; ``new_tokens(child, parent)``
    counts the tokens the step generated; ``key`` identifies a path's text.
    """
    if beams < 1 or per_beam < 1:
        raise ValueError(f"beams and per_beam must be >= 1, got {beams} and {per_beam}")
    pools: list[list[tuple[float, S]]] = [[(0.0, r)] for r in roots]
    tokens = [0] * len(roots)
    expansions = 0
    for depth in range(max_depth):
        fresh: list[tuple[int, S]] = []
        for q, pool in enumerate(pools):
            live = [s for _, s in pool if not is_done(s)]
            if not live:
                continue
            draws = beams * per_beam if depth == 0 else per_beam
            seen = {key(s) for _, s in pool if is_done(s)}
            for parent in live:
                for _ in range(draws):
                    child = expand(q, parent, rng)
                    tokens[q] += new_tokens(child, parent)
                    if key(child) not in seen:
                        seen.add(key(child))
                        fresh.append((q, child))
        if not fresh:
            break
        values = np.asarray(score(fresh), dtype=float)
        expansions += len(fresh)
        candidates: list[list[tuple[float, S]]] = [[(v, s) for v, s in pool if is_done(s)] for pool in pools]
        touched = {q for q, _ in fresh}
        for (q, child), v in zip(fresh, values):
            candidates[q].append((float(v), child))
        for q in touched:
            ranked = sorted(range(len(candidates[q])), key=lambda i: -candidates[q][i][0])
            pools[q] = [candidates[q][i] for i in ranked[:beams]]
    best, best_scores = [], []
    for q, pool in enumerate(pools):
        done = [(v, s) for v, s in pool if is_done(s)]
        if not done:
            raise RuntimeError(f"question {q}: no beam finished within {max_depth} steps")
        v, s = max(done, key=lambda vs: vs[0])
        best.append(s)
        best_scores.append(v)
    return SearchResult(best, best_scores, tokens, expansions)
