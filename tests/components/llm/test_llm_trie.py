"""TVM's prefix labels: mean outcome over the solutions sharing an exact token prefix, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from components.llm import TokenTrie, prefix_values


def test_prefix_values_known_answer() -> None:
    sequences = [[1, 2, 3], [1, 2, 4], [1, 5], [1, 2, 3, 9]]
    outcomes = [1.0, 0.0, 0.0, 1.0]
    labels = prefix_values(sequences, outcomes)
    # token 1 is shared by all four (mean 0.5); [1, 2] by three (2/3); [1, 2, 3] by two (1); then unique
    np.testing.assert_allclose(labels[0], [0.5, 2 / 3, 1.0])
    np.testing.assert_allclose(labels[1], [0.5, 2 / 3, 0.0])
    np.testing.assert_allclose(labels[2], [0.5, 0.0])
    np.testing.assert_allclose(labels[3], [0.5, 2 / 3, 1.0, 1.0])


def test_counts_divergence_and_errors() -> None:
    trie = TokenTrie()
    for ids, y in (([7, 8], 1), ([7, 8], 0), ([7, 9], 1)):
        trie.add(ids, y)
    means, counts = trie.stats([7, 8])
    assert counts.tolist() == [3, 2] and means.tolist() == pytest.approx([2 / 3, 0.5])
    assert trie.sequences == 3
    with pytest.raises(KeyError, match="prefix of length 2"):
        trie.stats([7, 6])
    with pytest.raises(ValueError, match="finite"):
        trie.add([1], float("nan"))
    with pytest.raises(ValueError, match="2 sequences and 1 outcomes"):
        prefix_values([[1], [2]], [1.0])


def test_ids_not_text_decide_sharing() -> None:
    """The same text tokenised two ways shares no prefix beyond the common ids."""
    labels = prefix_values([[10, 11], [12]], [1.0, 0.0])  # e.g. "ab" as "a"+"b" vs "ab" as one token
    assert labels[0].tolist() == [1.0, 1.0] and labels[1].tolist() == [0.0]
