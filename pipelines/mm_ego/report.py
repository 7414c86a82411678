"""The EgoMemoria-shaped table, the claims and the checks, as pure functions of the evaluation tables.

Inputs are the rows the evaluate stage writes: ``rows`` (one per model and seed: raw / debiased accuracy
per bucket, MDA, inflation, biased / unbiased accuracy, kept counts) and ``preds`` (one per model, seed
and test question: bucket, qtype, biased, kept, correct).

Claims (statistic and interval; with several training seeds the interval is over seeds, paired by seed;
with one seed it is a percentile bootstrap over test questions, paired where two models answer the same
questions, so it measures question sampling, not training noise):

* ``mpp_beats_uniform_mda``: MDA(MPP) - MDA(uniform-k) > 0;
* ``mpp_gap_grows_with_length``: (gap long - gap short) > 0, gap = debiased accuracy MPP - uniform-k;
* ``blind_model_above_chance_on_biased``: the blind network's accuracy on the biased questions minus chance
  (25 %) > 0, i.e. the inflation that de-biasing removes is there.

The MPP claims are *not resolved* when a length bucket keeps fewer than :data:`MIN_KEPT` questions after
de-biasing, or when the answer pass has not learned to read frames (uniform-k, the baseline, is not above
chance on the unbiased questions: then neither a win nor a loss of MPP says anything about the pointer);
the blind-model claim is not resolved when the biased subset has fewer than :data:`MIN_KEPT` questions.
That the blind models score 0 on the questions de-biasing keeps is true by construction: a :class:`Check`.

The ``oracle`` row is the MPP network's answer pass fed the evidence frames: the pointer's loss is
oracle - MPP, the answer step's is 100 - oracle (:func:`bottleneck_table`, :func:`bottleneck_note`). A
bucket without held-out questions (a small narration file) is reported empty in a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.egovideo.stats import excess_over_chance_ci, gap_trend_ci, mda_difference_ci
from components.egovideo.synthetic import BUCKETS
from components.metrics.stats import Interval, mean_ci, paired_ci, spearman
from paperflows.report import Check, Claim, Precondition, Report, decide, fmt, pm, rows_where, values
from pipelines.mm_ego.params import CHANCE, LABELS, PAPER_MDA, MmEgoParams

MIN_KEPT = 30          # questions per bucket (or in the biased subset) below which a claim is not resolved
UNDEFINED = Interval(math.nan, -math.inf, math.inf, 0)
Rows = Sequence[Mapping[str, Any]]


def _avg(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


def _safe(make: Any, *series: Sequence[float]) -> Interval:
    """An interval over seeds, infinite where a value is undefined (a bucket emptied by de-biasing)."""
    if not all(np.isfinite(s).all() for s in series):
        return Interval(math.nan, -math.inf, math.inf, len(series[0]))
    return make(*series)


def _answers(preds: Rows, model: str, seed: int) -> dict[str, np.ndarray]:
    mine = sorted(rows_where(preds, model=model, seed=seed), key=lambda r: r["q"])
    return {"correct": np.array([r["correct"] for r in mine], dtype=bool),
            "bucket": np.array([r["bucket"] for r in mine]),
            "kept": np.array([r["kept"] for r in mine], dtype=bool),
            "biased": np.array([r["biased"] for r in mine], dtype=bool)}


def _seeds(rows: Rows) -> list[int]:
    return sorted({int(r["seed"]) for r in rows})


def _gaps(rows: Rows, kind: str, seed: int | None = None) -> list[float]:
    """MPP minus uniform-k per bucket (``kind`` raw or debiased), mean over seeds or for one seed."""
    eq = {} if seed is None else {"seed": seed}
    return [_avg(values(rows, f"{kind}_{b}", model="mpp", **eq)) - _avg(values(rows, f"{kind}_{b}", model="uniform",
                                                                                  **eq)) for b in BUCKETS]


def _gate(rows: Rows, preds: Rows) -> Precondition:
    """The comparison can say something: enough kept questions per bucket, and an answer pass that reads
    frames at all (uniform-k, the baseline, answers the unbiased questions above chance)."""
    fewest = min((int(r[f"kept_{b}"]) for r in rows_where(rows, model="mpp") for b in BUCKETS), default=0)
    seeds = _seeds(rows)
    if len(seeds) > 1:
        learned = _safe(mean_ci, [v - CHANCE for v in values(rows, "acc_unbiased", model="uniform")])
    else:
        u = _answers(preds, "uniform", seeds[0])
        learned = excess_over_chance_ci(u["correct"][~u["biased"]], CHANCE)
    met = fewest >= MIN_KEPT and learned.low > 0
    return Precondition(f"every length bucket keeps >= {MIN_KEPT} questions after de-biasing (fewest: {fewest}) "
                        f"and uniform-k answers the unbiased questions above chance ({CHANCE + learned.estimate:.1f}%, "
                        f"95% lower bound {CHANCE + learned.low:.1f}%)", met, float(fewest))


def mpp_claims(rows: Rows, preds: Rows) -> list[Claim]:
    """MPP vs uniform-k: the MDA difference, and the growth of the debiased gap from short to long clips."""
    mda_text = "MPP beats uniform-k frame sampling on mean debiased accuracy (MDA)"
    grow_text = "MPP's debiased-accuracy lead over uniform-k grows with video length (long minus short)"
    models = {r["model"] for r in rows}
    if not {"mpp", "uniform"} <= models:
        gate = Precondition("MPP and uniform-k are both among train.methods", False)
        return [decide("mpp_beats_uniform_mda", mda_text, "MDA(MPP) - MDA(uniform-k), pp", UNDEFINED,
                       precondition=gate),
                decide("mpp_gap_grows_with_length", grow_text, "gap(long) - gap(short), pp", UNDEFINED,
                       precondition=gate)]
    seeds, gate = _seeds(rows), _gate(rows, preds)
    gaps, raw_gaps = _gaps(rows, "debiased"), _gaps(rows, "raw")
    if len(seeds) > 1:
        how = f"paired over {len(seeds)} seeds (mean, t interval)"
        mda = _safe(paired_ci, values(rows, "mda", model="mpp"), values(rows, "mda", model="uniform"))
        per_seed = [_gaps(rows, "debiased", s) for s in seeds]
        trend = _safe(mean_ci, [g[-1] - g[0] for g in per_seed])
    else:
        how = "one seed: paired bootstrap over the kept test questions"
        a, b = _answers(preds, "mpp", seeds[0]), _answers(preds, "uniform", seeds[0])
        mda = mda_difference_ci(a["correct"], b["correct"], a["bucket"], a["kept"])
        trend = gap_trend_ci(a["correct"], b["correct"], a["bucket"], a["kept"])
    mda_means = {m: _avg(values(rows, "mda", model=m)) for m in ("mpp", "uniform")}
    gap_text = ", ".join(f"{b} {g:+.1f}" for b, g in zip(BUCKETS, gaps))
    numbers = {"mda_mpp": mda_means["mpp"], "mda_uniform": mda_means["uniform"],
               **{f"gap_{b}": g for b, g in zip(BUCKETS, gaps)},
               **{f"raw_gap_{b}": g for b, g in zip(BUCKETS, raw_gaps)}}
    return [
        decide("mpp_beats_uniform_mda", mda_text, f"MDA(MPP) - MDA(uniform-k), pp; {how}", mda, precondition=gate,
               evidence=f"MDA MPP {mda_means['mpp']:.1f} vs uniform-k {mda_means['uniform']:.1f}", numbers=numbers),
        decide("mpp_gap_grows_with_length", grow_text, f"gap(long) - gap(short), pp, gap = debiased accuracy "
               f"MPP - uniform-k; {how}", trend, precondition=gate,
               evidence=f"debiased gap per bucket {gap_text} (raw gaps "
                        f"{', '.join(f'{g:+.1f}' for g in raw_gaps)})", numbers=numbers),
    ]


def blind_claim(rows: Rows, preds: Rows, mask_models: Sequence[str]) -> Claim:
    """The blind network is above chance on the biased questions: the inflation de-biasing removes."""
    text = ("The blind model scores above chance on the language-biased questions, the inflation that "
            "de-biasing removes")
    statistic = "blind-network accuracy on the biased questions - chance (25 %), pp"
    if not rows_where(rows, model="blind"):
        return decide("blind_model_above_chance_on_biased", text, statistic, UNDEFINED,
                      precondition=Precondition("the blind network is among train.methods", False))
    seeds = _seeds(rows)
    first = _answers(preds, "blind", seeds[0])
    n_biased = int(first["biased"].sum())
    gate = Precondition(f"the biased subset holds >= {MIN_KEPT} test questions ({n_biased})", n_biased >= MIN_KEPT,
                        float(n_biased))
    if len(seeds) > 1:
        how = f"over {len(seeds)} seeds (mean, t interval)"
        excess = _safe(mean_ci, [v - CHANCE for v in values(rows, "acc_biased", model="blind")])
    else:
        how = "one seed: bootstrap over the biased test questions"
        excess = excess_over_chance_ci(first["correct"][first["biased"]], CHANCE)
    names = list(dict.fromkeys(r["model"] for r in rows))
    inflation = {n: _avg(values(rows, "inflation", model=n)) for n in names}
    exploit = {n: _avg(values(rows, "acc_biased", model=n)) - _avg(values(rows, "acc_unbiased", model=n))
               for n in names}
    others = [n for n in names if n not in mask_models]
    pairs = [(exploit[n], inflation[n]) for n in others if math.isfinite(exploit[n]) and math.isfinite(inflation[n])]
    rho = spearman(*zip(*pairs)) if len(pairs) >= 2 else math.nan
    blind_acc = _avg(values(rows, "acc_biased", model="blind"))
    return decide(
        "blind_model_above_chance_on_biased", text, f"{statistic}; {how}", excess, precondition=gate,
        evidence=(f"blind network {blind_acc:.1f}% on {n_biased} biased questions vs chance {CHANCE:.0f}%; "
                  f"inflation raw - debiased: {', '.join(f'{n} {inflation[n]:+.1f}' for n in names)}; prior "
                  f"exploitation (acc biased - unbiased): {', '.join(f'{n} {exploit[n]:+.1f}' for n in names)}; "
                  f"Spearman of the two over the models outside the mask {fmt(rho)} (descriptive, n = {len(pairs)})"),
        numbers={"blind_acc_biased": blind_acc, "n_biased": float(n_biased), "spearman_exploit_inflation": rho,
                 **{f"inflation_{n}": inflation[n] for n in names}, **{f"exploit_{n}": exploit[n] for n in names}})


def checks(rows: Rows, preds: Rows, mask_models: Sequence[str]) -> list[Check]:
    """De-biasing by construction: no kept question is one a mask-defining blind model answered."""
    answered = [p for p in preds if p["model"] in mask_models and p["kept"] and p["correct"]]
    mda = {m: [r["mda"] for r in rows_where(rows, model=m)] for m in mask_models}
    return [Check("debiased_blind_models_score_zero",
                  "the blind models that define the bias mask answer none of the kept questions (MDA 0)",
                  passed=not answered and all(v == 0 or math.isnan(v) for vs in mda.values() for v in vs),
                  evidence=f"mask models {list(mask_models)}; kept questions they answered correctly: {len(answered)}",
                  numbers={f"mda_{m}": _avg(v) for m, v in mda.items()})]


def _cell(interval: Interval) -> str:
    return f"{fmt(interval.estimate, 1)} [{fmt(interval.low, 1)}, {fmt(interval.high, 1)}]"


def bucket_differences(rows: Rows, preds: Rows, a: str, b: str) -> list[Interval]:
    """Debiased accuracy of model ``a`` minus model ``b`` per bucket, with its 95% interval (paired over
    seeds with several seeds, else a paired bootstrap over the kept questions); infinite where undefined."""
    seeds = _seeds(rows)
    out = []
    for bucket in BUCKETS:
        if len(seeds) > 1:
            out.append(_safe(paired_ci, values(rows, f"debiased_{bucket}", model=a),
                             values(rows, f"debiased_{bucket}", model=b)))
        else:
            x, y = _answers(preds, a, seeds[0]), _answers(preds, b, seeds[0])
            out.append(mda_difference_ci(x["correct"], y["correct"], x["bucket"], x["kept"] & (x["bucket"] == bucket),
                                         names=(bucket,)))
    return out


def gap_table(rows: Rows, preds: Rows) -> list[dict[str, Any]]:
    """MPP minus uniform-k per bucket, debiased with its 95% interval (over seeds, or over questions)."""
    if not rows_where(rows, model="mpp") or not rows_where(rows, model="uniform"):
        return []
    raw = _gaps(rows, "raw")
    return [{"bucket": b, "debiased gap [95% CI]": _cell(ci), "raw gap": raw[i]}
            for i, (b, ci) in enumerate(zip(BUCKETS, bucket_differences(rows, preds, "mpp", "uniform")))]


def bottleneck_table(rows: Rows, preds: Rows, summary: Mapping[str, Any], k: int, bucket_frames: Sequence[int]
                     ) -> list[dict[str, Any]]:
    """Pointer or answer step: per bucket the debiased accuracy of MPP's answer pass on the pointer's top-k
    and on the evidence frames (oracle), the pointer's loss (oracle - MPP, with its interval), what the
    answer step still misses with perfect frames (100 - oracle), and the pointer's recall beside k/T."""
    if not rows_where(rows, model="oracle"):
        return []
    loss = bucket_differences(rows, preds, "oracle", "mpp")
    out = []
    for b, t, ci in zip(BUCKETS, bucket_frames, loss):
        oracle = _avg(values(rows, f"debiased_{b}", model="oracle"))
        out.append({"bucket": b, "MPP": _avg(values(rows, f"debiased_{b}", model="mpp")), "oracle": oracle,
                    "uniform-k": _avg(values(rows, f"debiased_{b}", model="uniform")),
                    "pointer loss: oracle - MPP [95% CI]": _cell(ci), "answer-step loss: 100 - oracle": 100 - oracle,
                    f"pointer recall@{k}": summary.get(f"pointer/{b}/recall_at_k"),
                    "uniform coverage k/T": min(1.0, k / t)})
    return out


def bottleneck_note(rows: Rows, preds: Rows) -> str | None:
    """One sentence: is the pointer or the answer step the larger loss (MDA of MPP, oracle, uniform-k)?"""
    if not rows_where(rows, model="oracle"):
        return None
    mda = {m: _avg(values(rows, "mda", model=m)) for m in ("mpp", "oracle", "uniform")}
    seeds = _seeds(rows)
    if len(seeds) > 1:
        loss = _safe(paired_ci, values(rows, "mda", model="oracle"), values(rows, "mda", model="mpp"))
    else:
        a, b = _answers(preds, "oracle", seeds[0]), _answers(preds, "mpp", seeds[0])
        loss = mda_difference_ci(a["correct"], b["correct"], a["bucket"], a["kept"])
    if not math.isfinite(loss.estimate):
        return "Oracle row: undefined (no bucket kept a question)."
    answer_loss = 100 - mda["oracle"]
    larger = ("the answer step" if answer_loss > loss.high else "the pointer" if loss.low > answer_loss
              else "neither clearly")
    return (f"Oracle row: the MPP answer pass fed the evidence frames reaches MDA {mda['oracle']:.1f} against "
            f"{mda['mpp']:.1f} on the pointer's top-k (uniform-k {fmt(mda['uniform'], 1)}): the pointer costs "
            f"{_cell(loss)} pp, the answer step with perfect frames still misses {answer_loss:.1f} pp; the larger "
            f"loss is {larger}.")


def qtype_table(preds: Rows) -> list[dict[str, Any]]:
    """Debiased accuracy (%) per model and question type, over all seeds' kept questions."""
    qtypes = sorted({p["qtype"] for p in preds})
    out = []
    for model in dict.fromkeys(p["model"] for p in preds):
        row: dict[str, Any] = {"model": model}
        for q in qtypes:
            kept = [p["correct"] for p in preds if p["model"] == model and p["qtype"] == q and p["kept"]]
            row[q] = 100.0 * _avg(kept) if kept else math.nan
        out.append(row)
    return out


def build_report(rows: Rows, preds: Rows, summary: Mapping[str, Any], bench: Mapping[str, Any],
                 qa_stats: Mapping[str, Any], p: MmEgoParams) -> Report:
    """EgoMemoria table (models x buckets, raw and debiased, MDA), the claims, the check and the notes."""
    names = list(dict.fromkeys(r["model"] for r in rows))
    columns = ["model", *(f"raw {b}" for b in BUCKETS), "raw mean", *(f"debiased {b}" for b in BUCKETS), "MDA",
               "raw - debiased", "paper MDA"]
    table = []
    for n in names:
        mda = values(rows, "mda", model=n)
        row: dict[str, Any] = {"model": LABELS[n] if n != "llm" else f"{LABELS[n]}: {p.debias.llm}"}
        for b in BUCKETS:
            row[f"raw {b}"] = _avg(values(rows, f"raw_{b}", model=n))
            row[f"debiased {b}"] = _avg(values(rows, f"debiased_{b}", model=n))
        row["raw mean"] = _avg(values(rows, "raw_mean", model=n))
        row["MDA"] = pm(mda, 1) if len(mda) > 1 and np.isfinite(mda).all() else _avg(mda)
        row["raw - debiased"] = _avg(values(rows, "inflation", model=n))
        row["paper MDA"] = PAPER_MDA if n == "mpp" else None
        table.append(row)
    mask = p.mask_models()
    first = _seeds(rows)[0]
    kept = {b: int(rows_where(rows, seed=first)[0][f"kept_{b}"]) for b in BUCKETS}
    buckets = [{"bucket": b, "frames": t, "test questions": bench[f"test/{b}/questions"],
                "biased share": bench.get(f"test/{b}/biased_share", math.nan),
                f"kept after de-biasing (seed {first})": kept[b],
                f"pointer recall@{p.model.k}": summary.get(f"pointer/{b}/recall_at_k"),
                "uniform coverage k/T": min(1.0, p.model.k / t)} for b, t in zip(BUCKETS, p.data.bucket_frames)]
    source = (f"synthesised from the narrations of {p.data.narrations_path}" if p.data.narrations_path
              else "synthetic egocentric streams")
    empty = [b for b in BUCKETS if not bench.get(f"test/{b}/questions")]
    notes = [
        (f"Accuracy in % on {bench['test/questions']} questions of {bench['test/videos']} held-out videos "
         f"({bench['train/questions']} training questions from {bench['train/videos']} videos); mean over seeds "
         f"{p.seeds}."),
        (f"De-biasing drops every question that a blind model ({', '.join(mask)}) answers correctly; the blind "
         "models that define the mask therefore score 0 debiased by construction (a check, not a claim)."),
        ("Claim intervals: over seeds (paired) with several training seeds; with one seed, a percentile "
         "bootstrap over the test questions, which leaves training noise out."),
        f"Frames: {source}; each frame is {p.frames.patches} patch tokens, compressed to their mean for the glimpse.",
        f"Paper MDA {PAPER_MDA} is MM-Ego (LLaVA-OV-7B class) on EgoMemoria; not comparable in absolute value.",
        ("Scale: the MPP claims need an answer pass that reads frames (their precondition). At the default "
         "budget (250 steps of 16 questions per model) it barely does, and a single-seed check at 2,000 steps (8x) "
         "lifted uniform-k only to about 31 % on the unbiased questions (chance 25 %); a decisive CPU run needs a "
         "training budget well beyond the 180-s default (more `train.steps`, videos per bucket and `seeds`: a t "
         "interval over 3 seeds is wide). The paper preset (`--set scale=paper`: 1-min / 10-min / 1-h clips of "
         "629 videos, a 7B-sized network) is what the paper ran, far beyond CPU."),
    ]
    if empty:
        notes.append(f"Empty bucket(s) {', '.join(empty)}: no held-out question (the narrations give no such clip, "
                     f"or no held-out video has one); their cells are empty, MDA averages the other buckets and the "
                     f"MPP claims are not resolved.")
    if (oracle := bottleneck_note(rows, preds)) is not None:
        notes.append(oracle)
    if "llm" in qa_stats:
        llm = qa_stats["llm"]
        notes.append(f"LLM QA engine ({llm['model']}): {llm['accepted']}/{llm['attempted']} questions accepted "
                     f"({100 * llm['acceptance_rate']:.0f}%).")
    return Report(slug="mm_ego", title="MM-Ego: EgoMemoria-style accuracy by video length (%, raw and debiased)",
                  columns=columns, rows=table, claims=[*mpp_claims(rows, preds), blind_claim(rows, preds, mask)],
                  checks=checks(rows, preds, mask), notes=notes,
                  extra_tables={"benchmark buckets": buckets, "MPP minus uniform-k by bucket": gap_table(rows, preds),
                                "pointer or answer step (debiased accuracy, oracle = MPP on the evidence frames)":
                                    bottleneck_table(rows, preds, summary, p.model.k, p.data.bucket_frames),
                                "debiased accuracy by question type": qtype_table(preds)})
