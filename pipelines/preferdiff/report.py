"""PreferDiff's table and claims, as pure functions of loaded tables.

Inputs: ``rows``, one per (method, seed), with test ``recall@k`` / ``ndcg@k`` at the best validation epoch
(fractions in [0, 1]); ``curves``, one per (method, seed, epoch) with the validation metrics.

Claims (paired over seeds: the objectives of one seed share the data, the split and the sampling noise):

* ``preferdiff_gt_mse_recall5`` / ``_ndcg5``: PreferDiff > MSE-x0 diffusion on test Recall@5 / NDCG@5;
* ``cosine_ge_mse_recall5``: cosine-x0 >= MSE-x0 on test Recall@5 (decided like ">": holds when the whole
  interval of the difference is above 0, does not hold when it is below 0);
* ``preferdiff_converges_faster``: PreferDiff reaches MSE's final validation Recall@5 in fewer epochs
  (epochs of MSE to first reach its own final value minus those of PreferDiff; never reached counts as one
  epoch past the end).

Precondition of the ranking claims: the MSE model ranks above chance (mean test Recall@5 > 5 / n_items).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.metrics.stats import Interval
from paperflows.report import Check, Claim, Precondition, Report, decide, decide_paired, pm, rows_where
from pipelines.preferdiff.params import LABELS, METRICS, PAPER_RESULTS, PreferdiffParams

Rows = Sequence[Mapping[str, Any]]


def _by_seed(rows: Rows, method: str, key: str) -> dict[int, float]:
    return {int(r["seed"]): float(r[key]) for r in rows_where(rows, method=method)}


def _undecidable(claim_id: str, text: str, statistic: str, n: int, why: str) -> Claim:
    return decide(claim_id, text, statistic, Interval(math.nan, -math.inf, math.inf, n),
                  precondition=Precondition(why, False, float(n)))


def paired_claim(rows: Rows, claim_id: str, text: str, a: str, b: str, metric: str, n_items: int) -> Claim:
    """``a > b`` on test ``metric``, paired over the seeds both ran (x100, in percentage points)."""
    statistic = f"test {metric} (%), {LABELS[a]} - {LABELS[b]}, paired over seeds"
    ra, rb = _by_seed(rows, a, metric), _by_seed(rows, b, metric)
    seeds = sorted(set(ra) & set(rb))
    if len(seeds) < 2:
        return _undecidable(claim_id, text, statistic, len(seeds), f"{a} and {b} both ran on >= 2 seeds ({len(seeds)})")
    xa, xb = [100 * ra[s] for s in seeds], [100 * rb[s] for s in seeds]
    mse = [100 * v for v in _by_seed(rows, "mse", "recall@5").values()]
    chance = 100 * 5 / max(n_items, 1)
    gate = Precondition(f"MSE-x0 ranks above chance: mean test Recall@5 {np.mean(mse):.2f}% > 5/n_items = "
                        f"{chance:.2f}%", bool(mse) and float(np.mean(mse)) > chance, float(np.mean(mse)) - chance
                        ) if mse else None
    wins = sum(x > y for x, y in zip(xa, xb))
    evidence = (f"{LABELS[a]} {np.mean(xa):.2f} vs {LABELS[b]} {np.mean(xb):.2f} (%); ahead on {wins}/{len(seeds)} "
                f"seeds")
    return decide_paired(claim_id, text, statistic, xa, xb, precondition=gate, evidence=evidence,
                         numbers={f"{a}_mean": float(np.mean(xa)), f"{b}_mean": float(np.mean(xb)),
                                  "wins": float(wins)})


def epochs_to_reach(curve: Sequence[Mapping[str, Any]], level: float, metric: str = "recall@5") -> int:
    """First epoch whose validation ``metric`` reaches ``level``; one past the last epoch when never."""
    ordered = sorted(curve, key=lambda c: int(c["epoch"]))
    for c in ordered:
        if float(c[metric]) >= level:
            return int(c["epoch"])
    return int(ordered[-1]["epoch"]) + 1 if ordered else 1


def convergence_claim(curves: Rows) -> Claim:
    """PreferDiff reaches MSE's final validation Recall@5 in fewer epochs (paired over seeds)."""
    claim_id, text = "preferdiff_converges_faster", "PreferDiff reaches MSE-x0's final validation Recall@5 in fewer epochs"
    statistic = "epochs to reach MSE-x0's final validation Recall@5, MSE-x0 - PreferDiff, paired over seeds"
    seeds = sorted({int(c["seed"]) for c in rows_where(curves, method="mse")}
                   & {int(c["seed"]) for c in rows_where(curves, method="preferdiff")})
    if len(seeds) < 2:
        return _undecidable(claim_id, text, statistic, len(seeds), f"mse and preferdiff both ran on >= 2 seeds "
                                                                   f"({len(seeds)})")
    mse_epochs, pd_epochs = [], []
    for s in seeds:
        mse = rows_where(curves, method="mse", seed=s)
        level = float(max(mse, key=lambda c: int(c["epoch"]))["recall@5"])
        mse_epochs.append(float(epochs_to_reach(mse, level)))
        pd_epochs.append(float(epochs_to_reach(rows_where(curves, method="preferdiff", seed=s), level)))
    evidence = f"epochs, MSE-x0 {mse_epochs} vs PreferDiff {pd_epochs} (seeds {seeds})"
    return decide_paired(claim_id, text, statistic, mse_epochs, pd_epochs, evidence=evidence,
                         numbers={"mse_epochs": float(np.mean(mse_epochs)), "preferdiff_epochs": float(np.mean(pd_epochs))})


def claims(rows: Rows, curves: Rows, n_items: int) -> list[Claim]:
    return [
        paired_claim(rows, "preferdiff_gt_mse_recall5", "PreferDiff > MSE-x0 diffusion on Recall@5", "preferdiff",
                     "mse", "recall@5", n_items),
        paired_claim(rows, "preferdiff_gt_mse_ndcg5", "PreferDiff > MSE-x0 diffusion on NDCG@5", "preferdiff", "mse",
                     "ndcg@5", n_items),
        paired_claim(rows, "cosine_ge_mse_recall5", "cosine-x0 >= MSE-x0 diffusion on Recall@5", "cosine", "mse",
                     "recall@5", n_items),
        convergence_claim(curves),
    ]


def table(rows: Rows, methods: Sequence[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per objective: test metrics (%) mean ± 95% half-width over seeds, the best epoch, the paper's."""
    columns = ["method", *METRICS, "best epoch", "paper Recall@5 / NDCG@5"]
    out = []
    for method in methods:
        mine = rows_where(rows, method=method)
        row: dict[str, Any] = {"method": LABELS[method]}
        for k in METRICS:
            row[k] = pm([100 * float(r[k]) for r in mine]) if mine else None
        row["best epoch"] = pm([float(r["best_epoch"]) for r in mine], 1) if mine else None
        paper = [PAPER_RESULTS.get((method, k)) for k in ("recall@5", "ndcg@5")]
        row["paper Recall@5 / NDCG@5"] = (" / ".join(f"{v:.2f}" for v in paper) if all(v is not None for v in paper)
                                          else "not retrieved")
        out.append(row)
    return columns, out


def _scale_note(rows: Rows, n_items: int) -> str:
    """Whether the diffusion objectives rose above chance in this run, in numbers."""
    means = {m: 100 * float(np.mean([r["recall@5"] for r in rows_where(rows, method=m)]))
             for m in ("mse", "cosine", "preferdiff", "sasrec") if rows_where(rows, method=m)}
    chance = 500 / n_items
    shown = ", ".join(f"{LABELS[m]} {v:.2f}%" for m, v in means.items())
    low = [LABELS[m] for m, v in means.items() if m != "sasrec" and v < 3 * chance]
    tail = (f" {', '.join(low)} stay within 3x chance: at this budget (a few hundred steps) the diffusion "
            "objectives have barely started to learn, so their differences are mostly seed noise." if low else "")
    return f"Mean test Recall@5: {shown}.{tail}"


def build_report(rows: Rows, curves: Rows, data: Mapping[str, Any], summary: Mapping[str, Any],
                 p: PreferdiffParams) -> Report:
    methods = list(p.train.methods)
    columns, body = table(rows, methods)
    n_items = int(data["n_items"])
    checks = []
    if "sasrec" in methods and rows_where(rows, method="sasrec"):
        sas = float(np.mean([r["recall@5"] for r in rows_where(rows, method="sasrec")]))
        checks.append(Check("sasrec_learns", "the SASRec-CE reference ranks above chance (Recall@5 > 5 / n_items)",
                            sas > 5 / n_items, f"SASRec test Recall@5 {100 * sas:.2f}% vs chance "
                                               f"{500 / n_items:.2f}%", {"sasrec_recall5": sas}))
    m, pd = p.model, p.preferdiff
    notes = [
        f"Data: {data['source']}; {n_items} items, users {data['train_users']} / {data['valid_users']} / "
        f"{data['test_users']} (train / valid / test, split by user); training examples are every prefix of a "
        f"training user ({summary.get('train_examples', '?')}), evaluation the last {p.data.eval_targets} "
        f"position(s) of each held-out user ({summary.get('test_examples', '?')} test cases; the official protocol "
        f"uses 1).",
        f"Metrics in %, mean ± 95% half-width over seeds {list(p.seeds)}: full ranking over all items, one target per "
        f"case, RecBole's Recall@k (= hit) and NDCG@k = 1/log2(rank+1); ties count against the target. Test "
        f"metrics at the best validation Recall@5 epoch (the official early stopping).",
        f"Model: SASRec {m.n_layers} layer(s), {m.n_heads} heads, hidden {m.hidden}, history {m.max_len}; diffusion "
        f"T = {m.timesteps}, linear beta 1e-4..0.02, x0 by one linear layer, DDIM stride {m.ddim_stride}, guidance "
        f"w = {m.w}, p_uncond {m.p_uncond}; learnable N(0,1) item embeddings (--ab=iids). AdamW lr {p.train.lr}, "
        f"batch {p.train.batch_size}, {p.train.epochs} epochs. PreferDiff lambda {pd.lam}, gamma {pd.gamma}, "
        f"pairing '{pd.pairing}' ('batch' is the official batch-mean comparison), negative noise "
        f"'{pd.negative_noise}' ('independent' is official).",
        f"Scale: {summary.get('test_examples', '?')} test cases, so one hit moves Recall@5 by "
        f"{100 / max(int(summary.get('test_examples', 1) or 1), 1):.2f} points; chance Recall@5 is "
        f"{500 / n_items:.2f}%. " + _scale_note(rows, n_items),
        "Paper column: the brief retrieved no table values (the paper reports Sports, Beauty and Toys, not "
        "MovieLens), so none are quoted; the comparison is between objectives inside this run.",
    ]
    return Report(slug="preferdiff", title="PreferDiff: diffusion recommenders by training objective, test "
                  "Recall/NDCG@5,10 (%)", columns=columns, rows=body, claims=claims(rows, curves, n_items),
                  checks=checks, notes=notes)
