"""The TOFU-shaped table and FLAT's claims, as pure functions of the per-run summaries and curves.

Inputs: ``rows`` (one per model: the references ``original`` and ``retain`` with seed None, and one per
(unlearning method, seed)) holding the TOFU_SUMMARY values, and ``curves`` (per method, seed and probe step:
forget-answer probability, forget / retain exact match).

Claims (units: the unlearning seeds; the fine-tuned original and oracle are shared by all):

* ``flat_reaches_oracle_forget_level`` (headline): FLAT (KL)'s forget quality (KS p-value of its forget truth
  ratios against the retain oracle's) lies above TOFU's 0.05 level, decided on log p-values (they span orders of
  magnitude). Gate: the original *is* told apart from the oracle (its forget quality < 0.05), else there is
  nothing to unlearn.
* ``flat_keeps_retain_accuracy`` (headline): FLAT (KL)'s retain exact match is not below the original's by more
  than 10 % (brief: keeps >= 90 %). Gated on the forget level: the original is told apart from the oracle, FLAT
  (KL) reaches the oracle's level on every seed's interval, and the original answers retain QAs. A run whose
  unlearning changed nothing keeps all its retain accuracy and so cannot pass this claim.
* ``ga_destroys_utility_at_flat_forget_level``: at the first probe step where GA's forget-answer probability is at
  or below FLAT (KL)'s final one (same seed), GA's retain exact match / the original's is below half. Gated on
  FLAT (KL) having reached the oracle's forget level and on GA reaching FLAT's forget probability in every seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from components.io import load_json, save_table
from components.metrics.stats import Estimate, mean_ci
from paperflows.claims import ClaimSpec, Gate, decide, fixed_gate, gate, non_inferiority, superiority
from paperflows.contract import Plot, StageContext, stage
from paperflows.errors import StageInputError
from paperflows.report import REPORT_TIMINGS, Claim, Report, fmt
from paperflows.rows import pm, rows_where, values
from pipelines.flat.params import (
    LABELS,
    PAPER_HP_GA_PPL,
    PAPER_HP_GAP,
    PAPER_HP_NPO_PPL,
    PAPER_MUSE_VERBMEM,
    RETAIN_DATA_METHODS,
    FlatParams,
    ModelParams,
)
from pipelines.flat.pipeline import (
    BENCH_METRICS,
    CURVES_CSV,
    CURVES_PNG,
    QA,
    REFERENCES,
    REPORT,
    RESULTS,
    TRADEOFF_CSV,
    TRADEOFF_PNG,
    UNLEARNED,
)
from pipelines.flat.plots import plot_curves, plot_tradeoff

FORGET_LEVEL_P = 0.05  # TOFU's forget-quality level: a KS p-value above it does not tell the model from the oracle
MIN_RETAIN_EM = 0.2  # the original must answer at least this share of the retain QAs exactly
FLAT = "flat_kl"  # the paper's headline variant
KEEP = 0.9  # brief flat section d: FLAT keeps at least 90 % of the original's retain accuracy
DESTROYED_BELOW = 0.5  # "destroys retain accuracy": below half of the original's
COLUMNS = (
    "forget_quality",
    "model_utility",
    "forget_exact_match",
    "forget_Q_A_Prob",
    "forget_Q_A_ROUGE",
    "forget_truth_ratio",
    "retain_exact_match",
    "retain_Q_A_Prob",
    "retain_Q_A_ROUGE",
    "retain_Truth_Ratio",
    "wf_Q_A_Prob",
    "wf_Q_A_ROUGE",
    "wf_Truth_Ratio",
    "general_perplexity",
)
Rows = Sequence[Mapping[str, Any]]

FLAT_REACHES_ORACLE_FORGET_LEVEL = ClaimSpec(
    "flat_reaches_oracle_forget_level",
    "FLAT (KL) reaches the retain-only oracle's forget level: KS p-value of forget truth ratios > 0.05",
    "forget quality of FLAT (KL) (KS p-value against the oracle), geometric mean over seeds",
    superiority(
        1.0,
        "TOFU's forget-quality level p = 0.05 (brief flat section d); smallest effect a factor 2 "
        "(p = 0.1, the next conventional level)",
        boundary=FORGET_LEVEL_P,
    ),
    headline=True,
)
FLAT_KEEPS_RETAIN_ACCURACY = ClaimSpec(
    "flat_keeps_retain_accuracy",
    "FLAT (KL), at the oracle's forget level, keeps >= 90 % of the original's retain accuracy (exact match)",
    "retain EM of FLAT (KL) / retain EM of the original, mean over seeds",
    non_inferiority(
        1 - KEEP, "brief flat section d: 'keeping at least 90% of the original's retain accuracy'", boundary=1.0
    ),
    headline=True,
)
HEADLINE = (FLAT_REACHES_ORACLE_FORGET_LEVEL, FLAT_KEEPS_RETAIN_ACCURACY)
GA_DESTROYS_UTILITY = ClaimSpec(
    "ga_destroys_utility_at_flat_forget_level",
    "Gradient ascent at FLAT (KL)'s forget level destroys utility: retain EM < 50 % of the original's",
    "GA retain EM / original retain EM, at the first step where GA's forget probability <= FLAT (KL)'s",
    superiority(
        0.1,
        "brief flat section d ('GA, at a matched forget level, destroys retain accuracy') gives no "
        "number: below half of the original's; smallest effect a tenth of it, the size of the loss "
        "the brief's 90 % keep line allows",
        direction="less",
        boundary=DESTROYED_BELOW,
    ),
)


def lm_label(m: ModelParams) -> str:
    """The base model in words, for the notes: the packaged one's name or the user's folder / Hugging Face id."""
    packaged = {"smollm2-135m": "SmolLM2-135M-Instruct", "tiny": "the random test Llama ('tiny')"}
    return packaged.get(m.lm_used, f"the user's model {m.lm_used} (model.name_or_path)")


def collect_rows(
    references: Mapping[str, Mapping[str, float]], runs: Mapping[tuple[str, int], Mapping[str, float]]
) -> list[dict[str, Any]]:
    """One flat row per model from its TOFU_SUMMARY (references first)."""
    out = [
        {
            "method": role,
            "seed": None,
            "uses_retain_data": role != "original",
            **{k: references[role].get(k) for k in COLUMNS},
        }
        for role in ("original", "retain")
    ]
    out += [
        {"method": m, "seed": s, "uses_retain_data": m in RETAIN_DATA_METHODS, **{k: summ.get(k) for k in COLUMNS}}
        for (m, s), summ in runs.items()
    ]
    return out


def _one(rows: Rows, method: str, key: str) -> float:
    found = rows_where(rows, method=method)
    return float(found[0][key]) if found and found[0][key] is not None else math.nan


def _by_seed(rows: Rows, key: str, method: str) -> dict[int, float]:
    """``{seed: key}`` of a method's finite values (the unlearning seeds are the units)."""
    out = {}
    for r in rows_where(rows, method=method):
        if r.get(key) is not None and math.isfinite(float(r[key])):
            out[int(r["seed"])] = float(r[key])
    return out


def _forget_quality(rows: Rows) -> Estimate | None:
    """FLAT (KL)'s forget quality per seed, on the log scale (None when not run; a p-value of 0 is floored)."""
    fq = _by_seed(rows, "forget_quality", FLAT)
    return Estimate.of({s: max(v, 1e-300) for s, v in fq.items()}, log=True) if fq else None


def original_gate(rows: Rows) -> Gate:
    """The original is told apart from the oracle: there is something to unlearn (one model, one value)."""
    original_fq = _one(rows, "original", "forget_quality")
    return fixed_gate(
        "original",
        "retain-only oracle",
        original_fq,
        math.isfinite(original_fq) and original_fq < FORGET_LEVEL_P,
        f"forget quality of the original (must be < {FORGET_LEVEL_P})",
    )


def forget_level_gate(rows: Rows) -> Gate:
    """FLAT (KL) reached the oracle's forget level: its forget-quality interval lies above 0.05."""
    return gate(
        "FLAT (KL)",
        "the oracle's forget level",
        _forget_quality(rows),
        margin=FORGET_LEVEL_P,
        statistic=f"forget quality (must lie above {FORGET_LEVEL_P})",
    )


def answers_gate(rows: Rows) -> Gate:
    original_em = _one(rows, "original", "retain_exact_match")
    return fixed_gate(
        "original",
        "no retain answer",
        original_em,
        math.isfinite(original_em) and original_em >= MIN_RETAIN_EM,
        f"retain exact match of the original (must be >= {MIN_RETAIN_EM})",
    )


def _keep_spec(keep: float) -> ClaimSpec:
    if keep == KEEP:
        return FLAT_KEEPS_RETAIN_ACCURACY
    return replace(
        FLAT_KEEPS_RETAIN_ACCURACY,
        claim=f"FLAT (KL), at the oracle's forget level, keeps >= {keep:.0%} of the original's retain "
        "accuracy (exact match)",
        rule=non_inferiority(
            1 - keep, f"eval.utility_keep = {keep} set for this run (the brief's is 0.9)", boundary=1.0
        ),
    )


def forget_claim(rows: Rows) -> Claim:
    """FLAT (KL) reaches the oracle's forget level."""
    estimate = _forget_quality(rows)
    gates = [original_gate(rows)]
    if estimate is None:
        return decide(
            FLAT_REACHES_ORACLE_FORGET_LEVEL, None, gates=gates, missing="flat_kl is not among unlearn.methods"
        )
    fq = _by_seed(rows, "forget_quality", FLAT)
    original_fq = _one(rows, "original", "forget_quality")
    return decide(
        FLAT_REACHES_ORACLE_FORGET_LEVEL,
        estimate,
        gates=gates,
        evidence=f"original {fmt(original_fq, 4)}; FLAT (KL) per seed {', '.join(fmt(fq[s], 3) for s in sorted(fq))}",
        numbers={"original_forget_quality": original_fq, "flat_forget_quality": float(np.mean(list(fq.values())))},
    )


def retain_claim(rows: Rows, keep: float = KEEP) -> Claim:
    """FLAT (KL) keeps ``keep`` of the original's retain accuracy, decided only once it reached the forget level."""
    spec = _keep_spec(keep)
    gates = [original_gate(rows), forget_level_gate(rows), answers_gate(rows)]
    original_em = _one(rows, "original", "retain_exact_match")
    em = _by_seed(rows, "retain_exact_match", FLAT)
    if not em:
        return decide(spec, None, gates=gates, missing="flat_kl is not among unlearn.methods")
    if not original_em > 0:
        return decide(
            spec,
            None,
            gates=gates,
            missing=f"the original's retain exact match is {fmt(original_em, 3)}, "
            "so no ratio (it must answer retain QAs)",
        )
    ratio = {s: v / original_em for s, v in em.items()}
    return decide(
        spec,
        Estimate.of(ratio),
        gates=gates,
        evidence=f"original retain EM {fmt(original_em, 3)}; FLAT (KL) ratio per seed "
        f"{', '.join(fmt(ratio[s], 3) for s in sorted(ratio))}",
        numbers={"original_retain_em": original_em},
    )


def flat_claims(rows: Rows, keep: float = KEEP) -> list[Claim]:
    """FLAT (KL) reaches the oracle's forget level, and (there) keeps ``keep`` of the original's retain accuracy."""
    return [forget_claim(rows), retain_claim(rows, keep)]


def matched_ga_ratio(curves: Rows, seed: int, original_em: float) -> tuple[float, float | None]:
    """(FLAT (KL)'s final forget probability, GA's retain-EM ratio at the first probe reaching it or None)."""
    flat = sorted(rows_where(curves, method=FLAT, seed=seed), key=lambda r: r["step"])
    ga = sorted(rows_where(curves, method="ga", seed=seed), key=lambda r: r["step"])
    target = float(flat[-1]["forget_prob"])
    reached = [r for r in ga if r["forget_prob"] <= target]
    return target, (float(reached[0]["retain_em"]) / original_em if reached and original_em > 0 else None)


def _ga_spec(destroyed_below: float) -> ClaimSpec:
    if destroyed_below == DESTROYED_BELOW:
        return GA_DESTROYS_UTILITY
    return replace(
        GA_DESTROYS_UTILITY,
        claim=f"Gradient ascent at FLAT (KL)'s forget level destroys utility: retain EM < "
        f"{destroyed_below:.0%} of the original's",
        rule=superiority(
            0.1,
            f"eval.destroyed_below = {destroyed_below} set for this run (default 0.5); "
            "smallest effect a tenth of the original's retain accuracy",
            direction="less",
            boundary=destroyed_below,
        ),
    )


def ga_claim(rows: Rows, curves: Rows, destroyed_below: float = DESTROYED_BELOW) -> Claim:
    """GA, stopped where it first matches FLAT (KL)'s forget probability, keeps < ``destroyed_below`` retain EM."""
    spec = _ga_spec(destroyed_below)
    gates = [original_gate(rows), forget_level_gate(rows)]
    if not (rows_where(curves, method="ga") and rows_where(curves, method=FLAT)):
        return decide(spec, None, gates=gates, missing="ga and flat_kl are not both run")
    original_em = _one(rows, "original", "retain_exact_match")
    seeds = sorted({int(r["seed"]) for r in rows_where(curves, method="ga")})
    matched = {s: matched_ga_ratio(curves, s, original_em) for s in seeds}
    reached = {s: r for s, (_, r) in matched.items() if r is not None}
    gates.append(
        fixed_gate(
            "GA",
            "FLAT (KL)'s final forget probability",
            float(len(reached)),
            len(reached) == len(seeds),
            f"seeds of {len(seeds)} where GA reaches it within the run",
        )
    )
    evidence = "per seed (FLAT forget prob -> GA ratio): " + ", ".join(
        f"{t:.3f} -> {fmt(r, 3)}" for t, r in matched.values()
    )
    if not reached:
        return decide(spec, None, gates=gates, evidence=evidence, missing="GA never reaches FLAT (KL)'s forget level")
    return decide(
        spec, Estimate.of(reached), gates=gates, evidence=evidence, numbers={"original_retain_em": original_em}
    )


def paper_column(method: str) -> str:
    """The brief's headline number for this method, where one exists (HP gap or MUSE VerbMem; not TOFU)."""
    parts = []
    if method in PAPER_HP_GAP:
        parts.append(f"HP gap {PAPER_HP_GAP[method]}")
    if method in PAPER_MUSE_VERBMEM:
        parts.append(f"MUSE VerbMem {PAPER_MUSE_VERBMEM[method]}")
    return "; ".join(parts) if parts else "–"


def table(rows: Rows, methods: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for method in ("original", "retain", *methods):
        mine = rows_where(rows, method=method)
        if not mine:
            continue

        def cell(key: str, method: str = method, single: bool = mine[0]["seed"] is None) -> str:
            xs = values(rows, key, method=method)
            if not xs or not np.isfinite(xs).all():
                return "–"
            if key == "general_perplexity":  # spans orders of magnitude once a model collapses
                interval = mean_ci(xs)
                if single or len(xs) < 2:
                    return f"{xs[0]:.3g}"
                return f"{interval.estimate:.3g} ± {interval.high - interval.estimate:.2g}"
            return fmt(xs[0], 3) if single else pm(xs, 3)

        uses = "–" if mine[0]["seed"] is None else "yes" if mine[0]["uses_retain_data"] else "no"
        out.append(
            {
                "method": LABELS.get(method, method),
                "unlearning reads retain data": uses,
                "forget quality": cell("forget_quality"),
                "model utility": cell("model_utility"),
                "forget EM": cell("forget_exact_match"),
                "forget prob": cell("forget_Q_A_Prob"),
                "forget ROUGE-L": cell("forget_Q_A_ROUGE"),
                "forget TR": cell("forget_truth_ratio"),
                "retain EM": cell("retain_exact_match"),
                "retain prob": cell("retain_Q_A_Prob"),
                "retain ROUGE-L": cell("retain_Q_A_ROUGE"),
                "retain TR": cell("retain_Truth_Ratio"),
                "wf prob": cell("wf_Q_A_Prob"),
                "wf TR": cell("wf_Truth_Ratio"),
                "PPL (news)": cell("general_perplexity"),
                "paper [3p]": paper_column(method),
            }
        )
    return out


def build_report(params: FlatParams, rows: Rows, curves: Rows, bench: Mapping[str, Any]) -> Report:
    methods = list(params.unlearn.methods)
    claims = [*flat_claims(rows, params.eval.utility_keep), ga_claim(rows, curves, params.eval.destroyed_below)]
    data = (
        f"{bench['forget_qas']} forget / {bench['retain_qas']} retain QAs ({bench['source']}), "
        f"{bench['retain_evaluated']} retain QAs, {bench['world_facts']} world facts and {bench['passages']} news "
        "documents evaluated"
    )
    notes = [
        f"Data: {data}. Means ± 95% half-widths over {len(params.seeds)} unlearning seeds; the original and the "
        "retain oracle are fine-tuned once (seed-free rows).",
        "forget quality = scipy ks_2samp p-value of the forget truth ratios against the retain oracle's; model "
        "utility = scipy hmean of retain and world-fact {probability, ROUGE-L recall, truth ratio} (TOFU's nine "
        "values less the three real-author ones: no offline real-author set); ROUGE-L recall of greedy answers "
        "(rouge-score, use_stemmer=True); EM = greedy decoding reproduces the answer (teacher-forced argmax on every "
        "answer token). PPL (news): perplexity on Lee-corpus news documents the LM was not tuned on.",
        "† GradDiff also reads retain data; every other method uses the forget set only (IDK-SFT and FLAT add "
        "template answers).",
        "paper [3p]: the brief gives only a third-party digest of the paper's Harry-Potter forget-quality gap "
        f"(lower is better; GA's PPL ~{PAPER_HP_GA_PPL:.0e}, NPO's {PAPER_HP_NPO_PPL}) and MUSE VerbMem on D_f; "
        "they are other benchmarks' numbers, shown beside ours, not comparable to the TOFU-style columns; '–' where "
        "the digest has no number for the method (no TOFU table is digested).",
        f"Fine-tuning data = the author QAs plus {params.data.trained_facts} capital questions that are never "
        "evaluated "
        "(a departure from TOFU, whose model is tuned on author QAs only): without them the LoRA answered every "
        "question author-style (measured: 'The Hollow Garden.' for the capital of Thailand, world-fact ROUGE 0 for "
        "every model, so model utility was 0 throughout). The evaluated world facts are other capitals.",
        f"CPU scale: {params.data.n_authors} authors x {len(params.data.attributes)} QAs, "
        f"LoRA r={params.model.lora_r} on "
        f"the top {params.model.lora_layers} layers of {lm_label(params.model)} (the frozen layers below run once per "
        "distinct "
        f"token row), base weights in {params.model.precision} with fp32 adapters (the official trainer runs bf16), "
        f"{params.finetune.steps} fine-tuning steps of {params.finetune.batch_size} QAs at lr "
        f"{params.finetune.lr:g}, {params.unlearn.steps} unlearning steps of {params.unlearn.batch_size} forget rows "
        f"at lr {params.unlearn.lr:g}; `--set scale=paper` restores TOFU's 200 authors / forget10 / 5 perturbed "
        "answers / 400 retain QAs, LoRA on all 30 layers and the official step counts and learning rates "
        "(params.py: PAPER_SCALE, PAPER_SOURCE).",
        f"FLAT's score h uses normalisation '{params.unlearn.normalisation}' ('padded' = the official code's sum over "
        "the padded batch / (B·L)); the official config's forget_loss GLS (matches no branch) is not reproduced.",
    ]
    return Report(
        slug="flat",
        title="FLAT (arXiv 2410.11143): TOFU-style unlearning at CPU scale",
        columns=list(table(rows, methods)[0]),
        rows=table(rows, methods),
        claims=claims,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------------
# the TOFU-shaped table, the figures and the claims
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "model", "finetune", "unlearn", "eval"),
    deps=(QA, REFERENCES, UNLEARNED, BENCH_METRICS),
    outs=(RESULTS, REPORT),
    plots=(
        Plot(CURVES_PNG),
        Plot(CURVES_CSV, x="step", y="forget_prob", title="Forget-answer probability"),
        Plot(TRADEOFF_PNG),
        Plot(TRADEOFF_CSV, x="forget_quality", y="model_utility", title="Forget quality vs model utility"),
    ),
    timings=REPORT_TIMINGS,
)
def report(ctx: StageContext) -> None:
    """Per (method, seed) rows from the TOFU summaries; the table, the figures and the claims."""
    p = ctx.params
    references = {role: load_json(ctx.path(REFERENCES) / role / "TOFU_SUMMARY.json") for role in ("original", "retain")}
    runs = {
        (m, s): load_json(ctx.path(UNLEARNED) / m / f"seed{s}" / "TOFU_SUMMARY.json")
        for m in p.unlearn.methods
        for s in p.seeds
    }
    curves = [
        row
        for m in p.unlearn.methods
        for s in p.seeds
        for row in load_table_rows(ctx.path(UNLEARNED) / m / f"seed{s}" / "curve.parquet")
    ]
    rows = collect_rows(references, runs)
    save_table(rows, ctx.path(RESULTS))
    plot_curves(curves, ctx.path(CURVES_PNG), ctx.path(CURVES_CSV))
    plot_tradeoff(rows, ctx.path(TRADEOFF_PNG), ctx.path(TRADEOFF_CSV))
    build_report(p, rows, curves, load_json(ctx.path(BENCH_METRICS))).save(ctx.path(REPORT))


def load_table_rows(path: Path) -> list[dict[str, Any]]:
    from components.io import load_table

    if not path.is_file():
        raise StageInputError(f"flat.report: {path} is missing; rerun the unlearn stage")
    return load_table(path)
