"""GRF masking: the Table-1-shaped accuracy table, the claims and the checks, as pure functions of loaded tables.

Inputs: ``acc`` one row per (task, variant, seed) with ``test_accuracy`` (%) and the learned ``modulation``; ``err``
one row per (seed, n_walks) with the mean ``relative_error`` of the GRF mask estimate; ``cost`` one row per
(seed, n_tokens, mask) with the median forward ``seconds`` and ``peak_bytes`` (measurements of the machine: the
checks on them are timed, kept out of the tracked report).

Headline claim (the paper's one empirical claim): GRF-masked linear attention beats unmasked linear attention on
test accuracy, decided on point clouds over their kNN graphs (``grf_ge_unmasked_clouds``, the paper's second
setting, where a CPU budget trains both models); the same comparison on the MNIST ViT (``grf_ge_unmasked``, Table 1
in miniature) is secondary: a ViT that reaches the learned gate costs more than the evidence budget. Paired by seed
(same initial weights and batches); smallest effect of interest: half the paper's +3.7 points. Gates: the unmasked
baseline learned the task (MNIST >= 90 %, point clouds >= 2x chance: the fidelity audit's bars, with the interval
over seeds), and the GRF arm beats chance, so no verdict comes from models that did not learn.

Checks (true by mathematics or by the algorithm's structure, verified on this run's numbers): the GRF mask's error
falls as 1/sqrt(walks) (the Monte-Carlo rate of an unbiased estimator; judged by the platform's equivalence rule on
the per-seed slopes), the GRF layer's time and memory grow linearly in N and the dense mask's quadratically
(the mean per-seed exponent against 1.25 / 1.5; timed), the modulation stays nonnegative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.attention.scaling import loglog_slope
from components.io import load_json, load_table
from components.metrics.stats import Estimate, mean_ci
from paperflows import Claim  # the type a claim function returns (decided by paperflows.claims.decide)
from paperflows.claims import ClaimSpec, Gate, decide, equivalence, gate, superiority
from paperflows.contract import StageContext, stage
from paperflows.report import REPORT_TIMINGS, Check, Report, fmt
from paperflows.rows import by_unit, pm
from pipelines.grf_masking.params import LABELS, PAPER_IMAGENET, TASKS, VARIANTS, GrfMaskingParams
from pipelines.grf_masking.pipeline import ACCURACY, CLOUD_METRICS, DATA_METRICS, MASK_ERROR, REPORT, SCALING

Rows = Sequence[Mapping[str, Any]]
PAPER_GAIN = 3.7  # paper Table 1 (ImageNet): GRF-masked linear - unmasked linear attention, top-1 points
GAIN_SOURCE = "paper Table 1 (ImageNet top-1): GRF-masked linear − unmasked linear = +3.7 points; half of it"
LINEAR_MAX, QUADRATIC_MIN = 1.25, 1.5  # brief §d claim 3: time grows "about linearly" / "quadratically"

GRF_GE_UNMASKED = ClaimSpec(
    "grf_ge_unmasked",
    "GRF-masked linear attention beats unmasked linear attention on MNIST ViT test accuracy",
    "test accuracy, GRF-masked − unmasked linear (pp), paired by seed",
    superiority(PAPER_GAIN / 2, GAIN_SOURCE),
)
GRF_GE_UNMASKED_CLOUDS = ClaimSpec(
    "grf_ge_unmasked_clouds",
    "GRF-masked linear attention beats unmasked linear attention on point-cloud shape "
    "classification over each cloud's kNN graph",
    "test accuracy, GRF-masked − unmasked linear (pp), paired by seed",
    superiority(PAPER_GAIN / 2, GAIN_SOURCE),
    headline=True,
)
HEADLINE = (GRF_GE_UNMASKED_CLOUDS,)
ACCURACY_SPECS = {"mnist": GRF_GE_UNMASKED, "point_clouds": GRF_GE_UNMASKED_CLOUDS}
# what "the unmasked baseline learned" means per task (fidelity audit G2: 2x chance is not a learned MNIST model)
LEARNED_BAR = {"mnist": 90.0, "point_clouds": None}  # test accuracy (%); None: twice chance
LEARNED_SOURCE = "fidelity audit G2: MNIST >= 90 %, point clouds >= 2x chance after training"

# the rule of the 1/sqrt(walks) check (a check, not a claim: it is the Monte-Carlo rate of an unbiased estimator)
MASK_ERROR_RATE = ClaimSpec(
    "mask_error_inverse_sqrt",
    "the GRF mask's relative error falls as 1/sqrt(number of walks)",
    "log-log slope of the relative Frobenius error vs walks, per seed",
    equivalence(0.1, "brief §d claim 2: the error falls 'roughly as 1/sqrt(n)'; slope −1/2 within ±0.1", boundary=-0.5),
)


def table(rows: Rows) -> tuple[list[str], list[dict[str, Any]]]:
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)]
    fitted = [t for t in tasks if any(r["task"] == t and "train_accuracy" in r for r in rows)]
    columns = [
        "variant",
        *(f"{TASKS[t]} test accuracy (%)" for t in tasks),
        *(f"{TASKS[t]} train accuracy (%)" for t in fitted),
        "parameters (MNIST ViT)",
        "paper ImageNet top-1 (%)",
    ]
    out = []
    for v in VARIANTS:
        mine = [r for r in rows if r["variant"] == v]
        if mine:
            vit = [r for r in mine if r["task"] == "mnist"]
            out.append(
                {
                    "variant": LABELS[v],
                    **{
                        f"{TASKS[t]} {split} accuracy (%)": pm(
                            [float(r[f"{split}_accuracy"]) for r in mine if r["task"] == t]
                        )
                        for split, shown in (("test", tasks), ("train", fitted))
                        for t in shown
                    },
                    "parameters (MNIST ViT)": int(vit[0]["parameters"]) if vit else "—",
                    "paper ImageNet top-1 (%)": PAPER_IMAGENET[v],
                }
            )
    return columns, out


# --------------------------------------------------------------------------------------------------
# the headline claims
# --------------------------------------------------------------------------------------------------
def _accuracy(rows: Rows, variant: str, task: str) -> dict[Any, float]:
    return by_unit(rows, "test_accuracy", variant=variant, task=task)


def learned_gate(arm: str, accuracy: Mapping[Any, float], bar: float, reference: str) -> Gate:
    """``arm``'s test accuracy lies above ``bar`` (%) with its interval over seeds."""
    estimate = Estimate.of({k: v - bar for k, v in accuracy.items()}) if accuracy else None
    return gate(arm, reference, estimate, statistic=f"test accuracy − {bar:.1f} (pp)")


def learned_bar(task: str, classes: int) -> float:
    """The test accuracy (%) the unmasked baseline must exceed on ``task`` to count as trained."""
    bar = LEARNED_BAR.get(task)
    return 2 * 100.0 / classes if bar is None else bar


def grf_ge_unmasked(rows: Rows, task: str = "mnist", classes: int = 10) -> Claim:
    """GRF-masked vs unmasked linear attention on ``task``, paired by seed; the unmasked arm must have learned
    (:func:`learned_bar`), the GRF arm must beat chance."""
    spec = ACCURACY_SPECS[task]
    grf, lin, exact = (_accuracy(rows, v, task) for v in ("grf_mask", "linear", "exact_mask"))
    if not grf or not lin:
        absent = [v for v, a in (("grf_mask", grf), ("linear", lin)) if not a]
        return decide(
            spec,
            None,
            missing=f"no {TASKS.get(task, task)} accuracy for {', '.join(absent)} (train.variants must include both)",
        )
    chance, bar = 100.0 / classes, learned_bar(task, classes)
    gates = [
        learned_gate("unmasked linear", lin, bar, f"the learned bar {bar:.1f} % ({LEARNED_SOURCE})"),
        learned_gate("GRF-masked linear", grf, chance, f"chance ({chance:.1f} %)"),
    ]
    common = [s for s in grf if s in exact]
    gap = float(np.mean([grf[s] - exact[s] for s in common])) if common else math.nan
    ahead = sum(grf[s] > lin[s] for s in grf if s in lin)
    fitted = [
        float(np.mean(list(t.values())))
        for t in (by_unit(rows, "train_accuracy", variant=v, task=task) for v in ("grf_mask", "linear"))
        if t
    ]
    evidence = (
        f"GRF {np.mean(list(grf.values())):.2f}% vs unmasked {np.mean(list(lin.values())):.2f}% "
        f"(chance {chance:.1f}%); GRF ahead on {ahead}/{len(grf)} seeds; GRF − exact mask {fmt(gap)} pp"
        + (f"; training accuracy GRF {fitted[0]:.1f}%, unmasked {fitted[1]:.1f}%" if len(fitted) == 2 else "")
    )
    return decide(
        spec,
        Estimate.paired(grf, lin),
        gates=gates,
        evidence=evidence,
        numbers={
            "grf_mean": float(np.mean(list(grf.values()))),
            "unmasked_mean": float(np.mean(list(lin.values()))),
            "grf_minus_exact": gap,
        },
    )


# --------------------------------------------------------------------------------------------------
# the checks: the Monte-Carlo rate and the complexity of the two masks
# --------------------------------------------------------------------------------------------------
def error_slopes(rows: Rows) -> dict[int, float]:
    """Per seed, the log-log slope of the mask's relative error against the number of walks."""
    slopes = {}
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = sorted((r for r in rows if int(r["seed"]) == seed), key=lambda r: r["n_walks"])
        slopes[seed] = loglog_slope([r["n_walks"] for r in mine], [r["relative_error"] for r in mine])
    return slopes


def mask_error_check(rows: Rows) -> Check:
    """The slope's interval over seeds lies inside −1/2 ± 0.1 (the platform's equivalence rule)."""
    slopes = {s: v for s, v in error_slopes(rows).items() if math.isfinite(v)}
    walks = sorted({int(r["n_walks"]) for r in rows})
    first, last = (
        (float(np.mean([r["relative_error"] for r in rows if r["n_walks"] == w])) for w in (walks[0], walks[-1]))
        if walks
        else (math.nan, math.nan)
    )
    if slopes:
        judged = decide(
            MASK_ERROR_RATE,
            Estimate.of(slopes),
            evidence=f"mean error {fmt(first, 3)} at {walks[0]} "
            f"walks, {fmt(last, 3)} at {walks[-1]}; per-seed slopes " + ", ".join(f"{v:.3f}" for v in slopes.values()),
        )
    else:
        judged = decide(MASK_ERROR_RATE, None, missing="no mask-error rows with a finite slope")
    return Check(
        MASK_ERROR_RATE.id,
        MASK_ERROR_RATE.claim + " (the Monte-Carlo rate of an unbiased estimator with independent walks)",
        judged.verdict == "holds",
        f"{judged.verdict}: {judged.evidence}",
        {"slope": judged.effect, "first_error": first, "last_error": last},
    )


def exponents(rows: Rows, mask: str, key: str, fit_min_n: int) -> dict[int, float]:
    """Per seed, the log-log slope of ``key`` vs N over sizes >= fit_min_n (NaN with fewer than 2 sizes)."""
    out = {}
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = sorted(
            (
                r
                for r in rows
                if int(r["seed"]) == seed and r["mask"] == mask and r["n_tokens"] >= fit_min_n and float(r[key]) > 0
            ),
            key=lambda r: r["n_tokens"],
        )
        out[seed] = loglog_slope([r["n_tokens"] for r in mine], [r[key] for r in mine]) if len(mine) >= 2 else math.nan
    return out


def scaling_checks(rows: Rows, fit_min_n: int) -> list[Check]:
    """The GRF layer's time and memory exponents stay below 1.25, the dense mask's above 1.5 (mean over seeds)."""
    out = []
    for mask, name, limit, shape in (
        ("grf_mask", "grf", LINEAR_MAX, "linear"),
        ("exact_mask", "dense", QUADRATIC_MIN, "quadratic"),
    ):
        sizes = sorted({int(r["n_tokens"]) for r in rows if r["mask"] == mask and r["n_tokens"] >= fit_min_n})
        label = "GRF-masked" if mask == "grf_mask" else "dense-masked"
        for key, what in (("seconds", "time"), ("peak_bytes", "memory")):
            exps = [e for e in exponents(rows, mask, key, fit_min_n).values() if math.isfinite(e)]
            interval = mean_ci(exps) if exps else None
            mean = interval.estimate if interval else math.nan
            passed = interval is not None and (mean < limit if shape == "linear" else mean > limit)
            side = "<" if shape == "linear" else ">"
            span = f"N in {sizes[0]}..{sizes[-1]}" if sizes else "no sizes"
            evidence = (
                f"mean exponent {fmt(mean, 3)}"
                + (f" [{fmt(interval.low, 3)}, {fmt(interval.high, 3)}]" if interval else "")
                + f" over {len(exps)} seed(s), {span} (sizes >= {fit_min_n}); "
                "per seed " + ", ".join(f"{e:.3f}" for e in exps)
            )
            adverb = "linearly" if shape == "linear" else "quadratically"
            out.append(
                Check(
                    f"{name}_{what}_{shape}",
                    f"the {label} layer's forward {what} grows {adverb} in N (mean log-log exponent {side} {limit:g})",
                    passed,
                    evidence,
                    {"exponent": mean},
                    timed=True,
                )
            )
    return out


def ratios(rows: Rows) -> dict[str, float]:
    """Dense / GRF time and memory at the largest N where both ran (mean over seeds)."""
    common = sorted(
        {r["n_tokens"] for r in rows if r["mask"] == "exact_mask"}
        & {r["n_tokens"] for r in rows if r["mask"] == "grf_mask"}
    )
    if not common:
        return {}
    n = common[-1]

    def mean(mask: str, key: str) -> float:
        return float(np.nanmean([r[key] for r in rows if r["mask"] == mask and r["n_tokens"] == n]))

    return {
        "n_tokens": float(n),
        "time_ratio": mean("exact_mask", "seconds") / mean("grf_mask", "seconds"),
        "memory_ratio": mean("exact_mask", "peak_bytes") / max(mean("grf_mask", "peak_bytes"), 1.0),
    }


def checks(acc: Rows, cost: Rows) -> list[Check]:
    mods = [x for r in acc if r["variant"] in ("exact_mask", "grf_mask") for layer in r["modulation"] for x in layer]
    peaks = [float(r["peak_bytes"]) for r in cost]
    r = ratios(cost)
    return [
        Check(
            "modulation_nonnegative",
            "the learned modulation f stays >= 0 (softplus), so the mask is nonnegative and the normaliser positive",
            all(x >= 0 for x in mods),
            f"{len(mods)} learned coefficients, smallest {min(mods) if mods else math.nan:.3g}",
        ),
        Check(
            "peak_memory_measured",
            "peak memory was measured for every timed forward",
            bool(peaks) and all(math.isfinite(p) for p in peaks),
            f"{sum(math.isfinite(p) for p in peaks)}/{len(peaks)} measured"
            + (
                f"; at N = {int(r['n_tokens'])} the dense mask took {r['time_ratio']:.1f}x the GRF time and "
                f"{r['memory_ratio']:.1f}x its memory"
                if r
                else ""
            ),
            timed=True,
        ),
    ]


def build_report(acc: Rows, err: Rows, cost: Rows, data: Mapping[str, Any], p: GrfMaskingParams) -> Report:
    columns, body = table(acc)
    m, g, t = p.model, p.grf, p.train
    c, cd = p.clouds, data.get("clouds", {})
    notes = [
        f"MNIST ({data['source']}): {data['n_train']} training and {data['n_test']} test images; "
        f"{(28 // m.patch_size) ** 2} patch tokens of {m.patch_size}x{m.patch_size} on the 4-neighbour patch grid, "
        f"W = A / 4. Accuracy: mean ± 95% half-width over seeds {p.seeds_of('train')} (point clouds: {list(p.seeds)}).",
        f"ViT: {m.n_layers} layers, width {m.d_model}, {m.n_heads} heads, mean pooling, learned position embedding for "
        f"every variant; {t.steps} AdamW steps of {t.batch_size} at lr {t.lr:g}. Linear variants use the "
        f"{m.feature_map} feature map. Mask: f_0..f_{g.k_max} per layer (shared by heads, softplus, start 2^-k), "
        f"alpha = f * f; GRFs with {g.n_walks} walks, p_halt {g.p_halt}, resampled every step (fixed in eval).",
        "At a few dozen tokens the GRF features are applied through the estimated mask Phi_q Phi_k^T (the same "
        "output as the sparse O(N) products, which the scaling study times); walk sampling is its extra cost.",
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
        + (
            "random grid graphs (10% of edges dropped)"
            if p.scaling.graph == "grid"
            else f"symmetrised {p.scaling.knn_k}-NN graphs of points on a procedural chair"
        )
        + f", median of {p.scaling.repeats} forwards; dense mask up to N = "
        f"{p.scaling.dense_max_n}. Peak memory: allocator peak on CUDA; on CPU the resident-set high-water mark after "
        "a warm-up call and a heap trim (page-granular: noisy below about 1 MB). On CPU a dense exponent above 2 "
        "means the N x N matrices left the caches within the fitted range. These are measurements of the machine: "
        "their checks and table are kept beside the tracked report (timings/).",
        f"Mask error: grid {p.mask_error.grid}x{p.mask_error.grid}, f_k = 2^-k, mean of {p.mask_error.repeats} "
        "independent estimates (two independent walk sets, so the diagonal is unbiased too).",
        "Not run: the point-cloud dynamics task itself (Interlacer, SSIM of rendered rollouts).",
    ]
    return Report(
        slug="grf_masking",
        title="GRF masking: test accuracy (%) by attention variant, MNIST ViT and point clouds on kNN graphs",
        columns=columns,
        rows=body,
        claims=[grf_ge_unmasked(acc, "point_clouds", len(c.families)), grf_ge_unmasked(acc)],
        checks=[mask_error_check(err), *scaling_checks(cost, p.scaling.fit_min_n), *checks(acc, cost)],
        notes=notes,
    )


# --------------------------------------------------------------------------------------------------
# the table, the claims, the checks
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "clouds", "model", "grf", "train", "mask_error", "scaling"),
    deps=(ACCURACY, MASK_ERROR, SCALING, DATA_METRICS, CLOUD_METRICS),
    outs=(REPORT,),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """The Table-1-shaped accuracy table, the two claims and the checks."""
    build_report(
        load_table(ctx.path(ACCURACY)),
        load_table(ctx.path(MASK_ERROR)),
        load_table(ctx.path(SCALING)),
        load_json(ctx.path(DATA_METRICS)) | {"clouds": load_json(ctx.path(CLOUD_METRICS))},
        ctx.params,
    ).save(ctx.path(REPORT))
