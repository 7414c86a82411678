"""FLAT's claims on constructed numbers: every verdict of each claim, and its preconditions."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.flat.params import FlatParams
from pipelines.flat.report import (build_report, collect_rows, flat_claims, ga_claim, matched_ga_ratio, paper_column,
                                   table)

SEEDS = (0, 1, 2)


def _summary(fq: float, retain_em: float, **more: float) -> dict[str, float]:
    return {"forget_quality": fq, "retain_exact_match": retain_em, "model_utility": 0.5, "forget_exact_match": 0.1,
            "forget_Q_A_Prob": 0.2, **more}


def _rows(flat_fq: list[float], flat_em: list[float], original_fq: float = 1e-4, original_em: float = 0.8
          ) -> list[dict[str, Any]]:
    refs = {"original": _summary(original_fq, original_em), "retain": _summary(1.0, 0.8)}
    runs = {("flat_kl", s): _summary(fq, em) for s, fq, em in zip(SEEDS, flat_fq, flat_em)}
    runs |= {("ga", s): _summary(0.5, 0.1) for s in SEEDS}
    return collect_rows(refs, runs)


def _curves(flat_final: list[float], ga_path: list[list[tuple[float, float]]]) -> list[dict[str, Any]]:
    """FLAT (KL) ends at ``flat_final[s]``; GA's probes per seed are (forget_prob, retain_em) at steps 0, 2, ..."""
    rows = [{"method": "flat_kl", "seed": s, "step": step, "forget_prob": p, "retain_em": 0.8}
            for s, final in zip(SEEDS, flat_final) for step, p in ((0, 0.9), (10, final))]
    rows += [{"method": "ga", "seed": s, "step": 2 * i, "forget_prob": p, "retain_em": em}
             for s, path in zip(SEEDS, ga_path) for i, (p, em) in enumerate(path)]
    return rows


def _verdicts(claims) -> dict[str, str]:
    return {c.id: c.verdict for c in claims}


def test_flat_claims_hold_when_flat_matches_the_oracle_and_keeps_accuracy() -> None:
    claims = flat_claims(_rows([0.6, 0.7, 0.8], [0.78, 0.8, 0.79]), keep=0.9)
    assert _verdicts(claims) == {"flat_reaches_oracle_forget_level": "holds", "flat_keeps_retain_accuracy": "holds"}
    assert claims[0].effect == pytest.approx(0.7) and claims[0].n == 3
    assert claims[1].effect == pytest.approx((0.78 + 0.8 + 0.79) / 3 / 0.8)


def test_flat_claims_do_not_hold_when_flat_stays_apart_and_forgets_the_retain_set() -> None:
    claims = flat_claims(_rows([0.001, 0.002, 0.0015], [0.2, 0.25, 0.22]), keep=0.9)
    assert _verdicts(claims) == {"flat_reaches_oracle_forget_level": "does not hold",
                                 "flat_keeps_retain_accuracy": "does not hold"}


def test_flat_claims_not_resolved_by_scattered_seeds_or_an_unlearnable_setting() -> None:
    scattered = flat_claims(_rows([0.001, 0.9, 0.02], [0.5, 0.95, 0.8]), keep=0.9)
    assert set(_verdicts(scattered).values()) == {"not resolved"}
    # the original is not told apart from the oracle, and it answers no retain QA: nothing to decide
    gated = flat_claims(_rows([0.6, 0.7, 0.8], [0.0, 0.0, 0.0], original_fq=0.9, original_em=0.0), keep=0.9)
    assert set(_verdicts(gated).values()) == {"not resolved"}
    assert all(c.precondition is not None and not c.precondition.met for c in gated)


def test_ga_claim_uses_the_first_probe_at_flat_forget_level() -> None:
    rows = _rows([0.6, 0.7, 0.8], [0.8, 0.8, 0.8])
    # GA crosses FLAT's final forget prob (0.3) at its third probe, where retain EM is 0.1 (of the original's 0.8)
    path = [(0.9, 0.8), (0.5, 0.6), (0.25, 0.1), (0.05, 0.0)]
    assert matched_ga_ratio(_curves([0.3] * 3, [path] * 3), 0, 0.8) == (0.3, pytest.approx(0.1 / 0.8))
    holds = ga_claim(rows, _curves([0.3, 0.3, 0.3], [path, [(0.9, 0.8), (0.2, 0.12)], [(0.8, 0.8), (0.1, 0.08)]]), 0.5)
    assert holds.verdict == "holds" and holds.effect == pytest.approx((0.1 + 0.12 + 0.08) / 3 / 0.8)
    gentle = [(0.9, 0.8), (0.25, 0.78)]
    assert ga_claim(rows, _curves([0.3] * 3, [gentle, [(0.2, 0.8)], [(0.2, 0.79)]]), 0.5).verdict == "does not hold"
    mixed = ga_claim(rows, _curves([0.3] * 3, [[(0.2, 0.05)], [(0.2, 0.8)], [(0.2, 0.4)]]), 0.5)
    assert mixed.verdict == "not resolved"
    never = ga_claim(rows, _curves([0.3] * 3, [[(0.9, 0.1)], [(0.2, 0.1)], [(0.2, 0.1)]]), 0.5)
    assert never.verdict == "not resolved" and not never.precondition.met and never.precondition.value == 2


def test_table_marks_retain_data_and_paper_numbers() -> None:
    rows = _rows([0.6, 0.7, 0.8], [0.8, 0.8, 0.8])
    shaped = table(rows, ["ga", "flat_kl"])
    assert [r["method"] for r in shaped] == ["Original (fine-tuned on all QAs)", "Retain-only oracle", "GA", "FLAT (KL)"]
    assert [r["unlearning reads retain data"] for r in shaped] == ["–", "–", "no", "no"]
    assert shaped[3]["forget quality"].startswith("0.700 ±")
    assert paper_column("flat_kl") == "HP gap 1.32; MUSE VerbMem 0.0" and paper_column("idk") == "–"
    report = build_report(FlatParams(), rows, _curves([0.3] * 3, [[(0.2, 0.1)]] * 3),
                          {"forget_qas": 15, "retain_qas": 135, "source": "synthetic authors", "retain_evaluated": 15,
                           "world_facts": 15, "passages": 4})
    assert [c.id for c in report.claims] == ["flat_reaches_oracle_forget_level", "flat_keeps_retain_accuracy",
                                             "ga_destroys_utility_at_flat_forget_level"]
