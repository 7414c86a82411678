"""HeartLang's table, claims and checks, as pure functions of loaded tables.

Inputs: ``rows``, one per (seed, method, task, fraction) with the probe's test macro ROC-AUC ``auc``; ``data``
and ``tokens``, the data and tokenize stages' summaries; ``usage``, one row per (tokenizer, seed, code) with the
number of unlabelled tokens the VQ-HBR assigned to it.

Claims (units are seeds; methods share the seed's labelled subsets, so differences are paired by seed):

* ``heartlang_beats_random_init``: AUC(HeartLang) - AUC(same transformer at random init), averaged over tasks and
  label fractions, > 0. Precondition: the random-init features leave headroom (mean AUC < ``CEILING``).
* ``qrs_ge_window_rhythm_10pct``: AUC(QRS tokens) - AUC(fixed-window tokens, same SSL) on the rhythm task at
  10 % labels >= 0, read as non-inferiority: holds when the interval lies above ``-MARGIN``, does not hold when
  it lies below it. Needs the rhythm task (not present with PTB-XL arrays of another subset). Precondition: the
  fixed-window control learned something (its mean AUC on the task with all labels >= ``CONTROL_FLOOR``); a control
  at chance (its features collapse when the window codes follow from the token's position alone) decides nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import Interval, paired_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, pm
from pipelines.heartlang.params import LABELS, METHODS, PAPER_AUC, PAPER_BASELINE, HeartlangParams

CEILING = 0.99      # mean random-init AUC above which no feature can show a gain
MARGIN = 0.01       # non-inferiority margin (AUC) of "QRS tokens >= fixed windows"
CLAIM_FRACTION = 0.1
CONTROL_FLOOR = 0.6   # mean AUC with all labels below which the fixed-window control is at chance
MIN_CODE_USAGE = 0.1
Rows = Sequence[Mapping[str, Any]]


def _per_seed(rows: Rows, method: str, task: str | None = None, fraction: float | None = None) -> dict[int, float]:
    mine = [r for r in rows if r["method"] == method and (task is None or r["task"] == task)
            and (fraction is None or math.isclose(r["fraction"], fraction))]
    seeds = sorted({int(r["seed"]) for r in mine})
    return {s: float(np.nanmean([r["auc"] for r in mine if int(r["seed"]) == s])) for s in seeds}


def _unresolved(claim_id: str, text: str, statistic: str, n: int, threshold: float, why: str) -> Claim:
    return decide(claim_id, text, statistic, Interval(math.nan, -math.inf, math.inf, n), threshold=threshold,
                  evidence=why)


def pretraining_claim(rows: Rows) -> Claim:
    claim_id, text = "heartlang_beats_random_init", "HeartLang features > the same transformer at random init"
    statistic = "macro ROC-AUC averaged over tasks x label fractions, HeartLang - random init, paired by seed"
    a, b = _per_seed(rows, "heartlang"), _per_seed(rows, "random_init")
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return _unresolved(claim_id, text, statistic, len(seeds), 0.0, f"{len(seeds)} paired seed(s)")
    x, y = [a[s] for s in seeds], [b[s] for s in seeds]
    base = float(np.mean(y))
    return decide(claim_id, text, statistic, paired_ci(x, y), threshold=0.0,
                  evidence=f"HeartLang {np.mean(x):.3f}, random init {base:.3f} over seeds {seeds}",
                  numbers={"heartlang_auc": float(np.mean(x)), "random_init_auc": base},
                  precondition=Precondition(f"random-init features leave headroom (mean AUC < {CEILING})",
                                            base < CEILING, base))


def tokenizer_claim(rows: Rows, task: str = "rhythm", fraction: float = CLAIM_FRACTION) -> Claim:
    claim_id = "qrs_ge_window_rhythm_10pct"
    text = f"QRS tokens >= fixed-window tokens (same SSL) on the {task} task at {fraction:.0%} labels"
    statistic = (f"macro ROC-AUC on {task} at {fraction:g} of the labels, QRS - fixed window, paired by seed "
                 f"(non-inferiority margin {MARGIN})")
    a, b = _per_seed(rows, "heartlang", task, fraction), _per_seed(rows, "fixed_window", task, fraction)
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return _unresolved(claim_id, text, statistic, len(seeds), -MARGIN,
                           f"{len(seeds)} paired seed(s) with task '{task}' at fraction {fraction:g}")
    x, y = [a[s] for s in seeds], [b[s] for s in seeds]
    full = _per_seed(rows, "fixed_window", task, 1.0)
    control = float(np.mean(list(full.values()))) if full else math.nan
    return decide(claim_id, text, statistic, paired_ci(x, y), threshold=-MARGIN,
                  evidence=f"QRS {np.mean(x):.3f}, fixed window {np.mean(y):.3f} over seeds {seeds}; fixed window "
                           f"with all labels {control:.3f}",
                  numbers={"qrs_auc": float(np.mean(x)), "window_auc": float(np.mean(y)), "window_auc_all_labels": control},
                  precondition=Precondition(f"the fixed-window control learned (mean AUC with all labels >= "
                                            f"{CONTROL_FLOOR})", bool(control >= CONTROL_FLOOR), control))


def table(rows: Rows) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per (task, label fraction, method): our macro AUC (mean ± 95% half-width over seeds) and the paper's
    PTB-XL linear-probe AUC of the same task (HeartLang / best baseline) on the HeartLang row."""
    columns = ["task", "labels", "method", "macro AUC (ours, %)", "n seeds", "paper PTB-XL HeartLang (%)",
               "paper PTB-XL best baseline (%)"]
    body = []
    for task in dict.fromkeys(r["task"] for r in rows):
        for fraction in sorted({r["fraction"] for r in rows if r["task"] == task}):
            for method in METHODS:
                per_seed = _per_seed(rows, method, task, fraction)
                if not per_seed:
                    continue
                paper = method == "heartlang" and task in PAPER_AUC
                body.append({"task": task, "labels": f"{fraction:.0%}", "method": LABELS[method],
                             "macro AUC (ours, %)": pm([100 * v for v in per_seed.values()]), "n seeds": len(per_seed),
                             "paper PTB-XL HeartLang (%)": PAPER_AUC[task].get(fraction, "") if paper else "",
                             "paper PTB-XL best baseline (%)": PAPER_BASELINE[task].get(fraction, "") if paper else ""})
    return columns, body


def checks(tokens: Mapping[str, Any], usage: Rows, num_codes: int) -> list[Check]:
    """Every recording gave beats; the VQ-HBR codebooks are used."""
    under = sum(int(v["under_2_beats"]) for v in tokens.values())
    out = [Check("r_peaks_found", "the detector found >= 2 R peaks in every recording (after the fallback)", under == 0,
                 f"{under} recording(s) with fewer than 2 peaks; mean beats per 10 s: "
                 + ", ".join(f"{k} {v['beats_mean']:.1f}" for k, v in tokens.items()), {"under_2_beats": float(under)})]
    for tok in sorted({u["tokenizer"] for u in usage}):
        shares = []
        for seed in sorted({u["seed"] for u in usage if u["tokenizer"] == tok}):
            counts = np.array([u["count"] for u in usage if (u["tokenizer"], u["seed"]) == (tok, seed)])
            shares.append(float((counts > 0).mean()))
        out.append(Check(f"codebook_used_{tok}", f"the {tok} VQ-HBR uses >= {MIN_CODE_USAGE:.0%} of its {num_codes} "
                         "codes on the unlabelled tokens (no collapse)", min(shares) >= MIN_CODE_USAGE,
                         f"share of codes used per seed: {', '.join(f'{s:.2f}' for s in shares)}",
                         {"min_code_usage": min(shares)}))
    return out


def build_report(rows: Rows, data: Mapping[str, Any], tokens: Mapping[str, Any], usage: Rows,
                 p: HeartlangParams) -> Report:
    columns, body = table(rows)
    claims = [pretraining_claim(rows), tokenizer_claim(rows)]
    notes = [
        f"Our numbers: {data['probe_source']} probe set ({data['probe_train']} training / {data['probe_test']} test "
        f"recordings; tasks {data['tasks']}), pretraining on {data['unlabelled']} {data['source']} recordings. The "
        "paper's columns are PTB-XL (real 12-lead ECGs, 71 diagnostic statements); they are beside ours for shape "
        "only, not comparable cell for cell.",
        f"Sentences: leads {', '.join(p.tokenize.leads)}, max_len {p.tokenize.max_len}, R peaks by "
        f"{p.tokenize.detector} on lead I; VQ-HBR codebook {p.vqhbr.num_codes} x {p.vqhbr.code_dim}; backbone depth "
        f"{p.pretrain.depth}, d {p.pretrain.dim}, {p.pretrain.mask_ratio:.0%} masking; probe: logistic regression "
        f"(C = {p.probe.c:g}) on mean-pooled final states, one-vs-rest per label column.",
        "Labelled recordings are one simulated lead (Gaussian-wave PQRST model) spread over 12 leads by fixed gains, so leads carry no "
        "independent morphology; label subsets hold at least one positive of every class (the 1 % split is "
        "therefore larger than 1 % of a small set: see n_labels in tables/probe.parquet).",
    ]
    extra = {}
    if data.get("detector"):
        extra["R-peak detector against the .atr beats (150 ms tolerance)"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in data["detector"]]
    return Report(slug="heartlang", title="HeartLang linear probe: macro ROC-AUC at 1 / 10 / 100 % labels",
                  columns=columns, rows=body, claims=claims,
                  checks=checks(tokens, usage, p.vqhbr.num_codes), notes=notes, extra_tables=extra)
