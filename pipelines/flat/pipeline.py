"""FLAT: LLM unlearning with forget data only, via f-divergence loss adjustment (arXiv 2410.11143).

Reproduces, at CPU scale, the TOFU-style comparison of the paper: rows = unlearning methods, columns = forget
quality (KS-test p-value of forget-set truth ratios against the retain-only oracle), model utility (harmonic
mean of retain and world-fact probability, ROUGE-L recall and truth ratio) and forget exact match /
probability, plus perplexity on general text. FLAT's loss (§3, the brief's table) on forget data only:

    L_FLAT = -E_{D_f}[ g*(h(x_f, y_e)) - f*(g*(h(x_f, y_f))) ],  h = mean answer-token probability

with y_e a template ("I don't know") answer and y_f the forget answer; f = KL, TV or JS (Pearson optional).
Stages, in the paper's order:

1. ``benchmark``: fictitious authors x template QAs (question, answer, paraphrased / perturbed answers) split
   into forget / retain authors, or TOFU's own files (``data.tofu_path`` + ``data.tofu_retain_path``); world
   facts and news text (gensim's files) for utility;
2. ``finetune``: SmolLM2-135M (bf16 weights, as the official trainer) + LoRA (fp32) on the top layers,
   fine-tuned on all QAs (the *original*) and on the retain QAs only (the *retain oracle*); both evaluated (the
   oracle's ``TOFU_EVAL.json`` is the reference of forget quality);
3. ``unlearn`` (one item per method, seeds inside): from the original, on the forget split, with GA, GradDiff
   (also reads retain data), NPO (reference = the original), IDK-SFT and FLAT-KL/TV/JS, all through
   ``components.training.fit`` and the objectives registry; evaluated like the references;
4. ``report``: the TOFU-shaped table, the curves and the forget-vs-utility scatter, the claims.

The official repository's bugs are not reproduced: its ``forget_loss: GLS`` default matches no loss branch
(the FLAT branch is used), and its B·L normalisation of h is an explicit option (``unlearn.normalisation``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from components.io import load_json, load_tensors, save_json, save_table, save_tensors
from components.training import TrainConfig, fit
from components.unlearning import IDK_TEMPLATES
from components.unlearning.evaluate import TofuEvaluator, add_forget_quality, summary
from components.unlearning.general_text import general_passages, world_fact_rows
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.flat import ABOUT
from pipelines.flat.data import forget_and_retain, mark_evaluated
from pipelines.flat.params import FlatParams
from pipelines.flat.plots import plot_finetune
from pipelines.flat.training import CurveProbe, adapter_meta, open_session, qa_pairs, save_eval

QA = "data/qa.json"  # forget + retain rows (TOFU fields), world facts, passages, templates
BENCH_METRICS = "metrics/benchmark.json"
MODELS = "models/"  # original/ and retain/ adapters (safetensors)
REFERENCES = "eval/"  # original/ and retain/ TOFU_EVAL.json + TOFU_SUMMARY.json
FINETUNE_CURVES = "tables/finetune_curves.parquet"
FINETUNE_METRICS = "metrics/finetune.json"
FINETUNE_PNG = "plots/finetune_loss.png"
UNLEARNED = "unlearned/"  # <method>/seed<k>/{TOFU_EVAL,TOFU_SUMMARY}.json, adapter, curves
RESULTS = "tables/results.parquet"  # one row per (method, seed)
CURVES_PNG, CURVES_CSV = "plots/unlearning_curves.png", "plots/unlearning_curves.csv"
TRADEOFF_PNG, TRADEOFF_CSV = "plots/forget_vs_utility.png", "plots/forget_vs_utility.csv"
REPORT = "report.json"


# --------------------------------------------------------------------------------------------------
# §4 / TOFU: the fictitious-author benchmark (or TOFU's files) and the utility sets
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(QA,), metrics=(BENCH_METRICS,))
def benchmark(ctx: StageContext) -> None:
    """QAs split into forget / retain authors, the retain QAs evaluated, world facts and general text."""
    d = ctx.params.data
    forget, retain, source = forget_and_retain(d, ctx.data_path)
    chosen = mark_evaluated(retain, d)
    world = world_fact_rows(d.world_facts, min(d.n_perturbed, 9), seed=derive_seed(d.seed, "world"))
    if d.trained_facts:  # general QAs in the fine-tuning data (never evaluated, never unlearned)
        facts = world_fact_rows(d.trained_facts, 1, seed=0, skip=d.world_facts)
        retain += [{**r, "perturbed_answer": None, "split": "retain", "evaluated": False} for r in facts]
    save_json(
        {
            "forget": forget,
            "retain": retain,
            "world_facts": world,
            "templates": list(IDK_TEMPLATES),
            "passages": general_passages(d.passages, d.passage_words),
        },
        ctx.path(QA),
    )
    save_json(
        {
            **source,
            "forget_qas": len(forget),
            "retain_qas": len(retain),
            "retain_evaluated": chosen,
            "world_facts": len(world),
            "trained_facts": d.trained_facts,
            "passages": d.passages,
        },
        ctx.path(BENCH_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# the model: SmolLM2-135M + LoRA on the top layers over a frozen, memoised trunk (one per process)
# --------------------------------------------------------------------------------------------------
def _setup(ctx: StageContext) -> tuple[Any, dict[str, Any], TofuEvaluator]:
    """The model session, the benchmark's QAs and the TOFU evaluator, primed on the base model."""
    qa = load_json(ctx.path(QA))
    session, evaluator = open_session(ctx.params, qa, ctx.cache_dir, ctx.project)
    return session, qa, evaluator


# --------------------------------------------------------------------------------------------------
# TOFU protocol: the original (all QAs) and the retain-only oracle, fine-tuned from the same base
# --------------------------------------------------------------------------------------------------
@stage(
    params=("model", "finetune", "eval.batch_size", "eval.max_new_tokens"),
    deps=(QA,),
    outs=(MODELS, REFERENCES, FINETUNE_CURVES),
    metrics=(FINETUNE_METRICS,),
    plots=(Plot(FINETUNE_PNG),),
    gpu=True,
    models={"finetuned_lora": MODELS},
)
def finetune(ctx: StageContext) -> None:
    """Fine-tune the original and the retain oracle (LoRA, NLL of the answers); evaluate both."""
    from components.llm import pair_batches
    from components.unlearning.training import sft_loss

    f = ctx.params.finetune
    session, qa, evaluator = _setup(ctx)
    curves, metrics, evals = [], {}, {}
    for role, rows in (("original", qa["forget"] + qa["retain"]), ("retain", qa["retain"])):
        session.reset()
        cfg = TrainConfig(
            steps=f.steps,
            lr=f.lr,
            weight_decay=f.weight_decay,
            warmup_steps=f.warmup_steps,
            seed=derive_seed(0, "finetune", role),
            log_every=max(1, f.steps // 20),
            progress=ctx.progress,
            desc=f"finetune {role}",
            grad_clip=1.0,
        )
        result = fit(
            session.model,
            sft_loss,
            pair_batches(qa_pairs(session, rows), size=f.batch_size),
            cfg,
            callback=ctx.metric_callback(f"finetune/{role}"),
            parameters=session.parameters_to_train(),
        )
        curves += result.curve(model=role)
        save_tensors(
            session.state(), ctx.path(MODELS) / role / "adapter.safetensors", adapter_meta(ctx.params.model, role)
        )
        evals[role] = evaluator.evaluate(session.model)
        metrics[role] = {"final_loss": result.final_loss, "trained_qas": len(rows)}
    for role in evals:
        folder = ctx.path(REFERENCES) / role
        folder.mkdir(parents=True, exist_ok=True)
        save_eval(add_forget_quality(evals[role], evals["retain"]), folder)
        metrics[role].update(summary(add_forget_quality(evals[role], evals["retain"])))
    save_table(curves, ctx.path(FINETUNE_CURVES))
    plot_finetune(curves, ctx.path(FINETUNE_PNG))
    save_json(metrics, ctx.path(FINETUNE_METRICS))
    ctx.log_metrics(
        {f"finetune/{role}/{k}": v for role in metrics for k, v in metrics[role].items() if isinstance(v, float)}
    )


# --------------------------------------------------------------------------------------------------
# §3 unlearning from the original on the forget split: one item per method, seeds inside
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "model", "unlearn", "eval.batch_size", "eval.max_new_tokens"),
    deps=(QA, MODELS, REFERENCES),
    outs=(UNLEARNED,),
    fan_out="unlearn.methods",
    gpu=True,
    models={"unlearned_lora": UNLEARNED},
)
def unlearn(ctx: StageContext) -> None:
    """Unlearn with one method (``ctx.item``) for every seed; evaluate each run against the retain oracle."""
    from components.llm import precompute_scores
    from components.preference import ObjectiveConfig
    from components.unlearning.training import unlearn_batches, unlearn_loss

    method, u = ctx.item, ctx.params.unlearn
    session, qa, evaluator = _setup(ctx)
    original = load_tensors(ctx.path(MODELS) / "original" / "adapter.safetensors")
    retain_eval = load_json(ctx.path(REFERENCES) / "retain" / "TOFU_EVAL.json")
    forget_tokens, retain_tokens = qa_pairs(session, qa["forget"]), qa_pairs(session, qa["retain"])
    n_forget = len(qa["forget"])
    probe = CurveProbe(
        session,
        qa_pairs(session, qa["forget"] + [r for r in qa["retain"] if r["evaluated"]]),
        n_forget,
        ctx.params.eval.batch_size,
        method,
        ctx.log_metrics,
    )
    objective = ObjectiveConfig(beta=u.beta, retain_weight=u.retain_weight, normalisation=u.normalisation)

    session.load(original)
    start = probe.values()  # every seed starts from the original: its point at step 0 is computed once
    for seed in ctx.params.seeds:
        session.load(original)
        rng = np.random.default_rng(derive_seed(seed, "templates", method))
        templates = qa_pairs(session, qa["forget"], [str(t) for t in rng.choice(qa["templates"], size=n_forget)])
        reference = precompute_scores(session.model, forget_tokens) if method == "npo" else None
        curve = [probe.point(0, float("nan"), *start, seed=seed)]

        def probe_model(step: int, metrics: dict[str, float], seed: int = seed, curve: list = curve) -> None:
            if step < u.steps:  # the last point comes from the final evaluation
                curve.append(probe.point(step, metrics.get("loss", float("nan")), *probe.values(), seed=seed))

        cfg = TrainConfig(
            steps=u.steps,
            lr=u.lr,
            seed=derive_seed(seed, "unlearn", method),
            log_every=u.curve_every,
            progress=ctx.progress,
            desc=f"{method} seed {seed}",
            grad_clip=1.0,
        )
        result = fit(
            session.model,
            unlearn_loss(method, objective),
            unlearn_batches(method, forget_tokens, templates, reference, retain_tokens, u.batch_size),
            cfg,
            callback=probe_model,
            parameters=session.parameters_to_train(),
        )
        tofu_eval = add_forget_quality(evaluator.evaluate(session.model), retain_eval)
        curve.append(
            probe.point(
                u.steps,
                result.final_loss,
                tofu_eval["forget_Q_A_Prob"]["agg_value"],
                tofu_eval["forget_exact_match"]["agg_value"],
                tofu_eval["retain_exact_match"]["agg_value"],
                seed=seed,
            )
        )
        folder = ctx.item_dir(UNLEARNED) / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        save_eval(tofu_eval, folder)
        save_tensors(
            session.state(), folder / "adapter.safetensors", adapter_meta(ctx.params.model, f"{method} seed {seed}")
        )
        save_table(curve, folder / "curve.parquet")


PIPELINE = Pipeline(
    paper=ABOUT, params_model=FlatParams, stages=(benchmark, finetune, unlearn), report="pipelines.flat.report:report"
)
