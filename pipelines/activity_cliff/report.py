"""The MoleculeACE-shaped table and the activity-cliff claims, as pure functions of the loaded tables.

``scores`` has one row per trained model: ``dataset, encoder, objective, seed, rmse, rmse_cliff, train_rmse,
train_loss_ratio, ...`` (RMSE over the test set, RMSE_cliff over its cliff molecules, and the mean training
loss of the cliff molecules over that of the other training molecules). A **unit** is one (dataset,
encoder, seed): the objectives of a unit share the data, the initial weights and the uniform batches, so
their differences are paired. Claims (95% Student-t intervals over units):

* ``mse_underfits_cliff_molecules``: under plain MSE the cliff molecules keep a higher training loss:
  mean over units of log(ratio) > 0 (the geometric-mean ratio > 1), over the encoders whose MSE models fit
  their training data (mean training R^2 >= 0.5; an encoder left undertrained by the CPU budget is named and
  left out, since its ratio would describe a model that has not learned the data at all).
* ``lac_lowers_rmse_cliff``: RMSE_cliff(LAC) - RMSE_cliff(MSE) < 0, paired by unit.
* ``lac_keeps_rmse``: RMSE(LAC) - RMSE(MSE) < ``report.rmse_margin`` (non-inferiority: *holds* when the
  whole interval is below the margin, *does not hold* when it is wholly above).

Seeds of one target share its data, so the intervals over units measure training noise and the spread over
the chosen targets, not the spread over all possible targets; the per-target table shows both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import Interval, mean_ci, paired_ci
from components.molecules.moleculeace import published_results
from paperflows.report import Check, Claim, Precondition, Report, decide, fmt_interval
from pipelines.activity_cliff.params import LABELS, PUBLISHED_ROW, SVM_TOLERANCE, ActivityCliffParams
from pipelines.activity_cliff.plots import of

Rows = Sequence[Mapping[str, Any]]
UNDEFINED = Interval(math.nan, -math.inf, math.inf, 0)
FIT_R2 = 0.5            # an encoder's MSE models "fit" when they explain half the training labels' variance


def _finite(xs: Sequence[Any]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def _avg(xs: Sequence[Any]) -> float:
    vals = _finite(xs)
    return float(np.mean(vals)) if vals else math.nan


def _ci(xs: Sequence[float]) -> Interval:
    vals = _finite(xs)
    return mean_ci(vals) if vals else UNDEFINED


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


def paired(scores: Rows, metric: str, a: str, b: str, encoder: str | None = None
           ) -> tuple[list[tuple[str, str, int]], list[float], list[float]]:
    """Units (dataset, encoder, seed) holding both objectives with a finite ``metric``, and the two series."""
    by = {(r["dataset"], r["encoder"], r["seed"], r["objective"]): r[metric] for r in scores
          if encoder is None or r["encoder"] == encoder}
    units = sorted({k[:3] for k in by})
    keep = [u for u in units if all(_finite([by.get((*u, o))]) for o in (a, b))]
    return keep, [float(by[(*u, a)]) for u in keep], [float(by[(*u, b)]) for u in keep]


def _difference(scores: Rows, metric: str, a: str, b: str, encoder: str | None = None) -> Interval:
    units, x, y = paired(scores, metric, a, b, encoder)
    return paired_ci(x, y) if units else UNDEFINED


# --------------------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------------------
def underfitting_claim(scores: Rows, label_sd: Mapping[str, float]) -> Claim:
    """Plain MSE leaves the cliff molecules with a higher training loss (module docstring). Decided on the
    encoders whose MSE models fit their training data (mean training R^2 >= :data:`FIT_R2`); an encoder
    below that (too few steps at CPU scale) is named and left out: its ratio would describe a model that has
    not learned the data, not one that fits all but the cliffs."""
    text = "Plain MSE underfits cliff molecules: their mean training loss exceeds that of the other molecules"
    statistic = "mean over (target, encoder, seed) of log(train loss cliff / non-cliff) under MSE"
    mse = [r for r in scores if r["objective"] == "mse" and r["train_loss_ratio"] is not None
           and math.isfinite(r["train_loss_ratio"]) and r["train_loss_ratio"] > 0 and label_sd.get(r["dataset"], 0) > 0]
    r2 = {e: _avg([1 - (r["train_rmse"] / label_sd[r["dataset"]]) ** 2 for r in mse if r["encoder"] == e])
          for e in dict.fromkeys(r["encoder"] for r in mse)}
    kept = [r for r in mse if r2[r["encoder"]] >= FIT_R2]
    fit_text = ", ".join(f"{LABELS.get(e, e)} {v:.2f}" for e, v in r2.items())
    gate = Precondition(f"at least 3 MSE models of encoders that fit their training data (mean training R^2 >= "
                        f"{FIT_R2}: {fit_text or 'none trained'})", len(kept) >= 3, float(len(kept)))
    if not kept:
        return decide("mse_underfits_cliff_molecules", text, statistic, UNDEFINED, precondition=gate,
                      numbers={f"train_r2_{e}": v for e, v in r2.items()})
    interval = _ci([math.log(r["train_loss_ratio"]) for r in kept])
    per_target = {d: math.exp(_avg([math.log(r["train_loss_ratio"]) for r in kept if r["dataset"] == d]))
                  for d in dict.fromkeys(r["dataset"] for r in kept)}
    geo = (math.exp(interval.estimate), math.exp(interval.low), math.exp(interval.high))
    left_out = [LABELS.get(e, e) for e, v in r2.items() if v < FIT_R2]
    above = sum(r["train_loss_ratio"] > 1 for r in kept)
    return decide("mse_underfits_cliff_molecules", text, statistic, interval, precondition=gate,
                  evidence=(f"geometric-mean ratio {geo[0]:.2f} [{geo[1]:.2f}, {geo[2]:.2f}] over {interval.n} MSE "
                            "models; per target " + ", ".join(f"{d} {v:.2f}" for d, v in per_target.items())
                            + f"; {above}/{len(kept)} models above 1; training R^2 of the MSE models: {fit_text}"
                            + (f"; left out (not fitted at this budget): {', '.join(left_out)}" if left_out else "")),
                  numbers={"geometric_mean_ratio": geo[0], "ratio_low": geo[1], "ratio_high": geo[2],
                           "models_above_1": float(above), **{f"train_r2_{e}": v for e, v in r2.items()}})


def _both_trained(scores: Rows) -> Precondition:
    objectives = {r["objective"] for r in scores}
    return Precondition("both plain MSE and LAC were trained (train.objectives)", {"mse", "lac"} <= objectives)


def lac_claims(scores: Rows, margin: float) -> list[Claim]:
    """LAC lowers RMSE_cliff (paired by unit) and keeps RMSE within ``margin`` of plain MSE."""
    gate = _both_trained(scores)
    cliff = _difference(scores, "rmse_cliff", "lac", "mse") if gate.met else UNDEFINED
    overall = _difference(scores, "rmse", "lac", "mse") if gate.met else UNDEFINED
    units, lac, mse = paired(scores, "rmse_cliff", "lac", "mse")
    wins = sum(a < b for a, b in zip(lac, mse))
    per_encoder = {e: (_difference(scores, "rmse_cliff", "lac", "mse", e), _difference(scores, "rmse", "lac", "mse", e))
                   for e in dict.fromkeys(r["encoder"] for r in scores)} if gate.met else {}
    by_encoder = "; ".join(f"{LABELS.get(e, e)}: dRMSE_cliff {fmt_interval(c)}, dRMSE {fmt_interval(o)}"
                           for e, (c, o) in per_encoder.items())
    numbers = {"rmse_cliff_lac": _avg(lac), "rmse_cliff_mse": _avg(mse), "wins": float(wins),
               "units": float(len(units)), "rmse_difference": overall.estimate}
    return [
        decide("lac_lowers_rmse_cliff", "The node and edge tasks (LAC) lower RMSE_cliff against plain MSE",
               "mean paired RMSE_cliff(LAC) - RMSE_cliff(MSE) over (target, encoder, seed), log units", cliff,
               direction="less", precondition=gate,
               evidence=(f"LAC lower on {wins}/{len(units)} units (the brief's 'majority of dataset x seed runs'); "
                         f"mean RMSE_cliff LAC {_avg(lac):.3f} vs MSE {_avg(mse):.3f}; {by_encoder}"),
               numbers=numbers),
        decide("lac_keeps_rmse", f"LAC does not raise RMSE beyond {margin:g} log units over plain MSE",
               "mean paired RMSE(LAC) - RMSE(MSE) over (target, encoder, seed), log units", overall,
               threshold=margin, direction="less", precondition=gate,
               evidence=f"non-inferiority margin report.rmse_margin = {margin:g}; {by_encoder}",
               numbers={**numbers, "margin": margin}),
    ]


# --------------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------------
COLUMNS = ["dataset", "model", "objective", "RMSE", "RMSE_cliff", "train loss ratio (cliff / non-cliff)", "seeds",
           "MoleculeACE row", "MoleculeACE RMSE", "MoleculeACE RMSE_cliff"]


def result_rows(scores: Rows, svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
                ) -> list[dict[str, Any]]:
    """Per dataset: our SVM + ECFP beside MoleculeACE's, then every encoder x objective (mean ± 95% half-width
    over seeds), MoleculeACE's row of the same family beside the plain-MSE row of each encoder."""
    out = []
    for d in dict.fromkeys(r["dataset"] for r in scores):
        s, pub = svm.get(d), published.get((d, *PUBLISHED_ROW["svm"]))
        if s is not None:
            out.append({"dataset": d, "model": "SVM + ECFP (sklearn SVR)", "objective": "epsilon-SVR",
                        "RMSE": _num(s["rmse"]), "RMSE_cliff": _num(s["rmse_cliff"]), "seeds": "–",
                        "MoleculeACE row": "SVM + ECFP" if pub else "–",
                        "MoleculeACE RMSE": _num(pub[0]) if pub else None,
                        "MoleculeACE RMSE_cliff": _num(pub[1]) if pub else None})
        for encoder in dict.fromkeys(r["encoder"] for r in scores):
            for objective in dict.fromkeys(r["objective"] for r in scores if r["encoder"] == encoder):
                mine = of(scores, d, encoder, objective)
                pub = published.get((d, *PUBLISHED_ROW[encoder])) if objective == "mse" else None
                out.append({"dataset": d, "model": LABELS[encoder], "objective": LABELS[objective],
                            "RMSE": _cell([r["rmse"] for r in mine]),
                            "RMSE_cliff": _cell([r["rmse_cliff"] for r in mine]),
                            "train loss ratio (cliff / non-cliff)": _cell([r["train_loss_ratio"] for r in mine], 2),
                            "seeds": len(mine), "MoleculeACE row": " + ".join(PUBLISHED_ROW[encoder]) if pub else "–",
                            "MoleculeACE RMSE": _num(pub[0]) if pub else None,
                            "MoleculeACE RMSE_cliff": _num(pub[1]) if pub else None})
    return out


def mean_rows(scores: Rows, svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
              ) -> list[dict[str, Any]]:
    """MoleculeACE's headline shape: the mean over the run's targets of each model's (seed-mean) numbers, beside
    the mean of MoleculeACE's row of the same family, and on how many targets our RMSE_cliff is below it."""
    datasets = list(dict.fromkeys(r["dataset"] for r in scores))

    def reference(key: str) -> dict[str, Any]:
        rows = [published[(d, *PUBLISHED_ROW[key])] for d in datasets if (d, *PUBLISHED_ROW[key]) in published]
        full = len(rows) == len(datasets)
        return {"MoleculeACE row": " + ".join(PUBLISHED_ROW[key]) if full else "–",
                "MoleculeACE RMSE": _num(np.mean([r[0] for r in rows])) if full else None,
                "MoleculeACE RMSE_cliff": _num(np.mean([r[1] for r in rows])) if full else None}

    def below(key: str, ours: list[float]) -> str | None:  # win rate against the published row
        pub = [published.get((d, *PUBLISHED_ROW[key])) for d in datasets]
        if any(p is None for p in pub):
            return None
        return f"{sum(o < p[1] for o, p in zip(ours, pub))}/{len(datasets)}"

    svm_cliff = [svm[d]["rmse_cliff"] if d in svm else math.nan for d in datasets]
    out = [{"model": "SVM + ECFP (sklearn SVR)", "objective": "epsilon-SVR",
            "RMSE": _num(_avg([svm[d]["rmse"] for d in datasets if d in svm])), "RMSE_cliff": _num(_avg(svm_cliff)),
            **reference("svm"), "targets with RMSE_cliff below MoleculeACE's": None}]   # the anchor: a check
    for encoder in dict.fromkeys(r["encoder"] for r in scores):
        for objective in dict.fromkeys(r["objective"] for r in scores if r["encoder"] == encoder):
            per = {m: [_avg([r[m] for r in of(scores, d, encoder, objective)]) for d in datasets]
                   for m in ("rmse", "rmse_cliff")}
            out.append({"model": LABELS[encoder], "objective": LABELS[objective], "RMSE": _num(_avg(per["rmse"])),
                        "RMSE_cliff": _num(_avg(per["rmse_cliff"])), **reference(encoder),
                        "targets with RMSE_cliff below MoleculeACE's": below(encoder, per["rmse_cliff"])})
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
            out.append({"objective": LABELS[objective], "encoder": LABELS[encoder] if encoder else "all",
                        "units": len(units),
                        "RMSE_cliff - MSE's [95% CI]": fmt_interval(paired_ci(a, b)).rsplit(",", 1)[0],
                        "RMSE - MSE's [95% CI]": fmt_interval(overall).rsplit(",", 1)[0],
                        "lower RMSE_cliff than MSE": f"{sum(x < y for x, y in zip(a, b))}/{len(units)}"})
    return out


def svm_rows(svm: Mapping[str, Any], published: Mapping[tuple[str, str, str], tuple[float, float]]
             ) -> list[dict[str, Any]]:
    out = []
    for d, s in svm.items():
        pub = published.get((d, *PUBLISHED_ROW["svm"]))
        out.append({"dataset": d, "SVR settings": ", ".join(f"{k}={v}" for k, v in s["config"].items())
                    + (" (MoleculeACE tuned)" if s["tuned"] else " (fixed)"),
                    "RMSE ours": _num(s["rmse"], 6), "RMSE published": _num(pub[0], 6) if pub else None,
                    "RMSE_cliff ours": _num(s["rmse_cliff"], 6),
                    "RMSE_cliff published": _num(pub[1], 6) if pub else None,
                    "largest |difference|": (f"{max(abs(s['rmse'] - pub[0]), abs(s['rmse_cliff'] - pub[1])):.1e}"
                                             if pub else None)})
    return out


def checks(svm: Mapping[str, Any], data: Mapping[str, Any],
           published: Mapping[tuple[str, str, str], tuple[float, float]]) -> list[Check]:
    """The SVM anchor against MoleculeACE's published row, and our cliff definition against the CSV flags."""
    out = []
    anchored = {d: s for d, s in svm.items() if s["tuned"] and (d, *PUBLISHED_ROW["svm"]) in published}
    if anchored:
        gaps = {d: max(abs(s["rmse"] - published[(d, "SVM", "ECFP")][0]),
                       abs(s["rmse_cliff"] - published[(d, "SVM", "ECFP")][1])) for d, s in anchored.items()}
        out.append(Check("svm_reproduces_moleculeace",
                         f"ECFP4 (1024 bits) + sklearn SVR with MoleculeACE's tuned settings reproduces its published "
                         f"RMSE and RMSE_cliff within {SVM_TOLERANCE}",
                         passed=max(gaps.values()) <= SVM_TOLERANCE,
                         evidence=", ".join(f"{d} |diff| {g:.1e}" for d, g in gaps.items()),
                         numbers={"largest_difference": max(gaps.values())}))
    agreement = {d: m["cliff_flag_agreement"] for d, m in data.items()}
    out.append(Check("cliff_flags_reproduced",
                     "MoleculeACE's cliff definition recomputed here (ECFP / scaffold / SMILES similarity >= 0.9 and "
                     "potency fold > 10, over train + test) gives the CSV's cliff_mol flags (>= 99% agreement)",
                     passed=min(agreement.values()) >= 0.99,
                     evidence=", ".join(f"{d} {data[d]['cliff_flag_mismatches']} of {data[d]['molecules']} differ"
                                        for d in data),
                     numbers={"lowest_agreement": min(agreement.values())}))
    return out


def data_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"dataset": d, "molecules": m["molecules"], "train": m["train"], "test": m["test"],
             "test cliff molecules": m["test_cliff_mols"], "graph edges (train only)": m["graph_edges"],
             "cliff edges": m["graph_cliff_edges"], "train molecules with an edge": m["train_with_edge"],
             "with a cliff edge": m["train_with_cliff_edge"]} for d, m in data.items()]


def notes(p: ActivityCliffParams) -> list[str]:
    g, t, lac, aca = p.graph, p.train, p.lac, p.aca
    similarity = ("ECFP4 Tanimoto, Tanimoto of the generic skeletons' ECFP4 (MoleculeACE's 'scaffold') or SMILES "
                  "Levenshtein similarity"
                  if g.similarity == "moleculeace" else "ECFP4 Tanimoto")
    return [
        ("LAC is a reconstruction (the brief's; no official code was found and the method text was not "
         "retrieved): nodes are molecules, edges join training molecules whose "
         f"{similarity} is >= {g.threshold:g}; node task = cross-entropy on {lac.n_bins} ordinal quantile bins of "
         f"the training labels (weight {lac.lambda_node:g}); edge task = BCE of a symmetric edge head on "
         f"(z_i, z_j, |z_i - z_j|) predicting cliff = potency fold > {g.fold:g}, plus a margin push "
         f"({lac.margin:g}) of the normalised embeddings of cliff edges (weight {lac.lambda_edge:g}); predictions "
         "come from the regression head. The optional message-passing step over the similarity graph is not "
         "used (it would need test-to-train edges at prediction time). tau, K and the lambdas are the brief's "
         "starting values, not tuned on a validation split."),
        ("The similarity graph holds training molecules only; the CSV's cliff_mol flags (computed by MoleculeACE "
         "on train + test) are used only to score: RMSE_cliff on the test set and the training-loss ratio's "
         "cliff / non-cliff groups."),
        (f"Training: AdamW lr {t.lr:g}, batches of {t.batch_size} uniform training molecules (+ {t.edge_batch} "
         f"graph edges for LAC), {t.mlp_steps} steps for ECFP-MLP and {t.gin_steps} for GIN, seeds {p.seeds}; "
         "objectives of one (target, encoder, seed) share the initial weights and the uniform batches. Labels "
         "are standardised by the training mean and SD inside the network. No early stopping and no tuning, "
         "where MoleculeACE tunes its deep models per target and stops early on a validation split: its columns "
         "are a reference, not a like-for-like comparison."),
        (f"clsar's ACA loss (ACANet package, GPL-3): alpha {aca.alpha:g}, positives |dy| < {aca.cliff_lower:g}, "
         f"negatives |dy| >= {aca.cliff_upper:g}, {'MSE' if aca.squared else 'MAE'} regression (its default), "
         "triplets mined within each batch, no structural gate."),
        ("MoleculeACE rows: MLP + ECFP beside our ECFP-MLP with plain MSE; MoleculeACE has no GIN, so its GCN "
         "(graph) row stands beside our GIN; SVM + ECFP beside our SVR. They are MoleculeACE's tuned models "
         "(published results file, commit 7e6de0b)."),
        ("Intervals: Student-t over (target, encoder, seed) units, paired by unit for differences; the seeds of a "
         "target share its data, so they measure training noise and the spread over these targets only."),
    ]


def fit_note(claim: Claim, p: ActivityCliffParams) -> str | None:
    """A note naming the encoders the CPU budget left undertrained (their MSE models' training R^2)."""
    short = {k.removeprefix("train_r2_"): v for k, v in claim.numbers.items()
             if k.startswith("train_r2_") and v < FIT_R2}
    if not short:
        return None
    steps = {"ecfp_mlp": p.train.mlp_steps, "gin": p.train.gin_steps}
    return ("Undertrained at this budget: " + ", ".join(f"{LABELS.get(e, e)} ({steps.get(e, '?')} steps, training R^2 "
                                                        f"{v:.2f} under MSE)" for e, v in short.items())
            + ". Their rows show the table's shape and take part in the paired LAC comparisons (same budget for "
              "every objective), not in the underfitting claim; `--set train.gin_steps=...` or `scale=paper` "
              "trains them to fit.")


def build_report(p: ActivityCliffParams, scores: Rows, svm: Mapping[str, Any], data: Mapping[str, Any]) -> Report:
    published = published_results()
    label_sd = {d: m["train_y_sd"] for d, m in data.items()}
    claims = [underfitting_claim(scores, label_sd), *lac_claims(scores, p.report.rmse_margin)]
    extra = fit_note(claims[0], p)
    return Report(slug="activity_cliff",
                  title="Activity cliffs on MoleculeACE: RMSE and RMSE_cliff (test set, -log10 nM) per target, "
                        "encoder and objective",
                  columns=COLUMNS, rows=result_rows(scores, svm, published), claims=claims,
                  checks=checks(svm, data, published), notes=notes(p) + ([extra] if extra else []),
                  extra_tables={"mean over the run's targets (MoleculeACE's headline shape)":
                                    mean_rows(scores, svm, published),
                                "paired differences against plain MSE": difference_rows(scores),
                                "SVM + ECFP anchor against MoleculeACE's published row": svm_rows(svm, published),
                                "data and the training-only similarity graph": data_rows(data)})
