"""TVM's claims and checks on constructed numbers: every verdict reachable, preconditions, the table shape."""

from __future__ import annotations

from typing import Any

from pipelines.tvm.params import TvmParams
from pipelines.tvm.report import auc_claim, auc_table, beam_claim, build_report, checks, table


def _search(tvm: list[float], orm: list[float], single: float = 0.8) -> list[dict[str, Any]]:
    rows = []
    for seed, (a, b) in enumerate(zip(tvm, orm)):
        rows += [{"seed": seed, "method": "beam", "verifier": "tvm", "accuracy": a, "tokens": 400.0},
                 {"seed": seed, "method": "beam", "verifier": "orm", "accuracy": b, "tokens": 410.0},
                 {"seed": seed, "method": "single", "verifier": "none", "accuracy": single, "tokens": 30.0}]
    return rows


def _aucs(tvm: list[float], orm: list[float], key: str = "auc_recoverable") -> list[dict[str, Any]]:
    return [row for seed, (a, b) in enumerate(zip(tvm, orm))
            for row in ({"seed": seed, "verifier": "tvm", "auc_outcome": 0.6, key: a},
                        {"seed": seed, "verifier": "orm", "auc_outcome": 0.6, key: b})]


def test_beam_claim_reaches_every_verdict() -> None:
    holds = beam_claim(_search([0.90, 0.92, 0.91], [0.85, 0.86, 0.86]))
    assert holds.verdict == "holds" and abs(holds.effect - 16 / 3) < 1e-9
    assert holds.numbers["wins"] == 3
    assert beam_claim(_search([0.80, 0.81, 0.80], [0.85, 0.86, 0.86])).verdict == "does not hold"
    noisy = beam_claim(_search([0.90, 0.80, 0.88], [0.85, 0.86, 0.84]))
    assert noisy.verdict == "not resolved" and noisy.ci[0] < 0 < noisy.ci[1]
    missing = beam_claim([r for r in _search([0.9, 0.9], [0.8, 0.8]) if r["method"] != "beam"])
    assert missing.verdict == "not resolved" and not missing.precondition.met


def test_auc_claim_reaches_every_verdict_and_falls_back_to_the_outcome() -> None:
    assert auc_claim(_aucs([0.80, 0.82, 0.81], [0.75, 0.76, 0.75])).verdict == "holds"
    assert auc_claim(_aucs([0.70, 0.71, 0.70], [0.75, 0.76, 0.75])).verdict == "does not hold"
    assert auc_claim(_aucs([0.80, 0.70, 0.78], [0.75, 0.76, 0.74])).verdict == "not resolved"
    outcome = auc_claim(_aucs([0.80, 0.82, 0.81], [0.75, 0.76, 0.75], key="auc_outcome"))
    assert outcome.verdict == "holds" and "eventual outcome" in outcome.statistic


def test_checks_pass_and_fail() -> None:
    data = {"train_questions": 100, "samples": 16, "train_accuracy": 0.80, "exact_accuracy": 0.805}
    labels = {"tvm/step_end_sq_error_vs_exact_value": 0.02, "orm/step_end_sq_error_vs_exact_value": 0.07}
    assert [(c.id, c.passed) for c in checks(data, labels)] == [("exact_value_matches_sampling", True),
                                                                ("tvm_labels_closer_to_value", True)]
    bad = checks({**data, "exact_accuracy": 0.9}, {**labels, "tvm/step_end_sq_error_vs_exact_value": 0.08})
    assert [c.passed for c in bad] == [False, False]
    assert checks({"source": "file"}, {}) == []


def test_table_and_report_shape() -> None:
    rows = _search([0.9, 0.92, 0.91], [0.85, 0.86, 0.86])
    columns, body = table(rows, 16, 4, 4)
    assert columns[:4] == ["method", "verifier", "accuracy (%)", "generated tokens / question"]
    assert [(r["method"], r["verifier"]) for r in body] == [
        ("single sample", "—"), ("step beam search (b=4, K=4)", "ORM (outcome labels)"),
        ("step beam search (b=4, K=4)", "TVM (token labels)")]
    assert body[0]["accuracy (%)"].startswith("80.0") and body[2]["generated tokens / question"] == 400.0
    aucs = _aucs([0.8, 0.82, 0.81], [0.75, 0.76, 0.75])
    assert [r["verifier"] for r in auc_table(aucs)] == ["TVM (token labels)", "ORM (outcome labels)"]
    data = {"source": "synthetic", "train_questions": 100, "test_questions": 20, "samples": 16,
            "train_accuracy": 0.8, "exact_accuracy": 0.8}
    report = build_report(rows, aucs, data, {}, TvmParams())
    assert [c.id for c in report.claims] == ["beam_tvm_ge_orm", "prefix_auc_tvm_gt_orm"]
    assert [c.verdict for c in report.claims] == ["holds", "holds"]


def test_champ_report_names_its_source_and_leaves_beam_search_unresolved() -> None:
    rows = []
    for seed in range(3):
        rows += [{"seed": seed, "method": "single", "verifier": "none", "accuracy": 0.15, "tokens": 215.0},
                 {"seed": seed, "method": "majority", "verifier": "none", "accuracy": 0.22, "tokens": 3870.0},
                 {"seed": seed, "method": "best_of_n", "verifier": "orm", "accuracy": 0.10 + 0.01 * seed,
                  "tokens": 3870.0},
                 {"seed": seed, "method": "best_of_n", "verifier": "tvm", "accuracy": 0.18, "tokens": 3870.0},
                 {"seed": seed, "method": "best_of_n", "verifier": "oracle", "accuracy": 0.52, "tokens": 3870.0}]
    models = {"GPT-3.5": {"solutions": 3600.0, "accuracy": 0.212, "answered": 0.78, "annotated_no_wrong_step": 14.0,
                          "graded_correct_no_wrong_step": 1.0, "annotated_wrong_step": 84.0,
                          "graded_correct_wrong_step": 0.119}}
    data = {"source": "champ", "train_questions": 160, "test_questions": 40, "train_solutions": 2880,
            "test_solutions": 720, "train_accuracy": 0.23, "test_accuracy": 0.15, "regrade_agreement": 1.0,
            "problems_in_file": 270.0, "problems_gradable": 200.0, "problems_used": 200.0, "max_chars": 200,
            "models": models}
    report = build_report(rows, _aucs([0.55, 0.56, 0.54], [0.50, 0.49, 0.51], key="auc_outcome"), data, {},
                          TvmParams.model_validate({"data": {"source": "champ"}}))
    assert [(r["method"], r["verifier"]) for r in report.rows][1:] == [
        ("majority vote (N=18)", "—"), ("Best-of-N (N=18)", "ORM (outcome labels)"),
        ("Best-of-N (N=18)", "TVM (token labels)"), ("Best-of-N (N=18)", "oracle (pass@N: any solution correct)")]
    beam, auc = report.claims
    assert beam.verdict == "not resolved" and not beam.precondition.met
    assert auc.verdict == "holds" and "eventual outcome" in auc.statistic
    notes = " ".join(report.notes)
    assert "CHAMP (champ-dataset, MIT)" in notes and "200 of its 200 problems" in notes and "policy wrote" not in notes
    assert "below the mean accuracy of a single solution" in notes     # ORM re-ranks below 15% on every seed
    (name, table_rows), = [(k, v) for k, v in report.extra_tables.items() if k.startswith("CHAMP models")]
    assert table_rows == [{"model": "GPT-3.5", "solutions": 3600, "graded accuracy (%)": 21.2,
                           "final answer read (%)": 78.0, "graded correct | no wrong step (%)": 100.0,
                           "annotated, no wrong step": 14, "graded correct | wrong step (%)": 11.9,
                           "annotated, wrong step": 84}]


def test_smollm2_generator_report_names_the_model_and_its_sampling() -> None:
    rows = []
    for seed in range(2):
        rows += [{"seed": seed, "method": "single", "verifier": "none", "accuracy": 0.05, "tokens": 30.0},
                 {"seed": seed, "method": "best_of_n", "verifier": "tvm", "accuracy": 0.1, "tokens": 120.0}]
    data = {"source": "smollm2", "train_questions": 6, "test_questions": 3, "train_solutions": 24,
            "test_solutions": 12, "train_accuracy": 0.04, "test_accuracy": 0.0, "regrade_agreement": 1.0, "samples": 4}
    params = TvmParams.model_validate({"policy": {"generator": "smollm2", "temperature": 0.9}})
    report = build_report(rows, [], data, {}, params)
    notes = " ".join(report.notes)
    assert "SmolLM2-135M-Instruct" in notes and "temperature 0.9" in notes and "sampled accuracy 4.0% (train)" in notes
    assert report.claims[0].verdict == "not resolved"
