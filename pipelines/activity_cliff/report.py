"""The MoleculeACE-shaped table and the activity-cliff claims, as pure functions of the loaded tables.

``scores`` has one row per trained model: ``dataset, encoder, objective, seed, rmse, rmse_cliff, train_rmse,
train_loss_ratio, ...`` (RMSE over the test set, RMSE_cliff over its cliff molecules, and the mean training
loss of the cliff molecules over that of the other training molecules). Within one encoder a **unit** is one
(dataset, seed): the objectives of a unit share the data, the initial weights and the uniform batches, so their
differences are paired by that key.

Headline (the paper's claim, decided **per encoder**, never pooled over encoders):
``lac_lowers_rmse_cliff_<encoder>``: RMSE_cliff(LAC) − RMSE_cliff(MSE) < 0, paired by (dataset, seed).
Secondary: ``lac_keeps_rmse_<encoder>`` (RMSE(LAC) − RMSE(MSE) below a non-inferiority margin) and
``mse_underfits_cliff_molecules`` (the cliff molecules' training loss over the others' > 1 under plain MSE, over
the encoders whose MSE models fit their training data).

Learning gates: each compared arm (the encoder under plain MSE and under LAC) fits its training data (training
R^2 = 1 − (train RMSE / label SD)^2 above :data:`FIT_R2`, the bar of the underfitting claim) and beats the
training-mean predictor on the test set (test R^2 = 1 − (RMSE / RMSE of the training mean)^2 > 0), each with its
interval over (dataset, seed). An encoder left unfit by the CPU budget decides nothing about LAC.

LAC is the brief's reconstruction (node and edge tasks on a training-only similarity graph of molecules, no
message passing over that graph); its task weight is chosen per target and encoder on a validation split carved
from the training molecules (``lac_weights``: the search's table).

Seeds of one target share its data, so the intervals measure training noise and the spread over the chosen
targets, not the spread over all possible targets; the per-target table shows both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from components.io import load_json, load_table
from components.metrics.stats import Estimate, Interval, mean_ci, paired_ci
from components.molecules.moleculeace import published_results
from paperflows import Claim  # the type a claim function returns (decided by paperflows.claims.decide)
from paperflows.claims import ClaimSpec, Gate, decide, gate, non_inferiority, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Check, Report, fmt_interval
from paperflows.rows import by_unit
from pipelines.activity_cliff.params import ENCODERS, LABELS, PUBLISHED_ROW, SVM_TOLERANCE, ActivityCliffParams
from pipelines.activity_cliff.pipeline import DATA_METRICS, LAC_WEIGHTS, REPORT, SCORES, SVM_METRICS
from pipelines.activity_cliff.plots import of

Rows = Sequence[Mapping[str, Any]]
UNDEFINED = Interval(math.nan, -math.inf, math.inf, 0)
FIT_R2 = 0.5  # an encoder's MSE models "fit" when they explain half the training labels' variance
LAC_NAME = "LAC (the brief's auxiliary-task reconstruction: node and edge tasks, no message passing on the graph)"
# MoleculeACE's published means over its 30 targets (results file, commit 7e6de0b): its two best methods,
# SVM + ECFP and GBM + ECFP, differ by 0.032 on RMSE_cliff (0.751 vs 0.783) and by 0.024 on RMSE (0.671 vs 0.695)
CLIFF_GAIN = 0.03
CLIFF_SOURCE = (
    "MoleculeACE's published means over 30 targets: its two best methods differ by 0.032 on RMSE_cliff "
    "(SVM + ECFP 0.751, GBM + ECFP 0.783); the LAC paper's own numbers were not retrieved"
)
RMSE_MARGIN = 0.02  # report.rmse_margin's default
RMSE_SOURCE = (
    "report.rmse_margin = 0.02, just below the 0.024 by which MoleculeACE's two best methods differ on "
    "mean RMSE over 30 targets (SVM + ECFP 0.671, GBM + ECFP 0.695); the brief: RMSE 'does not get worse "
    "beyond seed noise'"
)
UNIT = ("dataset", "seed")  # the unit of the per-encoder claims


def _lac_cliff_spec(encoder: str) -> ClaimSpec:
    return ClaimSpec(
        f"lac_lowers_rmse_cliff_{encoder}",
        f"{LAC_NAME} lowers RMSE_cliff against plain MSE, {LABELS[encoder]} encoder",
        f"RMSE_cliff(LAC) − RMSE_cliff(MSE), log units, paired by (target, seed), {LABELS[encoder]}",
        superiority(CLIFF_GAIN, CLIFF_SOURCE, direction="less"),
        headline=True,
    )


def _lac_rmse_spec(encoder: str) -> ClaimSpec:
    return ClaimSpec(
        f"lac_keeps_rmse_{encoder}",
        f"LAC does not raise the test RMSE over plain MSE beyond the margin, {LABELS[encoder]} encoder",
        f"RMSE(LAC) − RMSE(MSE), log units, paired by (target, seed), {LABELS[encoder]}",
        non_inferiority(RMSE_MARGIN, RMSE_SOURCE, direction="less"),
    )


LAC_LOWERS_RMSE_CLIFF = {e: _lac_cliff_spec(e) for e in ENCODERS}
LAC_KEEPS_RMSE = {e: _lac_rmse_spec(e) for e in ENCODERS}
MSE_UNDERFITS_CLIFF_MOLECULES = ClaimSpec(
    "mse_underfits_cliff_molecules",
    "Plain MSE underfits cliff molecules: their mean training loss exceeds that of the other molecules",
    "training loss of cliff / non-cliff molecules under MSE, geometric mean over (target, encoder, seed)",
    superiority(
        0.1,
        "the brief §d: the ratio exceeds 1 (no size retrieved from the paper); 10 % is taken as the "
        "smallest excess loss worth reporting",
    ),
)
HEADLINE = (LAC_LOWERS_RMSE_CLIFF["ecfp_mlp"], LAC_LOWERS_RMSE_CLIFF["gin"])


def _finite(xs: Sequence[Any]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def _avg(xs: Sequence[Any]) -> float:
    vals = _finite(xs)
    return float(np.mean(vals)) if vals else math.nan


def _num(x: Any, digits: int = 3) -> str | None:
    """A number as the tables print it (3 decimals, as MoleculeACE's table); None stays empty."""
    return None if x is None or not math.isfinite(float(x)) else f"{float(x):.{digits}f}"


def _cell(xs: Sequence[Any], digits: int = 3) -> str:
    """``mean ± half-width`` of the 95% interval over seeds (the mean alone for one seed)."""
    vals = _finite(xs)
    if not vals:
        return "–"
    ci = mean_ci(vals)
    return f"{ci.estimate:.{digits}f}" if ci.n < 2 else f"{ci.estimate:.{digits}f} ± {ci.high - ci.estimate:.{digits}f}"


def paired(
    scores: Rows, metric: str, a: str, b: str, encoder: str | None = None
) -> tuple[list[tuple[str, str, int]], list[float], list[float]]:
    """Units (dataset, encoder, seed) holding both objectives with a finite ``metric``, and the two series (for
    the table of differences; the claims pair with :func:`by_unit`)."""
    by = {
        (r["dataset"], r["encoder"], r["seed"], r["objective"]): r[metric]
        for r in scores
        if encoder is None or r["encoder"] == encoder
    }
    units = sorted({k[:3] for k in by})
    keep = [u for u in units if all(_finite([by.get((*u, o))]) for o in (a, b))]
    return keep, [float(by[(*u, a)]) for u in keep], [float(by[(*u, b)]) for u in keep]


def _difference(scores: Rows, metric: str, a: str, b: str, encoder: str | None = None) -> Interval:
    units, x, y = paired(scores, metric, a, b, encoder)
    return paired_ci(x, y) if units else UNDEFINED


# --------------------------------------------------------------------------------------------------
# learning gates
# --------------------------------------------------------------------------------------------------
def r2_vs_training_mean(scores: Rows, encoder: str, objective: str, mean_rmse: Mapping[str, float]) -> dict[Any, float]:
    """Per (dataset, seed): test R^2 against the training-mean predictor, 1 − (RMSE / its RMSE)^2."""
    rmse = by_unit(scores, "rmse", unit=UNIT, encoder=encoder, objective=objective)
    return {k: 1 - (v / mean_rmse[k[0]]) ** 2 for k, v in rmse.items() if mean_rmse.get(k[0], 0) > 0}


def _arm(encoder: str, objective: str) -> str:
    return f"{LABELS[encoder]} + {'LAC' if objective == 'lac' else LABELS[objective]}"


def fits_training_data(scores: Rows, encoder: str, objective: str, label_sd: Mapping[str, float]) -> Gate:
    """The encoder trained with ``objective`` explains more than :data:`FIT_R2` of its training labels' variance."""
    train = by_unit(scores, "train_rmse", unit=UNIT, encoder=encoder, objective=objective)
    r2 = {k: 1 - (v / label_sd[k[0]]) ** 2 for k, v in train.items() if v is not None and label_sd.get(k[0], 0) > 0}
    return gate(
        _arm(encoder, objective),
        f"training R^2 {FIT_R2}",
        Estimate.of(r2) if r2 else None,
        statistic="training R^2 = 1 − (train RMSE / label SD)^2",
        margin=FIT_R2,
    )


def beats_training_mean(scores: Rows, encoder: str, objective: str, mean_rmse: Mapping[str, float]) -> Gate:
    """The encoder trained with ``objective`` predicts the test set better than the training mean does."""
    r2 = r2_vs_training_mean(scores, encoder, objective, mean_rmse)
    return gate(
        _arm(encoder, objective),
        "the training-mean predictor",
        Estimate.of(r2) if r2 else None,
        statistic="test R^2 = 1 − (RMSE / RMSE of the training mean)^2",
    )


# --------------------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------------------
def train_r2(scores: Rows, label_sd: Mapping[str, float]) -> dict[str, float]:
    """Per encoder, the mean training R^2 of its plain-MSE models (1 − (train RMSE / label SD)^2)."""
    mse = [
        r
        for r in scores
        if r["objective"] == "mse" and r["train_rmse"] is not None and label_sd.get(r["dataset"], 0) > 0
    ]
    return {
        e: _avg([1 - (r["train_rmse"] / label_sd[r["dataset"]]) ** 2 for r in mse if r["encoder"] == e])
        for e in dict.fromkeys(r["encoder"] for r in mse)
    }


def underfitting_claim(scores: Rows, label_sd: Mapping[str, float]) -> Claim:
    """Plain MSE leaves the cliff molecules with a higher training loss (module docstring). Decided on the
    encoders whose MSE models fit their training data (mean training R^2 >= :data:`FIT_R2`); an encoder
    below that (too few steps at CPU scale) is named and left out: its ratio would describe a model that has
    not learned the data, not one that fits all but the cliffs. Gate: the kept models' training R^2 exceeds
    :data:`FIT_R2` with its interval."""
    spec = MSE_UNDERFITS_CLIFF_MOLECULES
    r2 = train_r2(scores, label_sd)
    fit_text = ", ".join(f"{LABELS.get(e, e)} {v:.2f}" for e, v in r2.items()) or "none trained"
    kept = [e for e, v in r2.items() if v >= FIT_R2]
    ratios = {
        k: v
        for k, v in by_unit(scores, "train_loss_ratio", unit=("dataset", "encoder", "seed"), objective="mse").items()
        if k[1] in kept and v > 0
    }
    numbers = {f"train_r2_{e}": v for e, v in r2.items()}
    if not ratios:
        return decide(
            spec,
            None,
            numbers=numbers,
            missing="no plain-MSE model of an encoder that fits its training "
            f"data (mean training R^2 >= {FIT_R2}: {fit_text})",
        )
    fitted = {
        k: 1 - (r["train_rmse"] / label_sd[k[0]]) ** 2
        for r in scores
        if r["objective"] == "mse"
        for k in [(r["dataset"], r["encoder"], r["seed"])]
        if k in ratios
    }
    fits = gate(
        "plain MSE (" + ", ".join(LABELS.get(e, e) for e in kept) + ")",
        f"training R^2 {FIT_R2}",
        Estimate.of(fitted),
        statistic="training R^2",
        margin=FIT_R2,
    )
    estimate = Estimate.of(ratios, log=True)
    left_out = [LABELS.get(e, e) for e, v in r2.items() if v < FIT_R2]
    above = sum(v > 1 for v in ratios.values())
    per_target = {
        d: math.exp(_avg([math.log(v) for k, v in ratios.items() if k[0] == d]))
        for d in dict.fromkeys(k[0] for k in ratios)
    }
    return decide(
        spec,
        estimate,
        gates=[fits],
        evidence=(
            "per target "
            + ", ".join(f"{d} {v:.2f}" for d, v in per_target.items())
            + f"; {above}/{len(ratios)} models above 1; training R^2 of the MSE models: {fit_text}"
            + (f"; left out (not fitted at this budget): {', '.join(left_out)}" if left_out else "")
        ),
        numbers={"models_above_1": float(above), **numbers},
    )


def lac_claims(
    scores: Rows,
    encoder: str,
    mean_rmse: Mapping[str, float],
    margin: float = RMSE_MARGIN,
    label_sd: Mapping[str, float] | None = None,
) -> list[Claim]:
    """For one encoder: LAC lowers RMSE_cliff (the headline) and keeps RMSE within ``margin`` (``report.rmse_margin``)
    of plain MSE, paired by (dataset, seed), both arms gated on fitting their training data (with the labels' SD
    per dataset, ``label_sd``) and on beating the training-mean predictor on the test set."""
    cliff_spec, rmse_spec = LAC_LOWERS_RMSE_CLIFF[encoder], LAC_KEEPS_RMSE[encoder]
    if margin != RMSE_MARGIN:
        rmse_spec = replace(
            rmse_spec,
            rule=non_inferiority(
                margin,
                f"report.rmse_margin = {margin:g} in this run's params (default {RMSE_MARGIN:g}: {RMSE_SOURCE})",
                direction="less",
            ),
        )
    objectives = {r["objective"] for r in scores if r["encoder"] == encoder}
    if not {"mse", "lac"} <= objectives:
        why = f"{LABELS[encoder]} was not trained with both plain MSE and LAC (model.encoders, train.objectives)"
        return [decide(cliff_spec, None, missing=why), decide(rmse_spec, None, missing=why)]
    gates = [fits_training_data(scores, encoder, o, label_sd or {}) for o in ("mse", "lac")]
    gates += [beats_training_mean(scores, encoder, o, mean_rmse) for o in ("mse", "lac")]
    series = {
        (m, o): by_unit(scores, m, unit=UNIT, encoder=encoder, objective=o)
        for m in ("rmse_cliff", "rmse")
        for o in ("lac", "mse")
    }
    lac, mse = series[("rmse_cliff", "lac")], series[("rmse_cliff", "mse")]
    wins = sum(lac[k] < mse[k] for k in lac if k in mse)
    numbers = {
        "rmse_cliff_lac": _avg(list(lac.values())),
        "rmse_cliff_mse": _avg(list(mse.values())),
        "rmse_lac": _avg(list(series[("rmse", "lac")].values())),
        "rmse_mse": _avg(list(series[("rmse", "mse")].values())),
        "wins": float(wins),
    }
    evidence = (
        f"LAC lower RMSE_cliff on {wins}/{len(lac)} (target, seed) units; mean RMSE_cliff LAC "
        f"{numbers['rmse_cliff_lac']:.3f} vs MSE {numbers['rmse_cliff_mse']:.3f}; mean RMSE LAC "
        f"{numbers['rmse_lac']:.3f} vs MSE {numbers['rmse_mse']:.3f}"
    )
    return [
        decide(cliff_spec, Estimate.paired(lac, mse), gates=gates, evidence=evidence, numbers=numbers),
        decide(
            rmse_spec,
            Estimate.paired(series[("rmse", "lac")], series[("rmse", "mse")]),
            gates=gates,
            evidence=evidence,
            numbers=numbers,
        ),
    ]


# --------------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------------
COLUMNS = [
    "dataset",
    "model",
    "objective",
    "RMSE",
    "RMSE_cliff",
    "train loss ratio (cliff / non-cliff)",
    "seeds",
    "MoleculeACE row",
    "MoleculeACE RMSE",
    "MoleculeACE RMSE_cliff",
]


def result_rows(
    scores: Rows, svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
) -> list[dict[str, Any]]:
    """Per dataset: our SVM + ECFP beside MoleculeACE's, then every encoder x objective (mean ± 95% half-width
    over seeds), MoleculeACE's row of the same family beside the plain-MSE row of each encoder."""
    out = []
    for d in dict.fromkeys(r["dataset"] for r in scores):
        s, pub = svm.get(d), published.get((d, *PUBLISHED_ROW["svm"]))
        if s is not None:
            out.append(
                {
                    "dataset": d,
                    "model": "SVM + ECFP (sklearn SVR)",
                    "objective": "epsilon-SVR",
                    "RMSE": _num(s["rmse"]),
                    "RMSE_cliff": _num(s["rmse_cliff"]),
                    "seeds": "–",
                    "MoleculeACE row": "SVM + ECFP" if pub else "–",
                    "MoleculeACE RMSE": _num(pub[0]) if pub else None,
                    "MoleculeACE RMSE_cliff": _num(pub[1]) if pub else None,
                }
            )
        for encoder in dict.fromkeys(r["encoder"] for r in scores):
            for objective in dict.fromkeys(r["objective"] for r in scores if r["encoder"] == encoder):
                mine = of(scores, d, encoder, objective)
                pub = published.get((d, *PUBLISHED_ROW[encoder])) if objective == "mse" else None
                out.append(
                    {
                        "dataset": d,
                        "model": LABELS[encoder],
                        "objective": LABELS[objective],
                        "RMSE": _cell([r["rmse"] for r in mine]),
                        "RMSE_cliff": _cell([r["rmse_cliff"] for r in mine]),
                        "train loss ratio (cliff / non-cliff)": _cell([r["train_loss_ratio"] for r in mine], 2),
                        "seeds": len(mine),
                        "MoleculeACE row": " + ".join(PUBLISHED_ROW[encoder]) if pub else "–",
                        "MoleculeACE RMSE": _num(pub[0]) if pub else None,
                        "MoleculeACE RMSE_cliff": _num(pub[1]) if pub else None,
                    }
                )
    return out


def mean_rows(
    scores: Rows, svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
) -> list[dict[str, Any]]:
    """MoleculeACE's headline shape: the mean over the run's targets of each model's (seed-mean) numbers, beside
    the mean of MoleculeACE's row of the same family, and on how many targets our RMSE_cliff is below it."""
    datasets = list(dict.fromkeys(r["dataset"] for r in scores))

    def reference(key: str) -> dict[str, Any]:
        rows = [published[(d, *PUBLISHED_ROW[key])] for d in datasets if (d, *PUBLISHED_ROW[key]) in published]
        full = len(rows) == len(datasets)
        return {
            "MoleculeACE row": " + ".join(PUBLISHED_ROW[key]) if full else "–",
            "MoleculeACE RMSE": _num(np.mean([r[0] for r in rows])) if full else None,
            "MoleculeACE RMSE_cliff": _num(np.mean([r[1] for r in rows])) if full else None,
        }

    def below(key: str, ours: list[float]) -> str | None:  # win rate against the published row
        pub = [published.get((d, *PUBLISHED_ROW[key])) for d in datasets]
        if any(p is None for p in pub):
            return None
        return f"{sum(o < p[1] for o, p in zip(ours, pub))}/{len(datasets)}"

    svm_cliff = [svm[d]["rmse_cliff"] if d in svm else math.nan for d in datasets]
    out = [
        {
            "model": "SVM + ECFP (sklearn SVR)",
            "objective": "epsilon-SVR",
            "RMSE": _num(_avg([svm[d]["rmse"] for d in datasets if d in svm])),
            "RMSE_cliff": _num(_avg(svm_cliff)),
            **reference("svm"),
            "targets with RMSE_cliff below MoleculeACE's": None,
        }
    ]  # the anchor: a check
    for encoder in dict.fromkeys(r["encoder"] for r in scores):
        for objective in dict.fromkeys(r["objective"] for r in scores if r["encoder"] == encoder):
            per = {
                m: [_avg([r[m] for r in of(scores, d, encoder, objective)]) for d in datasets]
                for m in ("rmse", "rmse_cliff")
            }
            out.append(
                {
                    "model": LABELS[encoder],
                    "objective": LABELS[objective],
                    "RMSE": _num(_avg(per["rmse"])),
                    "RMSE_cliff": _num(_avg(per["rmse_cliff"])),
                    **reference(encoder),
                    "targets with RMSE_cliff below MoleculeACE's": below(encoder, per["rmse_cliff"]),
                }
            )
    return out


def difference_rows(scores: Rows) -> list[dict[str, Any]]:
    """Each cliff-aware objective minus plain MSE, paired by unit: per encoder and over all encoders."""
    out = []
    for objective in [o for o in dict.fromkeys(r["objective"] for r in scores) if o != "mse"]:
        for encoder in [*dict.fromkeys(r["encoder"] for r in scores), None]:
            units, a, b = paired(scores, "rmse_cliff", objective, "mse", encoder)
            if not units:
                continue
            overall = _difference(scores, "rmse", objective, "mse", encoder)
            out.append(
                {
                    "objective": LABELS[objective],
                    "encoder": LABELS[encoder] if encoder else "all",
                    "units": len(units),
                    "RMSE_cliff - MSE's [95% CI]": fmt_interval(paired_ci(a, b)).rsplit(",", 1)[0],
                    "RMSE - MSE's [95% CI]": fmt_interval(overall).rsplit(",", 1)[0],
                    "lower RMSE_cliff than MSE": f"{sum(x < y for x, y in zip(a, b))}/{len(units)}",
                }
            )
    return out


def svm_rows(
    svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
) -> list[dict[str, Any]]:
    out = []
    for d, s in svm.items():
        pub = published.get((d, *PUBLISHED_ROW["svm"]))
        out.append(
            {
                "dataset": d,
                "SVR settings": ", ".join(f"{k}={v}" for k, v in s["config"].items())
                + (" (MoleculeACE tuned)" if s["tuned"] else " (fixed)"),
                "RMSE ours": _num(s["rmse"], 6),
                "RMSE published": _num(pub[0], 6) if pub else None,
                "RMSE_cliff ours": _num(s["rmse_cliff"], 6),
                "RMSE_cliff published": _num(pub[1], 6) if pub else None,
                "largest |difference|": (
                    f"{max(abs(s['rmse'] - pub[0]), abs(s['rmse_cliff'] - pub[1])):.1e}" if pub else None
                ),
            }
        )
    return out


def checks(
    svm: Mapping[str, Any], data: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
) -> list[Check]:
    """The SVM anchor against MoleculeACE's published row, and our cliff definition against the CSV flags."""
    out = []
    anchored = {d: s for d, s in svm.items() if s["tuned"] and (d, *PUBLISHED_ROW["svm"]) in published}
    if anchored:
        gaps = {
            d: max(
                abs(s["rmse"] - published[(d, "SVM", "ECFP")][0]),
                abs(s["rmse_cliff"] - published[(d, "SVM", "ECFP")][1]),
            )
            for d, s in anchored.items()
        }
        out.append(
            Check(
                "svm_reproduces_moleculeace",
                f"ECFP4 (1024 bits) + sklearn SVR with MoleculeACE's tuned settings reproduces its published "
                f"RMSE and RMSE_cliff within {SVM_TOLERANCE}",
                passed=max(gaps.values()) <= SVM_TOLERANCE,
                evidence=", ".join(f"{d} |diff| {g:.1e}" for d, g in gaps.items()),
                numbers={"largest_difference": max(gaps.values())},
            )
        )
    agreement = {d: m["cliff_flag_agreement"] for d, m in data.items()}
    out.append(
        Check(
            "cliff_flags_reproduced",
            "MoleculeACE's cliff definition recomputed here (ECFP / scaffold / SMILES similarity >= 0.9 and "
            "potency fold > 10, over train + test) gives the CSV's cliff_mol flags (>= 99% agreement)",
            passed=min(agreement.values()) >= 0.99,
            evidence=", ".join(
                f"{d} {data[d]['cliff_flag_mismatches']} of {data[d]['molecules']} differ" for d in data
            ),
            numbers={"lowest_agreement": min(agreement.values())},
        )
    )
    return out


def data_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "dataset": d,
            "molecules": m["molecules"],
            "train": m["train"],
            "test": m["test"],
            "test cliff molecules": m["test_cliff_mols"],
            "graph edges (train only)": m["graph_edges"],
            "cliff edges": m["graph_cliff_edges"],
            "train molecules with an edge": m["train_with_edge"],
            "with a cliff edge": m["train_with_cliff_edge"],
        }
        for d, m in data.items()
    ]


def notes(p: ActivityCliffParams) -> list[str]:
    g, t, lac, aca = p.graph, p.train, p.lac, p.aca
    similarity = (
        "ECFP4 Tanimoto, Tanimoto of the generic skeletons' ECFP4 (MoleculeACE's 'scaffold') or SMILES "
        "Levenshtein similarity"
        if g.similarity == "moleculeace"
        else "ECFP4 Tanimoto"
    )
    return [
        (
            "LAC is a reconstruction (the brief's; no official code was found and the method text was not "
            "retrieved): nodes are molecules, edges join training molecules whose "
            f"{similarity} is >= {g.threshold:g}; node task = cross-entropy on {lac.n_bins} ordinal quantile bins of "
            f"the training labels (weight {lac.lambda_node:g}); edge task = BCE of a symmetric edge head on "
            f"(z_i, z_j, |z_i - z_j|) predicting cliff = potency fold > {g.fold:g}, plus a margin push "
            f"({lac.margin:g}) of the normalised embeddings of cliff edges (weight {lac.lambda_edge:g}); predictions "
            "come from the regression head. There is no message passing over the similarity graph (the brief's "
            "optional step would need test-to-train edges at prediction time), so this is an auxiliary-task "
            "reconstruction, not the paper's node classification on the molecule graph: a negative result here "
            "is not one for the paper. Both task weights are multiplied by the weight of "
            f"{list(lac.weight_grid)} with the lowest RMSE_cliff on {lac.validation_fraction:g} of each target's "
            "training molecules held out (one LAC model per weight, first seed, encoder by encoder); tau and K "
            "keep the brief's values."
        ),
        (
            "The similarity graph holds training molecules only; the CSV's cliff_mol flags (computed by MoleculeACE "
            "on train + test) are used only to score: RMSE_cliff on the test set and the training-loss ratio's "
            "cliff / non-cliff groups."
        ),
        (
            f"Training: AdamW lr {t.lr:g}, batches of {t.batch_size} uniform training molecules (+ {t.edge_batch} "
            f"graph edges for LAC), {t.mlp_steps} steps for ECFP-MLP and {t.gin_steps} for GIN, seeds {p.seeds}; "
            "objectives of one (target, encoder, seed) share the initial weights and the uniform batches. Labels "
            "are standardised by the training mean and SD inside the network. No early stopping and no tuning, "
            "where MoleculeACE tunes its deep models per target and stops early on a validation split: its columns "
            "are a reference, not a like-for-like comparison."
        ),
        (
            f"clsar's ACA loss (ACANet package, GPL-3): alpha {aca.alpha:g}, positives |dy| < {aca.cliff_lower:g}, "
            f"negatives |dy| >= {aca.cliff_upper:g}, {'MSE' if aca.squared else 'MAE'} regression (its default), "
            "triplets mined within each batch, no structural gate."
        ),
        (
            "MoleculeACE rows: MLP + ECFP beside our ECFP-MLP with plain MSE; MoleculeACE has no GIN, so its GCN "
            "(graph) row stands beside our GIN; SVM + ECFP beside our SVR. They are MoleculeACE's tuned models "
            "(published results file, commit 7e6de0b)."
        ),
        (
            "Intervals: Student-t over (target, seed) units within one encoder, paired by that key for differences "
            "(the LAC claims are decided per encoder, never pooled); the underfitting ratio over (target, encoder, "
            "seed) on log scale. The seeds of a target share its data, so the intervals measure training noise and "
            "the spread over these targets only."
        ),
        (
            f"Learning gates of every LAC claim: each arm's training R^2 is above {FIT_R2} and its test R^2 against "
            "the training-mean predictor (the mean training label predicted for every test molecule) is above 0, "
            "each with its interval over (target, seed)."
        ),
    ]


def fit_note(r2: Mapping[str, float], p: ActivityCliffParams) -> str | None:
    """A note naming the encoders the CPU budget left undertrained (their MSE models' mean training R^2)."""
    short = {e: v for e, v in r2.items() if v < FIT_R2}
    if not short:
        return None
    steps = {"ecfp_mlp": p.train.mlp_steps, "gin": p.train.gin_steps}
    return (
        "Undertrained at this budget: "
        + ", ".join(
            f"{LABELS.get(e, e)} ({steps.get(e, '?')} steps, training R^2 {v:.2f} under MSE)" for e, v in short.items()
        )
        + ". Their rows show the table's shape; they are left out of the underfitting claim, and their LAC "
        "claims stay not resolved (training-R^2 gate); `--set scale=evidence`, `train.gin_steps=...` or "
        "`scale=paper` trains them longer."
    )


def weight_rows(weights: Rows) -> list[dict[str, Any]]:
    """The validation search of LAC's task weight: one row per (encoder, target, weight)."""
    return [
        {
            "encoder": LABELS.get(w["encoder"], w["encoder"]),
            "dataset": w["dataset"],
            "task weight": f"{w['weight']:g}",
            "validation RMSE_cliff": _num(w["validation_rmse_cliff"]),
            "validation RMSE": _num(w["validation_rmse"]),
            "held-out molecules (cliff)": f"{w['validation_molecules']} ({w['validation_cliff_molecules']})",
            "chosen": "yes" if w["chosen"] else "",
        }
        for w in weights
    ]


def build_report(
    p: ActivityCliffParams, scores: Rows, svm: Mapping[str, Any], data: Mapping[str, Any], weights: Rows = ()
) -> Report:
    published = published_results()
    label_sd = {d: m["train_y_sd"] for d, m in data.items()}
    mean_rmse = {d: m["train_mean_test_rmse"] for d, m in data.items() if "train_mean_test_rmse" in m}
    per_encoder = {e: lac_claims(scores, e, mean_rmse, p.report.rmse_margin, label_sd) for e in ENCODERS}
    claims = [
        *(c[0] for c in per_encoder.values()),
        *(c[1] for c in per_encoder.values()),
        underfitting_claim(scores, label_sd),
    ]
    extra = fit_note(train_r2(scores, label_sd), p)
    return Report(
        slug="activity_cliff",
        title="Activity cliffs on MoleculeACE: RMSE and RMSE_cliff (test set, -log10 nM) per target, "
        "encoder and objective",
        columns=COLUMNS,
        rows=result_rows(scores, svm, published),
        claims=claims,
        checks=checks(svm, data, published),
        notes=notes(p) + ([extra] if extra else []),
        extra_tables={
            "mean over the run's targets (MoleculeACE's headline shape)": mean_rows(scores, svm, published),
            "paired differences against plain MSE": difference_rows(scores),
            "SVM + ECFP anchor against MoleculeACE's published row": svm_rows(svm, published),
            "data and the training-only similarity graph": data_rows(data),
            "LAC task weight chosen on a validation split of the training molecules": weight_rows(weights),
        },
    )


# --------------------------------------------------------------------------------------------------
# 5. the table (ours beside MoleculeACE's published numbers) and the claims
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "graph", "model", "train", "lac", "aca", "svm", "report"),
    deps=(SCORES, SVM_METRICS, DATA_METRICS, LAC_WEIGHTS),
    outs=(REPORT,),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """Per-target RMSE / RMSE_cliff per encoder x objective, SVM anchor, published rows, claims."""
    build_report(
        ctx.params,
        load_table(ctx.path(SCORES)),
        load_json(ctx.path(SVM_METRICS)),
        load_json(ctx.path(DATA_METRICS)),
        load_table(ctx.path(LAC_WEIGHTS)),
    ).save(ctx.path(REPORT))
