"""EgoMemoria-style evaluation: held-out videos, length buckets, blind-model de-biasing and MDA.

De-biasing (MM-Ego §EgoMemoria): text-only ("blind") models answer each question without the video;
a question that *any* blind model answers correctly is language-biased and removed. With ``keep`` the
mask of the remaining questions and ``B`` the length buckets,

    debiased accuracy_b = mean(correct_i for i in bucket b if keep_i)
    MDA                 = mean over buckets b of debiased accuracy_b   (buckets with no kept question skipped)

The blind LLM scores each option ``o`` of a question ``q`` by the *mean* per-token log-probability of
``" o"`` after ``"Question: q\\nAnswer:"`` (length-normalised, so an option of one token is not preferred over
one of three for its length alone) and picks the best; the prompt holds no video, so every (question, option)
pair is scored once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from components.egovideo.synthetic import BUCKETS


class LogprobModel(Protocol):
    def token_logprobs(self, prompts: list[str], continuations: list[str], *, batch_size: int = 8) -> list[Any]: ...


def split_videos(video_uids: Sequence[str], test_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Disjoint (train, test) video uid lists; ``round(test_fraction * n)`` videos (at least 1) are held out."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    uids = sorted(set(video_uids))
    if len(uids) < 2:
        raise ValueError(f"need at least 2 videos to hold some out, got {len(uids)}")
    order = np.random.default_rng(seed).permutation(len(uids))
    n_test = min(len(uids) - 1, max(1, round(test_fraction * len(uids))))
    test = sorted(uids[i] for i in order[:n_test])
    train = sorted(uids[i] for i in order[n_test:])
    return train, test


def debias_mask(blind_correct: Mapping[str, np.ndarray]) -> np.ndarray:
    """``keep[i]`` is True when no blind model answered question ``i`` correctly."""
    if not blind_correct:
        raise ValueError("de-biasing needs at least one blind model")
    arrays = [np.asarray(v, dtype=bool) for v in blind_correct.values()]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(
            f"blind models answered different numbers of questions: "
            f"{ {k: np.shape(v) for k, v in blind_correct.items()} }"
        )
    return ~np.any(np.stack(arrays), axis=0)


def bucket_accuracy(
    correct: np.ndarray, buckets: Sequence[str], keep: np.ndarray | None = None, names: Sequence[str] = BUCKETS
) -> dict[str, float]:
    """Accuracy (%) per bucket over the questions with ``keep`` (all if None); NaN where none is left."""
    correct = np.asarray(correct, dtype=bool)
    b = np.asarray(buckets)
    if correct.shape != b.shape:
        raise ValueError(f"correct {correct.shape} and buckets {b.shape} differ in length")
    keep = np.ones_like(correct) if keep is None else np.asarray(keep, dtype=bool)
    out = {}
    for name in names:
        sel = (b == name) & keep
        out[name] = float(100.0 * correct[sel].mean()) if sel.any() else math.nan
    return out


def mean_over_buckets(per_bucket: Mapping[str, float]) -> float:
    """MDA when given debiased accuracies: the mean over buckets that kept any question (NaN if none)."""
    values = [v for v in per_bucket.values() if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def accuracy_table(correct: np.ndarray, buckets: Sequence[str], keep: np.ndarray) -> dict[str, Any]:
    """Raw and debiased accuracy per bucket, their bucket means, and the inflation raw - debiased."""
    raw = bucket_accuracy(correct, buckets)
    deb = bucket_accuracy(correct, buckets, keep)
    return {
        "raw": raw,
        "debiased": deb,
        "raw_mean": mean_over_buckets(raw),
        "mda": mean_over_buckets(deb),
        "inflation": mean_over_buckets(raw) - mean_over_buckets(deb),
    }


def blind_llm_choices(
    lm: LogprobModel, questions: Sequence[str], options: Sequence[Sequence[str]], batch: int = 64
) -> tuple[np.ndarray, int]:
    """The option index a blind LLM picks per question (highest mean per-token log-prob of ``" <option>"``).

    Returns ``(choices [N], distinct pairs scored)``. Ties go to the first option.
    """
    pairs = sorted({(q, o) for q, opts in zip(questions, options) for o in opts})
    scores: dict[tuple[str, str], float] = {}
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        tokens = lm.token_logprobs(
            [f"Question: {q}\nAnswer:" for q, _ in chunk], [f" {o}" for _, o in chunk], batch_size=batch
        )
        scores.update(zip(chunk, (float(np.mean(np.asarray(t, dtype=float))) if len(t) else -math.inf for t in tokens)))
    choices = np.asarray([int(np.argmax([scores[(q, o)] for o in opts])) for q, opts in zip(questions, options)])
    return choices, len(pairs)
