"""A trie over exact token ids with outcome statistics per prefix: TVM's token-level labels.

For the N sampled solutions of one question, with outcomes y (1 correct, 0 wrong), the label of token t of
solution s is the mean outcome of the solutions that share its exact prefix s_1..s_t:

    v_t(s) = (1 / |P_t|) * sum_{s' in P_t} y(s'),   P_t = {s' : s'_1..s'_t = s_1..s_t}.

Once s has diverged from every other solution, |P_t| = 1 and v_t = y(s). Prefixes are compared as token ids,
never as text: two texts that tokenise differently do not share a prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class _Node:
    __slots__ = ("children", "count", "total")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.count = 0
        self.total = 0.0


class TokenTrie:
    """Token-id prefixes of added sequences, each node holding (number of sequences through it, sum of
    their outcomes)."""

    def __init__(self) -> None:
        self._root = _Node()
        self.sequences = 0

    def add(self, ids: Sequence[int], outcome: float) -> None:
        """Insert one sequence with its outcome (a finite number)."""
        outcome = float(outcome)
        if not np.isfinite(outcome):
            raise ValueError(f"outcome must be finite, got {outcome}")
        node = self._root
        for token in ids:
            node = node.children.setdefault(int(token), _Node())
            node.count += 1
            node.total += outcome
        self.sequences += 1

    def stats(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(mean outcome [n], count [n]) of the sequences sharing ids[:t+1], for t = 0..n-1.

        Raises:
            KeyError: ``ids`` leaves the trie (it was never added, nor a prefix of an added sequence).
        """
        means, counts = np.empty(len(ids)), np.empty(len(ids), dtype=np.int64)
        node = self._root
        for t, token in enumerate(ids):
            child = node.children.get(int(token))
            if child is None:
                raise KeyError(f"the prefix of length {t + 1} was never added to the trie")
            node = child
            means[t], counts[t] = node.total / node.count, node.count
        return means, counts


def prefix_values(sequences: Sequence[Sequence[int]], outcomes: Sequence[float]) -> list[np.ndarray]:
    """TVM's label of every token of every sequence (the sequences of one question): the mean outcome over the
    sequences sharing its exact token prefix. Returns one float array per sequence, aligned with its ids."""
    if len(sequences) != len(outcomes):
        raise ValueError(f"got {len(sequences)} sequences and {len(outcomes)} outcomes")
    trie = TokenTrie()
    for ids, y in zip(sequences, outcomes):
        trie.add(ids, y)
    return [trie.stats(ids)[0] for ids in sequences]
