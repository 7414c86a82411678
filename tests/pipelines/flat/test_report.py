"""FLAT's claims on constructed numbers: every verdict of each claim, and its learning gates."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.flat.params import FlatParams
from pipelines.flat.report import (
    build_report,
    collect_rows,
    flat_claims,
    forget_claim,
    ga_claim,
    matched_ga_ratio,
    paper_column,
    retain_claim,
    table,
)

SEEDS = (0, 1, 2)


def _summary(fq: float, retain_em: float, **more: float) -> dict[str, float]:
    return {
        "forget_quality": fq,
        "retain_exact_match": retain_em,
        "model_utility": 0.5,
        "forget_exact_match": 0.1,
        "forget_Q_A_Prob": 0.2,
        **more,
    }


def _rows(
    flat_fq: list[float], flat_em: list[float], original_fq: float = 1e-4, original_em: float = 0.8
) -> list[dict[str, Any]]:
    refs = {"original": _summary(original_fq, original_em), "retain": _summary(1.0, 0.8)}
    runs = {("flat_kl", s): _summary(fq, em) for s, fq, em in zip(SEEDS, flat_fq, flat_em)}
    runs |= {("ga", s): _summary(0.5, 0.1) for s in SEEDS}
    return collect_rows(refs, runs)


def _curves(flat_final: list[float], ga_path: list[list[tuple[float, float]]]) -> list[dict[str, Any]]:
    """FLAT (KL) ends at ``flat_final[s]``; GA's probes per seed are (forget_prob, retain_em) at steps 0, 2, ..."""
    rows = [
        {"method": "flat_kl", "seed": s, "step": step, "forget_prob": p, "retain_em": 0.8}
        for s, final in zip(SEEDS, flat_final)
        for step, p in ((0, 0.9), (10, final))
    ]
    rows += [
        {"method": "ga", "seed": s, "step": 2 * i, "forget_prob": p, "retain_em": em}
        for s, path in zip(SEEDS, ga_path)
        for i, (p, em) in enumerate(path)
    ]
    return rows


def _verdicts(claims) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


def test_flat_claims_hold_when_flat_matches_the_oracle_and_keeps_accuracy() -> None:
    claims = flat_claims(_rows([0.6, 0.7, 0.8], [0.78, 0.8, 0.79]), keep=0.9)
    assert _verdicts(claims) == {"flat_reaches_oracle_forget_level": "holds", "flat_keeps_retain_accuracy": "holds"}
    assert claims[0].effect == pytest.approx((0.6 * 0.7 * 0.8) ** (1 / 3)) and claims[0].n == 3  # geometric mean
    assert claims[1].effect == pytest.approx((0.78 + 0.8 + 0.79) / 3 / 0.8)
    assert all(c.headline for c in claims)


def test_flat_claims_do_not_hold_when_flat_stays_apart_and_forgets_the_retain_set() -> None:
    forget = forget_claim(_rows([0.001, 0.002, 0.0015], [0.78, 0.8, 0.79]))
    assert forget.verdict == "does not hold"
    # FLAT reached the forget level but lost most of its retain accuracy
    keep = retain_claim(_rows([0.6, 0.7, 0.8], [0.2, 0.25, 0.22]))
    assert keep.verdict == "does not hold"


def test_a_forget_quality_just_around_the_level_does_not_hold() -> None:
    """Well measured around p = 0.05: every forget quality of a factor 2 above it (p = 0.1) is excluded."""
    claim = forget_claim(_rows([0.04, 0.06, 0.05, 0.055, 0.045], [0.8] * 5))
    assert claim.ci[0] < 0.05 < claim.ci[1] < 0.1 and claim.verdict == "does not hold"


def test_flat_claims_not_resolved_by_scattered_seeds() -> None:
    scattered = flat_claims(_rows([0.001, 0.9, 0.02], [0.5, 0.95, 0.8]), keep=0.9)
    assert set(_verdicts(scattered).values()) == {"not resolved"}
    noisy_keep = retain_claim(_rows([0.6, 0.7, 0.8], [0.5, 0.95, 0.8]))
    assert noisy_keep.verdict == "not resolved" and "interval" in noisy_keep.reason


def test_a_run_that_changed_nothing_cannot_keep_retain_accuracy() -> None:
    """The audit's case: unlearning moved nothing, so FLAT scores the original's forget quality and keeps all its
    retain accuracy on every seed; neither that nor a zero-width interval may make the retain claim hold."""
    unchanged = _rows([1e-4] * 3, [0.8] * 3, original_fq=1e-4, original_em=0.8)
    keep = retain_claim(unchanged)
    assert keep.verdict == "not resolved" and "gate failed: FLAT (KL) vs the oracle's forget level" in keep.reason
    # the audit's numbers: the original sits at p 0.0524, just above the level, and so does every seed of FLAT
    audit = flat_claims(_rows([0.0524] * 3, [0.5] * 3, original_fq=0.0524, original_em=0.5))
    assert set(_verdicts(audit).values()) == {"not resolved"}
    assert all("gate failed: original vs retain-only oracle" in c.reason for c in audit)


def test_flat_claims_gated_on_an_unlearnable_setting() -> None:
    # the original is not told apart from the oracle, and it answers no retain QA: nothing to decide
    gated = flat_claims(_rows([0.6, 0.7, 0.8], [0.0, 0.0, 0.0], original_fq=0.9, original_em=0.0), keep=0.9)
    assert set(_verdicts(gated).values()) == {"not resolved"}
    assert all(not all(g.passed for g in c.gates) for c in gated)
    assert "gate failed: original vs retain-only oracle" in gated[0].reason
    no_flat = flat_claims([r for r in _rows([0.6] * 3, [0.8] * 3) if r["method"] != "flat_kl"])
    assert set(_verdicts(no_flat).values()) == {"not resolved"}


def test_keep_share_from_params_changes_the_margin_and_says_so() -> None:
    rows = _rows([0.6, 0.7, 0.8], [0.60, 0.62, 0.61])  # keeps about 76 %
    assert retain_claim(rows).verdict == "does not hold"
    lenient = retain_claim(rows, keep=0.6)
    assert lenient.verdict == "holds" and "eval.utility_keep = 0.6" in lenient.evidence


def test_ga_claim_uses_the_first_probe_at_flat_forget_level() -> None:
    rows = _rows([0.6, 0.7, 0.8], [0.8, 0.8, 0.8])
    # GA crosses FLAT's final forget prob (0.3) at its third probe, where retain EM is 0.1 (of the original's 0.8)
    path = [(0.9, 0.8), (0.5, 0.6), (0.25, 0.1), (0.05, 0.0)]
    assert matched_ga_ratio(_curves([0.3] * 3, [path] * 3), 0, 0.8) == (0.3, pytest.approx(0.1 / 0.8))
    holds = ga_claim(rows, _curves([0.3, 0.3, 0.3], [path, [(0.9, 0.8), (0.2, 0.12)], [(0.8, 0.8), (0.1, 0.08)]]), 0.5)
    assert holds.verdict == "holds" and holds.effect == pytest.approx((0.1 + 0.12 + 0.08) / 3 / 0.8)
    gentle = [(0.9, 0.8), (0.25, 0.78)]
    assert ga_claim(rows, _curves([0.3] * 3, [gentle, [(0.2, 0.8)], [(0.2, 0.79)]]), 0.5).verdict == "does not hold"
    # GA keeps about half, well measured: every share a tenth below half (0.4) is excluded, a decided negative
    around = ga_claim(rows, _curves([0.3] * 3, [[(0.2, 0.8 * x)] for x in (0.48, 0.52, 0.5)]), 0.5)
    assert around.verdict == "does not hold" and around.ci[0] < 0.5 < around.ci[1]
    mixed = ga_claim(rows, _curves([0.3] * 3, [[(0.2, 0.05)], [(0.2, 0.8)], [(0.2, 0.4)]]), 0.5)
    assert mixed.verdict == "not resolved"
    never = ga_claim(rows, _curves([0.3] * 3, [[(0.9, 0.1)], [(0.2, 0.1)], [(0.2, 0.1)]]), 0.5)
    assert never.verdict == "not resolved" and "gate failed: GA vs FLAT (KL)'s final forget probability" in never.reason
    assert never.gates[-1].effect == 2


def test_ga_claim_is_gated_on_flat_reaching_the_forget_level() -> None:
    rows = _rows([0.001, 0.002, 0.0015], [0.8, 0.8, 0.8])  # FLAT did not reach the oracle's level
    path = [(0.9, 0.8), (0.2, 0.1)]
    claim = ga_claim(rows, _curves([0.3] * 3, [path, [(0.2, 0.12)], [(0.1, 0.08)]]), 0.5)
    assert claim.verdict == "not resolved" and "FLAT (KL) vs the oracle's forget level" in claim.reason


def test_table_marks_retain_data_and_paper_numbers() -> None:
    rows = _rows([0.6, 0.7, 0.8], [0.8, 0.8, 0.8])
    shaped = table(rows, ["ga", "flat_kl"])
    assert [r["method"] for r in shaped] == [
        "Original (fine-tuned on all QAs)",
        "Retain-only oracle",
        "GA",
        "FLAT (KL)",
    ]
    assert [r["unlearning reads retain data"] for r in shaped] == ["–", "–", "no", "no"]
    assert shaped[3]["forget quality"].startswith("0.700 ±")
    assert paper_column("flat_kl") == "HP gap 1.32; MUSE VerbMem 0.0" and paper_column("idk") == "–"
    report = build_report(
        FlatParams(),
        rows,
        _curves([0.3] * 3, [[(0.2, 0.1)]] * 3),
        {
            "forget_qas": 15,
            "retain_qas": 135,
            "source": "synthetic authors",
            "retain_evaluated": 15,
            "world_facts": 15,
            "passages": 4,
        },
    )
    assert [c.id for c in report.claims] == [
        "flat_reaches_oracle_forget_level",
        "flat_keeps_retain_accuracy",
        "ga_destroys_utility_at_flat_forget_level",
    ]
