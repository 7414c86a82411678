"""DeCapBench: DCScore for detailed image captions, and FeedQuill preference tuning (arXiv 2503.07906).

Reproduces, at CPU scale, the paper's meta-evaluation (correlation of caption metrics with human judgement:
DCScore against BLEU-4, ROUGE-L, TF-IDF and CAPTURE, Pearson / Spearman / Kendall, on all and on long
captions) and FeedQuill's effect (preference tuning on the judge's verified precision lowers hallucination):

1. ``world`` (§3.1): the images, their oracle facts and the candidate captions, in DeCapBench's formats: the
   synthetic scene-graph world (scenes, templated oracle facts, simulated captions of controlled coverage,
   hallucination, filler and paraphrase, and the "human" score of simulated raters), or the real oracle and
   candidate JSONL files;
2. ``dcscore`` (§3.2): decompose -> match -> verify, 3 x 3 trials, per-caption ``<idx>.json`` and
   ``DCScore: xx.xx``; by default a local judge that knows no caption grammar (sentence units, MiniLM cosine
   matching and verification; offline, synthetic and real captions alike), or the synthetic world's rule judge,
   or an OpenAI-compatible chat judge;
3. ``meta_eval`` (§4.2): the baselines (BLEU-4, ROUGE-L, TF-IDF cosine, CAPTURE-style F1 against the oracle
   caption), then Pearson, Spearman and Kendall of every metric with the human score, per seed, on all, long
   and short captions;
4. ``sft`` (§5, FeedQuill-lite): a tiny captioner (scene words -> caption) fine-tuned on noisy captions;
5. ``preferences``: K sampled captions per scene, judged; reward = verified precision + recall bonus;
   (best, worst) pairs;
6. ``dpo``: DPO on the pairs from the SFT weights against the frozen SFT model;
7. ``captioners``: SFT and DPO captions of held-out scenes: hallucination rate and recall (exact, from the
   scene graph) and DCScore (the judge);
8. ``report``: the correlation table, the FeedQuill table and the claims (:mod:`.report`).
"""

from __future__ import annotations

from typing import Any

from components.captions.baselines import BASELINES
from components.captions.dcscore import dcscore as dcscore_of
from components.captions.dcscore import score_items, summary_line
from components.captions.decapbench_files import benchmark_summary
from components.captions.evaluation import evaluate_captions, summarize
from components.captions.feedquill import judge_samples, policy_and_reference, preference_pairs, train_sft
from components.captions.meta_evaluation import correlation_rows
from components.captions.world import Scene
from components.io import load_json, load_jsonl, load_table, save_json, save_jsonl, save_table, save_text
from paperflows import Pipeline, Plot, StageContext, StageInputError, stage
from pipelines.decapbench import ABOUT
from pipelines.decapbench.data import real_benchmark, synthetic_benchmark
from pipelines.decapbench.feedquill import (
    blind_hallucination,
    dpo_on_pairs,
    eval_captions,
    feedquill_scenes,
    new_captioner,
    preference_samples,
    preference_summary,
    save_seed_captioner,
    seed_captioner,
    sft_data,
    train_config,
)
from pipelines.decapbench.params import CAPTIONERS, NGRAM_BASELINES, DecapbenchParams
from pipelines.decapbench.plots import plot_feedquill, plot_metric_vs_human, plot_training
from pipelines.decapbench.scoring import (
    baseline_table,
    caption_items,
    dcscore_rows,
    make_judge,
    oracle_check,
    per_seed_dcscore,
    prepare_judge,
)

ORACLE, CANDIDATES, SCENES = "data/oracle.jsonl", "data/candidates.jsonl", "data/scenes.json"
WORLD, DETAILS, SCORES, DCSCORE = "metrics/world.json", "dcscore/", "tables/dcscore.parquet", "metrics/dcscore.json"
BASELINE_SCORES, META, META_METRICS = "tables/baselines.parquet", "tables/meta_eval.parquet", "metrics/meta_eval.json"
META_PNG, META_CSV = "plots/metric_vs_human.png", "plots/correlations.csv"
SFT_MODELS, SFT_CURVES = "models/sft/", "tables/sft_curves.parquet"
PREFS, PREF_METRICS = "data/preferences.jsonl", "metrics/preferences.json"
DPO_MODELS, DPO_CURVES = "models/dpo/", "tables/dpo_curves.parquet"
TRAIN_PNG, TRAIN_CSV = "plots/training.png", "plots/training.csv"
CAPTIONER_ROWS, CAPTIONER_METRICS = "tables/captioners.parquet", "metrics/captioners.json"
FQ_PNG, FQ_CSV, REPORT = "plots/feedquill.png", "plots/feedquill.csv", "report.json"


# --------------------------------------------------------------------------------------------------
# §3.1 images, oracle facts, candidate captions (DeCapBench's formats)
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data", "captions"), outs=(ORACLE, CANDIDATES, SCENES), metrics=(WORLD,))
def world(ctx: StageContext) -> None:
    """Write the oracle and candidate files: the synthetic world per seed, or the real files as read."""
    p = ctx.params
    if p.uses_real_data():
        oracle, candidates, scenes = real_benchmark(p.data, ctx.data_path)
    else:
        oracle, candidates, scenes = synthetic_benchmark(p)
    save_jsonl(oracle, ctx.path(ORACLE))
    save_jsonl(candidates, ctx.path(CANDIDATES))
    save_json([s.to_dict() for s in scenes], ctx.path(SCENES))
    save_json(benchmark_summary(oracle, candidates), ctx.path(WORLD))


# --------------------------------------------------------------------------------------------------
# §3.2 DCScore: decompose -> match -> verify, 3 x 3 trials; per-caption <idx>.json and DCScore: xx.xx
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data", "judge"), deps=(ORACLE, CANDIDATES, SCENES), outs=(DETAILS, SCORES), metrics=(DCSCORE,))
def dcscore(ctx: StageContext) -> None:
    """Score every candidate caption with the judge (retrying unusable answers) and write its details."""
    p = ctx.params
    facts = {o["image_name"]: tuple(o["oracle_facts"]) for o in load_jsonl(ctx.path(ORACLE))}
    rows = load_jsonl(ctx.path(CANDIDATES))
    scenes = {s.name: s for s in map(Scene.from_dict, load_json(ctx.path(SCENES)))}
    judge = make_judge(p, ctx.data_path, scenes, p.judge.meta_judge(), p.seeds[0])
    items = caption_items(rows, facts)
    prepare_judge(judge, items)
    cfg = p.judge.dcscore_config()
    records = score_items(judge, items, cfg, workers=5 if p.uses_chat_judge() else 1)  # the official 5 shards
    for item, record in zip(items, records):
        save_json(record, ctx.path(DETAILS) / f"{item.index}.json")
    table = dcscore_rows(items, rows, records)
    overall, valid, invalid = dcscore_of(records)
    # the exact rule judge on the first 50 oracle captions themselves: DCScore 100
    checked = {} if p.uses_real_data() else oracle_check(rows, facts, scenes, cfg)
    per_seed = per_seed_dcscore(records, table)
    lines = [summary_line(overall)] + [f"{k} {summary_line(v)}" for k, v in per_seed.items()]
    save_text("\n".join(lines) + "\n", ctx.path(DETAILS) / "results.txt")
    save_table(table, ctx.path(SCORES))
    save_json(
        {
            "dcscore": overall,
            "valid": valid,
            "invalid": invalid,
            "judge": judge.name,
            "tokens": sum(r["tokens"] for r in table),
            **per_seed,
            **checked,
        },
        ctx.path(DCSCORE),
    )
    ctx.log_metrics({"dcscore": overall, "invalid": invalid})


# --------------------------------------------------------------------------------------------------
# §4.2 meta-evaluation: the baselines, and every metric's correlation with the human score
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "meta"),
    deps=(CANDIDATES, SCORES),
    outs=(BASELINE_SCORES, META),
    metrics=(META_METRICS,),
    plots=(
        Plot(META_PNG),
        Plot(META_CSV, x="metric", y="spearman_all", title="Spearman with the human score, mean over seeds"),
    ),
)
def meta_eval(ctx: StageContext) -> None:
    """BLEU-4, ROUGE-L, TF-IDF cosine (fitted per seed) and CAPTURE-style F1 of every candidate; then per seed
    and subset (all / long / short captions) each metric's Pearson, Spearman and Kendall with the human score."""
    rows = load_jsonl(ctx.path(CANDIDATES))
    names = NGRAM_BASELINES if ctx.params.uses_real_data() else BASELINES  # CAPTURE-style F1 parses our world only
    table = baseline_table(rows, names)
    save_table(table, ctx.path(BASELINE_SCORES))
    joined = joined_scores(ctx)
    correlations = correlation_rows(joined, ctx.params.meta.long_share)
    save_table(correlations, ctx.path(META))
    save_json(
        {
            "captions_with_human_score": sum(r["human_score"] is not None for r in joined),
            **{f"{r['metric']}/{r['subset']}/spearman/seed{r['seed']}": r["spearman"] for r in correlations},
        },
        ctx.path(META_METRICS),
    )
    plot_metric_vs_human(joined, correlations, ctx.path(META_PNG), ctx.path(META_CSV))


def joined_scores(ctx: StageContext) -> list[dict[str, Any]]:
    """Per caption: its DCScore terms, human score, words and every baseline's score."""
    scores = {r["idx"]: r for r in load_table(ctx.path(SCORES))}
    return [scores[r["idx"]] | r for r in load_table(ctx.path(BASELINE_SCORES))]


# --------------------------------------------------------------------------------------------------
# §5 FeedQuill-lite: SFT -> sampled captions judged into preference pairs -> DPO against the SFT model
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "feedquill", "captioner", "sft"),
    outs=(SFT_MODELS, SFT_CURVES),
    gpu=True,
    models={"sft_captioner": SFT_MODELS},
)
def sft(ctx: StageContext) -> None:
    """Fine-tune a from-scratch captioner per seed on noisy simulated captions of its training scenes."""
    p, t = ctx.params, ctx.params.sft
    curves = []
    for seed in p.feedquill_seeds():
        train, _, _ = feedquill_scenes(p, seed)
        prompts, targets = sft_data(p, train, seed)
        lm = new_captioner(p, seed)
        cfg = train_config(t, seed, "sft", ctx.progress)
        result = train_sft(lm, prompts, targets, cfg, t.batch_size, callback=ctx.metric_callback(f"sft/seed{seed}"))
        save_seed_captioner(lm, ctx.path(SFT_MODELS), p, seed)
        curves += result.curve(seed=seed)
    save_table(curves, ctx.path(SFT_CURVES))


@stage(params=("seeds", "feedquill", "captioner", "judge"), deps=(SFT_MODELS,), outs=(PREFS,), metrics=(PREF_METRICS,))
def preferences(ctx: StageContext) -> None:
    """Sample K captions per preference scene, judge them, keep the (best, worst) pairs."""
    p, f = ctx.params, ctx.params.feedquill
    rows, summary = [], {}
    for seed in p.feedquill_seeds():
        _, scenes, _ = feedquill_scenes(p, seed)
        lm = seed_captioner(ctx.path(SFT_MODELS), p, seed)
        samples = preference_samples(lm, scenes, f, seed)
        judge = make_judge(p, ctx.data_path, {s.name: s for s in scenes}, p.feedquill_judge(), seed)
        rewards = judge_samples(judge, scenes, samples, p.judge.dcscore_config(), f.recall_bonus)
        pairs = preference_pairs(samples, rewards, f.margin)
        rows += [q.to_row(scenes, seed=seed) for q in pairs]
        summary |= preference_summary(seed, rewards, pairs)
    save_jsonl(rows, ctx.path(PREFS))
    save_json(summary, ctx.path(PREF_METRICS))


@stage(
    params=("seeds", "feedquill", "captioner", "dpo"),
    deps=(SFT_MODELS, SFT_CURVES, PREFS),
    outs=(DPO_MODELS, DPO_CURVES),
    gpu=True,
    models={"dpo_captioner": DPO_MODELS},
    plots=(Plot(TRAIN_PNG), Plot(TRAIN_CSV, x="step", y="loss", title="SFT and DPO loss (first seed)")),
)
def dpo(ctx: StageContext) -> None:
    """DPO per seed from the SFT weights; the frozen SFT model is the reference (its scores computed once)."""
    p, t = ctx.params, ctx.params.dpo
    pairs, curves = load_jsonl(ctx.path(PREFS)), []
    for seed in p.feedquill_seeds():
        mine = [q for q in pairs if q["seed"] == seed]
        if not mine:
            raise StageInputError(
                f"decapbench.dpo: seed {seed} has no preference pair (every scene's samples "
                "scored within feedquill.margin); raise feedquill.pref_scenes or lower the margin"
            )
        sft_model = seed_captioner(ctx.path(SFT_MODELS), p, seed)
        policy, reference = policy_and_reference(sft_model)
        cfg = train_config(t, seed, "dpo", ctx.progress)
        result = dpo_on_pairs(policy, reference, mine, cfg, t, ctx.metric_callback(f"dpo/seed{seed}"))
        save_seed_captioner(policy, ctx.path(DPO_MODELS), p, seed)
        curves += [{"seed": seed, **h} for h in result.history]
    save_table(curves, ctx.path(DPO_CURVES))
    plot_training(load_table(ctx.path(SFT_CURVES)), curves, ctx.path(TRAIN_PNG), ctx.path(TRAIN_CSV))


@stage(
    params=("seeds", "feedquill", "captioner", "judge"),
    deps=(SFT_MODELS, DPO_MODELS),
    outs=(CAPTIONER_ROWS,),
    metrics=(CAPTIONER_METRICS,),
    plots=(
        Plot(FQ_PNG),
        Plot(FQ_CSV, x="seed", y="hallucination_change", title="Hallucination rate, DPO minus SFT, per seed"),
    ),
)
def captioners(ctx: StageContext) -> None:
    """Caption the held-out scenes with the SFT and the DPO captioner of each seed and score the captions."""
    p, f = ctx.params, ctx.params.feedquill
    rows, summary = [], {}
    for seed in p.feedquill_seeds():
        _, _, scenes = feedquill_scenes(p, seed)
        judge = make_judge(p, ctx.data_path, {s.name: s for s in scenes}, p.feedquill_judge(), seed)
        for name, folder in zip(CAPTIONERS, (SFT_MODELS, DPO_MODELS)):
            lm = seed_captioner(ctx.path(folder), p, seed)
            texts = eval_captions(lm, scenes, f, seed)
            evaluated = evaluate_captions(scenes, texts, judge, p.judge.dcscore_config())
            rows += [{"seed": seed, "captioner": name, **r} for r in evaluated]
            summary |= {f"{name}/seed{seed}/{k}": v for k, v in summarize(evaluated).items()}
            # the trivial reference: the same captions read against other scenes (a captioner blind to its input)
            summary[f"{name}/seed{seed}/hallucination_blind"] = blind_hallucination(scenes, texts)
    save_table(rows, ctx.path(CAPTIONER_ROWS))
    save_json(summary, ctx.path(CAPTIONER_METRICS))
    plot_feedquill(rows, ctx.path(FQ_PNG), ctx.path(FQ_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=DecapbenchParams,
    stages=(world, dcscore, meta_eval, sft, preferences, dpo, captioners),
    report="pipelines.decapbench.report:report",
)
