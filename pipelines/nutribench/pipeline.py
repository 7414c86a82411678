"""NutriBench: evaluating LLMs on carbohydrate estimation from meal descriptions (ICLR 2025, arXiv 2407.12843).

Reproduces, at CPU scale, the paper's accuracy table (Acc@7.5 and MAE per prompting strategy, split by
natural vs metric servings; official reference: Llama-3.1-8B-Instruct base 0.3301 / 36.18 g and CoT
0.3527 / 37.17 g on v2) and its type-1-diabetes risk study (bolus from each estimate, glucose simulated
with the UVa/Padova model: time in range 70-180 mg/dL, LBGI, HBGI against the bolus on the true carbs).

The method: an LLM reads a meal description and answers ``{"total_carbohydrates": x}`` (-1 if unknown),
prompted plainly (base), step by step (CoT), or with nutrition facts retrieved from a food table (RAG);
instructions and 3 worked meals sit in the system turn, decoding is greedy, and the official parser reads
the answer. Stages, in the paper's order:

1. ``curate`` (§3): meal descriptions with nutrient labels from the packaged food-composition tables
   (natural and metric servings), or the real NutriBench file ``data.path``; plus the food table that
   the RAG prompt and the lookup baseline read.
2. ``estimate`` (§4, one item per strategy): LLM prompting ``base``, ``cot``, ``rag`` on a local LLM, and
   the non-LLM baselines ``mean``, ``ridge`` (TF-IDF + ridge) and ``lookup`` (parse, look up, sum).
   The worked examples are NutriBench's own three meals (short lookup-and-sum reasoning); a CoT/RAG answer
   may take 256 tokens (the worked answers take 73-122) and ends early only at its answer or in a greedy
   loop. An answer that states no number gets one short completion pass: its reasoning so far plus the cue
   ``Output: {"total_carbohydrates": `` and a few tokens more (an explicit -1 stays an abstention).
3. ``score`` (§4.1): per meal, answered / hit (|pred - gt| < 7.5 g, an abstention never a hit) / absolute
   error; Acc@7.5, MAE and answer rate per strategy and serving type.
4. ``risk`` (§5): the bolus study (:mod:`components.glucose.bolus_study`): for every (strategy, meal,
   virtual adult) a 6-hour simulation with a meal bolus max(estimate, 0) / CR; TIR, LBGI, HBGI.
5. ``report``: the paper-shaped table and the claims with their intervals (:mod:`.report`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from components.glucose import BolusStudyConfig, SimConfig, load_patients, reference_gap, run_bolus_study
from components.io import load_table, save_json, save_table
from components.nutrition.answers import carb_metrics, meal_scores
from components.nutrition.baselines import BASELINES
from components.nutrition.curation import CurationConfig, curate_meals
from components.nutrition.foods import Food, load_food_table
from components.nutrition.nutribench_file import NutribenchFormatError, read_nutribench_file
from paperflows.contract import Pipeline, Plot, StageContext, stage
from paperflows.errors import StageInputError
from pipelines.nutribench import ABOUT
from pipelines.nutribench.estimation import baseline_answers, llm_answers, llm_subset, prediction_rows
from pipelines.nutribench.params import SERVING_TYPES, TRUE_BOLUS, NutribenchParams
from pipelines.nutribench.plots import column, plot_glucose_traces

MEALS = "data/meals.parquet"
FOODS = "data/foods.parquet"
CURATION = "metrics/curation.json"
PREDICTIONS = "predictions/"  # one sub-folder per strategy: predictions.parquet, summary.json
SCORES = "tables/estimation.parquet"  # one row per (strategy, meal)
ESTIMATION = "metrics/estimation.json"
RISK_ROWS = "tables/risk.parquet"  # one row per (strategy, meal, patient)
RISK = "metrics/risk.json"
TRACES_PNG = "plots/glucose_traces.png"
TRACES_CSV = "plots/glucose_traces.csv"
REPORT = "report.json"


# --------------------------------------------------------------------------------------------------
# §3 the meal benchmark: curated meals, or the real NutriBench file
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data"), outs=(MEALS, FOODS), metrics=(CURATION,))
def curate(ctx: StageContext) -> None:
    """Build (or read) the meal benchmark and write the food table."""
    p, d = ctx.params, ctx.params.data
    foods = load_food_table(d.sources)
    if d.path is not None:  # checked with the params before any work; read here in full
        try:
            meals = read_nutribench_file(ctx.data_path(d.path), eval_share=d.eval_share, seed=p.seeds[0])
        except (FileNotFoundError, NutribenchFormatError) as err:
            raise StageInputError(f"nutribench.data.path: {err}") from None
    else:
        meals = curate_meals(
            foods,
            CurationConfig(
                n_meals=d.n_meals,
                max_items=d.max_items,
                metric_share=d.metric_share,
                eval_share=d.eval_share,
                seed=p.seeds[0],
            ),
        )
    save_table([f.to_row() for f in foods], ctx.path(FOODS))
    save_table(meals, ctx.path(MEALS))
    carbs = np.array([m["carb"] for m in meals])
    summary: dict[str, Any] = {
        "meals": len(meals),
        "foods": len(foods),
        "eval_meals": sum(m["split"] == "eval" for m in meals),
        "carb_mean_g": float(carbs.mean()),
        "carb_median_g": float(np.median(carbs)),
        "carb_max_g": float(carbs.max()),
    }
    summary |= {f"{s}_meals": sum(m["serving_type"] == s for m in meals) for s in SERVING_TYPES}
    summary |= {f"foods_{s}": sum(f.source == s for f in foods) for s in d.sources}
    save_json(summary, ctx.path(CURATION))


# --------------------------------------------------------------------------------------------------
# §4 one estimator per fan-out item: LLM prompting (base, CoT, RAG) and the non-LLM baselines
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "estimate"), deps=(MEALS, FOODS), outs=(PREDICTIONS,), fan_out="estimate.strategies")
def estimate(ctx: StageContext) -> None:
    """Answer the eval meals with one strategy (``ctx.item``)."""
    p, strategy, e = ctx.params, ctx.item, ctx.params.estimate
    meals = load_table(ctx.path(MEALS))
    foods = [Food.from_row(r) for r in load_table(ctx.path(FOODS))]
    train, evaluated = [m for m in meals if m["split"] == "train"], [m for m in meals if m["split"] == "eval"]
    started, cpu_started = time.perf_counter(), time.process_time()
    if strategy in BASELINES:
        preds, out = baseline_answers(strategy, foods, train, evaluated, e)
    else:
        evaluated = llm_subset(evaluated, e.llm_meals, p.seeds[0])
        preds, out = llm_answers(
            strategy, [m["meal_description"] for m in evaluated], foods, e, ctx.cache_dir, ctx.project
        )
    ctx.log_metrics(
        {"estimate/seconds": time.perf_counter() - started, "estimate/cpu_seconds": time.process_time() - cpu_started}
    )
    rows = prediction_rows(evaluated, preds, out)
    folder = ctx.item_dir(PREDICTIONS)
    save_table(rows, folder / "predictions.parquet")
    metrics = carb_metrics(preds, np.array([m["carb"] for m in evaluated]))
    metrics["truncated_share"] = float(np.mean([r["truncated"] for r in rows]))
    metrics["completed_share"] = float(np.mean([r["completion"] is not None for r in rows]))
    metrics["looped_share"] = float(np.mean([r["looped"] for r in rows]))
    save_json(metrics, folder / "summary.json")
    ctx.log_metrics({f"estimate/{k}": v for k, v in metrics.items()})


def _predictions(ctx: StageContext, strategy: str) -> list[dict[str, Any]]:
    path = ctx.path(PREDICTIONS) / strategy / "predictions.parquet"
    if not path.is_file():
        raise StageInputError(
            f"nutribench.{ctx.stage.name}: {path} is missing; rerun the estimate stage for strategy '{strategy}'"
        )
    return load_table(path)


# --------------------------------------------------------------------------------------------------
# §4.1 scoring: per meal answered / hit / absolute error, then Acc@7.5, MAE, answer rate
# --------------------------------------------------------------------------------------------------
@stage(params=("estimate.strategies",), deps=(PREDICTIONS,), outs=(SCORES,), metrics=(ESTIMATION,))
def score(ctx: StageContext) -> None:
    """Per meal and per strategy and serving type: Acc@7.5, MAE, answer rate, n."""
    out: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for strategy in ctx.params.estimate.strategies:
        preds = _predictions(ctx, strategy)
        pred, carb = np.array([r["pred"] for r in preds]), np.array([r["carb"] for r in preds])
        per_meal = meal_scores(pred, carb)
        pred_first = np.array([r["pred_first"] for r in preds])
        answered_first = meal_scores(pred_first, carb)["answered"]  # before the answer-line cue
        completed = [r["completion"] is not None for r in preds]
        rows += [
            {
                "strategy": strategy,
                "meal_id": r["meal_id"],
                "serving_type": r["serving_type"],
                "carb": r["carb"],
                "pred": r["pred"],
                "truncated": bool(r["truncated"]),
                "completed": completed[i],
                "answered": bool(per_meal["answered"][i]),
                "answered_first": bool(answered_first[i]),
                "hit": bool(per_meal["hit"][i]),
                "abs_error": float(per_meal["abs_error"][i]),
            }
            for i, r in enumerate(preds)
        ]
        first = carb_metrics(pred_first, carb)
        out[strategy] = {
            "truncated_share": float(np.mean([r["truncated"] for r in preds])),
            "looped_share": float(np.mean([r["looped"] for r in preds])),
            "completed_share": float(np.mean(completed)),
            "answer_rate_first": first["answer_rate"],
            "all": carb_metrics(pred, carb),
        }
        for serving in SERVING_TYPES:
            keep = np.array([r["serving_type"] == serving for r in preds])
            if keep.any():
                out[strategy][serving] = carb_metrics(pred[keep], carb[keep])
    save_json(out, ctx.path(ESTIMATION))
    save_table(rows, ctx.path(SCORES))


# --------------------------------------------------------------------------------------------------
# §5 the T1D risk study: the bolus each estimate leads to, simulated on virtual adults
# --------------------------------------------------------------------------------------------------
@stage(
    params=("estimate.strategies", "risk"),
    deps=(PREDICTIONS, MEALS),
    outs=(RISK_ROWS,),
    metrics=(RISK,),
    plots=(
        Plot(TRACES_PNG),
        Plot(TRACES_CSV, x="minute", y=column(TRUE_BOLUS), title="BG (mg/dL) of the plotted patient and meal"),
    ),
)
def risk(ctx: StageContext) -> None:
    """Simulate every (patient, meal, strategy) bolus and the true-carb bolus; TIR, LBGI, HBGI."""
    r = ctx.params.risk
    estimates = {
        s: {row["meal_id"]: row["pred"] for row in _predictions(ctx, s)} for s in ctx.params.estimate.strategies
    }
    carbs = {m["meal_id"]: m["carb"] for m in load_table(ctx.path(MEALS))}
    sim = SimConfig(duration_min=r.duration_min, meal_time_min=r.meal_time_min, substeps=r.substeps)
    cfg = BolusStudyConfig(
        sim=sim,
        meals_per_arm=r.meals,
        max_bolus_u=r.max_bolus_u,
        tir_low=r.tir_low,
        tir_high=r.tir_high,
        risk_convention=r.risk_convention,
        trace_patient=r.plot_patient,
    )
    started = time.perf_counter()
    try:
        study = run_bolus_study(load_patients(r.patients), carbs, estimates, cfg)
    except ValueError as err:
        raise StageInputError(f"nutribench.risk: {err}") from None
    ctx.log_metrics({"risk/simulation_seconds": time.perf_counter() - started})
    if r.reference_check:
        study.summary["reference_max_abs_dbg_mg_dl"] = reference_gap(study, sim)
    save_table(study.rows, ctx.path(RISK_ROWS))
    save_json(study.summary, ctx.path(RISK))
    plot_glucose_traces(
        study.traces,
        patient=study.trace_patient,
        carb=carbs[study.trace_meal],
        meal_time_min=r.meal_time_min,
        tir_low=r.tir_low,
        tir_high=r.tir_high,
        png=ctx.path(TRACES_PNG),
        csv=ctx.path(TRACES_CSV),
    )


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=NutribenchParams,
    stages=(curate, estimate, score, risk),
    report="pipelines.nutribench.report:report",
)
