"""DeCapBench's tables and claims, as pure functions of loaded tables (no file I/O).

* The meta-evaluation table (the paper's shape): one row per metric, its Pearson / Spearman / Kendall
  correlation with the human score over all captions, over the long ones (the longest ``long_share`` of each
  seed's captions by word count) and Spearman over the short ones; mean ± 95% interval over seeds.
* Claim ``dcscore_beats_ngram_metrics``: per seed, min over BLEU-4 / ROUGE-L / TF-IDF of
  Spearman(DCScore, human) - Spearman(baseline, human); its mean over seeds with a t interval (with one set
  of captions, e.g. a real file, a bootstrap over captions instead).
* Claim ``gap_largest_on_long_captions``: per seed, min over those baselines of the gap on long captions minus
  the gap on short captions.
* FeedQuill-lite claims, paired per seed (SFT and DPO captioners of the same seed on the same held-out scenes):
  DPO lowers the hallucination rate, raises DCScore, and keeps recall within 5 % (DPO recall / SFT recall >
  0.95). Precondition: the SFT captioner states more correct than false units on every seed (otherwise the
  effect of DPO is that of learning the task at all, not of preference tuning) and every seed had pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from components.captions.evaluation import summarize
from components.metrics.stats import CORRELATIONS as CORRELATION_FNS
from components.metrics.stats import Interval, mean_ci
from paperflows.report import Check, Claim, Precondition, Report, decide, fmt_interval, pm, rows_where
from pipelines.decapbench.params import (
    CAPTIONERS,
    CORRELATIONS,
    LABELS,
    MIN_SFT_PRECISION,
    NGRAM_BASELINES,
    RECALL_TOLERANCE,
    DecapbenchParams,
)

# metric name -> column of the joined per-caption table
METRIC_COLUMNS = {"dcscore": "dcscore", "dcscore_precision": "precision", "dcscore_recall": "recall",
                  "capture": "capture", "bleu4": "bleu4", "rouge_l": "rouge_l", "tfidf_cosine": "tfidf_cosine"}
COLUMNS = ["metric", "Pearson", "Spearman", "Kendall", "Pearson (long)", "Spearman (long)", "Kendall (long)",
           "Spearman (short)", "captions per seed", "paper Pearson", "paper Spearman", "paper Kendall"]
NO_INTERVAL = Interval(float("nan"), -math.inf, math.inf, 0)


def _groups(rows: Sequence[dict[str, Any]]) -> list[Any]:
    return list(dict.fromkeys(r["seed"] for r in rows))


def long_mask(words: Sequence[int], long_share: float) -> np.ndarray:
    """True for the ``round(long_share * n)`` captions with the most words (ties by position), at least one
    caption on each side."""
    n = len(words)
    k = min(n - 1, max(1, round(long_share * n)))
    order = np.argsort(-np.asarray(words, dtype=float), kind="stable")
    mask = np.zeros(n, dtype=bool)
    mask[order[:k]] = True
    return mask


def _scored(rows: Sequence[dict[str, Any]], group: Any) -> list[dict[str, Any]]:
    """A group's captions that have a human score and a valid DCScore (the captions every metric scored)."""
    return [r for r in rows if r["seed"] == group and r["human_score"] is not None and r["valid"]]


def correlation_rows(rows: Sequence[dict[str, Any]], long_share: float) -> list[dict[str, Any]]:
    """Per seed (group), subset and metric: n and the three correlations with the human score."""
    out = []
    for group in _groups(rows):
        mine = _scored(rows, group)
        if len(mine) < 4:
            continue
        long = long_mask([r["words"] for r in mine], long_share)
        for subset, keep in (("all", np.ones(len(mine), bool)), ("long", long), ("short", ~long)):
            chosen = [r for r, k in zip(mine, keep) if k]
            human = [float(r["human_score"]) for r in chosen]
            for metric, column in METRIC_COLUMNS.items():
                if column not in chosen[0]:      # a metric not computed for these captions (CAPTURE on real files)
                    continue
                x = [float(r[column]) for r in chosen]
                out.append({"seed": group, "subset": subset, "metric": metric, "n": len(chosen),
                            **{c: CORRELATION_FNS[c](x, human) if len(chosen) >= 2 else float("nan")
                               for c in CORRELATIONS}})
    return out


def _value(rows: Sequence[dict[str, Any]], group: Any, subset: str, metric: str, kind: str = "spearman") -> float:
    found = rows_where(rows, seed=group, subset=subset, metric=metric)
    return float(found[0][kind]) if found and found[0][kind] is not None else float("nan")


def seed_gaps(meta: Sequence[dict[str, Any]], group: Any) -> dict[str, float]:
    """The claim statistics of one seed: per baseline b, gap_b = rho(DCScore) - rho(b) on all, long and short
    captions, and the minima the claims are decided on."""
    out: dict[str, float] = {}
    for b in NGRAM_BASELINES:
        for subset in ("all", "long", "short"):
            out[f"gap_{b}_{subset}"] = _value(meta, group, subset, "dcscore") - _value(meta, group, subset, b)
        out[f"long_minus_short_{b}"] = out[f"gap_{b}_long"] - out[f"gap_{b}_short"]
    out["min_gap_all"] = min(out[f"gap_{b}_all"] for b in NGRAM_BASELINES)
    out["min_long_minus_short"] = min(out[f"long_minus_short_{b}"] for b in NGRAM_BASELINES)
    return out


def _rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of two [B, n] arrays (average ranks for ties; nan for a constant row)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(1) / np.sqrt((rx ** 2).sum(1) * (ry ** 2).sum(1))


def bootstrap_gaps(captions: Sequence[dict[str, Any]], long_share: float, n_boot: int = 1000, seed: int = 0
                   ) -> dict[str, Interval]:
    """One set of captions (a real file): percentile bootstrap intervals of the two claim statistics
    (``min_gap_all``, ``min_long_minus_short``) over captions resampled within the long and within the short
    ones (draw 0 is the sample itself, the estimate)."""
    mine = _scored(captions, captions[0]["seed"]) if captions else []
    if len(mine) < 8:
        return {"min_gap_all": NO_INTERVAL, "min_long_minus_short": NO_INTERVAL}
    human = np.array([float(r["human_score"]) for r in mine])
    values = {m: np.array([float(r[METRIC_COLUMNS[m]]) for r in mine]) for m in ("dcscore", *NGRAM_BASELINES)}
    long = long_mask([r["words"] for r in mine], long_share)
    rng = np.random.default_rng(seed)
    index = {}
    for subset, members in (("long", np.flatnonzero(long)), ("short", np.flatnonzero(~long))):
        draws = members[rng.integers(0, len(members), (n_boot, len(members)))]
        index[subset] = np.vstack([members[None, :], draws])
    index["all"] = np.hstack([index["long"], index["short"]])
    rho = {(m, s): _rowwise_spearman(v[i], human[i]) for m, v in values.items() for s, i in index.items()}
    gap = {(b, s): rho[("dcscore", s)] - rho[(b, s)] for b in NGRAM_BASELINES for s in index}
    stats = {"min_gap_all": np.min([gap[(b, "all")] for b in NGRAM_BASELINES], axis=0),
             "min_long_minus_short": np.min([gap[(b, "long")] - gap[(b, "short")] for b in NGRAM_BASELINES], axis=0)}
    out = {}
    for key, series in stats.items():
        finite = series[1:][np.isfinite(series[1:])]
        if not np.isfinite(series[0]) or not len(finite):
            out[key] = NO_INTERVAL
            continue
        low, high = np.quantile(finite, [0.025, 0.975])
        out[key] = Interval(float(series[0]), float(low), float(high), len(mine))
    return out


def metric_claims(meta: Sequence[dict[str, Any]], captions: Sequence[dict[str, Any]], long_share: float
                  ) -> list[Claim]:
    """The two meta-evaluation claims (module docstring); ``captions`` (the joined per-caption rows) serve the
    bootstrap when there is a single set of captions."""
    groups = _groups(meta)
    per_seed = [seed_gaps(meta, g) for g in groups]
    single = bootstrap_gaps(captions, long_share) if len(groups) == 1 else {}
    precondition = Precondition("the captions carry human scores (synthetic world, or a human_score per row of "
                                "the candidate file)", met=bool(groups), value=float(len(groups)))
    claims = []
    for key, cid, text, statistic in (
            ("min_gap_all", "dcscore_beats_ngram_metrics",
             "DCScore correlates with the human score better than BLEU-4, ROUGE-L and TF-IDF",
             "min over BLEU-4/ROUGE-L/TF-IDF of Spearman(DCScore) - Spearman(baseline), all captions"),
            ("min_long_minus_short", "gap_largest_on_long_captions",
             "DCScore's advantage over BLEU-4, ROUGE-L and TF-IDF is largest on long captions",
             "min over BLEU-4/ROUGE-L/TF-IDF of (Spearman gap on long captions - gap on short captions)")):
        values = [s[key] for s in per_seed if math.isfinite(s[key])]
        interval = mean_ci(values) if len(values) >= 2 else single.get(key, NO_INTERVAL)
        numbers = {k: float(np.nanmean([s[k] for s in per_seed])) for k in per_seed[0]} if per_seed else {}
        detail = "; ".join(f"{LABELS[b]} {numbers.get(f'gap_{b}_all', float('nan')):+.3f} (long "
                           f"{numbers.get(f'gap_{b}_long', float('nan')):+.3f}, short "
                           f"{numbers.get(f'gap_{b}_short', float('nan')):+.3f})" for b in NGRAM_BASELINES)
        unit = (f"over {len(values)} seeds (t interval)" if len(values) >= 2 else
                "bootstrap over the captions of one set, resampled within long and short")
        claims.append(decide(cid, text, statistic, interval, evidence=f"Spearman gaps of DCScore per baseline, "
                             f"mean over seeds: {detail}; {unit}", numbers=numbers, precondition=precondition))
    return claims


def captioner_summaries(rows: Sequence[dict[str, Any]], seeds: Sequence[int]) -> dict[str, list[dict[str, float]]]:
    """``{captioner: [summary of seed s for s in seeds]}`` from the per-caption evaluation rows."""
    return {name: [summarize(rows_where(rows, seed=s, captioner=name)) for s in seeds] for name in CAPTIONERS}


def feedquill_claims(rows: Sequence[dict[str, Any]], seeds: Sequence[int], pairs: dict[str, float]) -> list[Claim]:
    """DPO vs SFT, paired per seed (module docstring)."""
    s = captioner_summaries(rows, seeds)
    sft, dpo = s["sft"], s["dpo"]
    precision = min(1 - x["hallucination"] for x in sft) if sft else float("nan")
    fewest_pairs = min(pairs.get(f"seed{seed}/pairs", 0) for seed in seeds) if seeds else 0
    precondition = Precondition(
        f"the SFT captioner states more correct than false units on every seed (lowest SFT precision "
        f"{precision:.2f} >= {MIN_SFT_PRECISION}) and every seed has preference pairs (fewest {fewest_pairs:g})",
        met=precision >= MIN_SFT_PRECISION and fewest_pairs > 0, value=precision)

    def series(summaries: list[dict[str, float]], key: str) -> list[float]:
        return [x[key] for x in summaries]

    numbers = {f"{n}_{k}": float(np.mean(series(s[n], k))) for n in CAPTIONERS
               for k in ("hallucination", "recall", "dcscore", "words")}
    n = len(seeds)

    def paired(a: list[float], b: list[float]) -> Interval:
        return mean_ci(np.asarray(a) - np.asarray(b)) if n else NO_INTERVAL

    ratios = [d / t if t > 0 else float("nan") for d, t in zip(series(dpo, "recall"), series(sft, "recall"))]
    finite = [r for r in ratios if math.isfinite(r)]
    evidence = (f"SFT: hallucination {pm(series(sft, 'hallucination'), 3)}, recall {pm(series(sft, 'recall'), 3)}, "
                f"DCScore {pm(series(sft, 'dcscore'))}; DPO: hallucination {pm(series(dpo, 'hallucination'), 3)}, "
                f"recall {pm(series(dpo, 'recall'), 3)}, DCScore {pm(series(dpo, 'dcscore'))}; "
                f"{n} seeds, each SFT and DPO on the same held-out scenes") if n else ""
    return [
        decide("dpo_lowers_hallucination", "DPO on DCScore-judge preferences lowers the hallucination rate vs SFT",
               "mean over seeds of (SFT - DPO) hallucination rate (false units / stated units)",
               paired(series(sft, "hallucination"), series(dpo, "hallucination")), evidence=evidence,
               numbers=numbers, precondition=precondition),
        decide("dpo_raises_dcscore", "DPO on DCScore-judge preferences raises DCScore vs SFT",
               "mean over seeds of (DPO - SFT) DCScore", paired(series(dpo, "dcscore"), series(sft, "dcscore")),
               evidence=evidence, numbers=numbers, precondition=precondition),
        decide("dpo_keeps_recall", f"DPO keeps recall within {RECALL_TOLERANCE:.0%} of SFT's",
               "mean over seeds of DPO recall / SFT recall (exact oracle-fact coverage)",
               mean_ci(finite) if finite else NO_INTERVAL, threshold=1 - RECALL_TOLERANCE, evidence=evidence,
               numbers={**numbers, "recall_ratio": float(np.mean(finite)) if finite else float("nan")},
               precondition=precondition),
    ]


def meta_table(meta: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper-shaped correlation table: rows are metrics, cells mean ± 95% half-width over seeds."""
    table = []
    for metric in METRIC_COLUMNS:
        row: dict[str, Any] = {"metric": LABELS[metric]}
        for subset, suffix, kinds in (("all", "", CORRELATIONS), ("long", " (long)", CORRELATIONS),
                                      ("short", " (short)", ("spearman",))):
            for kind in kinds:
                values = [r[kind] for r in rows_where(meta, subset=subset, metric=metric)
                          if r[kind] is not None and math.isfinite(r[kind])]
                row[f"{kind.capitalize()}{suffix}"] = pm(values, 3) if values else None
        counts = [r["n"] for r in rows_where(meta, subset="all", metric=metric)]
        row["captions per seed"] = int(np.mean(counts)) if counts else None
        row |= {"paper Pearson": None, "paper Spearman": None, "paper Kendall": None}
        table.append(row)
    return table


FEEDQUILL_COLUMNS = (("hallucination rate", "hallucination", 3), ("recall", "recall", 3), ("DCScore", "dcscore", 2),
                     ("units per caption", "units_per_caption", 1), ("words", "words", 1),
                     ("fillers per caption", "fillers_per_caption", 2))


def feedquill_table(rows: Sequence[dict[str, Any]], seeds: Sequence[int], pairs: dict[str, float]
                    ) -> list[dict[str, Any]]:
    """SFT, DPO and their paired difference (mean ± 95% half-width over seeds); the DPO row gives the
    preference pairs it was trained on."""
    s = captioner_summaries(rows, seeds)
    table = [{"captioner": name.upper(), **{label: pm([x[key] for x in s[name]], digits)
                                            for label, key, digits in FEEDQUILL_COLUMNS}} for name in CAPTIONERS]
    table[0]["preference pairs"] = None
    table[1]["preference pairs"] = pm([pairs.get(f"seed{x}/pairs", 0) for x in seeds], 1) if seeds else None
    if seeds:
        table.append({"captioner": "DPO - SFT", **{label: pm([d[key] - t[key] for d, t in zip(s["dpo"], s["sft"])], 3)
                                                   for label, key, _ in FEEDQUILL_COLUMNS}, "preference pairs": None})
    return table


def build_report(p: DecapbenchParams, world: dict[str, Any], dcscore: dict[str, Any], meta: list[dict[str, Any]],
                 captions: list[dict[str, Any]], pairs: dict[str, float], captioner_rows: list[dict[str, Any]]
                 ) -> Report:
    """The report: the correlation table, the FeedQuill and per-seed DCScore tables, claims, checks, notes."""
    seeds = list(p.seeds)
    claims = metric_claims(meta, captions, p.meta.long_share) + feedquill_claims(captioner_rows, seeds, pairs)
    checks = []
    if "oracle_dcscore_exact" in dcscore:
        checks.append(Check("oracle_caption_scores_100", "The exact rule judge gives the oracle captions DCScore "
                            "100 (every fact matched once and verified: P = R = F1 = 1)",
                            passed=abs(dcscore["oracle_dcscore_exact"] - 100.0) < 1e-9,
                            evidence=f"DCScore of {dcscore['oracle_checked']} oracle captions = "
                                     f"{dcscore['oracle_dcscore_exact']:.4f}",
                            numbers={"oracle_dcscore_exact": dcscore["oracle_dcscore_exact"]}))
    per_seed = [{"set": k, "DCScore": v} for k, v in dcscore.items() if k.startswith("seed")]
    source = (f"real files: {p.data.candidates_path} against {p.data.oracle_path}" if p.uses_real_data() else
              f"synthetic world: {p.data.n_images} scenes per seed with {p.data.min_objects}-{p.data.max_objects} "
              f"objects, {world['oracle_facts_mean']:.1f} oracle facts per scene on average")
    notes = [
        f"Data: {source}. DCScore of all {dcscore['valid']} valid captions ({dcscore['invalid']} invalid after "
        f"{p.judge.max_tries} tries): {dcscore['dcscore']:.2f} with the {dcscore['judge']} judge "
        f"({p.judge.n_match} matchings x {p.judge.n_verify} verifications per caption).",
        "Synthetic 'human' score: the true F1 of precision (correct stated facts / stated facts) and coverage "
        f"(oracle facts stated / oracle facts) of each simulated caption, plus N(0, {p.captions.human_noise}) "
        "noise. The rule judge's sampling noise (flip_rate "
        f"{p.judge.flip_rate}) stands for the temperature of an LLM judge; relevant credit: "
        f"{p.judge.relevant_credit}.",
        "The paper's correlation numbers are not in the brief (its result tables were not retrieved), so the "
        "'paper' columns are empty.",
        *(["Real captions: the CAPTURE-style F1 is not computed (its tuples come from the synthetic world's "
           f"parser); the chat judge used {dcscore.get('tokens', 0):,} tokens (prompt + 3 x completion). "
           "FeedQuill-lite runs in the synthetic world whatever the data source."] if p.uses_real_data() else []),
        f"FeedQuill-lite: a {p.captioner.n_layers}-layer width-{p.captioner.d_model} Llama over words (the shared "
        f"word_lm; the brief names a GPT-2 config of the same size), SFT {p.sft.steps} steps, K = "
        f"{p.feedquill.samples} samples at temperature {p.feedquill.temperature}, reward = verified precision + "
        f"{p.feedquill.recall_bonus} x recall, DPO (beta {p.dpo.beta}) {p.dpo.steps} steps against the frozen SFT "
        f"model instead of FeedQuill's reward model + PPO; evaluation captions decoded at temperature "
        f"{p.feedquill.eval_temperature}. Hallucination and recall are exact (scene graph), DCScore is the judge's.",
    ]
    return Report(slug="decapbench", title="DeCapBench: correlation of caption metrics with human judgement "
                  "(mean ± 95% CI over seeds)", columns=COLUMNS, rows=meta_table(meta), claims=claims,
                  checks=checks, notes=notes,
                  extra_tables={"FeedQuill-lite: SFT vs DPO captioners on held-out scenes":
                                feedquill_table(captioner_rows, seeds, pairs), "DCScore per seed": per_seed})
