"""EgoMemoria statistics of one evaluation: de-biased accuracy tables, pointer hits, and intervals over questions.

* :func:`debiased_rows`: for one training seed, the bias mask of the blind models (a question any of them
  answers correctly is dropped, :func:`components.egovideo.benchmark.debias_mask`) and, per model, raw and
  debiased accuracy per length bucket, MDA, the inflation ``raw mean - MDA`` and the accuracy on the
  biased / unbiased questions (``biased``: the answer equals the question's prior); plus one row per
  (model, question).
* :func:`pointer_hits`: how well a pointer's top-k covers a question's evidence frames: recall
  ``|evidence ∩ selected| / |evidence|`` and the mean rank of the evidence (frames scored strictly higher).
* :func:`summarize`: per-model means over seeds and the pointer's recall and evidence rank per bucket.
* Intervals over questions, for a single training seed (a percentile bootstrap that resamples the
  questions with replacement; both models of a paired statistic see the same resampled questions):
  :func:`mda_difference_ci` (``MDA_a - MDA_b``), :func:`gap_trend_ci` (``gap_last - gap_first`` with
  ``gap_b`` the debiased accuracy difference in bucket ``b``) and :func:`excess_over_chance_ci`
  (accuracy minus chance). The bucket sizes vary between resamples; a bucket emptied by a resample is
  skipped by MDA, as the metric itself does; a statistic undefined on a resample makes the interval
  infinite rather than spuriously narrow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.egovideo.benchmark import accuracy_table, debias_mask
from components.egovideo.synthetic import BUCKETS
from components.metrics.stats import Interval, bootstrap_ci


def pointer_hits(scores: np.ndarray, evidence: Sequence[int], selected: Sequence[int]) -> tuple[float, float]:
    """``(recall, mean evidence rank)`` of one question: the share of its evidence frames among the
    selected ones, and the mean over evidence frames of the number of frames scored strictly higher."""
    s = np.asarray(scores, dtype=float)
    ev = sorted({int(e) for e in evidence})
    if not ev:
        raise ValueError("pointer_hits: a question needs at least one evidence frame")
    recall = len(set(ev) & {int(i) for i in selected}) / len(ev)
    rank = float(np.mean([int((s > s[e]).sum()) for e in ev]))
    return recall, rank


def _share(ok: np.ndarray, sel: np.ndarray) -> float:
    return float(100.0 * ok[sel].mean()) if sel.any() else math.nan


def debiased_rows(
    models: Mapping[str, np.ndarray],
    blind: Mapping[str, np.ndarray],
    buckets: Sequence[str],
    biased: Sequence[bool],
    qtypes: Sequence[str],
    seed: int,
    names: Sequence[str] = BUCKETS,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Accuracy rows (one per model) and prediction rows (one per model and question) of one seed.

    ``models`` maps a name to its per-question correctness; ``blind`` the blind models that define the
    bias mask (they may also be in ``models``).
    """
    keep = debias_mask(blind)
    flags = np.asarray(biased, dtype=bool)
    b = np.asarray(buckets)
    if not (len(keep) == len(flags) == len(b) == len(qtypes)):
        raise ValueError(
            f"debiased_rows: {len(keep)} answers, {len(flags)} biased flags, {len(b)} buckets and {len(qtypes)} qtypes"
        )
    rows, preds = [], []
    for name, correct in models.items():
        ok = np.asarray(correct, dtype=bool)
        if ok.shape != keep.shape:
            raise ValueError(f"debiased_rows: model {name} answered {len(ok)} questions, expected {len(keep)}")
        table = accuracy_table(ok, buckets, keep)
        row: dict[str, Any] = {
            "model": name,
            "seed": seed,
            "raw_mean": table["raw_mean"],
            "mda": table["mda"],
            "inflation": table["inflation"],
            "kept": int(keep.sum()),
            "acc_biased": _share(ok, flags),
            "acc_unbiased": _share(ok, ~flags),
        }
        row.update({f"raw_{n}": table["raw"][n] for n in names})
        row.update({f"debiased_{n}": table["debiased"][n] for n in names})
        row.update({f"kept_{n}": int(((b == n) & keep).sum()) for n in names})
        rows.append(row)
        preds += [
            {
                "model": name,
                "seed": seed,
                "q": i,
                "bucket": str(b[i]),
                "qtype": str(qtypes[i]),
                "biased": bool(flags[i]),
                "kept": bool(keep[i]),
                "correct": bool(ok[i]),
            }
            for i in range(len(ok))
        ]
    return rows, preds


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def summarize(
    rows: Sequence[Mapping[str, Any]], pointer: Sequence[Mapping[str, Any]], names: Sequence[str] = BUCKETS
) -> dict[str, float]:
    """``<model>/<key>``: means over seeds of MDA, raw mean, biased / unbiased accuracy and the debiased
    accuracy per bucket; ``pointer/<bucket>/recall_at_k`` and ``.../mean_evidence_rank`` (NaN: no pointer)."""
    out: dict[str, float] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        for key in ("mda", "raw_mean", "acc_biased", "acc_unbiased", *(f"debiased_{n}" for n in names)):
            out[f"{model}/{key}"] = _mean([float(r[key]) for r in mine])
    for n in names:
        sel = [r for r in pointer if r["bucket"] == n]
        out[f"pointer/{n}/recall_at_k"] = _mean([float(r["recall"]) for r in sel])
        out[f"pointer/{n}/mean_evidence_rank"] = _mean([float(r["evidence_rank"]) for r in sel])
    return out


# --------------------------------------------------------------------------------------------------
# intervals over questions (one training seed)
# --------------------------------------------------------------------------------------------------
def _over_questions(n: int, statistic: Any, n_boot: int, seed: int) -> Interval:
    """Percentile bootstrap of ``statistic(question indices)`` over ``n`` questions."""
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    interval = bootstrap_ci(
        np.arange(n, dtype=float), lambda idx: statistic(idx.astype(np.int64)), n_boot=n_boot, seed=seed
    )
    if not (math.isfinite(interval.estimate) and math.isfinite(interval.low) and math.isfinite(interval.high)):
        return Interval(interval.estimate, -math.inf, math.inf, n)
    return interval


def _kept(
    correct_a: np.ndarray, correct_b: np.ndarray | None, buckets: Sequence[str], keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(correct_a, dtype=float)
    d = a - np.asarray(correct_b, dtype=float) if correct_b is not None else a
    k = np.asarray(keep, dtype=bool)
    b = np.asarray(buckets)
    if not (d.shape == k.shape == b.shape):
        raise ValueError(f"correctness {d.shape}, keep {k.shape} and buckets {b.shape} differ in length")
    return 100.0 * d[k], b[k]


def _bucket_means(d: np.ndarray, b: np.ndarray, names: Sequence[str]) -> list[float]:
    return [float(d[b == n].mean()) if (b == n).any() else math.nan for n in names]


def mda_difference_ci(
    correct_a: np.ndarray,
    correct_b: np.ndarray,
    buckets: Sequence[str],
    keep: np.ndarray,
    names: Sequence[str] = BUCKETS,
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """``MDA_a - MDA_b`` (percentage points) over the kept questions, paired bootstrap over those questions."""
    d, b = _kept(correct_a, correct_b, buckets, keep)

    def stat(idx: np.ndarray) -> float:
        means = [m for m in _bucket_means(d[idx], b[idx], names) if not math.isnan(m)]
        return float(np.mean(means)) if means else math.nan

    return _over_questions(len(d), stat, n_boot, seed)


def gap_trend_ci(
    correct_a: np.ndarray,
    correct_b: np.ndarray,
    buckets: Sequence[str],
    keep: np.ndarray,
    first: str = BUCKETS[0],
    last: str = BUCKETS[-1],
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """``gap_last - gap_first`` (pp), ``gap_x`` = debiased accuracy of a minus b in bucket x; bootstrap over
    the kept questions. Positive: a's lead over b grows from the first to the last bucket."""
    d, b = _kept(correct_a, correct_b, buckets, keep)

    def stat(idx: np.ndarray) -> float:
        lo, hi = _bucket_means(d[idx], b[idx], (first, last))
        return hi - lo

    return _over_questions(len(d), stat, n_boot, seed)


def excess_over_chance_ci(correct: np.ndarray, chance: float, n_boot: int = 2000, seed: int = 0) -> Interval:
    """Accuracy (%) minus ``chance`` (%) over the given questions, bootstrap over them."""
    x = 100.0 * np.asarray(correct, dtype=float) - chance
    return _over_questions(len(x), lambda idx: float(x[idx].mean()), n_boot, seed)
