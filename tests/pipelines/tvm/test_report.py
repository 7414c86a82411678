"""TVM's claims and checks on constructed numbers: every verdict reachable, the learning gates, the table shape."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.tvm.params import TvmParams
from pipelines.tvm.report import (
    QUESTION_CORRECT,
    accuracy_gap,
    auc_claim,
    auc_table,
    beam_claim,
    build_report,
    checks,
    table,
)


def _correct(n: int, right: int, offset: int = 0) -> list[float]:
    """``n`` questions, ``right`` of them correct, starting at question ``offset`` (wrapping round)."""
    return [float((q - offset) % n < right) for q in range(n)]


def _search(
    tvm: list[list[float]],
    orm: list[list[float]],
    single_right: float = 0.6,
    orm_bon: float = 0.8,
    tvm_bon: float = 0.8,
) -> list[dict[str, Any]]:
    """Rows of three arms per seed from per-question correctness; Best-of-N and single as fractions correct."""
    rows = []
    for seed, (a, b) in enumerate(zip(tvm, orm)):
        n = len(a)
        for method, verifier, cells in (
            ("beam", "tvm", a),
            ("beam", "orm", b),
            ("single", "none", _correct(n, round(single_right * n))),
            ("best_of_n", "orm", _correct(n, round(orm_bon * n))),
            ("best_of_n", "tvm", _correct(n, round(tvm_bon * n))),
        ):
            rows.append(
                {
                    "seed": seed,
                    "method": method,
                    "verifier": verifier,
                    "accuracy": sum(cells) / n,
                    "tokens": 400.0 if method == "beam" else 30.0,
                    QUESTION_CORRECT: cells,
                }
            )
    return rows


def _pair(n: int, base: int, extra_tvm: int = 0, extra_orm: int = 0, seeds: int = 3) -> tuple[list, list]:
    """TVM and ORM share ``base`` correct questions; each is also right on its own extra ones."""
    tvm = [[float(q < base + extra_tvm) for q in range(n)] for _ in range(seeds)]
    orm = [
        [float(q < base or base + extra_tvm <= q < base + extra_tvm + extra_orm) for q in range(n)]
        for _ in range(seeds)
    ]
    return tvm, orm


def _aucs(tvm: list[float], orm: list[float], key: str = "auc_recoverable") -> list[dict[str, Any]]:
    return [
        row
        for seed, (a, b) in enumerate(zip(tvm, orm))
        for row in (
            {"seed": seed, "verifier": "tvm", "auc_outcome": 0.6, key: a},
            {"seed": seed, "verifier": "orm", "auc_outcome": 0.6, key: b},
        )
    ]


def test_beam_claim_reaches_every_verdict() -> None:
    holds = beam_claim(_search(*_pair(200, 140, extra_tvm=12)))  # TVM +6 points on every seed
    assert holds.verdict == "holds" and holds.effect == pytest.approx(6.0) and holds.numbers["wins"] == 3
    assert holds.n == 600 and "bootstrap over held-out questions × seeds" in holds.statistic
    assert beam_claim(_search(*_pair(200, 120, extra_orm=30))).verdict == "does not hold"  # −15 points
    # a loss smaller than the 2.3-point margin, well measured: TVM is not worse than ORM by a point that matters
    small = beam_claim(_search(*_pair(1000, 700, extra_orm=5)))
    assert small.verdict == "holds" and -1 < small.effect < 0
    noisy = beam_claim(_search(*_pair(20, 10, extra_tvm=2, extra_orm=3)))
    assert noisy.verdict == "not resolved" and noisy.ci[0] < -2.3 < noisy.ci[1]


def test_identical_arms_carry_no_variance() -> None:
    same = beam_claim(_search(*_pair(50, 40)))
    assert same.verdict == "not resolved" and "no variance" in same.reason


def test_a_verifier_that_did_not_learn_gates_both_claims() -> None:
    rows = _search(*_pair(200, 140, extra_tvm=12), single_right=0.8, orm_bon=0.7, tvm_bon=0.9)  # ORM below one sample
    beam = beam_claim(rows)
    assert beam.verdict == "not resolved" and "gate failed: ORM Best-of-N vs single sample" in beam.reason
    assert "TVM Best-of-N" not in beam.reason
    auc = auc_claim(_aucs([0.80, 0.82, 0.81], [0.75, 0.76, 0.75]), rows)
    assert auc.verdict == "not resolved" and "ORM Best-of-N" in auc.reason
    missing_bon = [
        r for r in _search(*_pair(200, 140, extra_tvm=12)) if r["verifier"] != "tvm" or r["method"] != "best_of_n"
    ]
    assert "TVM Best-of-N vs single sample" in beam_claim(missing_bon).reason


def test_beam_claim_without_beam_search_is_not_measured() -> None:
    rows = [r for r in _search(*_pair(50, 40, extra_tvm=2)) if r["method"] != "beam"]
    missing = beam_claim(rows)
    assert missing.verdict == "not resolved" and "synthetic policy" in missing.reason


def test_per_seed_fallback_and_unit_mismatch() -> None:
    rows = [{k: v for k, v in r.items() if k != QUESTION_CORRECT} for r in _search(*_pair(100, 60, extra_tvm=5))]
    for r, bump in zip([r for r in rows if r["method"] == "beam" and r["verifier"] == "tvm"], (0.0, 0.01, 0.02)):
        r["accuracy"] += bump
    per_seed = beam_claim(rows)
    assert per_seed.n == 3 and per_seed.verdict == "holds"
    short = [r for r in _search(*_pair(100, 60, extra_tvm=5)) if not (r["verifier"] == "orm" and r["seed"] == 2)]
    with pytest.raises(ValueError, match="seeds"):
        accuracy_gap(short, {"method": "beam", "verifier": "tvm"}, {"method": "beam", "verifier": "orm"})


def test_auc_claim_reaches_every_verdict_and_falls_back_to_the_outcome() -> None:
    rows = _search(*_pair(50, 40, extra_tvm=2))
    assert auc_claim(_aucs([0.80, 0.82, 0.81], [0.75, 0.76, 0.75]), rows).verdict == "holds"
    assert auc_claim(_aucs([0.70, 0.72, 0.70], [0.75, 0.76, 0.75]), rows).verdict == "does not hold"
    # an AUC gap near zero, well measured: every gap of the 0.025 smallest effect of interest is excluded
    small = auc_claim(_aucs([0.753, 0.758, 0.751, 0.754, 0.757], [0.750, 0.760, 0.750, 0.755, 0.755]), rows)
    assert small.verdict == "does not hold" and small.ci[0] < 0 < small.ci[1] < 0.025
    assert auc_claim(_aucs([0.80, 0.70, 0.78], [0.75, 0.76, 0.74]), rows).verdict == "not resolved"
    outcome = auc_claim(_aucs([0.80, 0.82, 0.81], [0.75, 0.76, 0.75], key="auc_outcome"), rows)
    assert outcome.verdict == "holds" and "eventual outcome" in outcome.evidence
    assert auc_claim([], rows).verdict == "not resolved"


def test_checks_pass_and_fail() -> None:
    data = {"train_questions": 100, "samples": 16, "train_accuracy": 0.80, "exact_accuracy": 0.805}
    labels = {"tvm/step_end_sq_error_vs_exact_value": 0.02, "orm/step_end_sq_error_vs_exact_value": 0.07}
    assert [(c.id, c.passed) for c in checks(data, labels)] == [
        ("exact_value_matches_sampling", True),
        ("tvm_labels_closer_to_value", True),
    ]
    bad = checks({**data, "exact_accuracy": 0.9}, {**labels, "tvm/step_end_sq_error_vs_exact_value": 0.08})
    assert [c.passed for c in bad] == [False, False]
    assert checks({"source": "file"}, {}) == []


def test_table_and_report_shape() -> None:
    rows = _search(*_pair(100, 60, extra_tvm=8))
    columns, body = table(rows, 16, 4, 4)
    assert columns[:4] == ["method", "verifier", "accuracy (%)", "generated tokens / question"]
    assert [(r["method"], r["verifier"]) for r in body] == [
        ("single sample", "—"),
        ("Best-of-N (N=16)", "ORM (outcome labels)"),
        ("Best-of-N (N=16)", "TVM (token labels)"),
        ("step beam search (b=4, K=4)", "ORM (outcome labels)"),
        ("step beam search (b=4, K=4)", "TVM (token labels)"),
    ]
    assert body[0]["accuracy (%)"].startswith("60.0") and body[4]["generated tokens / question"] == 400.0
    aucs = _aucs([0.8, 0.82, 0.81], [0.75, 0.76, 0.75])
    assert [r["verifier"] for r in auc_table(aucs)] == ["TVM (token labels)", "ORM (outcome labels)"]
    data = {
        "source": "synthetic",
        "train_questions": 100,
        "test_questions": 20,
        "samples": 16,
        "train_accuracy": 0.8,
        "exact_accuracy": 0.8,
    }
    report = build_report(rows, aucs, data, {}, TvmParams())
    assert [c.id for c in report.claims] == ["beam_tvm_ge_orm", "prefix_auc_tvm_gt_orm"]
    assert [c.headline for c in report.claims] == [True, False]
    assert [c.verdict for c in report.claims] == ["holds", "holds"]


def test_champ_report_names_its_source_and_leaves_beam_search_unresolved() -> None:
    rows = []
    for seed in range(3):
        rows += [
            {"seed": seed, "method": "single", "verifier": "none", "accuracy": 0.15, "tokens": 215.0},
            {"seed": seed, "method": "majority", "verifier": "none", "accuracy": 0.22, "tokens": 3870.0},
            {"seed": seed, "method": "best_of_n", "verifier": "orm", "accuracy": 0.10 + 0.01 * seed, "tokens": 3870.0},
            {"seed": seed, "method": "best_of_n", "verifier": "tvm", "accuracy": 0.18 + 0.01 * seed, "tokens": 3870.0},
            {"seed": seed, "method": "best_of_n", "verifier": "oracle", "accuracy": 0.52, "tokens": 3870.0},
        ]
    models = {
        "GPT-3.5": {
            "solutions": 3600.0,
            "accuracy": 0.212,
            "answered": 0.78,
            "annotated_no_wrong_step": 14.0,
            "graded_correct_no_wrong_step": 1.0,
            "annotated_wrong_step": 84.0,
            "graded_correct_wrong_step": 0.119,
        }
    }
    data = {
        "source": "champ",
        "train_questions": 160,
        "test_questions": 40,
        "train_solutions": 2880,
        "test_solutions": 720,
        "train_accuracy": 0.23,
        "test_accuracy": 0.15,
        "regrade_agreement": 1.0,
        "problems_in_file": 270.0,
        "problems_gradable": 200.0,
        "problems_used": 200.0,
        "max_chars": 200,
        "models": models,
    }
    report = build_report(
        rows,
        _aucs([0.55, 0.56, 0.54], [0.50, 0.49, 0.51], key="auc_outcome"),
        data,
        {},
        TvmParams.model_validate({"data": {"source": "champ"}}),
    )
    assert [(r["method"], r["verifier"]) for r in report.rows][1:] == [
        ("majority vote (N=18)", "—"),
        ("Best-of-N (N=18)", "ORM (outcome labels)"),
        ("Best-of-N (N=18)", "TVM (token labels)"),
        ("Best-of-N (N=18)", "oracle (pass@N: any solution correct)"),
    ]
    beam, auc = report.claims
    assert beam.verdict == "not resolved" and "synthetic policy" in beam.reason
    # ORM re-ranks below a single solution on every seed: the AUC comparison is gated, TVM's gate passes
    assert auc.verdict == "not resolved" and "ORM Best-of-N vs single sample" in auc.reason
    assert "TVM Best-of-N" not in auc.reason and "eventual outcome" in auc.evidence
    notes = " ".join(report.notes)
    assert "CHAMP (champ-dataset, MIT)" in notes and "200 of its 200 problems" in notes and "policy wrote" not in notes
    assert "below the mean accuracy of a single solution" in notes
    ((name, table_rows),) = [(k, v) for k, v in report.extra_tables.items() if k.startswith("CHAMP models")]
    assert table_rows == [
        {
            "model": "GPT-3.5",
            "solutions": 3600,
            "graded accuracy (%)": 21.2,
            "final answer read (%)": 78.0,
            "graded correct | no wrong step (%)": 100.0,
            "annotated, no wrong step": 14,
            "graded correct | wrong step (%)": 11.9,
            "annotated, wrong step": 84,
        }
    ]


def test_smollm2_generator_report_names_the_model_and_its_sampling() -> None:
    rows = []
    for seed in range(2):
        rows += [
            {"seed": seed, "method": "single", "verifier": "none", "accuracy": 0.05, "tokens": 30.0},
            {"seed": seed, "method": "best_of_n", "verifier": "tvm", "accuracy": 0.1, "tokens": 120.0},
        ]
    data = {
        "source": "smollm2",
        "train_questions": 6,
        "test_questions": 3,
        "train_solutions": 24,
        "test_solutions": 12,
        "train_accuracy": 0.04,
        "test_accuracy": 0.0,
        "regrade_agreement": 1.0,
        "samples": 4,
    }
    params = TvmParams.model_validate({"policy": {"generator": "smollm2", "temperature": 0.9}})
    report = build_report(rows, [], data, {}, params)
    notes = " ".join(report.notes)
    assert "SmolLM2-135M-Instruct" in notes and "temperature 0.9" in notes and "sampled accuracy 4.0% (train)" in notes
    assert [c.verdict for c in report.claims] == ["not resolved", "not resolved"]
