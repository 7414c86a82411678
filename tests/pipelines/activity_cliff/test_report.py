"""activity_cliff's claims on constructed numbers: every verdict of every claim is reached, LAC is decided per
encoder behind the training-mean gate, and the table puts MoleculeACE's published rows beside ours."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipelines.activity_cliff.params import ActivityCliffParams
from pipelines.activity_cliff.report import HEADLINE, build_report, checks, lac_claims, underfitting_claim

SD = {"A": 1.0, "B": 1.0}
MEAN_RMSE = {"A": 1.2, "B": 1.2}  # test RMSE of the training-mean predictor per dataset


def scores(
    ratio: dict[str, list[float]] | None = None,
    cliff: dict[str, list[float]] | None = None,
    overall: dict[str, list[float]] | None = None,
    train_rmse: float = 0.2,
    encoders: tuple[str, ...] = ("ecfp_mlp",),
) -> list[dict[str, Any]]:
    """Rows for datasets A, B x encoders x 3 seeds: ``ratio``/``cliff``/``overall`` give per objective the six
    values (A seeds 0-2, then B) of the training-loss ratio, RMSE_cliff and RMSE."""
    ratio = ratio or {"mse": [2.0] * 6, "lac": [1.5] * 6}
    cliff = cliff or {o: [0.8] * 6 for o in ratio}
    overall = overall or {o: [0.7 + 0.01 * k for k in range(6)] for o in ratio}
    rows = []
    for encoder in encoders:
        for objective in ratio:
            for k, (dataset, seed) in enumerate((d, s) for d in ("A", "B") for s in range(3)):
                rows.append(
                    {
                        "dataset": dataset,
                        "encoder": encoder,
                        "objective": objective,
                        "seed": seed,
                        "rmse": overall[objective][k],
                        "rmse_cliff": cliff[objective][k],
                        "rmse_noncliff": 0.6,
                        "train_rmse": train_rmse,
                        "train_loss_cliff": 0.1,
                        "train_loss_noncliff": 0.05,
                        "train_loss_ratio": ratio[objective][k],
                    }
                )
    return rows


def test_the_headline_is_lac_on_rmse_cliff_per_encoder() -> None:
    assert [s.id for s in HEADLINE] == ["lac_lowers_rmse_cliff_ecfp_mlp", "lac_lowers_rmse_cliff_gin"]
    assert all(s.rule.direction == "less" and "MoleculeACE" in s.rule.source for s in HEADLINE)


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([2.0, 2.5, 1.8, 3.0, 2.2, 2.7], "holds"),
        ([0.5, 0.6, 0.55, 0.7, 0.5, 0.65], "does not hold"),
        ([1.02, 1.0, 1.05, 0.98, 1.03, 1.01], "does not hold"),  # an excess below the smallest effect (10 %)
        ([0.5, 2.0, 1.0, 0.7, 1.6, 1.1], "not resolved"),
    ],
)
def test_underfitting_claim_verdicts(ratios: list[float], verdict: str) -> None:
    rows = scores(ratio={"mse": ratios, "lac": [1.0] * 6})
    rows = [dict(r, train_rmse=0.2 + 0.01 * r["seed"]) for r in rows]  # training R^2 varies a little
    claim = underfitting_claim(rows, SD)
    assert claim.verdict == verdict and claim.n == 6
    assert claim.effect == pytest.approx(math.exp(sum(math.log(r) for r in ratios) / 6))  # a geometric mean


def test_underfitting_claim_leaves_out_an_encoder_that_did_not_fit() -> None:
    fitted = scores(ratio={"mse": [2.0, 2.5, 1.8, 3.0, 2.2, 2.7]})
    fitted = [dict(r, train_rmse=0.2 + 0.01 * r["seed"]) for r in fitted]
    unfitted = [dict(r, encoder="gin", train_rmse=0.9, train_loss_ratio=0.5) for r in fitted]  # R^2 = 0.19
    claim = underfitting_claim(fitted + unfitted, SD)
    assert claim.verdict == "holds" and claim.n == 6 and "left out (not fitted at this budget): GIN" in claim.evidence
    assert claim.numbers["train_r2_gin"] == pytest.approx(1 - 0.81)
    nothing = underfitting_claim(unfitted, SD)
    assert nothing.verdict == "not resolved" and "not measured" in nothing.reason
    assert underfitting_claim(scores(ratio={"lac": [2.0] * 6}), SD).verdict == "not resolved"  # no MSE model


BASE = [0.80, 0.82, 0.78, 0.90, 0.88, 0.92]
STEPS = (0.05, 0.04, 0.06, 0.05, 0.045, 0.055)


def _decide(cliff_lac: list[float], rmse_lac: list[float], mean_rmse: dict[str, float] = MEAN_RMSE) -> tuple[str, str]:
    rows = scores(
        ratio={"mse": [2.0] * 6, "lac": [1.5] * 6},
        cliff={"mse": BASE, "lac": cliff_lac},
        overall={"mse": BASE, "lac": rmse_lac},
    )
    first, second = lac_claims(rows, "ecfp_mlp", mean_rmse, label_sd=SD)
    assert first.headline and not second.headline
    return first.verdict, second.verdict


def test_lac_claims_verdicts() -> None:
    lower = [b - d for b, d in zip(BASE, STEPS)]
    higher = [b + d for b, d in zip(BASE, STEPS)]
    noisy = [b + d for b, d in zip(BASE, (0.1, -0.1, 0.05, -0.08, 0.02, -0.01))]
    assert _decide(lower, [b + 0.001 * (i % 2) for i, b in enumerate(BASE)]) == ("holds", "holds")
    assert _decide(higher, higher) == ("does not hold", "does not hold")
    assert _decide(noisy, noisy) == ("not resolved", "not resolved")
    # a tight RMSE_cliff change below the smallest effect (0.03) is a decided negative
    tiny = [b + d for b, d in zip(BASE, (0.01, -0.01, 0.005, -0.005, 0.0, 0.002))]
    assert _decide(tiny, tiny)[0] == "does not hold"


def test_an_encoder_that_does_not_beat_the_training_mean_decides_nothing() -> None:
    lower = [b - d for b, d in zip(BASE, STEPS)]
    # the training mean predicts the test set with RMSE 0.85: MSE's 0.78-0.92 is no better
    verdicts = _decide(lower, lower, {"A": 0.85, "B": 0.85})
    assert verdicts == ("not resolved", "not resolved")
    rows = scores(cliff={"mse": BASE, "lac": lower}, overall={"mse": BASE, "lac": lower})
    claim = lac_claims(rows, "ecfp_mlp", {"A": 0.85, "B": 0.85}, label_sd=SD)[0]
    assert "gate failed" in claim.reason and "training-mean predictor" in claim.reason
    # no reference measured (an older data.json): the gate is not passed either
    assert lac_claims(rows, "ecfp_mlp", {}, label_sd=SD)[0].verdict == "not resolved"


def test_an_encoder_that_does_not_fit_its_training_data_decides_nothing() -> None:
    lower = [b - d for b, d in zip(BASE, STEPS)]
    # training RMSE 0.9 against label SD 1: training R^2 0.19, below the 0.5 bar, though both arms beat the mean
    rows = scores(cliff={"mse": BASE, "lac": lower}, overall={"mse": BASE, "lac": lower}, train_rmse=0.9)
    claim = lac_claims(rows, "ecfp_mlp", MEAN_RMSE, label_sd=SD)[0]
    assert claim.verdict == "not resolved" and "training R^2 0.5" in claim.reason
    assert lac_claims(rows, "ecfp_mlp", MEAN_RMSE, label_sd={})[0].verdict == "not resolved"  # SD unknown


def test_lac_claims_are_per_encoder_and_pair_by_target_and_seed() -> None:
    rows = scores(
        ratio={"mse": [2.0] * 6, "lac": [1.5] * 6},
        cliff={"mse": [0.8] * 6, "lac": [0.7] * 6},
        encoders=("ecfp_mlp", "gin"),
    )
    rows = [
        dict(
            r,
            rmse_cliff=r["rmse_cliff"]
            + (0.3 if r["encoder"] == "gin" else 0.0)
            + 0.01 * r["seed"] * (r["objective"] == "lac"),
        )
        for r in rows
    ]
    mlp, gin = (
        lac_claims(rows, "ecfp_mlp", MEAN_RMSE, label_sd=SD)[0],
        lac_claims(rows, "gin", MEAN_RMSE, label_sd=SD)[0],
    )
    assert (mlp.id, gin.id) == ("lac_lowers_rmse_cliff_ecfp_mlp", "lac_lowers_rmse_cliff_gin")
    assert mlp.n == gin.n == 6 and mlp.effect == pytest.approx(-0.09) and gin.effect == pytest.approx(-0.09)
    assert mlp.numbers["wins"] == 6.0 and "LAC lower RMSE_cliff on 6/6" in mlp.evidence
    # a unit trained with one objective only is an error, not silently dropped
    missing = [r for r in rows if not (r["encoder"] == "gin" and r["objective"] == "lac" and r["seed"] == 2)]
    with pytest.raises(ValueError, match="different units"):
        lac_claims(missing, "gin", MEAN_RMSE, label_sd=SD)
    # an encoder without LAC (or not run) is not resolved, not measured
    only_mse = lac_claims(scores(ratio={"mse": [2.0] * 6}), "ecfp_mlp", MEAN_RMSE, label_sd=SD)
    assert [c.verdict for c in only_mse] == ["not resolved", "not resolved"]
    assert all("not measured" in c.reason for c in only_mse)


def test_checks_against_the_published_row_and_the_cliff_flags() -> None:
    data = {"CHEMBL2047_EC50": {"cliff_flag_agreement": 1.0, "cliff_flag_mismatches": 0, "molecules": 631}}
    ok = {"CHEMBL2047_EC50": {"rmse": 0.6135738, "rmse_cliff": 0.6874106, "tuned": True, "config": {"C": 10}}}
    off = {"CHEMBL2047_EC50": {"rmse": 0.70, "rmse_cliff": 0.6874106, "tuned": True, "config": {"C": 10}}}
    from components.molecules.moleculeace import published_results

    published = published_results()
    assert [c.passed for c in checks(ok, data, published)] == [True, True]
    assert [c.passed for c in checks(off, data, published)] == [False, True]
    bad_flags = {"X": {"cliff_flag_agreement": 0.9, "cliff_flag_mismatches": 10, "molecules": 100}}
    assert [c.id for c in checks({}, bad_flags, published)] == ["cliff_flags_reproduced"]
    assert not checks({}, bad_flags, published)[0].passed


def test_report_table_has_published_numbers_beside_ours() -> None:
    rows = scores(ratio={"mse": [2.0] * 6, "lac": [1.5] * 6, "aca": [2.0] * 6}, encoders=("ecfp_mlp", "gin"))
    rows = [dict(r, dataset={"A": "CHEMBL2047_EC50", "B": "CHEMBL1862_Ki"}[r["dataset"]]) for r in rows]
    svm = {
        d: {"rmse": 0.6, "rmse_cliff": 0.7, "tuned": True, "config": {"C": 10, "gamma": 0.01}}
        for d in ("CHEMBL2047_EC50", "CHEMBL1862_Ki")
    }
    data = {
        d: {
            "molecules": 600,
            "train": 480,
            "test": 120,
            "test_cliff_mols": 40,
            "graph_edges": 900,
            "graph_cliff_edges": 200,
            "train_with_edge": 300,
            "train_with_cliff_edge": 150,
            "train_y_sd": 1.0,
            "cliff_flag_agreement": 1.0,
            "cliff_flag_mismatches": 0,
            "train_mean_test_rmse": 1.2,
        }
        for d in svm
    }
    report = build_report(ActivityCliffParams(), rows, svm, data)
    table = {(r["dataset"], r["model"], r["objective"]): r for r in report.rows}
    assert len(report.rows) == 2 * (1 + 2 * 3)
    mlp = table[("CHEMBL2047_EC50", "ECFP-MLP", "plain MSE")]
    published = (mlp["MoleculeACE row"], mlp["MoleculeACE RMSE"], mlp["MoleculeACE RMSE_cliff"])
    assert published == ("MLP + ECFP", "0.677", "0.728")
    assert table[("CHEMBL1862_Ki", "GIN", "plain MSE")]["MoleculeACE row"] == "GCN + GRAPH"
    assert table[("CHEMBL1862_Ki", "SVM + ECFP (sklearn SVR)", "epsilon-SVR")]["MoleculeACE RMSE"] == "0.774"
    assert [c.id for c in report.claims] == [
        "lac_lowers_rmse_cliff_ecfp_mlp",
        "lac_lowers_rmse_cliff_gin",
        "lac_keeps_rmse_ecfp_mlp",
        "lac_keeps_rmse_gin",
        "mse_underfits_cliff_molecules",
    ]
    assert [c.id for c in report.headline] == ["lac_lowers_rmse_cliff_ecfp_mlp", "lac_lowers_rmse_cliff_gin"]
    assert "reconstruction" in report.notes[0] and not any("Undertrained" in n for n in report.notes)
    slow_gin = [dict(r, train_rmse=0.9) if r["encoder"] == "gin" else r for r in rows]
    note = build_report(ActivityCliffParams(), slow_gin, svm, data).notes[-1]
    assert note.startswith("Undertrained at this budget: GIN (75 steps, training R^2 0.19 under MSE)")
    headline = report.extra_tables["mean over the run's targets (MoleculeACE's headline shape)"]
    assert headline[0]["MoleculeACE RMSE"] == f"{(0.613573775 + 0.773564898) / 2:.3f}"
    # constructed RMSE_cliff 0.8 vs MoleculeACE's MLP + ECFP 0.728 (CHEMBL2047_EC50) and 0.781 (CHEMBL1862_Ki),
    # and vs its GCN 0.781 and 0.942
    assert [h["targets with RMSE_cliff below MoleculeACE's"] for h in headline] == [None] + ["0/2"] * 3 + ["1/2"] * 3
    assert headline[1]["MoleculeACE row"] == "MLP + ECFP" and headline[4]["MoleculeACE row"] == "GCN + GRAPH"
