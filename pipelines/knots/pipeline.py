"""KnOTS: model merging with SVD to tie the KnOTS (arXiv 2410.19735).

The paper's per-task normalised-accuracy table (TA, TIES, DARE-TIES against their KnOTS versions, plus the
joint setting) at CPU scale:

* tasks are different datasets with their own label spaces (MNIST, Fashion-MNIST, Animal-MNIST, sklearn
  digits at 28x28), each on its classes 0..k-1; the encoder (CLIP's stand-in) is a small ViT pretrained on
  the *other* classes of those datasets, or the packaged DINOv2-style ViT-S/14 (``base.encoder``);
* one LoRA (peft, q/k/v/out_proj) per task with its own frozen linear head, as CLIP's heads are (§4.1);
* KnOTS (§3): per layer the thin SVD ``[dW_1 | ... | dW_n] = U S V^T`` gives ``R_i = S V_i^T`` with
  ``dW_i = U R_i``; the R_i of all layers are flattened, merged (TA / TIES / DARE-TIES), mapped back by U;
* lambda (and top-K) chosen on validation; test accuracy normalised by each task's own LoRA model.

On CPU every stage computes on one torch intra-op thread whatever ``PAPERFLOWS_TORCH_THREADS`` says, so
the numbers do not depend on the thread count.
"""

from __future__ import annotations

import torch
from torch import nn

from components.data.images import class_disjoint_split, load_pooled
from components.io import load_json, load_tensors, save_json, save_model, save_table, save_tensors
from components.merging import MergeConfig, alignment_diagnostics, knots_space, original_space
from components.metrics.classification import mean_normalized_accuracy
from components.models.lora import apply_deltas, group_factors_by_layer, load_factors, lora_factors, save_factors
from components.models.peft_io import save_peft_adapter
from components.models.pretrained_vit import ViTS14Config, load_vit_s14
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches, select_device
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from paperflows.rows import mean, values
from pipelines.knots import ABOUT, plots, tasks
from pipelines.knots.params import KnotsParams
from pipelines.knots.tasks import IMAGE_SIZE, compute_threads, make_encoder, merge_grid, task_accuracies, train_task

SPLITS = ("train", "val", "test")
# artifacts, each named once
TASK_DATA = "data/tasks.safetensors"
BASE_MODELS = "models/base/"
LORAS = "models/lora/"
SINGLE_FILE = "single_task.json"  # each finetune item's accuracies, beside its LoRA files
PEFT_DIR = "peft"  # models/lora/<task>/peft/seed<s>/: each LoRA as a peft adapter folder
SINGLE_TASK = "metrics/single_task.json"
MERGE_METRICS = "metrics/merge.json"
MERGE_GRID = "tables/merge_grid.parquet"
MERGE_TEST = "tables/merge_test.parquet"
SEARCH_PNG, SEARCH_CSV = "plots/lambda_search.png", "plots/lambda_search.csv"


# --------------------------------------------------------------------------------------------------
# stage 1: task datasets, and the disjoint pretraining pool
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(TASK_DATA,))
def prepare(ctx: StageContext) -> None:
    """Per dataset: classes 0..k-1 are its task (train/val/test); the other classes go to the pretraining pool."""
    data = ctx.params.data
    tensors, pool_x, pool_y, offset = {}, [], [], 0
    for task in data.tasks:
        images, labels = load_pooled(task, IMAGE_SIZE)
        parts = class_disjoint_split(
            images,
            labels,
            list(range(data.task_classes)),
            n_train=data.max_train,
            n_val=data.n_val,
            n_test=data.n_test,
            n_rest=data.pretrain_per_dataset,
            seed=derive_seed(data.split_seed, "split", task),
        )
        for split in SPLITS:
            tensors[f"{task}/{split}/x"], tensors[f"{task}/{split}/y"] = parts[split]
        pool_x.append(parts["rest"][0])
        pool_y.append(parts["rest"][1] + offset)  # one pretraining class per (dataset, held-out class)
        offset += 10 - data.task_classes
    tensors["pretrain/x"], tensors["pretrain/y"] = torch.cat(pool_x), torch.cat(pool_y)
    save_tensors(tensors, ctx.path(TASK_DATA))


# --------------------------------------------------------------------------------------------------
# stage 2: the pretrained encoder (stands in for CLIP's image encoder)
# --------------------------------------------------------------------------------------------------
BASE_FILE = f"{BASE_MODELS}encoder.safetensors"


@stage(
    params=("base", "data.tasks", "data.task_classes"),
    deps=(TASK_DATA,),
    outs=(BASE_MODELS,),
    gpu=True,
    models={"encoder": BASE_MODELS},
)
def pretrain(ctx: StageContext) -> None:
    """tiny: pretrain the encoder on the held-out classes; vit_s14: convert the packaged weights.
    One encoder serves every seed, as one CLIP serves every run in the paper."""
    p = ctx.params
    if p.base.encoder == "vit_s14":
        save_model(load_vit_s14(ViTS14Config(input_size=p.base.input_size)), ctx.path(BASE_FILE))
        return
    data = load_tensors(ctx.path(TASK_DATA))
    model = make_encoder(p)
    cfg = TrainConfig(
        steps=p.base.steps,
        lr=p.base.lr,
        seed=p.base.seed,
        log_every=max(1, p.base.steps // 30),
        progress=ctx.progress,
        desc="knots pretrain",
    )
    with compute_threads(select_device(cfg.device)):
        fit(
            model,
            cross_entropy_loss,
            random_batches(data["pretrain/x"], data["pretrain/y"], size=p.base.batch_size),
            cfg,
            callback=ctx.metric_callback("pretrain"),
        )
    save_model(model, ctx.path(BASE_FILE))


def _load_base(ctx: StageContext) -> nn.Module:
    model = make_encoder(ctx.params)
    model.load_state_dict(load_tensors(ctx.path(BASE_FILE)))
    return model.eval()


# --------------------------------------------------------------------------------------------------
# stage 3: one LoRA per task (§4.1), a fan-out stage: one item per task
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data.tasks", "data.task_classes", "base", "lora"),  # lora.adapters_path: read, not trained
    deps=(TASK_DATA, BASE_MODELS),
    outs=(LORAS,),
    fan_out="data.tasks",
    gpu=True,
    models={"lora": LORAS},
)
def finetune(ctx: StageContext) -> None:
    """One task's LoRA for every seed: fit the task's frozen head, then its LoRA; single-task accuracies."""
    p, task = ctx.params, ctx.item
    data, out, single = load_tensors(ctx.path(TASK_DATA)), ctx.item_dir(LORAS), {}
    device, base = select_device("auto"), _load_base(ctx)
    adapter = tasks.user_adapter(ctx.data_path(p.lora.adapters_path) / task, base) if p.lora.adapters_path else None
    for seed in p.seeds:
        task_seed = derive_seed(seed, "task", task)  # from (seed, task) alone: a LoRA ignores the other tasks
        with compute_threads(device):
            if adapter is None:
                model, head, scores = train_task(
                    p, base, data, task, task_seed, device, ctx.progress, ctx.metric_callback(f"lora/{task}/seed{seed}")
                )
                factors = {name.removeprefix("encoder."): f for name, f in lora_factors(model.cpu()).items()}
            else:  # the user's LoRA replaces training; the head is still this seed's probe
                head, scores = tasks.adapted_task(p, base, data, task, task_seed, adapter, device)
                factors = adapter
        single.update({f"seed{seed}/{split}": value for split, value in scores.items()})
        save_factors(factors, out / f"seed{seed}.safetensors")
        save_peft_adapter(factors, out / PEFT_DIR / f"seed{seed}", dropout=p.lora.dropout if adapter is None else 0.0)
        save_tensors({"weight": head.weight, "bias": head.bias}, out / f"seed{seed}_head.safetensors")
    save_json(single, out / SINGLE_FILE)
    ctx.log_metrics({f"lora/{task}/{key}_acc": value for key, value in single.items()})


def _single_task_accuracies(ctx: StageContext) -> dict[str, float]:
    """``seed<s>/<task>/<split>`` accuracies of every task's own LoRA, gathered from the items' files."""
    single: dict[str, float] = {}
    for task in ctx.params.data.tasks:
        path = ctx.path(f"{LORAS}{task}/{SINGLE_FILE}")
        if not path.is_file():
            raise StageInputError(
                f"knots.{ctx.stage.name}: {path} is missing; the finetune item '{task}' "
                f"did not finish (run `paperflows stage knots finetune`)"
            )
        single.update(
            {f"{key.split('/')[0]}/{task}/{key.split('/', 1)[1]}": value for key, value in load_json(path).items()}
        )
    return single


def _load_loras(ctx: StageContext, seed: int, tasks: list[str]) -> tuple[list, dict[str, nn.Linear]]:
    """Each task's LoRA factors and frozen head for one seed, as the finetune items wrote them."""
    factors, heads = [], {}
    for task in tasks:
        factors.append(load_factors(ctx.path(f"{LORAS}{task}/seed{seed}.safetensors")))
        w = load_tensors(ctx.path(f"{LORAS}{task}/seed{seed}_head.safetensors"))
        heads[task] = nn.Linear(w["weight"].shape[1], w["weight"].shape[0])
        heads[task].load_state_dict(w)
    return factors, heads


# --------------------------------------------------------------------------------------------------
# stage 4: merge and search lambda / top-K on validation (§3, §4)
# --------------------------------------------------------------------------------------------------
def method_mean(rows: list[dict], method: str, key: str = "avg_norm_acc") -> float:
    """The mean over seeds of ``key`` of ``method``'s rows."""
    return mean(values(rows, key, method=method))


@stage(
    params=("seeds", "data.tasks", "data.task_classes", "base", "merge"),
    deps=(TASK_DATA, BASE_MODELS, LORAS),
    outs=(MERGE_GRID, MERGE_TEST),
    metrics=(MERGE_METRICS, SINGLE_TASK),
    plots=(
        Plot(SEARCH_PNG),
        Plot(
            SEARCH_CSV, x="lambda", y="knots_ties", title="validation avg normalised accuracy of KnOTS-TIES vs lambda"
        ),
    ),
)
def merge(ctx: StageContext) -> None:
    """Merge the task LoRAs with every method, choose lambda/top-K on validation, score on test."""
    p = ctx.params
    single = _single_task_accuracies(ctx)  # first: a missing item fails before any work
    save_json(single, ctx.path(SINGLE_TASK))
    data, tasks, device = load_tensors(ctx.path(TASK_DATA)), p.data.tasks, select_device("auto")
    grid_rows, test_rows, checks = [], [], {}
    base = _load_base(ctx)
    for seed in p.seeds:
        per_task, heads = _load_loras(ctx, seed, tasks)
        layer_factors, scale = group_factors_by_layer(per_task)
        spaces = {"original": original_space(layer_factors, scale), "knots": knots_space(layer_factors, scale)}
        single_val = {t: single[f"seed{seed}/{t}/val"] for t in tasks}
        single_test = {t: single[f"seed{seed}/{t}/test"] for t in tasks}

        def evaluate(space, merger: str, cfg: MergeConfig, split: str) -> tuple[dict[str, float], float]:
            deltas = space.merge(merger, cfg, torch.Generator().manual_seed(seed))
            return task_accuracies(apply_deltas(base, deltas).eval(), heads, data, tasks, split, device)

        for method in p.merge.methods:
            space = spaces["knots" if method.startswith("knots_") else "original"]
            merger = method.removeprefix("knots_")
            best = None
            for cfg in merge_grid(method, p.merge):
                with compute_threads(device):
                    acc, joint = evaluate(space, merger, cfg, "val")
                norm = mean_normalized_accuracy(acc, single_val)
                grid_rows.append(
                    {
                        "seed": seed,
                        "method": method,
                        "lam": cfg.lam,
                        "top_k": cfg.top_k,
                        "val_norm_acc": norm,
                        "val_joint_acc": 100 * joint,
                    }
                )
                if best is None or norm > best[0]:
                    best = (norm, cfg)
            cfg = best[1]
            with compute_threads(device):
                acc, joint = evaluate(space, merger, cfg, "test")
            row = {
                "seed": seed,
                "method": method,
                "lam": cfg.lam,
                "top_k": cfg.top_k,
                "avg_norm_acc": mean_normalized_accuracy(acc, single_test),
                "joint_acc": 100 * joint,
            }
            row.update({f"{t}_norm_acc": 100 * acc[t] / single_test[t] for t in tasks})
            row.update({f"{t}_acc": 100 * acc[t] for t in tasks})
            test_rows.append(row)
            ctx.log_metrics({f"merge/{method}/avg_norm_acc": row["avg_norm_acc"]}, step=seed)
        # invariants measured on the real LoRAs: KnOTS-TA == TA; alignment scores before / after
        checks.update(
            {
                f"seed{seed}/{k}": v
                for k, v in alignment_diagnostics(spaces["original"], spaces["knots"], layer_factors, scale).items()
            }
        )
    save_table(grid_rows, ctx.path(MERGE_GRID))
    save_table(test_rows, ctx.path(MERGE_TEST))
    summary = {f"{m}/avg_norm_acc": method_mean(test_rows, m) for m in p.merge.methods}
    save_json({**summary, **checks}, ctx.path(MERGE_METRICS))
    plots.lambda_search(grid_rows, p.merge.methods, p.merge.lambdas, ctx.path(SEARCH_PNG), ctx.path(SEARCH_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=KnotsParams,
    stages=(prepare, pretrain, finetune, merge),
    report="pipelines.knots.report:report",
)
