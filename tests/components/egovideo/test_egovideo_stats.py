"""EgoMemoria statistics against hand-computed answers: de-biased rows, pointer hits, summaries, and the
intervals over questions (estimates exact, intervals that behave as intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.egovideo.stats import (
    debiased_rows,
    excess_over_chance_ci,
    gap_trend_ci,
    mda_difference_ci,
    pointer_hits,
    summarize,
)

BUCKETS = ["short", "short", "short", "short", "medium", "medium", "long", "long"]
QTYPES = ["last_put"] * 4 + ["count_open"] * 4
BIASED = [True, False, False, True, True, False, False, False]
MODEL = np.array([1, 1, 0, 1, 1, 0, 0, 1], dtype=bool)
BLIND = np.array([1, 0, 0, 1, 1, 0, 0, 0], dtype=bool)


def test_pointer_hits_known_answer() -> None:
    scores = np.array([0.1, 0.9, 0.5, 0.7, 0.2])
    # evidence frames 1 (best: rank 0) and 4 (scores above it: 0.9, 0.5, 0.7 -> rank 3); top-2 = {1, 3}
    assert pointer_hits(scores, [1, 4], [1, 3]) == (0.5, 1.5)
    assert pointer_hits(scores, [3, 3], [3]) == (1.0, 1.0)  # repeated evidence counts once
    with pytest.raises(ValueError, match="at least one evidence frame"):
        pointer_hits(scores, [], [0])


def test_debiased_rows_known_answer() -> None:
    rows, preds = debiased_rows({"mpp": MODEL, "blind": BLIND}, {"blind": BLIND}, BUCKETS, BIASED, QTYPES, seed=3)
    mpp, blind = rows
    # kept: q1, q2 (short), q5 (medium), q6, q7 (long); MPP answers q1, q7 of them
    assert mpp["debiased_short"] == 50.0 and mpp["debiased_medium"] == 0.0 and mpp["debiased_long"] == 50.0
    assert mpp["raw_short"] == 75.0 and mpp["raw_medium"] == 50.0 and mpp["raw_long"] == 50.0
    assert mpp["mda"] == pytest.approx(100 / 3) and mpp["raw_mean"] == pytest.approx(175 / 3)
    assert mpp["inflation"] == pytest.approx(25.0)
    assert (mpp["kept"], mpp["kept_short"], mpp["kept_medium"], mpp["kept_long"]) == (5, 2, 1, 2)
    # biased q0, q3, q4: MPP right on all three; unbiased q1, q2, q5, q6, q7: right on q1, q7
    assert mpp["acc_biased"] == 100.0 and mpp["acc_unbiased"] == 40.0
    assert blind["mda"] == 0.0 and blind["acc_biased"] == 100.0 and blind["seed"] == 3
    assert len(preds) == 16 and preds[0] == {
        "model": "mpp",
        "seed": 3,
        "q": 0,
        "bucket": "short",
        "qtype": "last_put",
        "biased": True,
        "kept": False,
        "correct": True,
    }
    with pytest.raises(ValueError, match="model x answered 3 questions, expected 8"):
        debiased_rows({"x": MODEL[:3]}, {"blind": BLIND}, BUCKETS, BIASED, QTYPES, seed=0)
    with pytest.raises(ValueError, match="8 answers, 8 biased flags, 7 buckets"):
        debiased_rows({"x": MODEL}, {"blind": BLIND}, BUCKETS[:7], BIASED, QTYPES, seed=0)


def test_no_biased_question_gives_nan_not_an_error() -> None:
    rows, _ = debiased_rows({"m": MODEL}, {"b": BLIND}, BUCKETS, [False] * 8, QTYPES, seed=0)
    assert math.isnan(rows[0]["acc_biased"]) and rows[0]["acc_unbiased"] == pytest.approx(62.5)


def test_summarize_means_over_seeds_and_pointer_per_bucket() -> None:
    rows = [
        {
            "model": "m",
            "seed": s,
            "mda": v,
            "raw_mean": 2 * v,
            "acc_biased": 1.0,
            "acc_unbiased": 0.0,
            "debiased_short": v,
            "debiased_medium": v,
            "debiased_long": v,
        }
        for s, v in ((0, 10.0), (1, 30.0))
    ]
    pointer = [
        {"bucket": "long", "recall": 1.0, "evidence_rank": 0.0},
        {"bucket": "long", "recall": 0.5, "evidence_rank": 3.0},
    ]
    out = summarize(rows, pointer)
    assert out["m/mda"] == 20.0 and out["m/raw_mean"] == 40.0 and out["m/debiased_long"] == 20.0
    assert out["pointer/long/recall_at_k"] == 0.75 and out["pointer/long/mean_evidence_rank"] == 1.5
    assert math.isnan(out["pointer/short/recall_at_k"])


def _two_models(n_per_bucket: int, p_a: dict[str, float], p_b: dict[str, float], seed: int = 0):
    rng = np.random.default_rng(seed)
    buckets = np.repeat(["short", "medium", "long"], n_per_bucket)
    a = np.concatenate([rng.random(n_per_bucket) < p_a[b] for b in ("short", "medium", "long")])
    b = np.concatenate([rng.random(n_per_bucket) < p_b[b] for b in ("short", "medium", "long")])
    return a, b, buckets


def test_mda_difference_estimate_is_exact_and_the_interval_covers_it() -> None:
    a, b, buckets = _two_models(
        200, {"short": 0.8, "medium": 0.7, "long": 0.6}, {"short": 0.5, "medium": 0.5, "long": 0.5}
    )
    keep = np.ones(len(a), dtype=bool)
    keep[::7] = False
    ci = mda_difference_ci(a, b, buckets, keep, n_boot=500)
    exact = np.mean(
        [100 * (a[keep & (buckets == k)].mean() - b[keep & (buckets == k)].mean()) for k in ("short", "medium", "long")]
    )
    assert ci.estimate == pytest.approx(exact) and ci.low < exact < ci.high and ci.n == int(keep.sum())
    assert ci.low > 0  # a real 20 pp lead is resolved at n = 600
    # the same inputs and seed give the same interval; a single bucket is that bucket's difference
    assert mda_difference_ci(a, b, buckets, keep, n_boot=500) == ci
    one = mda_difference_ci(a, b, buckets, keep, names=("long",), n_boot=200)
    sel = keep & (buckets == "long")
    assert one.estimate == pytest.approx(100 * (a[sel].mean() - b[sel].mean()))


def test_identical_models_give_a_zero_width_interval_at_zero() -> None:
    a, _, buckets = _two_models(30, {"short": 0.5, "medium": 0.5, "long": 0.5}, {"short": 0, "medium": 0, "long": 0})
    ci = mda_difference_ci(a, a, buckets, np.ones(len(a), dtype=bool), n_boot=100)
    assert (ci.estimate, ci.low, ci.high) == (0.0, 0.0, 0.0)


def test_gap_trend_known_answer_and_sign() -> None:
    # a leads b by 0 pp on short and by 50 pp on long (deterministic answers)
    buckets = np.array(["short"] * 4 + ["medium"] * 4 + ["long"] * 4)
    a = np.array([1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0], dtype=bool)
    b = np.array([1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0], dtype=bool)
    ci = gap_trend_ci(a, b, buckets, np.ones(12, dtype=bool), n_boot=300)
    assert ci.estimate == pytest.approx(50.0) and ci.low <= 50.0 <= ci.high
    assert gap_trend_ci(b, a, buckets, np.ones(12, dtype=bool), n_boot=300).estimate == pytest.approx(-50.0)
    # a bucket that de-biasing emptied leaves the statistic undefined: an infinite interval, not a number
    keep = buckets != "long"
    empty = gap_trend_ci(a, b, buckets, keep, n_boot=50)
    assert math.isnan(empty.estimate) and (empty.low, empty.high) == (-math.inf, math.inf)


def test_excess_over_chance() -> None:
    correct = np.array([1] * 60 + [0] * 40, dtype=bool)
    ci = excess_over_chance_ci(correct, 25.0, n_boot=500)
    assert ci.estimate == pytest.approx(35.0) and ci.low > 0 and ci.high < 50
    at_chance = excess_over_chance_ci(np.array([1, 0, 0, 0] * 10, dtype=bool), 25.0, n_boot=500)
    assert at_chance.estimate == pytest.approx(0.0) and at_chance.low < 0 < at_chance.high
    nothing = excess_over_chance_ci(np.array([], dtype=bool), 25.0)
    assert nothing.n == 0 and (nothing.low, nothing.high) == (-math.inf, math.inf)
