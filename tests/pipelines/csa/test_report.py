"""csa claim functions on constructed numbers: each verdict is reachable, the precondition bites."""

from __future__ import annotations

from pipelines.csa.report import csa_beats_contrastive, rho_check, rho_weighting_beats_cosine


def _rows(per_method: dict[str, list[float]], ns=(50, 200, 800), key: str = "zero_shot",
          clip_at_largest: float = 0.6) -> list[dict]:
    """Rows for 3 seeds: per_method[m][seed] at every N (the contrastive model at the largest N is set apart)."""
    rows = []
    for m, per_seed in per_method.items():
        for seed, v in enumerate(per_seed):
            for n in ns:
                value = clip_at_largest if (m == "contrastive" and n == max(ns) and key == "zero_shot") else v
                rows.append({"seed": seed, "n_pairs": n, "method": m, key: value,
                             **({"zero_shot": clip_at_largest if n == max(ns) else v}
                                if key != "zero_shot" and m == "contrastive" else {})})
    return rows


def test_csa_beats_contrastive_verdicts() -> None:
    holds = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]})
    assert csa_beats_contrastive(holds, "zero_shot", 200, 10).verdict == "holds"
    fails = _rows({"csa": [0.3, 0.31, 0.29], "contrastive": [0.6, 0.62, 0.61]})
    assert csa_beats_contrastive(fails, "zero_shot", 200, 10).verdict == "does not hold"
    mixed = _rows({"csa": [0.6, 0.2, 0.6], "contrastive": [0.3, 0.5, 0.3]})
    assert csa_beats_contrastive(mixed, "zero_shot", 200, 10).verdict == "not resolved"
    # a contrastive model at chance even with the most pairs is no baseline: not resolved
    broken = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.1, 0.11, 0.09]}, clip_at_largest=0.1)
    claim = csa_beats_contrastive(broken, "zero_shot", 200, 10)
    assert claim.verdict == "not resolved" and not claim.precondition.met
    auc = _rows({"csa": [0.9, 0.92, 0.91], "contrastive": [0.7, 0.72, 0.69]}, key="mislabel_auc")
    assert csa_beats_contrastive(auc, "mislabel_auc", 200, 10).verdict == "holds"


def test_only_few_pair_settings_count() -> None:
    rows = _rows({"csa": [0.6, 0.62, 0.61], "contrastive": [0.3, 0.31, 0.29]})
    for r in rows:   # the contrastive model wins at N = 800 by far: irrelevant to the few-pairs claim
        if r["n_pairs"] == 800 and r["method"] == "contrastive":
            r["zero_shot"] = 0.99
    claim = csa_beats_contrastive(rows, "zero_shot", 200, 10)
    assert claim.verdict == "holds" and abs(claim.effect - 0.31) < 1e-9


def test_rho_weighting_verdicts() -> None:
    assert rho_weighting_beats_cosine(_rows({"csa": [0.7, 0.71, 0.72], "cca": [0.68, 0.69, 0.70]}),
                                      "zero_shot").verdict == "holds"
    assert rho_weighting_beats_cosine(_rows({"csa": [0.6, 0.61, 0.62], "cca": [0.68, 0.69, 0.70]}),
                                      "zero_shot").verdict == "does not hold"
    assert rho_weighting_beats_cosine(_rows({"csa": [0.7, 0.6, 0.7], "cca": [0.65, 0.7, 0.65]}),
                                      "zero_shot").verdict == "not resolved"


def test_rho_check() -> None:
    good = [{"seed": 0, "n_pairs": 50, "k": k, "rho": r} for k, r in enumerate([0.9, 0.5, 0.1], 1)]
    assert rho_check(good).passed
    bad = [{"seed": 0, "n_pairs": 50, "k": k, "rho": r} for k, r in enumerate([0.5, 0.9], 1)]
    assert not rho_check(bad).passed
