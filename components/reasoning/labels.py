"""Token labels of the three verifiers, over the solution tokens of (question, solution) token rows.

For the N sampled solutions of one question, with token ids ``ids`` (question tokens first, ``prompt`` of them),
outcome y in {0, 1} and, where known, per line the token index of its delimiter and whether the line is right:

* ORM (outcome supervision): every solution token gets y.
* PRM (process supervision): every token of line j gets line j's correctness (its delimiter included).
* TVM (token supervision, the paper's Eq.): token t gets the mean outcome of the solutions of the same question
  that share its exact token prefix, ``components.llm.prefix_values`` over the whole rows (question included),
  so the label falls back to y once a solution has diverged from all others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from components.llm import prefix_values

KINDS = ("orm", "prm", "tvm")


def _check(ids: Sequence[Sequence[int]], prompts: Sequence[int]) -> None:
    if len(ids) != len(prompts):
        raise ValueError(f"got {len(ids)} token rows and {len(prompts)} prompt lengths")
    for i, (row, p) in enumerate(zip(ids, prompts)):
        if not 0 <= p < len(row):
            raise ValueError(f"row {i}: prompt length {p} leaves no solution token in {len(row)} tokens")


def outcome_labels(ids: Sequence[Sequence[int]], prompts: Sequence[int], outcomes: Sequence[float]) -> list[np.ndarray]:
    """ORM: y broadcast to each solution token; one array of len(row) - prompt per row."""
    _check(ids, prompts)
    return [np.full(len(row) - p, float(y)) for row, p, y in zip(ids, prompts, outcomes)]


def step_labels(
    ids: Sequence[Sequence[int]],
    prompts: Sequence[int],
    line_ends: Sequence[Sequence[int]],
    line_correct: Sequence[Sequence[bool]],
) -> list[np.ndarray]:
    """PRM: the tokens of line j (after line j-1's delimiter, up to and including line j's at index
    ``line_ends[i][j]`` of the row) get ``line_correct[i][j]``."""
    _check(ids, prompts)
    out = []
    for i, (row, p, ends, correct) in enumerate(zip(ids, prompts, line_ends, line_correct)):
        if len(ends) != len(correct) or not ends or ends[-1] != len(row) - 1:
            raise ValueError(
                f"row {i}: line ends {list(ends)} must end at the last token ({len(row) - 1}) and "
                f"match {len(correct)} line labels"
            )
        labels, start = np.empty(len(row) - p), p
        for end, ok in zip(ends, correct):
            labels[start - p : end + 1 - p] = float(ok)
            start = end + 1
        out.append(labels)
    return out


def token_value_labels(
    ids: Sequence[Sequence[int]], prompts: Sequence[int], outcomes: Sequence[float], groups: Sequence[int]
) -> list[np.ndarray]:
    """TVM: prefix-shared mean outcome within each question (``groups[i]``: row i's question), on solution tokens."""
    _check(ids, prompts)
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(int(g), []).append(i)
    out: list[np.ndarray] = [np.empty(0)] * len(ids)
    for members in by_group.values():
        values = prefix_values([ids[i] for i in members], [outcomes[i] for i in members])
        for i, v in zip(members, values):
            out[i] = v[prompts[i] :]
    return out
