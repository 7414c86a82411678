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

import functools
from pathlib import Path
from typing import Any

import numpy as np

from components.io import load_json, load_tensors, save_json, save_table, save_tensors
from components.training import TrainConfig, fit
from components.unlearning import IDK_TEMPLATES, AuthorConfig, TofuFormatError, author_rows, read_tofu_file
from components.unlearning.evaluate import (
    EvalConfig,
    TofuEvaluator,
    add_forget_quality,
    qa_continuation,
    qa_prompt,
    summary,
)
from components.unlearning.general_text import general_passages, world_fact_rows
from components.unlearning.tofu_file import overlap_problem
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.flat import ABOUT
from pipelines.flat.params import FlatParams
from pipelines.flat.plots import plot_finetune

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
    if d.tofu_path is not None:  # checked with the params before any work; read here in full
        try:
            forget = read_tofu_file(ctx.data_path(d.tofu_path), split="forget")
            retain = read_tofu_file(ctx.data_path(d.tofu_retain_path), split="retain")
        except (FileNotFoundError, TofuFormatError) as err:
            raise StageInputError(f"flat.data: {err}") from None
        shared = overlap_problem(d.tofu_path, d.tofu_retain_path, forget, retain)  # as the params were checked
        if shared is not None:
            raise StageInputError(f"flat.data.tofu_retain_path: {shared}")
        source = {"source": "tofu", "forget_file": d.tofu_path, "retain_file": d.tofu_retain_path}
    else:
        rows = author_rows(
            AuthorConfig(
                n_authors=d.n_authors,
                forget_authors=d.forget_authors,
                n_perturbed=d.n_perturbed,
                attributes=tuple(d.attributes),
                seed=d.seed,
            )
        )
        forget, retain = [r for r in rows if r["split"] == "forget"], [r for r in rows if r["split"] == "retain"]
        source = {"source": "synthetic authors", "authors": d.n_authors, "forget_authors": d.forget_authors}
    scorable = [i for i, r in enumerate(retain) if r["perturbed_answer"] is not None]
    rng = np.random.default_rng(derive_seed(d.seed, "retain_eval"))
    chosen = set(rng.choice(scorable, size=min(d.retain_eval, len(scorable)), replace=False).tolist())
    for i, row in enumerate(retain):
        row["evaluated"] = i in chosen
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
            "retain_evaluated": len(chosen),
            "world_facts": len(world),
            "trained_facts": d.trained_facts,
            "passages": d.passages,
        },
        ctx.path(BENCH_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# the model: SmolLM2-135M + LoRA on the top layers over a frozen, memoised trunk (one per process)
# --------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _session(lm_name: str, precision: str, cache_dir: Path | None, lora: tuple[Any, ...]) -> Any:
    from components.llm import load_lm
    from components.unlearning.training import AdapterSession

    layers, r, alpha, targets = lora
    return AdapterSession(
        load_lm(lm_name, cache_dir=cache_dir, seed=0, precision=precision),
        lora_layers=layers,
        r=r,
        alpha=alpha,
        target_modules=targets,
    )


def _setup(ctx: StageContext) -> tuple[Any, dict[str, Any], TofuEvaluator]:
    m, qa = ctx.params.model, load_json(ctx.path(QA))
    lora = (m.lora_layers, m.lora_r, m.lora_alpha, tuple(m.target_modules))
    session = _session(m.lm, m.precision, ctx.cache_dir, lora)
    evaluator = TofuEvaluator(
        session.lm,
        qa["forget"],
        [r for r in qa["retain"] if r["evaluated"]],
        qa["world_facts"],
        qa["passages"],
        EvalConfig(batch_size=ctx.params.eval.batch_size, max_new_tokens=ctx.params.eval.max_new_tokens),
    )
    evaluator.prime(session.model)
    return session, qa, evaluator


def _pairs(session: Any, rows: list[dict[str, Any]], answers: list[str] | None = None) -> Any:
    answers = answers if answers is not None else [r["answer"] for r in rows]
    return session.lm.tokenize_pairs([qa_prompt(r["question"]) for r in rows], [qa_continuation(a) for a in answers])


def _adapter_meta(ctx: StageContext, role: str) -> dict[str, str]:
    m = ctx.params.model
    return {
        "base_model": m.lm,
        "precision": m.precision,
        "role": role,
        "lora_layers": f"top {m.lora_layers}",
        "lora_r": str(m.lora_r),
        "lora_alpha": str(m.lora_alpha),
        "target_modules": ",".join(m.target_modules),
        "load": "LocalLM.with_lora(...) with these settings, then copy these tensors into its parameters",
    }


def _save_eval(tofu_eval: dict[str, Any], folder: Path) -> None:
    save_json(tofu_eval, folder / "TOFU_EVAL.json")
    save_json(summary(tofu_eval), folder / "TOFU_SUMMARY.json")


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
            pair_batches(_pairs(session, rows), size=f.batch_size),
            cfg,
            callback=ctx.metric_callback(f"finetune/{role}"),
            parameters=session.parameters_to_train(),
        )
        curves += result.curve(model=role)
        save_tensors(session.state(), ctx.path(MODELS) / role / "adapter.safetensors", _adapter_meta(ctx, role))
        evals[role] = evaluator.evaluate(session.model)
        metrics[role] = {"final_loss": result.final_loss, "trained_qas": len(rows)}
    for role in evals:
        folder = ctx.path(REFERENCES) / role
        folder.mkdir(parents=True, exist_ok=True)
        _save_eval(add_forget_quality(evals[role], evals["retain"]), folder)
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
    from components.llm import precompute_scores, scores_and_greedy_hits
    from components.preference import ObjectiveConfig
    from components.unlearning.training import unlearn_batches, unlearn_loss

    method, u = ctx.item, ctx.params.unlearn
    session, qa, evaluator = _setup(ctx)
    original = load_tensors(ctx.path(MODELS) / "original" / "adapter.safetensors")
    retain_eval = load_json(ctx.path(REFERENCES) / "retain" / "TOFU_EVAL.json")
    forget_tokens, retain_tokens = _pairs(session, qa["forget"]), _pairs(session, qa["retain"])
    probe = _pairs(session, qa["forget"] + [r for r in qa["retain"] if r["evaluated"]])
    n_forget = len(qa["forget"])
    objective = ObjectiveConfig(beta=u.beta, retain_weight=u.retain_weight, normalisation=u.normalisation)

    def point(
        step: int, loss: float, forget_prob: float, forget_em: float, retain_em: float, seed: int
    ) -> dict[str, Any]:
        ctx.log_metrics(
            {
                f"unlearn/{method}/seed{seed}/forget_prob": forget_prob,
                f"unlearn/{method}/seed{seed}/forget_em": forget_em,
                f"unlearn/{method}/seed{seed}/retain_em": retain_em,
            },
            step=step,
        )
        return {
            "method": method,
            "seed": seed,
            "step": step,
            "loss": loss,
            "forget_prob": forget_prob,
            "forget_em": forget_em,
            "retain_em": retain_em,
        }

    def probe_values() -> tuple[float, float, float]:
        scores, hits = scores_and_greedy_hits(session.model, probe, ctx.params.eval.batch_size)
        exact = (hits == scores.n_tokens).float().numpy()
        prob = np.exp(scores.logp_mean.numpy())
        return float(prob[:n_forget].mean()), float(exact[:n_forget].mean()), float(exact[n_forget:].mean())

    session.load(original)
    start = probe_values()  # every seed starts from the original: its point at step 0 is computed once
    for seed in ctx.params.seeds:
        session.load(original)
        rng = np.random.default_rng(derive_seed(seed, "templates", method))
        templates = _pairs(session, qa["forget"], [str(t) for t in rng.choice(qa["templates"], size=n_forget)])
        reference = precompute_scores(session.model, forget_tokens) if method == "npo" else None
        curve = [point(0, float("nan"), *start, seed=seed)]

        def probe_model(step: int, metrics: dict[str, float], seed: int = seed, curve: list = curve) -> None:
            if step < u.steps:  # the last point comes from the final evaluation
                curve.append(point(step, metrics.get("loss", float("nan")), *probe_values(), seed=seed))

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
            point(
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
        _save_eval(tofu_eval, folder)
        save_tensors(session.state(), folder / "adapter.safetensors", _adapter_meta(ctx, f"{method} seed {seed}"))
        save_table(curve, folder / "curve.parquet")


PIPELINE = Pipeline(
    paper=ABOUT, params_model=FlatParams, stages=(benchmark, finetune, unlearn), report="pipelines.flat.report:report"
)
