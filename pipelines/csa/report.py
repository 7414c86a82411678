"""CSA: the paper-shaped tables (zero-shot accuracy and mislabel AUC vs N, retrieval recall@k) and the claims, as
pure functions of loaded tables.

Claims are paired over seeds. The few-pairs claims take, per seed, the mean over the N values <= ``few_pairs``
(the seed is the independent unit: each seed redraws the pairs, the swapped captions and the baseline's init).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from paperflows.report import Check, Claim, Precondition, Report, decide_paired, pm, values
from pipelines.csa.params import LABELS, PAPER_MISLABEL_AUC, CsaParams

METRIC_NAMES = {"zero_shot": "zero-shot accuracy", "mislabel_auc": "mislabel ROC AUC"}


def _per_seed(rows: list[dict[str, Any]], key: str, method: str, ns: list[int]) -> list[float]:
    """Per seed (sorted), the mean of ``key`` over the N values ``ns``."""
    seeds = sorted({r["seed"] for r in rows})
    return [float(np.mean([r[key] for r in rows if r["seed"] == s and r["method"] == method and r["n_pairs"] in ns]))
            for s in seeds]


def _baseline_learned(rows: list[dict[str, Any]], n_classes: int) -> Precondition:
    """The contrastive baseline must beat chance (1/C) by half again at the largest N, or it is not a baseline."""
    largest = max(r["n_pairs"] for r in rows)
    acc = float(np.mean(values(rows, "zero_shot", method="contrastive", n_pairs=largest)))
    return Precondition(f"the CLIP-like baseline reaches zero-shot accuracy > 1.5/C = {1.5 / n_classes:.3f} at "
                        f"N = {largest}", acc > 1.5 / n_classes, acc)


def csa_beats_contrastive(rows: list[dict[str, Any]], key: str, few_pairs: int, n_classes: int) -> Claim:
    """CSA minus the CLIP-like model on ``key``, few pairs (N <= few_pairs), paired over seeds."""
    ns = sorted({r["n_pairs"] for r in rows if r["n_pairs"] <= few_pairs})
    csa, clip = _per_seed(rows, key, "csa", ns), _per_seed(rows, key, "contrastive", ns)
    per_n = {f"{m}@{n}": float(np.mean(values(rows, key, method=m, n_pairs=n)))
             for n in ns for m in ("csa", "contrastive")}
    return decide_paired(f"csa_beats_contrastive_{key}",
                         f"with <= {few_pairs} pairs CSA beats a contrastive model trained on the same pairs on "
                         f"{METRIC_NAMES[key]}",
                         f"mean over seeds of (CSA - CLIP-like) {METRIC_NAMES[key]}, averaged over N in {ns}",
                         csa, clip, numbers=per_n, precondition=_baseline_learned(rows, n_classes),
                         evidence="per-N means: " + ", ".join(f"{k} {v:.3f}" for k, v in per_n.items()))


def rho_weighting_beats_cosine(rows: list[dict[str, Any]], key: str) -> Claim:
    """CSA (rho-weighted) minus plain-cosine CCA on ``key``, over every N, paired over seeds."""
    ns = sorted({r["n_pairs"] for r in rows})
    csa, cca = _per_seed(rows, key, "csa", ns), _per_seed(rows, key, "cca", ns)
    per_n = {f"{m}@{n}": float(np.mean(values(rows, key, method=m, n_pairs=n))) for n in ns for m in ("csa", "cca")}
    return decide_paired(f"rho_weighting_beats_cosine_{key}",
                         f"weighting the canonical dimensions by rho beats plain cosine on {METRIC_NAMES[key]}",
                         f"mean over seeds of (CSA - CCA cosine) {METRIC_NAMES[key]}, averaged over N in {ns}",
                         csa, cca, numbers=per_n,
                         evidence="per-N means: " + ", ".join(f"{k} {v:.3f}" for k, v in per_n.items()))


def rho_check(rho_rows: list[dict[str, Any]]) -> Check:
    """Canonical correlations lie in [0, 1] and decrease with k (true of an SVD's singular values)."""
    ok, worst = True, 0.0
    for key in {(r["seed"], r["n_pairs"]) for r in rho_rows}:
        mine = [r for r in rho_rows if (r["seed"], r["n_pairs"]) == key]
        rho = [r["rho"] for r in sorted(mine, key=lambda r: r["k"])]
        ok &= min(rho) >= 0 and max(rho) <= 1 and all(a >= b - 1e-12 for a, b in zip(rho, rho[1:]))
        worst = max(worst, max(rho))
    return Check("canonical_correlations_ordered", "every fitted rho_k is in [0, 1] and non-increasing in k", bool(ok),
                 f"largest rho_1 {worst:.3f}", {"max_rho": worst})


def build_report(p: CsaParams, rows: list[dict[str, Any]], feature_metrics: dict[str, Any],
                 align_metrics: dict[str, Any], rho_rows: list[dict[str, Any]] | None = None) -> Report:
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ns = sorted({r["n_pairs"] for r in rows})
    columns = ["method"] + [f"zero-shot N={n}" for n in ns] + [f"mislabel AUC N={n}" for n in ns] + \
        ["paper mislabel AUC (ImageNet)"]
    table = []
    for m in methods:
        row = {"method": LABELS.get(m, m)}
        for n in ns:
            row[f"zero-shot N={n}"] = pm(values(rows, "zero_shot", method=m, n_pairs=n), 3)
            row[f"mislabel AUC N={n}"] = pm(values(rows, "mislabel_auc", method=m, n_pairs=n), 3)
        row["paper mislabel AUC (ImageNet)"] = PAPER_MISLABEL_AUC.get(m)
        table.append(row)
    ks = sorted(int(k.split("@")[1]) for k in rows[0] if k.startswith("recall@"))
    retrieval = [{"method": LABELS.get(m, m), "N": n,
                  **{f"recall@{k}": pm(values(rows, f"recall@{k}", method=m, n_pairs=n), 3) for k in ks}}
                 for n in ns for m in methods]
    n_classes = int(feature_metrics.get("classes", 10))
    claims = []
    if {"csa", "contrastive"} <= set(methods):
        claims += [csa_beats_contrastive(rows, key, p.eval.few_pairs, n_classes)
                   for key in ("zero_shot", "mislabel_auc")]
    if {"csa", "cca"} <= set(methods):
        claims += [rho_weighting_beats_cosine(rows, key) for key in ("zero_shot", "mislabel_auc")]
    fm, am = feature_metrics, align_metrics
    notes = [f"Data: {fm.get('source')}, {fm.get('pool')} pool / {fm.get('test')} test items, image features "
             f"{fm.get('image_dim')}-d -> PCA {am.get('image_pca_dim')}, text {fm.get('text_dim')}-d -> PCA "
             f"{am.get('text_pca_dim')}; chance zero-shot accuracy 1/{n_classes}; {am.get('swapped')} of the test "
             "captions swapped for mislabel detection.",
             "Retrieval is instance-level over the clean test captions; captions differ only by template, class and "
             "two attributes, so many are duplicates (ties with the true caption do not count against it) and the "
             "random template cannot be read from the image: recall@k is low for every method.",
             "Paper numbers are ImageNet with CLIP-scale encoders (5k pairs for CSA; CLIP trained on 400M pairs), not "
             "this setting: they show the direction of the claim, not a value to match."]
    if {"csa", "asif"} <= set(methods):
        m = {(k, meth): float(np.mean(values(rows, k, method=meth, n_pairs=ns[0])))
             for k in METRIC_NAMES for meth in ("csa", "asif")}
        notes.append(f"ASIF (not part of the claims) at N = {ns[0]}: zero-shot {m['zero_shot', 'asif']:.3f} vs CSA "
                     f"{m['zero_shot', 'csa']:.3f}, mislabel AUC {m['mislabel_auc', 'asif']:.3f} vs CSA "
                     f"{m['mislabel_auc', 'csa']:.3f}.")
    if feature_metrics.get("caption_examples"):
        notes.append("Caption examples: " + " | ".join(feature_metrics["caption_examples"]))
    return Report(slug="csa", title="CSA: canonical similarity analysis (zero-shot, mislabel detection, retrieval vs "
                  "number of pairs)", columns=columns, rows=table, claims=claims,
                  checks=[rho_check(rho_rows)] if rho_rows else [], notes=notes,
                  extra_tables={"Image-to-caption retrieval (recall@k, clean test pairs)": retrieval})
