"""GRF masking: the Table-1-shaped accuracy table, the claims and the checks, as pure functions of loaded tables.

Inputs: ``acc`` one row per (task, variant, seed) with ``test_accuracy`` (%) and the learned ``modulation``; ``err``
one row per (seed, n_walks) with the mean ``relative_error`` of the GRF mask estimate; ``cost`` one row per
(seed, n_tokens, mask) with the median forward ``seconds`` and ``peak_bytes``.

Claims:

1. ``grf_ge_unmasked`` (MNIST) and ``grf_ge_unmasked_clouds`` (point clouds): GRF-masked linear attention >=
   unmasked linear attention on test accuracy; paired over seeds (same initial weights and batches), 95%
   Student-t interval of the mean difference against 0. Precondition: the task was learned (the better of the
   two variants' mean accuracies >= 2x chance; a run where neither learned decides nothing).
2. ``mask_error_inverse_sqrt``: the mask error falls as 1/sqrt(walks): the per-seed log-log slope's interval lies
   inside [-0.6, -0.4] (holds), misses it entirely (does not hold), or overlaps its edge (not resolved).
3. ``grf_time_linear`` / ``grf_memory_linear``: the GRF layer's time / peak-memory exponent (per-seed log-log
   slope over N >= ``fit_min_n``) is below 1.25; ``dense_time_quadratic`` / ``dense_memory_quadratic``: the dense
   mask's exponent is above 1.5.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.attention.scaling import loglog_slope
from components.metrics.stats import Interval, mean_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, fmt_interval, pm
from pipelines.grf_masking.params import LABELS, PAPER_IMAGENET, TASKS, VARIANTS, GrfMaskingParams

Rows = Sequence[Mapping[str, Any]]
SQRT_BAND = (-0.6, -0.4)
LINEAR_MAX, QUADRATIC_MIN = 1.25, 1.5


def _acc(rows: Rows, variant: str, task: str = "mnist") -> dict[int, float]:
    return {int(r["seed"]): float(r["test_accuracy"]) for r in rows if r["variant"] == variant and r["task"] == task}


def table(rows: Rows) -> tuple[list[str], list[dict[str, Any]]]:
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)]
    columns = ["variant", *(f"{TASKS[t]} test accuracy (%)" for t in tasks), "parameters (MNIST ViT)",
               "paper ImageNet top-1 (%)"]
    out = []
    for v in VARIANTS:
        mine = [r for r in rows if r["variant"] == v]
        if mine:
            vit = [r for r in mine if r["task"] == "mnist"]
            out.append({"variant": LABELS[v],
                        **{f"{TASKS[t]} test accuracy (%)": pm([float(r["test_accuracy"]) for r in mine
                                                               if r["task"] == t]) for t in tasks},
                        "parameters (MNIST ViT)": int(vit[0]["parameters"]) if vit else "—",
                        "paper ImageNet top-1 (%)": PAPER_IMAGENET[v]})
    return columns, out


def grf_ge_unmasked(rows: Rows, task: str = "mnist", classes: int = 10) -> Claim:
    grf, lin, exact = _acc(rows, "grf_mask", task), _acc(rows, "linear", task), _acc(rows, "exact_mask", task)
    seeds = sorted(set(grf) & set(lin))
    claim_id = {"mnist": "grf_ge_unmasked", "point_clouds": "grf_ge_unmasked_clouds"}.get(task, f"grf_ge_unmasked_{task}")
    text, stat = (f"GRF-masked linear attention >= unmasked linear attention on {TASKS.get(task, task)} test accuracy",
                  "test accuracy, GRF-masked - unmasked linear (pp), paired over seeds")
    if len(seeds) < 2:
        gate = Precondition(f"both variants ran on >= 2 common seeds ({len(seeds)})", False, float(len(seeds)))
        return decide(claim_id, text, stat, Interval(math.nan, -math.inf, math.inf, len(seeds)), precondition=gate)
    a, b = [grf[s] for s in seeds], [lin[s] for s in seeds]
    floor, best = 200.0 / classes, float(max(np.mean(a), np.mean(b)))
    gate = Precondition(f"the task was learned: the better of the two reached {best:.1f}% >= {floor:.0f}% (twice "
                        "chance)", best >= floor, best)
    common = [s for s in seeds if s in exact]
    gap = float(np.mean([grf[s] - exact[s] for s in common])) if common else math.nan
    evidence = (f"GRF {np.mean(a):.2f}% vs unmasked {np.mean(b):.2f}%; GRF ahead on "
                f"{sum(x > y for x, y in zip(a, b))}/{len(seeds)} seeds; GRF - exact mask {gap:+.2f} pp")
    return decide_paired(claim_id, text, stat, a, b, precondition=gate, evidence=evidence,
                         numbers={"grf_mean": float(np.mean(a)), "unmasked_mean": float(np.mean(b)),
                                  "grf_minus_exact": gap})


def _band_claim(id: str, claim: str, statistic: str, interval: Interval, band: tuple[float, float],
                evidence: str, numbers: dict[str, float]) -> Claim:
    low, high = band
    if interval.n < 2:
        verdict = "not resolved"
    elif low <= interval.low and interval.high <= high:
        verdict = "holds"
    elif interval.high < low or interval.low > high:
        verdict = "does not hold"
    else:
        verdict = "not resolved"
    return Claim(id=id, claim=claim, statistic=statistic, effect=interval.estimate, ci=(interval.low, interval.high),
                 n=interval.n, verdict=verdict, threshold=(low + high) / 2, direction="less", numbers=numbers,
                 evidence=f"{statistic} = {fmt_interval(interval)}; claimed inside [{low:g}, {high:g}]. {evidence}.")


def _interval(values: Sequence[float]) -> Interval:
    finite = [v for v in values if math.isfinite(v)]
    return mean_ci(finite) if finite else Interval(math.nan, -math.inf, math.inf, 0)


def mask_error_claim(rows: Rows) -> Claim:
    slopes = {}
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = sorted((r for r in rows if int(r["seed"]) == seed), key=lambda r: r["n_walks"])
        slopes[seed] = loglog_slope([r["n_walks"] for r in mine], [r["relative_error"] for r in mine])
    walks = sorted({int(r["n_walks"]) for r in rows})
    first = float(np.mean([r["relative_error"] for r in rows if r["n_walks"] == walks[0]])) if walks else math.nan
    last = float(np.mean([r["relative_error"] for r in rows if r["n_walks"] == walks[-1]])) if walks else math.nan
    evidence = (f"per-seed slopes {', '.join(f'{s:.3f}' for s in slopes.values())}; mean error {first:.3f} at "
                f"{walks[0] if walks else '-'} walks, {last:.3f} at {walks[-1] if walks else '-'}")
    return _band_claim("mask_error_inverse_sqrt", "the GRF mask's relative error falls as 1/sqrt(number of walks)",
                       "log-log slope of the relative Frobenius error vs walks", _interval(list(slopes.values())),
                       SQRT_BAND, evidence, {"first_error": first, "last_error": last})


def exponents(rows: Rows, mask: str, key: str, fit_min_n: int) -> dict[int, float]:
    """Per seed, the log-log slope of ``key`` vs N over sizes >= fit_min_n (NaN with fewer than 2 sizes)."""
    out = {}
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = sorted((r for r in rows if int(r["seed"]) == seed and r["mask"] == mask
                       and r["n_tokens"] >= fit_min_n and float(r[key]) > 0), key=lambda r: r["n_tokens"])
        out[seed] = loglog_slope([r["n_tokens"] for r in mine], [r[key] for r in mine]) if len(mine) >= 2 \
            else math.nan
    return out


def scaling_claims(rows: Rows, fit_min_n: int) -> list[Claim]:
    out = []
    for mask, name, threshold, direction, shape in (("grf_mask", "grf", LINEAR_MAX, "less", "linearly"),
                                                    ("exact_mask", "dense", QUADRATIC_MIN, "greater", "quadratically")):
        for key, what in (("seconds", "time"), ("peak_bytes", "memory")):
            exps = exponents(rows, mask, key, fit_min_n)
            sizes = sorted({int(r["n_tokens"]) for r in rows if r["mask"] == mask and r["n_tokens"] >= fit_min_n})
            interval = _interval(list(exps.values()))
            label = "GRF-masked" if mask == "grf_mask" else "dense-masked"
            gate = Precondition(f"at least 2 sizes >= {fit_min_n} and 2 seeds measured for the {label} layer",
                                len(sizes) >= 2 and interval.n >= 2, float(len(sizes)))
            side = "<" if direction == "less" else ">"
            out.append(decide(
                f"{name}_{what}_{'linear' if mask == 'grf_mask' else 'quadratic'}",
                f"the {label} layer's forward {what} grows {shape} in N (exponent {side} {threshold:g})",
                f"log-log slope of forward {what} vs N (N in {sizes[0] if sizes else '-'}..{sizes[-1] if sizes else '-'})",
                interval, threshold=threshold, direction=direction, precondition=gate,  # type: ignore[arg-type]
                evidence="per-seed exponents " + ", ".join(f"{e:.3f}" for e in exps.values()),
                numbers={f"seed{s}": e for s, e in exps.items() if math.isfinite(e)}))
    return out


def ratios(rows: Rows) -> dict[str, float]:
    """Dense / GRF time and memory at the largest N where both ran (mean over seeds)."""
    common = sorted({r["n_tokens"] for r in rows if r["mask"] == "exact_mask"}
                    & {r["n_tokens"] for r in rows if r["mask"] == "grf_mask"})
    if not common:
        return {}
    n = common[-1]

    def mean(mask: str, key: str) -> float:
        return float(np.nanmean([r[key] for r in rows if r["mask"] == mask and r["n_tokens"] == n]))

    return {"n_tokens": float(n), "time_ratio": mean("exact_mask", "seconds") / mean("grf_mask", "seconds"),
            "memory_ratio": mean("exact_mask", "peak_bytes") / max(mean("grf_mask", "peak_bytes"), 1.0)}


def checks(acc: Rows, cost: Rows) -> list[Check]:
    mods = [x for r in acc if r["variant"] in ("exact_mask", "grf_mask") for layer in r["modulation"] for x in layer]
    peaks = [float(r["peak_bytes"]) for r in cost]
    return [
        Check("modulation_nonnegative", "the learned modulation f stays >= 0 (softplus), so the mask is nonnegative "
              "and the normaliser positive", all(x >= 0 for x in mods),
              f"{len(mods)} learned coefficients, smallest {min(mods) if mods else math.nan:.3g}"),
        Check("peak_memory_measured", "peak memory was measured for every timed forward", bool(peaks) and
              all(math.isfinite(p) for p in peaks), f"{sum(math.isfinite(p) for p in peaks)}/{len(peaks)} measured"),
    ]


def build_report(acc: Rows, err: Rows, cost: Rows, data: Mapping[str, Any], p: GrfMaskingParams) -> Report:
    columns, body = table(acc)
    r = ratios(cost)
    m, g, t = p.model, p.grf, p.train
    seconds = {v: float(np.mean([x["seconds"] for x in acc if x["variant"] == v and x["task"] == "mnist"]))
               for v in VARIANTS if any(x["variant"] == v and x["task"] == "mnist" for x in acc)}
    c, cd = p.clouds, data.get("clouds", {})
    notes = [
        f"MNIST ({data['source']}): {data['n_train']} training and {data['n_test']} test images; {(28 // m.patch_size) ** 2} "
        f"patch tokens of {m.patch_size}x{m.patch_size} on the 4-neighbour patch grid, W = A / 4. Accuracy: mean ± "
        f"95% half-width over seeds {list(p.seeds)}.",
        f"ViT: {m.n_layers} layers, width {m.d_model}, {m.n_heads} heads, mean pooling, learned position embedding for "
        f"every variant; {t.steps} AdamW steps of {t.batch_size} at lr {t.lr:g}. Linear variants use the "
        f"{m.feature_map} feature map. Mask: f_0..f_{g.k_max} per layer (shared by heads, softplus, start 2^-k), "
        f"alpha = f * f; GRFs with {g.n_walks} walks, p_halt {g.p_halt}, resampled every step (fixed in eval).",
        "MNIST training seconds per run (mean): " + ", ".join(f"{v} {s:.1f}" for v, s in seconds.items()) + ". At "
        "a few dozen tokens the GRF features are applied through the estimated mask Phi_q Phi_k^T (the same output "
        "as the sparse O(N) products, which the scaling study times); walk sampling is its extra cost.",
        f"Point clouds (the paper's second setting is point-cloud dynamics on kNN graphs of > 30k particles, scored "
        f"by SSIM of rendered rollouts; here a shape classification stands in for it): {cd.get('n_train', '?')} "
        f"training and {cd.get('n_test', '?')} test clouds of {c.n_points} surface points from the procedural "
        f"families {', '.join(c.families)}, rotation '{c.rotation}'; each cloud's symmetrised {c.knn_k}-NN graph "
        f"(W = A / its max degree) is the graph of its mask; points embedded linearly, no position embedding, mean "
        f"pooling; {c.steps} steps of {c.batch_size} clouds; the two GRF walk sets are sampled once per batch on the "
        "clouds' disjoint union and shared by the layers.",
        "Paper column: ImageNet top-1 from the paper's Table 1 as quoted in the brief (softmax ViT 74.1%; GRF-masked "
        "linear attention +3.7 points over unmasked linear); the other cells were not retrieved. Our MNIST numbers "
        "are not comparable in level, only in ordering.",
        f"Scaling: one single-head layer (d = {p.scaling.d_head}), mask construction included, "
        + ("random grid graphs (10% of edges dropped)" if p.scaling.graph == "grid" else
           f"symmetrised {p.scaling.knn_k}-NN graphs of points on a procedural chair")
        + f", median of {p.scaling.repeats} forwards; dense mask up to N = "
        f"{p.scaling.dense_max_n}. Peak memory: allocator peak on CUDA; on CPU the resident-set high-water mark after "
        "a warm-up call and a heap trim (page-granular: noisy below about 1 MB). On CPU a dense exponent above 2 "
        "means the N x N matrices left the caches within the fitted range."
        + (f" At N = {int(r['n_tokens'])} the dense mask took {r['time_ratio']:.1f}x the GRF time and "
           f"{r['memory_ratio']:.1f}x its memory." if r else ""),
        f"Mask error: grid {p.mask_error.grid}x{p.mask_error.grid}, f_k = 2^-k, mean of {p.mask_error.repeats} "
        "independent estimates (two independent walk sets, so the diagonal is unbiased too).",
        "Not run: the point-cloud dynamics task itself (Interlacer, SSIM of rendered rollouts).",
    ]
    return Report(slug="grf_masking", title="GRF masking: test accuracy (%) by attention variant, MNIST ViT and "
                                            "point clouds on kNN graphs", columns=columns, rows=body,
                  claims=[grf_ge_unmasked(acc), grf_ge_unmasked(acc, "point_clouds", len(c.families)),
                          mask_error_claim(err), *scaling_claims(cost, p.scaling.fit_min_n)],
                  checks=checks(acc, cost), notes=notes)
