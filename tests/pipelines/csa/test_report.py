"""csa claim functions on constructed numbers: each verdict is reachable, the chance gates bite, units pair by seed."""

from __future__ import annotations

import pytest

from pipelines.csa.params import CsaParams
from pipelines.csa.report import (
    HEADLINE,
    build_report,
    csa_beats_asif,
    csa_beats_contrastive,
    csa_beats_contrastive_at,
    rho_check,
    rho_weighting_beats_cosine,
)


def _rows(
    per_method: dict[str, list[float]],
    ns=(50, 200, 800),
    key: str = "zero_shot",
    at: dict[tuple[str, int], list[float]] | None = None,
) -> list[dict]:
    """Rows for len(list) seeds: ``per_method[m][seed]`` at every N, except the cells ``at[(m, N)]`` (per seed);
    the other metric is a constant well above chance, so only ``key`` matters."""
    other, at = ("mislabel_auc" if key == "zero_shot" else "zero_shot"), at or {}
    rows = []
    for m, per_seed in per_method.items():
        for seed, v in enumerate(per_seed):
            for n in ns:
                value = at[(m, n)][seed] if (m, n) in at else v
                rows.append({"seed": seed, "n_pairs": n, "method": m, key: value, other: 0.8})
    return rows


def test_the_headline_is_csa_against_the_contrastive_model_on_zero_shot() -> None:
    assert [s.id for s in HEADLINE] == ["csa_beats_contrastive_zero_shot"] and HEADLINE[0].headline
    assert HEADLINE[0].rule.smallest_effect == 0.05 and "brief" in HEADLINE[0].rule.source


def test_csa_beats_contrastive_verdicts() -> None:
    holds = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]})
    claim = csa_beats_contrastive(holds, "zero_shot", 200, 10)
    assert claim.verdict == "holds" and claim.headline and claim.n == 3
    assert len(claim.gates) == 4 and all(g.passed for g in claim.gates)  # 2 arms x N in {50, 200}
    fails = _rows({"csa": [0.3, 0.31, 0.29], "contrastive": [0.6, 0.62, 0.61]})
    assert csa_beats_contrastive(fails, "zero_shot", 200, 10).verdict == "does not hold"
    mixed = _rows({"csa": [0.6, 0.2, 0.6], "contrastive": [0.3, 0.5, 0.3]})
    assert csa_beats_contrastive(mixed, "zero_shot", 200, 10).verdict == "not resolved"
    auc = _rows({"csa": [0.9, 0.92, 0.91], "contrastive": [0.7, 0.72, 0.69]}, key="mislabel_auc")
    secondary = csa_beats_contrastive(auc, "mislabel_auc", 200, 10)
    assert secondary.verdict == "holds" and not secondary.headline


def test_a_gain_below_the_smallest_effect_does_not_hold() -> None:
    # CSA ahead by about 0.01 zero-shot (the smallest effect of interest is 0.05): a decided negative
    small = _rows({"csa": [0.61, 0.60, 0.62, 0.60], "contrastive": [0.60, 0.60, 0.60, 0.61]})
    claim = csa_beats_contrastive(small, "zero_shot", 200, 10)
    assert claim.ci[1] < 0.05 and claim.verdict == "does not hold"


def test_a_contrastive_model_at_chance_with_few_pairs_decides_nothing() -> None:
    # near chance at N = 50 (0.1 +- 0.02) even though it learns at N = 200: the few-pairs claim is not resolved
    rows = _rows(
        {"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]}, at={("contrastive", 50): [0.12, 0.08, 0.11]}
    )
    claim = csa_beats_contrastive(rows, "zero_shot", 200, 10)
    assert claim.verdict == "not resolved" and "gate failed" in claim.reason
    assert "CLIP-like (InfoNCE) at N = 50" in claim.reason and "N = 200" not in claim.reason


def test_only_few_pair_settings_count() -> None:
    rows = _rows(
        {"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]}, at={("contrastive", 800): [0.99, 0.99, 0.99]}
    )  # far ahead at N = 800: irrelevant here
    claim = csa_beats_contrastive(rows, "zero_shot", 200, 10)
    assert claim.verdict == "holds" and claim.effect == pytest.approx(0.31)


def test_seeds_pair_by_key_and_a_missing_method_is_not_measured() -> None:
    rows = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]})
    rows = [r for r in rows if not (r["method"] == "contrastive" and r["seed"] == 2)]
    with pytest.raises(ValueError, match="different units"):
        csa_beats_contrastive(rows, "zero_shot", 200, 10)
    holed = [
        r
        for r in _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]})
        if not (r["method"] == "csa" and r["seed"] == 1 and r["n_pairs"] == 50)
    ]
    with pytest.raises(ValueError, match="cells missing"):
        csa_beats_contrastive(holed, "zero_shot", 200, 10)
    alone = csa_beats_contrastive(_rows({"csa": [0.6, 0.62, 0.61]}), "zero_shot", 200, 10)
    assert alone.verdict == "not resolved" and alone.n == 0 and "not measured" in alone.reason


def test_rho_weighting_verdicts() -> None:
    assert (
        rho_weighting_beats_cosine(_rows({"csa": [0.7, 0.71, 0.72], "cca": [0.65, 0.66, 0.66]}), "zero_shot").verdict
        == "holds"
    )
    assert (
        rho_weighting_beats_cosine(_rows({"csa": [0.6, 0.61, 0.62], "cca": [0.68, 0.69, 0.70]}), "zero_shot").verdict
        == "does not hold"
    )
    assert (
        rho_weighting_beats_cosine(_rows({"csa": [0.7, 0.6, 0.7], "cca": [0.65, 0.7, 0.65]}), "zero_shot").verdict
        == "not resolved"
    )


def test_csa_against_asif_is_decided_per_n() -> None:
    # ASIF ahead at N = 50 on every seed, CSA ahead at N = 800, no decision at N = 200
    rows = _rows(
        {"csa": [0.86, 0.87, 0.85], "asif": [0.90, 0.92, 0.91]},
        key="mislabel_auc",
        at={
            ("csa", 200): [0.95, 0.80, 0.93],
            ("asif", 200): [0.85, 0.90, 0.86],
            ("csa", 800): [0.97, 0.98, 0.97],
            ("asif", 800): [0.90, 0.90, 0.91],
        },
    )
    verdicts = {n: csa_beats_asif(rows, n) for n in (50, 200, 800)}
    assert {n: c.verdict for n, c in verdicts.items()} == {50: "does not hold", 200: "not resolved", 800: "holds"}
    assert verdicts[50].id == "csa_beats_asif_mislabel_auc_n50" and not verdicts[50].headline
    at_chance = _rows({"csa": [0.9, 0.92, 0.91], "asif": [0.52, 0.47, 0.50]}, key="mislabel_auc")
    claim = csa_beats_asif(at_chance, 50)
    assert claim.verdict == "not resolved" and "ASIF at N = 50" in claim.reason


def test_the_report_names_one_headline_and_the_asif_claims() -> None:
    methods = {
        "csa": [0.6, 0.62, 0.61],
        "cca": [0.55, 0.56, 0.57],
        "asif": [0.5, 0.52, 0.51],
        "contrastive": [0.3, 0.31, 0.29],
    }
    rows = [{**r, "recall@1": 0.1} for r in _rows(methods)]
    features = {"classes": 10, "source": "constructed", "pool": 100, "test": 50}
    report = build_report(CsaParams(), rows, features, {"swapped": 15})
    assert [c.id for c in report.claims] == [
        "csa_beats_contrastive_zero_shot",
        "csa_beats_contrastive_zero_shot_n50",
        "csa_beats_contrastive_zero_shot_n200",
        "csa_beats_contrastive_zero_shot_n800",
        "csa_beats_contrastive_mislabel_auc_n50",
        "csa_beats_contrastive_mislabel_auc_n200",
        "csa_beats_contrastive_mislabel_auc_n800",
        "rho_weighting_beats_cosine_zero_shot",
        "rho_weighting_beats_cosine_mislabel_auc",
        "csa_beats_asif_mislabel_auc_n50",
        "csa_beats_asif_mislabel_auc_n200",
        "csa_beats_asif_mislabel_auc_n800",
    ]
    assert [c.id for c in report.headline] == ["csa_beats_contrastive_zero_shot"]
    assert any("tuned per seed and N on its N training pairs alone" in n for n in report.notes)


def test_csa_against_the_contrastive_model_is_decided_per_n() -> None:
    # the contrastive model catches up with many pairs: CSA ahead at N = 50, behind at N = 800
    rows = _rows(
        {"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]},
        at={("contrastive", 800): [0.75, 0.76, 0.74], ("csa", 200): [0.6, 0.3, 0.62]},
    )
    verdicts = {n: csa_beats_contrastive_at(rows, "zero_shot", n) for n in (50, 200, 800)}
    assert {n: c.verdict for n, c in verdicts.items()} == {50: "holds", 200: "not resolved", 800: "does not hold"}
    assert verdicts[800].id == "csa_beats_contrastive_zero_shot_n800" and not verdicts[800].headline
    # a contrastive model that did not learn at this N decides nothing there
    idle = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.11, 0.09, 0.1]})
    claim = csa_beats_contrastive_at(idle, "zero_shot", 50)
    assert claim.verdict == "not resolved" and "CLIP-like (InfoNCE) at N = 50" in claim.reason


def test_rho_check() -> None:
    good = [{"seed": 0, "n_pairs": 50, "k": k, "rho": r} for k, r in enumerate([0.9, 0.5, 0.1], 1)]
    assert rho_check(good).passed
    bad = [{"seed": 0, "n_pairs": 50, "k": k, "rho": r} for k, r in enumerate([0.5, 0.9], 1)]
    assert not rho_check(bad).passed
