"""HRF report: quality against NFE per dataset and schedule, the velocity law at the origin, path crossing,
and the claims and checks, as pure functions of the loaded tables.

Claims (decided on intervals over seeds, paired where RF and HRF2 share a seed):

* ``velocity_law_bimodal``: HRF2's velocity at x = 0 puts at least ``eval.min_mode_fraction`` of its
  samples near every mode of the true law (1-D mixture);
* ``velocity_law_closer_than_rf`` (1-D) / ``velocity_law_closer_than_rf_moons``: its samples are closer to
  the true velocity law than RF's single value (paired differences of W1 / SW2);
* ``hrf_paths_cross``: the fraction of 1-D sample pairs whose order flips exceeds ``eval.crossing_threshold``
  for every HRF schedule (weak beyond bimodality: a sampler drawing a fresh velocity per step from a law
  with spread makes paths cross);
* ``hrf2_w1_nfe10``: the brief's check, HRF2's best split at NFE 10 has W1 < ``eval.w1_target``;
* ``hrf2_beats_rf_<dataset>``: the paper's headline, HRF2 (best split per NFE) better than RF at matched NFE,
  on the per-seed mean over the matched NFEs of log(RF / HRF2) (> 0: HRF2 better).

Checks (true by construction or mathematics): RF's velocity at a point is one value (a deterministic
network), RF's 1-D paths keep their order (a 1-D ODE flow cannot cross), the NFE of every row is the
product of its step counts, and every model of a dataset has the parameter count of its HRF2 network.
"""

from __future__ import annotations

import math
from typing import Any

from components.metrics.stats import Interval, mean_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, mean, pm, rows_where
from pipelines.hrf.params import DATASET_LABEL, LOWDIM, METRIC_LABEL, PAPER_MNIST_FID, PAPER_TABLE, HrfParams

Rows = list[dict[str, Any]]


def _num(value: Any) -> float:
    """A stored number; an undefined one (NaN written to parquet, read back as None) is NaN."""
    return float("nan") if value is None else float(value)


def _seed_values(rows: Rows, key: str, **equal: Any) -> dict[int, float]:
    return {int(r["seed"]): _num(r[key]) for r in rows_where(rows, **equal)}


Best = dict[int, tuple[str, dict[int, float]]]  # nfe -> (steps, {seed: value})


def best_by_nfe(rows: Rows, dataset: str, method: str, key: str = "distance") -> Best:
    """For each NFE the schedule of ``method`` with the lowest mean ``key`` over seeds:
    ``{nfe: (steps, {seed: value})}``, NFEs ascending. (The split is chosen on the compared metric.)"""
    out: Best = {}
    for steps in dict.fromkeys(r["steps"] for r in rows_where(rows, dataset=dataset, method=method)):
        chosen = rows_where(rows, dataset=dataset, method=method, steps=steps)
        per_seed = _seed_values(chosen, key)
        nfe = int(chosen[0]["nfe"])
        if nfe not in out or mean(list(per_seed.values())) < mean(list(out[nfe][1].values())):
            out[nfe] = (steps, per_seed)
    return dict(sorted(out.items()))


def seed_means(rows: Rows, key: str, name: str) -> dict[str, float]:
    """Mean of ``key`` over the seeds of every group of rows named ``name.format(**row)`` (DVC metrics)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(name.format(**r), []).append(_num(r[key]))
    return {k: sum(v) / len(v) for k, v in groups.items()}


def _unresolved(id: str, claim: str, statistic: str, reason: str) -> Claim:
    """A claim that cannot be decided from these tables (nothing to compare): *not resolved*, n = 0."""
    return decide(id, claim, statistic, Interval(math.nan, -math.inf, math.inf, 0),
                  precondition=Precondition(reason, met=False))


# --------------------------------------------------------------------------------------------------
# the velocity law at the origin
# --------------------------------------------------------------------------------------------------
def velocity_claims(velocity: Rows, p: HrfParams) -> tuple[list[Claim], list[Check]]:
    ev, t0 = p.eval, p.eval.velocity_times[0]
    claims: list[Claim] = []
    hrf2 = _seed_values(velocity, "min_mode_fraction", dataset="mixture", method="HRF2", t=t0)
    modes = [v for v in hrf2.values() if math.isfinite(v)]
    claim = (f"HRF2's velocity at x = 0, t = {t0:g} is multi-modal: each mode of the true law holds at least "
             f"{ev.min_mode_fraction:g} of its samples")
    statistic = f"smallest share of HRF2 velocity samples within {ev.mode_radius:g} of a mode (mean over seeds)"
    claims.append(decide("velocity_law_bimodal", claim, statistic, mean_ci(modes), threshold=ev.min_mode_fraction,
                         evidence="1-D mixture; the true law's modes are its components of weight > 0.05",
                         numbers={"hrf2_min_mode_fraction": mean(modes)})
                  if modes else _unresolved("velocity_law_bimodal", claim, statistic, "no HRF2 velocity rows "
                                            "with modes on the 1-D mixture"))
    for dataset, suffix in (("mixture", ""), ("moons", "_moons")):
        rf = _seed_values(velocity, "distance_to_true", dataset=dataset, method="RF", t=t0)
        hrf = _seed_values(velocity, "distance_to_true", dataset=dataset, method="HRF2", t=t0)
        seeds = sorted(s for s in set(rf) & set(hrf) if math.isfinite(rf[s]) and math.isfinite(hrf[s]))
        cid = f"velocity_law_closer_than_rf{suffix}"
        claim = (f"{DATASET_LABEL[dataset]}: HRF2's velocity samples at the origin (t = {t0:g}) are closer to the "
                 f"true velocity law than RF's single value")
        statistic = f"{'W1' if dataset == 'mixture' else 'SW2'} to the true law, RF - HRF2 (paired by seed)"
        if not seeds:
            claims.append(_unresolved(cid, claim, statistic, f"the true velocity law at t = {t0:g} is known "
                                      "(the moons' only at t = 0) and both RF and HRF2 were measured"))
            continue
        a, b = [rf[s] for s in seeds], [hrf[s] for s in seeds]
        claims.append(decide_paired(cid, claim, statistic, a, b, evidence=f"RF {pm(a, 3)}, HRF2 {pm(b, 3)}",
                                    numbers={"rf": mean(a), "hrf2": mean(b)}))
    spreads = [_num(r["spread"]) for r in rows_where(velocity, method="RF")]
    single = Check("rf_velocity_single_valued", "RF's velocity at a point is one value (a deterministic network "
                   "evaluated on one input)", passed=bool(spreads) and max(spreads) < 1e-5,
                   evidence=f"largest spread of RF's velocities at the origin over datasets, times and seeds: "
                            f"{max(spreads, default=math.nan):.1e}",
                   numbers={"rf_max_spread": max(spreads, default=math.nan)})
    return claims, [single]


# --------------------------------------------------------------------------------------------------
# path crossing (1-D order flips between x0 and the sample)
# --------------------------------------------------------------------------------------------------
def crossing_claims(quality: Rows, p: HrfParams) -> tuple[list[Claim], list[Check]]:
    thr, min_nfe = p.eval.crossing_threshold, p.eval.crossing_min_nfe
    rows = rows_where(quality, dataset="mixture")
    hrf = [r for r in rows if r["method"] != "RF"]
    per_seed: dict[int, float] = {}
    for r in hrf:
        per_seed[int(r["seed"])] = min(per_seed.get(int(r["seed"]), math.inf), _num(r["order_flips"]))
    claim = "HRF paths cross: sample order flips between x0 and x1 for every HRF schedule (1-D)"
    statistic = "smallest order-flip fraction over the HRF schedules, per seed (mean over seeds)"
    if per_seed:
        flips = list(per_seed.values())
        claims = [decide("hrf_paths_cross", claim, statistic, mean_ci(flips), threshold=thr,
                         evidence=f"{len({(r['method'], r['steps']) for r in hrf})} HRF schedules; an independent "
                                  f"coupling gives 0.5; crossing follows once the learned velocity law has spread",
                         numbers={"hrf_min_flips": mean(flips)})]
    else:
        claims = [_unresolved("hrf_paths_cross", claim, statistic, "HRF was sampled on the 1-D mixture")]
    rf = [r for r in rows if r["method"] == "RF" and int(r["nfe"]) >= min_nfe]
    worst = max((_num(r["order_flips"]) for r in rf), default=math.nan)
    coarse = sorted({r["steps"] for r in rows if r["method"] == "RF" and int(r["nfe"]) < min_nfe})
    check = Check("rf_paths_keep_order", f"RF's 1-D paths do not cross (a 1-D ODE flow keeps the order of its "
                  f"samples): order-flip fraction < {thr / 5:g} at NFE >= {min_nfe}",
                  passed=bool(rf) and worst < thr / 5,
                  evidence=f"largest RF flip fraction over {len({r['steps'] for r in rf})} schedules and the "
                           f"seeds: {worst:.4f}" + (f" (coarser RF schedules {coarse} are not an ODE solution and "
                                                    f"are not checked)" if coarse else ""),
                  numbers={"rf_max_flips": worst})
    return claims, [check]


# --------------------------------------------------------------------------------------------------
# sample quality against NFE
# --------------------------------------------------------------------------------------------------
def w1_claim(quality: Rows, p: HrfParams) -> Claim:
    target = p.eval.w1_target
    claim = f"HRF2's 1-D W1 at NFE 10 is below {target:g}"
    statistic = "W1 of HRF2's best split at NFE 10 (mean over seeds)"
    best = best_by_nfe(quality, "mixture", "HRF2").get(10)
    if best is None:
        return _unresolved("hrf2_w1_nfe10", claim, statistic, "HRF2 was sampled with a schedule of NFE 10")
    steps, per_seed = best[0], list(best[1].values())
    return decide("hrf2_w1_nfe10", claim, statistic, mean_ci(per_seed), threshold=target, direction="less",
                  evidence=f"best split {steps} (chosen on this metric); {p.data.n_eval} reference samples",
                  numbers={"hrf2_w1_nfe10": mean(per_seed)})


def matched_nfe_claim(rows: Rows, dataset: str, key: str, precondition: Precondition | None = None) -> Claim:
    """HRF2 (best split per NFE) against RF at every NFE both were sampled with, paired by seed."""
    cid = f"hrf2_beats_rf_{dataset}"
    claim = f"{DATASET_LABEL[dataset]}: HRF2 gives better samples than RF at matched NFE ({METRIC_LABEL[dataset]})"
    statistic = "mean over matched NFEs of log(RF / HRF2 best split), paired by seed (> 0: HRF2 better)"
    rf, hrf = best_by_nfe(rows, dataset, "RF", key), best_by_nfe(rows, dataset, "HRF2", key)
    matched = sorted(set(rf) & set(hrf))
    seeds = sorted(set.intersection(*(set(rf[n][1]) & set(hrf[n][1]) for n in matched))) if matched else []
    if not seeds:
        return _unresolved(cid, claim, statistic, "RF and HRF2 were sampled at a common NFE with common seeds")

    def log_mean(table: Best, seed: int) -> float:
        return sum(math.log(max(table[n][1][seed], 1e-12)) for n in matched) / len(matched)

    a, b = [log_mean(rf, s) for s in seeds], [log_mean(hrf, s) for s in seeds]
    per_nfe = "; ".join(f"NFE {n}: RF {mean(list(rf[n][1].values())):.3f} vs HRF2 "
                        f"{mean(list(hrf[n][1].values())):.3f} ({hrf[n][0]})" for n in matched)
    numbers = {**{f"rf_nfe{n}": mean(list(rf[n][1].values())) for n in matched},
               **{f"hrf2_nfe{n}": mean(list(hrf[n][1].values())) for n in matched}, "matched": float(len(matched))}
    return decide_paired(cid, claim, statistic, a, b, numbers=numbers, precondition=precondition,
                         evidence=f"{per_nfe}; the HRF2 split is chosen on this metric")


# --------------------------------------------------------------------------------------------------
# checks of the bookkeeping, the tables and the report
# --------------------------------------------------------------------------------------------------
def bookkeeping_checks(rows: Rows, sizes: dict[str, float]) -> list[Check]:
    wrong = [r for r in rows if int(r["nfe"]) != math.prod(int(n) for n in str(r["steps"]).split("x"))]
    ref = {k: f"{k.split('/')[0]}/HRF2" for k in sizes}
    off = {k: v / sizes[ref[k]] - 1 for k, v in sizes.items() if ref[k] in sizes}
    return [Check("nfe_is_product_of_steps", "NFE = the product of the step counts of all levels (network "
                  "calls counted by the sampler)", passed=not wrong,
                  evidence=f"{len(rows) - len(wrong)}/{len(rows)} rows"),
            Check("parameter_counts_matched", "every model of a dataset has the parameter count of its HRF2 "
                  "network (within 1%)", passed=len(off) == len(sizes) and all(abs(v) < 0.01 for v in off.values()),
                  evidence=", ".join(f"{k} {int(sizes[k])}" for k in sizes),
                  numbers={f"{k}/relative": v for k, v in off.items()})]


def quality_table(quality: Rows, mnist: Rows) -> Rows:
    table = []
    for dataset, rows, key in (("mixture", quality, "distance"), ("moons", quality, "distance"),
                               ("mnist", mnist, "fid")):
        for method in dict.fromkeys(r["method"] for r in rows_where(rows, dataset=dataset)):
            for steps in dict.fromkeys(r["steps"] for r in rows_where(rows, dataset=dataset, method=method)):
                sel = rows_where(rows, dataset=dataset, method=method, steps=steps)
                nfe = int(sel[0]["nfe"])
                table.append({"dataset": DATASET_LABEL[dataset], "method": method, "steps": steps, "NFE": nfe,
                              "metric": METRIC_LABEL[dataset], "ours": pm([_num(r[key]) for r in sel], 3),
                              "order flips": (mean([_num(r["order_flips"]) for r in sel]) if dataset == "mixture"
                                              else None),
                              "paper FID-50k": PAPER_MNIST_FID.get((method, nfe)) if dataset == "mnist" else None})
    return table


def velocity_table(velocity: Rows, p: HrfParams) -> Rows:
    def avg(key: str, **equal: Any) -> float:
        vals = [v for v in _seed_values(velocity, key, **equal).values() if math.isfinite(v)]
        return mean(vals) if vals else math.nan

    out = []
    for dataset in LOWDIM:
        for method in dict.fromkeys(r["method"] for r in rows_where(velocity, dataset=dataset)):
            for t in p.eval.velocity_times:
                at = {"dataset": dataset, "method": method, "t": t}
                row = {"dataset": DATASET_LABEL[dataset], "method": method, "t": t,
                       "distance to true law (W1 / SW2)": avg("distance_to_true", **at),
                       "spread (std)": avg("spread", **at)}
                if dataset == "mixture":
                    row["smallest mode mass"] = avg("min_mode_fraction", **at)
                    row["mass near modes"] = avg("mode_fraction", **at)
                out.append(row)
    return out


def image_table(mnist: Rows, real: dict[str, float]) -> Rows:
    out = [{"images": "real (train vs test)", "feature FID": real["real/fid"],
            "confidence": real["real/confidence"], "inception-style score": real["real/inception_score"]}]
    for method in dict.fromkeys(r["method"] for r in mnist):
        for steps in dict.fromkeys(r["steps"] for r in rows_where(mnist, method=method)):
            sel = rows_where(mnist, method=method, steps=steps)
            out.append({"images": f"{method} {steps}", "feature FID": mean([r["fid"] for r in sel]),
                        "confidence": mean([r["confidence"] for r in sel]),
                        "inception-style score": mean([r["inception_score"] for r in sel])})
    return out


def build_report(quality: Rows, velocity: Rows, mnist: Rows, judge: dict[str, float],
                 mnist_summary: dict[str, float], sizes: dict[str, float], p: HrfParams) -> Report:
    """The paper-shaped table (quality vs NFE), the extra tables, the claims and the checks."""
    v_claims, v_checks = velocity_claims(velocity, p)
    c_claims, c_checks = crossing_claims(quality, p)
    judge_ok = Precondition(f"the feature classifier reaches {p.eval.judge_min_accuracy:g} test accuracy",
                            met=judge["test_accuracy"] >= p.eval.judge_min_accuracy, value=judge["test_accuracy"])
    claims = [*v_claims, *c_claims, w1_claim(quality, p),
              matched_nfe_claim(quality, "mixture", "distance"), matched_nfe_claim(quality, "moons", "distance"),
              matched_nfe_claim(mnist, "mnist", "fid", precondition=judge_ok)]
    notes = [
        (f"ours: mean ± half-width of the 95% interval over seeds {p.seeds}. W1: exact 1-D Wasserstein-1 to "
         f"{p.data.n_eval} reference samples; sliced W2: {p.eval.n_projections} random projections; feature FID: "
         f"Fréchet distance of TinyViT classifier features (test accuracy {100 * judge['test_accuracy']:.1f}%) "
         f"against {p.data.mnist_eval} MNIST test images."),
        ("Two exact samples of the target are themselves apart by a W1 of order 1/sqrt(n) (about 0.03 for two "
         "sets of 2,000): differences of that size between methods are sampling noise."),
        "NFE = product of the step counts of all levels; the sampler's own call count is checked against it.",
        ("Order flips: fraction of sample pairs whose order differs between x0 and the generated x1 (1-D; a "
         "deterministic 1-D flow keeps the order, an independent coupling gives 0.5)."),
        ("Paper column: FID-50k with Inception features, U-Nets and 400k steps; not comparable in absolute value "
         "with the CPU-scale feature FID here (MLPs, a few hundred steps)."),
    ]
    sizes_rows = [{"dataset": DATASET_LABEL[k.split("/")[0]], "method": k.split("/")[1], "parameters": int(v)}
                  for k, v in sizes.items()]
    return Report(slug="hrf", title="HRF vs RF: sample quality against NFE (lower is better)",
                  columns=["dataset", "method", "steps", "NFE", "metric", "ours", "order flips", "paper FID-50k"],
                  rows=quality_table(quality, mnist), claims=claims,
                  checks=[*v_checks, *c_checks, *bookkeeping_checks(quality + mnist, sizes)], notes=notes,
                  extra_tables={"velocity law at the origin": velocity_table(velocity, p),
                                "MNIST scores": image_table(mnist, mnist_summary), "parameter counts": sizes_rows,
                                "paper (Table 7, as quoted by CCVFM; U-Nets, Inception FID-50k)": PAPER_TABLE})
