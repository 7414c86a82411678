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

import contextlib
import itertools

import torch
from torch import Tensor, nn

from components.data.images import class_disjoint_split, load_pooled
from components.io import load_json, load_tensors, save_json, save_model, save_table, save_tensors
from components.merging import MergeConfig, alignment_diagnostics, knots_space, original_space
from components.metrics.classification import accuracy, joint_accuracy, mean_normalized_accuracy
from components.models.lora import (
    LoraSpec,
    apply_deltas,
    attach_lora,
    group_factors_by_layer,
    load_factors,
    lora_factors,
    save_factors,
)
from components.models.pretrained_vit import ViTS14, ViTS14Config, load_vit_s14
from components.models.vit import TinyViT, TinyViTConfig
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches, select_device, torch_threads
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from paperflows.rows import mean, values
from pipelines.knots import ABOUT, plots
from pipelines.knots.params import KnotsParams, MergeParams

SPLITS = ("train", "val", "test")
IMAGE_SIZE = 28
# artifacts, each named once
TASK_DATA = "data/tasks.safetensors"
BASE_MODELS = "models/base/"
LORAS = "models/lora/"
SINGLE_FILE = "single_task.json"  # each finetune item's accuracies, beside its LoRA files
SINGLE_TASK = "metrics/single_task.json"
MERGE_METRICS = "metrics/merge.json"
MERGE_GRID = "tables/merge_grid.parquet"
MERGE_TEST = "tables/merge_test.parquet"
SEARCH_PNG, SEARCH_CSV = "plots/lambda_search.png", "plots/lambda_search.csv"


def _compute_threads(device: torch.device):
    """One intra-op thread on CPU (a fixed reduction order: results independent of the thread setting)."""
    return torch_threads(1) if device.type == "cpu" else contextlib.nullcontext()


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
def _encoder(p: KnotsParams) -> nn.Module:
    if p.base.encoder == "vit_s14":
        return ViTS14(ViTS14Config(input_size=p.base.input_size))
    return TinyViT(
        TinyViTConfig(
            image_size=IMAGE_SIZE,
            patch_size=7,
            d_model=p.base.d_model,
            n_heads=p.base.n_heads,
            n_layers=p.base.n_layers,
            n_classes=len(p.data.tasks) * (10 - p.data.task_classes),
        ),
        seed=p.base.seed,
    )


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
    model = _encoder(p)
    cfg = TrainConfig(
        steps=p.base.steps,
        lr=p.base.lr,
        seed=p.base.seed,
        log_every=max(1, p.base.steps // 30),
        progress=ctx.progress,
        desc="knots pretrain",
    )
    with _compute_threads(select_device(cfg.device)):
        fit(
            model,
            cross_entropy_loss,
            random_batches(data["pretrain/x"], data["pretrain/y"], size=p.base.batch_size),
            cfg,
            callback=ctx.metric_callback("pretrain"),
        )
    save_model(model, ctx.path(BASE_FILE))


def _load_base(ctx: StageContext) -> nn.Module:
    model = _encoder(ctx.params)
    model.load_state_dict(load_tensors(ctx.path(BASE_FILE)))
    return model.eval()


def _features(encoder: nn.Module, x: Tensor, device: torch.device, batch: int = 1024) -> Tensor:
    """encoder.features over x in batches on ``device``; [N, d] on the CPU."""
    encoder = encoder.to(device)
    with torch.no_grad():
        return torch.cat([encoder.features(x[i : i + batch].to(device)).cpu() for i in range(0, len(x), batch)])


class _WithHead(nn.Module):
    """Encoder features followed by a task's frozen linear head."""

    def __init__(self, encoder: nn.Module, head: nn.Linear):
        super().__init__()
        self.encoder, self.task_head = encoder, head

    def forward(self, x: Tensor) -> Tensor:
        return self.task_head(self.encoder.features(x))


# --------------------------------------------------------------------------------------------------
# stage 3: one LoRA per task (§4.1), a fan-out stage: one item per task
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data.tasks", "data.task_classes", "base", "lora"),
    deps=(TASK_DATA, BASE_MODELS),
    outs=(LORAS,),
    fan_out="data.tasks",
    gpu=True,
    models={"lora": LORAS},
)
def finetune(ctx: StageContext) -> None:
    """One task's LoRA for every seed: fit the task's frozen head, then its LoRA; single-task accuracies."""
    p, task = ctx.params, ctx.item
    data = load_tensors(ctx.path(TASK_DATA))
    spec = LoraSpec(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout)
    out = ctx.item_dir(LORAS)
    single: dict[str, float] = {}
    x, y = data[f"{task}/train/x"], data[f"{task}/train/y"]
    device, base = select_device("auto"), _load_base(ctx)
    with _compute_threads(device):
        feats = _features(base, x, device)
    for seed in p.seeds:
        task_seed = derive_seed(seed, "task", task)  # from (seed, task) alone: a LoRA ignores the other tasks
        with _compute_threads(device):
            # the task head: a short linear probe on the frozen base features, then frozen (like CLIP heads)
            torch.manual_seed(task_seed)
            head = nn.Linear(feats.shape[1], p.data.task_classes)
            fit(
                nn.Sequential(head),
                cross_entropy_loss,
                random_batches(feats, y, size=256),
                TrainConfig(steps=p.lora.head_steps, lr=p.lora.head_lr, seed=task_seed, progress=False, log_every=50),
            )
            head.requires_grad_(False)
            model = attach_lora(_WithHead(base.cpu(), head), spec, seed=task_seed)
            cfg = TrainConfig(
                steps=p.lora.steps,
                lr=p.lora.lr,
                seed=task_seed,
                progress=ctx.progress,
                log_every=max(1, p.lora.steps // 30),
                desc=f"knots lora {task} seed {seed}",
            )
            fit(
                model,
                cross_entropy_loss,
                random_batches(x, y, size=p.lora.batch_size),
                cfg,
                callback=ctx.metric_callback(f"lora/{task}/seed{seed}"),
            )
            model.eval()
            tuned = model.get_base_model().encoder
            for split in ("val", "test"):
                logits = head(_features(tuned, data[f"{task}/{split}/x"], device))
                single[f"seed{seed}/{split}"] = accuracy(logits, data[f"{task}/{split}/y"])
            single[f"seed{seed}/zero_shot_test"] = accuracy(
                head(_features(base, data[f"{task}/test/x"], device)), data[f"{task}/test/y"]
            )
        save_factors(
            {name.removeprefix("encoder."): f for name, f in lora_factors(model.cpu()).items()},
            out / f"seed{seed}.safetensors",
        )
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
def _grid(method: str, merge: MergeParams) -> list[MergeConfig]:
    if method.endswith("ta"):
        return [MergeConfig(lam=lam, merge="sum") for lam in merge.lambdas]
    p = merge.dare_p if "dare" in method else 0.0
    return [
        MergeConfig(lam=lam, top_k=k, dare_p=p, merge="mean")
        for lam, k in itertools.product(merge.lambdas, merge.top_ks)
    ]


def method_mean(rows: list[dict], method: str, key: str = "avg_norm_acc") -> float:
    """The mean over seeds of ``key`` of ``method``'s rows."""
    return mean(values(rows, key, method=method))


def _task_accuracies(
    encoder: nn.Module,
    heads: dict[str, nn.Linear],
    data: dict[str, Tensor],
    tasks: list[str],
    split: str,
    device: torch.device,
) -> tuple[dict[str, float], float]:
    """Per-task accuracy with each task's own head, and joint accuracy over the union of all classes."""
    per_task, all_logits, ids, labels = {}, [], [], []
    with torch.no_grad():
        for t, task in enumerate(tasks):
            feats = _features(encoder, data[f"{task}/{split}/x"], device)
            per_task[task] = accuracy(heads[task](feats), data[f"{task}/{split}/y"])
            all_logits.append([heads[name](feats) for name in tasks])
            ids.append(torch.full((feats.shape[0],), t))
            labels.append(data[f"{task}/{split}/y"])
    joint = joint_accuracy(
        [torch.cat([rows[h] for rows in all_logits]) for h in range(len(tasks))], torch.cat(ids), torch.cat(labels)
    )
    return per_task, joint


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
            return _task_accuracies(apply_deltas(base, deltas).eval(), heads, data, tasks, split, device)

        for method in p.merge.methods:
            space = spaces["knots" if method.startswith("knots_") else "original"]
            merger = method.removeprefix("knots_")
            best = None
            for cfg in _grid(method, p.merge):
                with _compute_threads(device):
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
            with _compute_threads(device):
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
