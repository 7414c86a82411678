"""The TOFU-shaped table and FLAT's claims, as pure functions of the per-run summaries and curves.

Inputs: ``rows`` (one per model: the references ``original`` and ``retain`` with seed None, and one per
(unlearning method, seed)) holding the TOFU_SUMMARY values, and ``curves`` (per method, seed and probe step:
forget-answer probability, forget / retain exact match).

Claims (intervals over the unlearning seeds, t-based; the fine-tuned original and oracle are shared by all):

* ``flat_reaches_oracle_forget_level``: FLAT (KL)'s forget quality (KS p-value against the retain oracle) > 0.05,
  i.e. its forget-set truth ratios are not told apart from the oracle's at the 5 % level. Precondition: the
  original *is* told apart (its forget quality < 0.05), else there is nothing to unlearn.
* ``flat_keeps_retain_accuracy``: FLAT (KL)'s retain exact match / the original's > ``eval.utility_keep`` (0.9).
  Precondition: the original answers a meaningful share of the retain QAs (>= MIN_RETAIN_EM).
* ``ga_destroys_utility_at_flat_forget_level``: at the first probe step where GA's forget-answer probability is at
  or below FLAT (KL)'s final one (same seed), GA's retain exact match / the original's < ``eval.destroyed_below``.
  Precondition: GA reaches that level within the run in every seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import Interval, mean_ci
from paperflows.report import Claim, Precondition, Report, decide, fmt, pm, rows_where, values
from pipelines.flat.params import (LABELS, PAPER_HP_GA_PPL, PAPER_HP_GAP, PAPER_HP_NPO_PPL, PAPER_MUSE_VERBMEM,
                                   RETAIN_DATA_METHODS, FlatParams)

FORGET_LEVEL_P = 0.05     # the KS p-value above which the unlearned model is not told apart from the oracle
MIN_RETAIN_EM = 0.2       # the original must answer at least this share of the retain QAs exactly
HEADLINE = "flat_kl"      # the paper's headline variant
COLUMNS = ("forget_quality", "model_utility", "forget_exact_match", "forget_Q_A_Prob", "forget_Q_A_ROUGE",
           "forget_truth_ratio", "retain_exact_match", "retain_Q_A_Prob", "retain_Q_A_ROUGE", "retain_Truth_Ratio",
           "wf_Q_A_Prob", "wf_Q_A_ROUGE", "wf_Truth_Ratio", "general_perplexity")
UNDEFINED = Interval(math.nan, -math.inf, math.inf, 0)
Rows = Sequence[Mapping[str, Any]]


def collect_rows(references: Mapping[str, Mapping[str, float]],
                 runs: Mapping[tuple[str, int], Mapping[str, float]]) -> list[dict[str, Any]]:
    """One flat row per model from its TOFU_SUMMARY (references first)."""
    out = [{"method": role, "seed": None, "uses_retain_data": role != "original",
            **{k: references[role].get(k) for k in COLUMNS}} for role in ("original", "retain")]
    out += [{"method": m, "seed": s, "uses_retain_data": m in RETAIN_DATA_METHODS, **{k: summ.get(k) for k in COLUMNS}}
            for (m, s), summ in runs.items()]
    return out


def _one(rows: Rows, method: str, key: str) -> float:
    found = rows_where(rows, method=method)
    return float(found[0][key]) if found and found[0][key] is not None else math.nan


def _safe(xs: list[float]) -> Interval:
    return mean_ci(xs) if xs and all(np.isfinite(xs)) else Interval(math.nan, -math.inf, math.inf, len(xs))


def flat_claims(rows: Rows, keep: float) -> list[Claim]:
    """FLAT (KL) reaches the oracle's forget level, and keeps ``keep`` of the original's retain accuracy."""
    fq_text = "FLAT (KL) reaches the retain-only oracle's forget level: KS p-value of forget truth ratios > 0.05"
    keep_text = f"FLAT (KL) keeps >= {keep:.0%} of the original's retain accuracy (exact match)"
    if not rows_where(rows, method=HEADLINE):
        gate = Precondition("flat_kl is among unlearn.methods", False)
        return [decide("flat_reaches_oracle_forget_level", fq_text, "forget quality", UNDEFINED, precondition=gate),
                decide("flat_keeps_retain_accuracy", keep_text, "retain EM ratio", UNDEFINED, precondition=gate)]
    original_fq, original_em = _one(rows, "original", "forget_quality"), _one(rows, "original", "retain_exact_match")
    fq = values(rows, "forget_quality", method=HEADLINE)
    ratio = [v / original_em if original_em > 0 else math.nan
             for v in values(rows, "retain_exact_match", method=HEADLINE)]
    learned = Precondition(f"the original is told apart from the oracle (its forget quality {fmt(original_fq, 3)} "
                           f"< {FORGET_LEVEL_P})", original_fq < FORGET_LEVEL_P, original_fq)
    answers = Precondition(f"the original answers >= {MIN_RETAIN_EM:.0%} of the retain QAs exactly "
                           f"({fmt(original_em, 3)})", original_em >= MIN_RETAIN_EM, original_em)
    return [
        decide("flat_reaches_oracle_forget_level", fq_text, f"forget quality of FLAT (KL), mean over {len(fq)} seeds",
               _safe(fq), threshold=FORGET_LEVEL_P, precondition=learned,
               evidence=f"original {fmt(original_fq, 4)}; FLAT (KL) per seed {', '.join(fmt(v, 3) for v in fq)}",
               numbers={"original_forget_quality": original_fq, "flat_forget_quality": float(np.mean(fq))}),
        decide("flat_keeps_retain_accuracy", keep_text, "retain EM of FLAT (KL) / retain EM of the original",
               _safe(ratio), threshold=keep, precondition=answers,
               evidence=f"original retain EM {fmt(original_em, 3)}; FLAT (KL) ratio per seed "
                        f"{', '.join(fmt(v, 3) for v in ratio)}",
               numbers={"original_retain_em": original_em}),
    ]


def matched_ga_ratio(curves: Rows, seed: int, original_em: float) -> tuple[float, float | None]:
    """(FLAT (KL)'s final forget probability, GA's retain-EM ratio at the first probe reaching it or None)."""
    flat = sorted(rows_where(curves, method=HEADLINE, seed=seed), key=lambda r: r["step"])
    ga = sorted(rows_where(curves, method="ga", seed=seed), key=lambda r: r["step"])
    target = float(flat[-1]["forget_prob"])
    reached = [r for r in ga if r["forget_prob"] <= target]
    return target, (float(reached[0]["retain_em"]) / original_em if reached and original_em > 0 else None)


def ga_claim(rows: Rows, curves: Rows, destroyed_below: float) -> Claim:
    """GA, stopped where it first matches FLAT (KL)'s forget probability, keeps < ``destroyed_below`` retain EM."""
    text = (f"Gradient ascent at FLAT (KL)'s forget level destroys utility: retain EM < {destroyed_below:.0%} of "
            "the original's")
    statistic = "GA retain EM / original retain EM, at the first step where GA's forget probability <= FLAT (KL)'s"
    if not (rows_where(curves, method="ga") and rows_where(curves, method=HEADLINE)):
        return decide("ga_destroys_utility_at_flat_forget_level", text, statistic, UNDEFINED, direction="less",
                      threshold=destroyed_below, precondition=Precondition("ga and flat_kl are both run", False))
    original_em = _one(rows, "original", "retain_exact_match")
    seeds = sorted({int(r["seed"]) for r in rows_where(curves, method="ga")})
    matched = [matched_ga_ratio(curves, s, original_em) for s in seeds]
    reached = [r for _, r in matched if r is not None]
    gate = Precondition(f"GA reaches FLAT (KL)'s forget probability within the run in every seed "
                        f"({len(reached)} of {len(seeds)})", len(reached) == len(seeds), float(len(reached)))
    return decide("ga_destroys_utility_at_flat_forget_level", text, statistic,
                  _safe(reached) if gate.met else UNDEFINED, threshold=destroyed_below, direction="less",
                  precondition=gate,
                  evidence="per seed (FLAT forget prob -> GA ratio): " + ", ".join(
                      f"{t:.3f} -> {fmt(r, 3)}" for t, r in matched),
                  numbers={"original_retain_em": original_em})


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
            if key == "general_perplexity":     # spans orders of magnitude once a model collapses
                interval = mean_ci(xs)
                if single or len(xs) < 2:
                    return f"{xs[0]:.3g}"
                return f"{interval.estimate:.3g} ± {interval.high - interval.estimate:.2g}"
            return fmt(xs[0], 3) if single else pm(xs, 3)

        uses = "–" if mine[0]["seed"] is None else "yes" if mine[0]["uses_retain_data"] else "no"
        out.append({"method": LABELS.get(method, method), "unlearning reads retain data": uses, "forget quality": cell("forget_quality"), "model utility": cell("model_utility"),
                    "forget EM": cell("forget_exact_match"), "forget prob": cell("forget_Q_A_Prob"),
                    "forget ROUGE-L": cell("forget_Q_A_ROUGE"), "forget TR": cell("forget_truth_ratio"),
                    "retain EM": cell("retain_exact_match"), "retain prob": cell("retain_Q_A_Prob"),
                    "retain ROUGE-L": cell("retain_Q_A_ROUGE"), "retain TR": cell("retain_Truth_Ratio"),
                    "wf prob": cell("wf_Q_A_Prob"), "wf TR": cell("wf_Truth_Ratio"),
                    "PPL (news)": cell("general_perplexity"), "paper [3p]": paper_column(method)})
    return out


def build_report(params: FlatParams, rows: Rows, curves: Rows, bench: Mapping[str, Any]) -> Report:
    methods = list(params.unlearn.methods)
    claims = [*flat_claims(rows, params.eval.utility_keep), ga_claim(rows, curves, params.eval.destroyed_below)]
    data = (f"{bench['forget_qas']} forget / {bench['retain_qas']} retain QAs ({bench['source']}), "
            f"{bench['retain_evaluated']} retain QAs, {bench['world_facts']} world facts and {bench['passages']} news "
            "documents evaluated")
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
        f"Fine-tuning data = the author QAs plus {params.data.trained_facts} capital questions that are never evaluated "
        "(a departure from TOFU, whose model is tuned on author QAs only): without them the LoRA answered every "
        "question author-style (measured: 'The Hollow Garden.' for the capital of Thailand, world-fact ROUGE 0 for "
        "every model, so model utility was 0 throughout). The evaluated world facts are other capitals.",
        f"CPU scale: {params.data.n_authors} authors x {len(params.data.attributes)} QAs, LoRA r={params.model.lora_r} on "
        f"the top {params.model.lora_layers} of SmolLM2's 30 layers (the frozen layers below run once per distinct "
        f"token row), base weights in {params.model.precision} with fp32 adapters (the official trainer runs bf16), "
        f"{params.finetune.steps} fine-tuning steps of {params.finetune.batch_size} QAs at lr "
        f"{params.finetune.lr:g}, {params.unlearn.steps} unlearning steps of {params.unlearn.batch_size} forget rows "
        f"at lr {params.unlearn.lr:g}; `--set scale=paper` restores TOFU's 200 authors / forget10 / 5 perturbed "
        "answers / 400 retain QAs, LoRA on all 30 layers and the official step counts and learning rates "
        "(params.py: PAPER_SCALE, PAPER_SOURCE).",
        f"FLAT's score h uses normalisation '{params.unlearn.normalisation}' ('padded' = the official code's sum over "
        "the padded batch / (B·L)); the official config's forget_loss GLS (matches no branch) is not reproduced.",
    ]
    return Report(slug="flat", title="FLAT (arXiv 2410.11143): TOFU-style unlearning at CPU scale",
                  columns=list(table(rows, methods)[0]), rows=table(rows, methods), claims=claims, notes=notes)
