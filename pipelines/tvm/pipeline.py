"""TVM: token-supervised value models for tree search in math reasoning (arXiv 2407.12863).

Reproduces, at CPU scale, the paper's comparison of verifiers for math reasoning (its Table 1 shape: accuracy of
single sampling, majority vote, Best-of-N and step-level beam search guided by ORM / PRM / TVM verifiers, with the
tokens each method generates), and its argument that token-level value labels score partial solutions better:

1. **sample** (§3, data): N sampled solutions per training question, graded by their final answer (programmatic
   word problems and a slip policy; CHAMP's competition problems with the solutions real models wrote; or a
   user's JSONL of sampled solutions; the last two split by question);
2. **labels** (§3.2, Eq. 3): per solution token, ORM's outcome, PRM's step correctness, TVM's mean outcome of the
   samples that share the exact token prefix (a token trie);
3. **train** (§3.2, one item per label type): a tiny causal transformer with a value head, MSE on sigmoid values,
   through the one training loop, per seed;
4. **search** (§4): single sample, majority vote, Best-of-N and step beam search (b beams, K draws per beam)
   scored by each verifier on held-out questions; the prefix scores at step ends against recoverability;
5. **report**: the table, the claims (TVM vs ORM beam search; prefix AUC), the checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from components.io import load_jsonl, load_tensors, save_json, save_jsonl, save_table, save_tensors
from components.reasoning.champ import as_solution_rows, default_path, grade_champ, model_summary, read_champ
from components.reasoning.datasets import answer_key, sample_synthetic, split_file
from components.reasoning.grading import grade
from components.reasoning.labels import outcome_labels, step_labels, token_value_labels
from components.reasoning.policy import prefix_value
from components.reasoning.search import best_of_n, majority_vote
from components.reasoning.solutions_file import read_solutions
from components.reasoning.verifier import Encoded, Verifier
from components.training import TrainConfig
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.tvm import ABOUT
from pipelines.tvm.data import label_rows, lm_samples, problem_of, slip_policy
from pipelines.tvm.evaluation import QUESTION_CORRECT, beam_accuracy, prefix_aucs
from pipelines.tvm.params import TvmParams
from pipelines.tvm.plots import plot_accuracy_vs_tokens, plot_labels

TRAIN, TEST = "data/train.jsonl", "data/test.jsonl"
DATA_METRICS = "metrics/data.json"
LABELS, LABEL_METRICS, LABELS_PNG = "data/labels.safetensors", "metrics/labels.json", "plots/token_labels.png"
MODELS = "models/"
SEARCH, PREFIX_AUC, SEARCH_METRICS = "tables/search.parquet", "tables/prefix_auc.parquet", "metrics/search.json"
ACC_PNG, ACC_CSV = "plots/accuracy_vs_tokens.png", "plots/accuracy_vs_tokens.csv"
REPORT = "report.json"


def _make_verifier(ctx: StageContext, seed: int) -> Verifier:
    v = ctx.params.verifier
    return Verifier(
        v.backbone,
        seed,
        cache_dir=ctx.cache_dir,
        lora_r=v.lora_r,
        lora_layers=v.lora_layers,
        name_or_path=v.name_or_path,
        root=ctx.project,
    )


def _encode(verifier: Verifier, records: list[dict], with_question: bool):
    return verifier.encode([(r["question"], r["solution"]) for r in records], with_question=with_question)


# --------------------------------------------------------------------------------------------------
# §3 data: N sampled solutions per question, graded by the final answer
# --------------------------------------------------------------------------------------------------
@stage(params=("data", "policy"), outs=(TRAIN, TEST), metrics=(DATA_METRICS,))
def sample(ctx: StageContext) -> None:
    """Synthetic problems and slip-policy samples, CHAMP's model-written solutions, or a solutions file, by question."""
    d = ctx.params.data
    if d.source == "champ":
        champ, kept = read_champ(default_path(), d.champ_models, d.champ_settings, d.champ_max_chars, d.champ_problems)
        train, test, summary = split_file(
            as_solution_rows(champ), d.test_fraction, derive_seed(d.seed, "split"), grader=grade_champ
        )
        for record in train + test:
            record.update(model=champ[record["line"]].model, setting=champ[record["line"]].setting)
        summary.update(kept, source="champ", models=model_summary(champ), max_chars=d.champ_max_chars)
    elif d.solutions_path:
        rows = read_solutions(ctx.data_path(d.solutions_path))
        train, test, summary = split_file(rows, d.test_fraction, derive_seed(d.seed, "split"))
    elif ctx.params.policy.generator == "smollm2":
        train, test, summary = lm_samples(d, ctx.params.policy, ctx.cache_dir, ctx.project)
    else:
        policy = slip_policy(ctx.params)
        train, test, summary = sample_synthetic(
            d.train_questions, d.test_questions, d.samples, d.numbers, d.operand_max, d.cap, policy, d.seed
        )
    save_jsonl(train, ctx.path(TRAIN))
    save_jsonl(test, ctx.path(TEST))
    save_json(summary, ctx.path(DATA_METRICS))


# --------------------------------------------------------------------------------------------------
# §3.2 token labels: ORM (outcome), PRM (step correctness), TVM (prefix-shared expected outcome, Eq. 3)
# --------------------------------------------------------------------------------------------------
@stage(
    params=("verifier.kinds", "verifier.with_question", "verifier.backbone", "verifier.name_or_path"),
    deps=(TRAIN,),
    outs=(LABELS,),
    metrics=(LABEL_METRICS,),
    plots=(Plot(LABELS_PNG),),
)
def labels(ctx: StageContext) -> None:
    """Every training token's label under each label type; how far each is from the exact value V*."""
    records = load_jsonl(ctx.path(TRAIN))
    v = ctx.params.verifier  # the rows depend on the backbone's tokenizer alone
    tokenizer_only = Verifier(v.backbone, 0, cache_dir=ctx.cache_dir, name_or_path=v.name_or_path, root=ctx.project)
    enc = _encode(tokenizer_only, records, ctx.params.verifier.with_question)
    outcomes = [float(r["correct"]) for r in records]
    made = {
        "orm": lambda: outcome_labels(enc.ids, enc.prompts, outcomes),
        "tvm": lambda: token_value_labels(enc.ids, enc.prompts, outcomes, [r["question_id"] for r in records]),
        "prm": lambda: step_labels(enc.ids, enc.prompts, enc.line_ends, [r["line_correct"] for r in records]),
    }
    per_kind = {k: made[k]() for k in ctx.params.verifier.kinds}
    tensors = {
        "ids": torch.tensor([t for row in enc.ids for t in row]),
        "lengths": torch.tensor([len(row) for row in enc.ids]),
        "prompts": torch.tensor(enc.prompts),
    }
    tensors.update({k: torch.tensor(np.concatenate(v), dtype=torch.float32) for k, v in per_kind.items()})
    save_tensors(tensors, ctx.path(LABELS))
    summary: dict[str, float] = {
        "solutions": len(records),
        "tokens": int(sum(len(v) for v in per_kind[ctx.params.verifier.kinds[0]])),
    }
    if "line_values" in records[0]:  # synthetic: compare each label with V* at every step end
        for kind, values in per_kind.items():
            errors = [
                (lab[end - p] - v) ** 2
                for lab, p, ends, r in zip(values, enc.prompts, enc.line_ends, records)
                for end, v in zip(ends[:-1], r["line_values"][:-1])
            ]
            summary[f"{kind}/step_end_sq_error_vs_exact_value"] = float(np.mean(errors))
    save_json(summary, ctx.path(LABEL_METRICS))
    first = next((i for i, r in enumerate(records) if not r["correct"]), 0)  # a wrong solution if there is one
    plot_labels(records[first]["solution"], {k: v[first] for k, v in per_kind.items()}, ctx.path(LABELS_PNG))


# --------------------------------------------------------------------------------------------------
# §3.2 verifiers: value head on a tiny causal transformer, MSE on sigmoid values, one per label type
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "verifier"),
    deps=(LABELS,),
    outs=(MODELS,),
    fan_out="verifier.kinds",
    gpu=True,
    models={"verifier": MODELS},
)
def train(ctx: StageContext) -> None:
    """Train this item's verifier once per seed (same initial weights and batches across label types)."""
    v, kind = ctx.params.verifier, ctx.item
    ids, prompts, kinds = label_rows(ctx.path(LABELS))
    out, curves = ctx.item_dir(MODELS), {}
    for seed in ctx.params.seeds:
        verifier = _make_verifier(ctx, derive_seed(seed, "init"))
        cfg = TrainConfig(
            steps=v.steps,
            lr=v.lr,
            warmup_steps=v.warmup_steps,
            seed=derive_seed(seed, "batches"),
            device="auto",
            log_every=max(1, v.steps // 10),
            progress=ctx.progress,
            desc=f"tvm {kind} s{seed}",
        )
        result = verifier.train(
            Encoded(ids, prompts, []),
            kinds[kind],
            cfg,
            v.batch_size,
            callback=ctx.metric_callback(f"train/{kind}/s{seed}"),
        )
        save_tensors(
            verifier.state(),
            out / f"s{seed}.safetensors",
            metadata={
                "kind": kind,
                "seed": str(seed),
                "model.class": "components.llm.value_head:ValueHeadModel",
                "backbone": v.name_or_path or v.backbone,
            },
        )
        curves[f"s{seed}"] = {"final_loss": result.final_loss}  # wall time: MLflow only
    save_json({"kind": kind, "runs": curves}, out / "results.json")


# --------------------------------------------------------------------------------------------------
# §4 search on held-out questions: single sample, majority vote, Best-of-N, step beam search; prefix scores
# --------------------------------------------------------------------------------------------------
def _verifier(ctx: StageContext, kind: str, seed: int) -> Verifier:
    verifier = _make_verifier(ctx, derive_seed(seed, "init"))
    verifier.load_state(load_tensors(ctx.path(f"{MODELS}{kind}/s{seed}.safetensors")))
    return verifier


@stage(
    params=("seeds", "data", "policy", "verifier", "search"),
    deps=(TEST, MODELS),
    outs=(SEARCH, PREFIX_AUC),
    metrics=(SEARCH_METRICS,),
    plots=(Plot(ACC_PNG), Plot(ACC_CSV, x="tokens", y="accuracy", title="accuracy vs generated tokens per question")),
)
def search(ctx: StageContext) -> None:
    """Every method and verifier on every seed; prefix-score AUCs at step ends."""
    p = ctx.params
    records = load_jsonl(ctx.path(TEST))
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(int(r["question_id"]), []).append(i)
    qs = [groups[q] for q in sorted(groups)]
    synthetic = "ops" in records[0]
    problems = [problem_of(records[g[0]]) for g in qs] if synthetic else []
    correct = np.array([bool(r["correct"]) for r in records])
    length = np.array([len(r["solution"]) + 1 for r in records], dtype=float)
    tokens_all = float(np.mean([length[g].sum() for g in qs]))
    voted = [majority_vote([answer_key(records[i]["predicted"]) for i in g]) for g in qs]
    grader = grade_champ if p.data.source == "champ" else grade
    majority = [float(grader(v, records[g[0]]["answer"])) for v, g in zip(voted, qs)]
    # CHAMP lists a question's solutions by prompt setting: a single sample is any of them (their mean accuracy)
    single = [float(correct[g].mean() if p.data.source == "champ" else correct[g[0]]) for g in qs]
    pass_at_n = [float(correct[g].any()) for g in qs]

    def scored(per_question: list[float], **row: Any) -> dict[str, Any]:
        return {**row, "accuracy": float(np.mean(per_question)), QUESTION_CORRECT: per_question}

    rows, aucs = [], []
    for seed in p.seeds:
        rows += [
            scored(
                single, seed=seed, method="single", verifier="none", tokens=float(np.mean([length[g[0]] for g in qs]))
            ),
            scored(majority, seed=seed, method="majority", verifier="none", tokens=tokens_all),
        ]
        if synthetic:
            policy = slip_policy(p)
            oracle = lambda pairs: np.array([prefix_value(problems[q], s, policy) for q, s in pairs])  # noqa: E731
            rows += [
                scored(pass_at_n, seed=seed, method="best_of_n", verifier="oracle", tokens=tokens_all),
                {"seed": seed, "method": "beam", "verifier": "oracle", **beam_accuracy(p, problems, oracle, seed)},
            ]
        elif p.data.source == "champ":  # pass@N: the ceiling of any re-ranking
            rows.append(scored(pass_at_n, seed=seed, method="best_of_n", verifier="oracle", tokens=tokens_all))
        for kind in p.verifier.kinds:
            verifier = _verifier(ctx, kind, seed)
            enc = verifier.encode([(r["question"], r["solution"]) for r in records], p.verifier.with_question)
            values = verifier.values_at(enc.ids, enc.line_ends)
            final = [v[-1] for v in values]
            chosen = [best_of_n([final[i] for i in g], g) for g in qs]
            rows.append(
                scored(
                    [float(c) for c in correct[chosen]], seed=seed, method="best_of_n", verifier=kind, tokens=tokens_all
                )
            )
            if synthetic:

                def score(pairs, verifier=verifier):
                    e = verifier.encode([(problems[q].question, s.text()) for q, s in pairs], p.verifier.with_question)
                    return verifier.last_values(e.ids)

                rows.append(
                    {"seed": seed, "method": "beam", "verifier": kind, **beam_accuracy(p, problems, score, seed)}
                )
            aucs.append({"seed": seed, "verifier": kind, **prefix_aucs(records, values)})
    save_table(rows, ctx.path(SEARCH))
    save_table(aucs, ctx.path(PREFIX_AUC))
    save_json(
        {f"{r['method']}/{r['verifier']}/s{r['seed']}/accuracy": r["accuracy"] for r in rows}, ctx.path(SEARCH_METRICS)
    )
    plot_accuracy_vs_tokens(rows, ctx.path(ACC_PNG), ctx.path(ACC_CSV))


PIPELINE = Pipeline(
    paper=ABOUT, params_model=TvmParams, stages=(sample, labels, train, search), report="pipelines.tvm.report:report"
)
