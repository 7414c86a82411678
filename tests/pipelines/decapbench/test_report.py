"""DeCapBench's claims on constructed numbers: each verdict reachable, the learning gates (a judge that shares
the simulator's facts decides nothing), the single-set bootstrap, and the table's shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from components.captions.meta_evaluation import METRIC_COLUMNS, correlation_rows, long_mask
from pipelines.decapbench.params import NGRAM_BASELINES, DecapbenchParams
from pipelines.decapbench.report import build_report, feedquill_claims, metric_claims, shared_truth_check


def _meta(spearman: dict[tuple[str, str], list[float]]) -> list[dict[str, Any]]:
    """Correlation rows for seeds 0..k-1: (metric, subset) -> Spearman per seed (Pearson, Kendall = Spearman)."""
    rows = []
    for (metric, subset), values in spearman.items():
        for seed, v in enumerate(values):
            rows.append(
                {"seed": seed, "subset": subset, "metric": metric, "n": 100, "pearson": v, "spearman": v, "kendall": v}
            )
    return rows


def _world(dc: dict[str, list[float]], base: dict[str, list[float]]) -> list[dict[str, Any]]:
    """DCScore with Spearman dc[subset] per seed, each n-gram baseline base[subset]; other metrics 0.5."""
    spec = {("dcscore", s): v for s, v in dc.items()}
    spec |= {(b, s): v for b in NGRAM_BASELINES for s, v in base.items()}
    spec |= {(m, s): [0.5] * 3 for m in ("dcscore_precision", "dcscore_recall", "capture") for s in dc}
    return _meta(spec)


def _verdicts(claims: list[Any]) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


GOOD = (
    {"all": [0.90, 0.91, 0.92], "long": [0.88, 0.89, 0.90], "short": [0.92, 0.93, 0.94]},
    {"all": [0.50, 0.52, 0.51], "long": [0.20, 0.22, 0.21], "short": [0.60, 0.61, 0.62]},
)


def test_metric_claims_hold_with_an_independent_judge() -> None:
    claims = metric_claims(_world(*GOOD), [], 0.5, judge="chat")
    assert _verdicts(claims) == {
        "dcscore_beats_ngram_metrics": "holds",
        "gap_largest_on_long_captions": "holds",
        "dcscore_beats_capture": "not resolved",  # offline, CAPTURE parses with the simulator's grammar
    }
    assert "gate failed: CAPTURE-style F1 vs the simulator's own grammar" in claims[2].reason
    assert claims[0].headline and not claims[1].headline
    assert claims[0].effect == pytest.approx(0.40) and claims[0].n == 3
    assert claims[1].effect == pytest.approx(0.68 - 0.32)
    assert claims[0].numbers["gap_bleu4_long"] == pytest.approx(0.68)


def test_the_rule_judge_sharing_the_simulator_decides_nothing_and_is_a_check() -> None:
    meta = _world(*GOOD)
    claims = metric_claims(meta, [], 0.5, judge="rule")
    assert set(_verdicts(claims).values()) == {"not resolved"}
    assert all("gate failed: DCScore (rule judge) vs the human score's own facts" in c.reason for c in claims)
    (check,) = shared_truth_check(meta, "rule")
    assert check.id == "rule_judge_beats_ngram_metrics" and check.passed and "by construction" in check.check
    assert shared_truth_check(meta, "chat") == []


def test_a_human_score_of_dcscores_own_form_decides_nothing() -> None:
    """The synthetic human score 'f1' is the F1 of the true precision and coverage: a judge that recovers the facts
    reproduces it, so even the grammar-free judge's win is not a claim against it."""
    claims = metric_claims(_world(*GOOD), [], 0.5, judge="minilm", human="f1")
    assert set(_verdicts(claims).values()) == {"not resolved"}
    assert all("gate failed: human score (f1) vs DCScore's F1 form" in c.reason for c in claims)
    assert (
        _verdicts(metric_claims(_world(*GOOD), [], 0.5, judge="minilm", human="raters"))["dcscore_beats_ngram_metrics"]
        == "holds"
    )


def test_metric_claims_do_not_hold() -> None:
    meta = _world(
        {"all": [0.30, 0.31, 0.32], "long": [0.30, 0.31, 0.30], "short": [0.60, 0.61, 0.62]},
        {"all": [0.60, 0.62, 0.61], "long": [0.50, 0.52, 0.51], "short": [0.20, 0.21, 0.22]},
    )
    verdicts = _verdicts(metric_claims(meta, [], 0.5, judge="chat"))
    assert verdicts.pop("dcscore_beats_capture") == "not resolved" and set(verdicts.values()) == {"does not hold"}


def test_a_gap_near_zero_well_measured_does_not_hold() -> None:
    """Below one standard error of a Spearman rho over 300 captions (0.058): no gap that matters."""
    dc = [0.60, 0.62, 0.61, 0.60, 0.615]
    meta = _world(
        {"all": dc, "long": dc, "short": dc}, {"all": [0.60, 0.61, 0.61, 0.595, 0.60], "long": dc, "short": dc}
    )
    claim = metric_claims(meta, [], 0.5, judge="chat")[0]
    assert claim.ci[0] < 0 < claim.ci[1] < 0.058 and claim.verdict == "does not hold"


def test_metric_claims_not_resolved_by_noisy_seeds_or_without_human_scores() -> None:
    meta = _world(
        {"all": [0.9, 0.4, 0.6], "long": [0.9, 0.3, 0.6], "short": [0.5, 0.8, 0.6]},
        {"all": [0.5, 0.6, 0.6], "long": [0.5, 0.5, 0.5], "short": [0.5, 0.5, 0.5]},
    )
    assert set(_verdicts(metric_claims(meta, [], 0.5, judge="chat")).values()) == {"not resolved"}
    claims = metric_claims([], [], 0.5, judge="chat")
    assert set(_verdicts(claims).values()) == {"not resolved"} and "human scores" in claims[0].reason


def test_a_dcscore_uncorrelated_with_humans_fails_its_gate() -> None:
    meta = _world(
        {"all": [0.05, -0.1, 0.02], "long": [0.1, 0.0, 0.05], "short": [0.0, 0.1, 0.0]},
        {"all": [-0.5, -0.52, -0.51], "long": [-0.5, -0.5, -0.6], "short": [-0.1, -0.1, -0.2]},
    )
    claim = metric_claims(meta, [], 0.5, judge="chat")[0]
    assert claim.verdict == "not resolved" and "gate failed: DCScore vs chance (rho = 0)" in claim.reason


def _captions(n: int, rng: np.random.Generator, dc_noise: float, base_noise: float) -> list[dict[str, Any]]:
    human = rng.uniform(0, 1, n)
    words = rng.integers(20, 200, n)
    return [
        {
            "seed": None,
            "idx": i,
            "valid": True,
            "human_score": float(h),
            "words": int(w),
            "dcscore": float(h + rng.normal(0, dc_noise)),
            "precision": float(h),
            "recall": float(h),
            "capture": float(h),
            **{b: float(h + rng.normal(0, base_noise if w >= 110 else 0.05)) for b in NGRAM_BASELINES},
        }
        for i, (h, w) in enumerate(zip(human, words))
    ]


def test_one_set_of_captions_gets_a_bootstrap_over_captions() -> None:
    """A real candidate file with human scores: one group, so the interval comes from resampled captions."""
    captions = _captions(200, np.random.default_rng(0), dc_noise=0.05, base_noise=0.3)
    meta = correlation_rows(captions, 0.5)
    assert {r["seed"] for r in meta} == {None} and len(meta) == 3 * len(METRIC_COLUMNS)
    claims = metric_claims(meta, captions, 0.5, judge="chat")
    assert claims[0].verdict == "holds" and claims[0].n == 200 and claims[0].ci[0] > 0
    assert "bootstrap over the captions" in claims[0].evidence and claims[0].gates[1].passed
    assert claims[1].verdict == "holds"  # the baselines are noisy on long captions only


def test_long_mask_splits_by_word_count() -> None:
    assert long_mask([10, 50, 30, 40], 0.5).tolist() == [False, True, False, True]
    assert long_mask([5, 6], 0.99).tolist() == [False, True]  # one caption stays short


def _fq_rows(seed: int, name: str, hallucination: float, recall: float, dcscore: float) -> list[dict[str, Any]]:
    return [
        {
            "seed": seed,
            "captioner": name,
            "units": 100,
            "false_units": round(100 * hallucination),
            "fillers": 0,
            "recall_exact": recall,
            "valid": True,
            "dcscore": dcscore,
            "words": 50,
        }
        for _ in range(4)
    ]


def _feedquill(sft: list[tuple[float, float, float]], dpo: list[tuple[float, float, float]]) -> list[dict[str, Any]]:
    rows = []
    for seed, (s, d) in enumerate(zip(sft, dpo)):
        rows += _fq_rows(seed, "sft", *s) + _fq_rows(seed, "dpo", *d)
    return rows


PAIRS = {"seed0/pairs": 50, "seed1/pairs": 48, "seed2/pairs": 51}
# the captioners' hallucination rate when their captions are read against other scenes (the blind captioner)
BLIND = {f"{name}/seed{s}/hallucination_blind": 0.92 for name in ("sft", "dpo") for s in range(4)}
FQ_SPECS = ("dpo_lowers_hallucination", "dpo_raises_dcscore", "dpo_keeps_recall")


def test_feedquill_claims_hold() -> None:
    rows = _feedquill(
        [(0.3, 0.6, 50), (0.3, 0.62, 51), (0.4, 0.58, 49)], [(0.1, 0.6, 60), (0.1, 0.61, 62), (0.2, 0.59, 58)]
    )
    claims = feedquill_claims(rows, [0, 1, 2], PAIRS, BLIND)
    assert _verdicts(claims) == dict.fromkeys(FQ_SPECS, "holds")
    assert claims[0].effect == pytest.approx(0.2)
    assert claims[1].effect == pytest.approx((60 / 50 * 62 / 51 * 58 / 49) ** (1 / 3))  # geometric mean ratio
    assert all(g.passed for g in claims[0].gates) and claims[2].rule.kind == "non_inferiority"


def test_feedquill_claims_do_not_hold() -> None:
    rows = _feedquill(
        [(0.1, 0.6, 60), (0.12, 0.6, 61), (0.2, 0.6, 59)], [(0.3, 0.3, 50), (0.3, 0.31, 50), (0.4, 0.29, 48)]
    )
    assert _verdicts(feedquill_claims(rows, [0, 1, 2], PAIRS, BLIND)) == dict.fromkeys(FQ_SPECS, "does not hold")


def test_a_tiny_drop_in_hallucination_does_not_hold() -> None:
    """DPO changes the hallucination rate by about a point: every drop of 5 points is excluded."""
    sft = [(0.30, 0.6, 50), (0.30, 0.6, 51), (0.31, 0.6, 49), (0.29, 0.6, 50)]
    dpo = [(0.29, 0.6, 50), (0.30, 0.6, 51), (0.30, 0.6, 49), (0.29, 0.6, 50)]
    pairs = {f"seed{s}/pairs": 10 for s in range(4)}
    claim = feedquill_claims(_feedquill(sft, dpo), [0, 1, 2, 3], pairs, BLIND)[0]
    assert claim.verdict == "does not hold" and claim.ci[1] < 0.05


def test_feedquill_claims_need_captioners_that_learned_and_pairs() -> None:
    weak = _feedquill([(0.8, 0.1, 10), (0.85, 0.1, 11), (0.9, 0.1, 9)], [(0.5, 0.2, 20)] * 3)
    claims = feedquill_claims(weak, [0, 1, 2], PAIRS, BLIND)
    assert set(_verdicts(claims).values()) == {"not resolved"}
    assert all("gate failed: SFT captioner vs precision 0.5" in c.reason for c in claims)
    assert claims[0].gates[0].effect == pytest.approx(0.15 - 0.5)
    good = _feedquill([(0.3, 0.6, 50), (0.25, 0.6, 50), (0.3, 0.6, 52)], [(0.1, 0.6, 60)] * 3)
    no_pairs = feedquill_claims(good, [0, 1, 2], {**PAIRS, "seed1/pairs": 0}, BLIND)
    assert all("gate failed: preference pairs vs none" in c.reason for c in no_pairs)
    noisy = _feedquill(
        [(0.3, 0.6, 50), (0.3, 0.6, 50), (0.3, 0.6, 50)], [(0.1, 0.6, 40), (0.5, 0.6, 60), (0.3, 0.6, 52)]
    )
    # DPO's own precision (0.9, 0.5, 0.7) is not above 0.5 on its interval: its gate fails
    assert "DPO captioner" in feedquill_claims(noisy, [0, 1, 2], PAIRS, BLIND)[0].reason
    noisy = _feedquill(
        [(0.3, 0.6, 50), (0.3, 0.6, 50), (0.3, 0.6, 50)], [(0.1, 0.6, 40), (0.35, 0.6, 60), (0.2, 0.6, 52)]
    )
    assert _verdicts(feedquill_claims(noisy, [0, 1, 2], PAIRS, BLIND))["dpo_lowers_hallucination"] == "not resolved"


def test_build_report_shape() -> None:
    meta = _world(
        {"all": [0.90, 0.91, 0.92], "long": [0.88, 0.89, 0.90], "short": [0.92, 0.93, 0.94]},
        {"all": [0.50, 0.52, 0.51], "long": [0.20, 0.22, 0.21], "short": [0.60, 0.61, 0.62]},
    )
    rows = _feedquill([(0.3, 0.6, 50), (0.32, 0.6, 51), (0.3, 0.6, 52)], [(0.1, 0.6, 60)] * 3)
    dcscore = {
        "dcscore": 58.2,
        "valid": 900,
        "invalid": 0,
        "judge": "rule",
        "seed0": 57.0,
        "seed1": 58.0,
        "seed2": 59.0,
        "oracle_dcscore_exact": 100.0,
        "oracle_checked": 50,
    }
    report = build_report(DecapbenchParams(), {"oracle_facts_mean": 27.5}, dcscore, meta, [], PAIRS, rows, BLIND)
    assert [r["metric"] for r in report.rows] == [
        "DCScore",
        "DCScore precision term",
        "DCScore recall term",
        "CAPTURE-style F1 (obj/attr/rel)",
        "BLEU-4",
        "ROUGE-L",
        "TF-IDF cosine",
    ]
    assert report.rows[0]["Spearman"].startswith("0.910 ± ") and report.rows[0]["paper Spearman"] is None
    assert report.columns[:4] == ["metric", "Pearson", "Spearman", "Kendall"]
    assert [c.id for c in report.checks] == ["oracle_caption_scores_100", "rule_judge_beats_ngram_metrics"]
    assert all(c.passed for c in report.checks)
    assert report.claims[0].verdict == "not resolved" and [c.id for c in report.headline] == [
        "dcscore_beats_ngram_metrics"
    ]
    fq = report.extra_tables["FeedQuill-lite: SFT vs DPO captioners on held-out scenes"]
    assert [r["captioner"] for r in fq] == ["SFT", "DPO", "DPO - SFT"]
    assert fq[1]["preference pairs"].startswith("49.7 ± ") and fq[2]["hallucination rate"].startswith("-0.207")
    assert report.extra_tables["DCScore per seed"][0] == {"set": "seed0", "DCScore": 57.0}
    assert "## Claims" in report.to_markdown()
