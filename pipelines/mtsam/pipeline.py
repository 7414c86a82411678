"""MTSAM: multi-task fine-tuning of a frozen foundation model with ToRA (arXiv 2403.10971, ICLR 2025).

Reproduces, at CPU scale, the NYUv2 multi-task table (segmentation mIoU / pixel accuracy, depth absolute /
relative error, normal mean / median angle and % within 11.25 / 22.5 / 30 degrees, Δm against single-task
baselines) with a trainable-parameter column:

1. **scenes** (the data): procedurally rendered indoor scenes with exact segmentation, depth and normals (or
   NYUv2 in the MTAN ``.npy`` layout from ``data.nyuv2_path``), in NYUv2's array layout;
2. **encode**: the frozen foundation model, the pretrained ViT-S/14 (SAM is not available offline); its
   first blocks run once (a cache of their output tokens), the last ``model.adapt_blocks`` are the
   adapted tail;
3. **train** (the method, one item per method): MTSAM's task-specific no-mask embeddings and one SAM-style
   decoder per task on the tail's patch tokens, trained with the weighted task losses by decoders only,
   single-task fine-tuning, LoRA per task, one shared LoRA, or ToRA (Tucker update with G = 0 at init,
   task rows in U3, orthogonality regulariser); every model on every seed, scored on the test set;
4. **report**: the paper-shaped table, Δm / Δp against the single-task baseline, the claims and checks.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from components.data.nyuv2 import NYUV2_CLASSES, read_nyuv2, subsample
from components.data.scenes import SCENE_CLASSES, SceneConfig, render_scenes
from components.io import load_tensors, save_json, save_table, save_tensors
from components.models.dense_methods import MethodConfig, build_learners, dense_scores, predict_all, update_norms
from components.models.lora import LoraSpec, lora_factors, save_factors
from components.models.multitask_dense import TASKS, DenseConfig, MultiTaskDense
from components.models.pretrained_vit import ViTS14, ViTS14Config, load_vit_s14
from components.models.sam_decoder import DecoderConfig
from components.models.tora import ToraSpec, use_task
from components.training import TrainConfig, fit, random_batches, torch_threads
from paperflows import Pipeline, StageContext, StageInputError, derive_seed, stage
from pipelines.mtsam import ABOUT
from pipelines.mtsam.params import MtsamParams

SPLITS = ("train", "test")
SCENES, SCENE_METRICS = "data/scenes.safetensors", "metrics/scenes.json"
PREFIX, TAIL = "data/prefix.safetensors", "models/encoder/tail.safetensors"
ENCODE_TIMES = "timings/encode.json"
RUNS = "methods/"
SCORES, CURVES = "tables/scores.parquet", "tables/curves.parquet"
CURVES_PNG, CURVES_CSV = "plots/training_curves.png", "plots/training_curves.csv"
EXAMPLES_PNG, DELTA_PNG, DELTA_CSV = "plots/example_predictions.png", "plots/delta_m.png", "plots/delta_m.csv"


def n_classes(p: MtsamParams) -> int:
    return NYUV2_CLASSES if p.data.nyuv2_path else len(SCENE_CLASSES)


# --------------------------------------------------------------------------------------------------
# 1. scenes: images [N, 3, S, S] and labels [N, h, w], depth [N, 1, h, w], normals [N, 3, h, w]
# --------------------------------------------------------------------------------------------------
def _nyuv2(ctx: StageContext, split: str, limit: int) -> dict[str, torch.Tensor]:
    d, size = ctx.params.data, ctx.params.model.input_size
    items: dict[str, list[torch.Tensor]] = {k: [] for k in ("image", "label", "depth", "normal")}
    try:
        for _, item in read_nyuv2(ctx.data_path(d.nyuv2_path), "val" if split == "test" else "train", limit):
            image = torch.from_numpy(item["image"]).permute(2, 0, 1)[None]
            items["image"].append(F.interpolate(image, size=(size, size), mode="bilinear", align_corners=False)[0])
            for kind in ("label", "depth", "normal"):  # exact values: subsampled, never interpolated
                items[kind].append(torch.from_numpy(subsample(item[kind], d.nyuv2_label_stride)))
    except ValueError as err:
        raise StageInputError(f"mtsam.data.nyuv2_path: {err}") from None
    out = {k: torch.stack(v) for k, v in items.items()}
    return {
        "image": out["image"],
        "label": out["label"],
        "depth": out["depth"].permute(0, 3, 1, 2).contiguous(),
        "normal": out["normal"].permute(0, 3, 1, 2).contiguous(),
    }


def _rendered(ctx: StageContext, split: str, n: int) -> dict[str, torch.Tensor]:
    d = ctx.params.data
    arrays = render_scenes(
        n,
        ctx.params.model.input_size,
        d.label_size,
        derive_seed(d.seed, "scenes", split),
        SceneConfig(window_prob=d.window_prob),
    )
    nhwc = {k: torch.from_numpy(v) for k, v in arrays.items()}
    return {
        "image": nhwc["image"].permute(0, 3, 1, 2).contiguous(),
        "label": nhwc["label"],
        "depth": nhwc["depth"].permute(0, 3, 1, 2).contiguous(),
        "normal": nhwc["normal"].permute(0, 3, 1, 2).contiguous(),
    }


@stage(params=("data", "model.input_size"), outs=(SCENES,), metrics=(SCENE_METRICS,))
def scenes(ctx: StageContext) -> None:
    """Render the scenes (or read NYUv2), in NYUv2's layout; the metrics describe the label statistics."""
    d, tensors, stats = ctx.params.data, {}, {"source": "nyuv2" if ctx.params.data.nyuv2_path else "rendered"}
    for split, n in zip(SPLITS, (d.n_train, d.n_test)):
        part = _nyuv2(ctx, split, n) if d.nyuv2_path else _rendered(ctx, split, n)
        tensors.update({f"{split}/{k}": v for k, v in part.items()})
        label = part["label"]
        stats.update(
            {
                f"{split}/images": len(label),
                f"{split}/unlabelled_share": float((label < 0).float().mean()),
                f"{split}/depth_valid_share": float((part["depth"] != 0).float().mean()),
            }
        )
        stats.update(
            {f"{split}/class_share/{c}": float((label == c).float().mean()) for c in range(n_classes(ctx.params))}
        )
    stats["label_size"] = list(tensors["train/label"].shape[1:])
    stats.update(_trivial(tensors))
    save_tensors(tensors, ctx.path(SCENES))
    save_json(stats, ctx.path(SCENE_METRICS))


def _trivial(t: dict[str, torch.Tensor]) -> dict[str, float]:
    """Test scores of predictors that ignore the image: the training majority class and mean depth."""
    train_label, test_label = t["train/label"], t["test/label"]
    majority = int(torch.bincount(train_label[train_label >= 0]).argmax())
    mean_depth = t["train/depth"][t["train/depth"] != 0].mean()
    test_depth = t["test/depth"][t["test/depth"] != 0]
    return {
        "trivial/pix_acc": 100 * float((test_label[test_label >= 0] == majority).float().mean()),
        "trivial/abs_err": float((test_depth - mean_depth).abs().mean()),
    }


# --------------------------------------------------------------------------------------------------
# 2. encode: the frozen foundation model's prefix, once; the weights of the adapted tail
# --------------------------------------------------------------------------------------------------
def _encoder(p: MtsamParams, pretrained: bool = False) -> ViTS14:
    if p.model.encoder == "tiny":
        return ViTS14(ViTS14Config(input_size=p.model.input_size, d_model=32, n_heads=2, n_layers=2, mlp_hidden=64))
    cfg = ViTS14Config(input_size=p.model.input_size)
    return load_vit_s14(cfg) if pretrained else ViTS14(cfg)


def _start(p: MtsamParams) -> int:
    return (2 if p.model.encoder == "tiny" else 12) - p.model.adapt_blocks


@stage(
    params=("model.encoder", "model.input_size", "model.adapt_blocks"),
    deps=(SCENES,),
    outs=(PREFIX, TAIL),
    timings=(ENCODE_TIMES,),
)
def encode(ctx: StageContext) -> None:
    """Tokens after the frozen blocks [0, start) for every image, and the tail's pretrained weights."""
    p, data = ctx.params, load_tensors(ctx.path(SCENES))
    encoder, start = _encoder(p, pretrained=True).eval(), _start(p)
    seconds = {}
    with torch.no_grad():
        for split in SPLITS:
            images, began = data[f"{split}/image"], time.perf_counter()
            chunks = [encoder.hidden(images[i : i + 64], start) for i in range(0, len(images), 64)]
            seconds[f"{split}_seconds_per_image"] = (time.perf_counter() - began) / max(len(images), 1)
            data[f"{split}/prefix"] = torch.cat(chunks)
    save_tensors({f"{s}/prefix": data[f"{s}/prefix"] for s in SPLITS}, ctx.path(PREFIX))
    tail = {
        k: v
        for k, v in encoder.state_dict().items()
        if k.startswith("norm.") or (k.startswith("blocks.") and int(k.split(".")[1]) >= start)
    }
    save_tensors(tail, ctx.path(TAIL))
    save_json(
        {**seconds, "start_block": start, "prefix_tokens": list(data["train/prefix"].shape[1:])}, ctx.path(ENCODE_TIMES)
    )


# --------------------------------------------------------------------------------------------------
# 3. train: one item per method, every seed; scored on the test set
# --------------------------------------------------------------------------------------------------
def _dense_model(ctx: StageContext, seed: int) -> MultiTaskDense:
    """The tail (pretrained weights) with task decoders initialised from ``seed``."""
    p = ctx.params
    encoder = _encoder(p)
    missing, unexpected = encoder.load_state_dict(load_tensors(ctx.path(TAIL)), strict=False)
    if unexpected or any(
        k.startswith("norm.") or int(k.split(".")[1]) >= _start(p)
        for k in missing
        if k.startswith(("blocks.", "norm."))
    ):
        raise StageInputError(f"mtsam.train: {ctx.path(TAIL)} does not hold the tail of this encoder; rerun encode")
    labels = load_tensors(ctx.path(SCENES))["train/label"]
    decoder = DecoderConfig(p.model.decoder_dim, p.model.decoder_depth, p.model.decoder_heads, p.model.decoder_mlp)
    cfg = DenseConfig(n_classes=n_classes(p), out_size=tuple(labels.shape[1:]), start=_start(p), decoder=decoder)
    return MultiTaskDense(encoder, cfg, seed=seed)


def _method_config(p: MtsamParams) -> MethodConfig:
    return MethodConfig(
        lora=LoraSpec(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout, targets=("q_proj", "k_proj", "v_proj")),
        tora=ToraSpec(
            ranks=(p.tora.r1, p.tora.r2, p.tora.r3),
            n_tasks=len(TASKS),
            scaling=p.tora.scaling,
            dropout=p.tora.dropout,
            init=p.tora.init,
        ),
        tora_lambda=p.tora.lam,
    )


@stage(
    params=("seeds", "data.nyuv2_path", "model", "train", "tora", "lora"),
    deps=(SCENES, PREFIX, TAIL),
    outs=(RUNS,),
    fan_out="train.methods",
    gpu=True,
    models={"adapters": RUNS},
)
def train(ctx: StageContext) -> None:
    """One method on every seed: build its learners, train each with the weighted task losses, score them."""
    p, method, out = ctx.params, ctx.item, ctx.item_dir(RUNS)
    data, prefix = load_tensors(ctx.path(SCENES)), load_tensors(ctx.path(PREFIX))
    target = {
        split: {"seg": data[f"{split}/label"], "depth": data[f"{split}/depth"], "normal": data[f"{split}/normal"]}
        for split in SPLITS
    }
    batches = random_batches(prefix["train/prefix"], *target["train"].values(), size=p.train.batch_size)
    rows, curves, examples = [], [], {}
    with torch_threads(1):  # one intra-op thread: the numbers do not depend on the machine's thread setting
        for seed in p.seeds:
            base = _dense_model(ctx, derive_seed(seed, "decoders"))
            learners = build_learners(method, base, _method_config(p), derive_seed(seed, "adapter", method))
            init_gap = _init_gap(learners[0].model, base, prefix["test/prefix"][:16]) if method == "tora" else None
            for learner in learners:
                tag = f"{method}/seed{seed}" + (f"/{learner.name}" if len(learners) > 1 else "")
                cfg = TrainConfig(
                    steps=p.train.steps,
                    lr=p.train.lr,
                    weight_decay=p.train.weight_decay,
                    grad_clip=None,
                    warmup_steps=min(p.train.warmup_steps, p.train.steps),
                    log_every=max(1, p.train.steps // 25),
                    seed=derive_seed(seed, "train", method, learner.name),
                    progress=ctx.progress,
                    desc=f"mtsam {tag}",
                )
                result = fit(
                    learner.model,
                    learner.loss,
                    batches,
                    cfg,
                    callback=ctx.metric_callback(tag),
                    parameters=learner.parameters,
                )
                curves += [{"method": method, "seed": seed, "learner": learner.name, **h} for h in result.history]
                named = {n: q for n, q in learner.model.named_parameters() if any(q is x for x in learner.parameters)}
                save_tensors({n: q.detach() for n, q in named.items()}, out / f"seed{seed}_{learner.name}.safetensors")
                if method == "lora_per_task":  # the per-task LoRAs, in the form the KnOTS merge reads
                    save_factors(lora_factors(learner.model), out / f"seed{seed}_{learner.name}_lora.safetensors")
            preds = predict_all(learners, prefix["test/prefix"])
            scores, norms = dense_scores(preds, target["test"], n_classes(p)), update_norms(learners)
            rows.append(
                {
                    "method": method,
                    "seed": seed,
                    **scores,
                    "trainable": sum(learner.trainable() for learner in learners),
                    "adapter_params": sum(learner.adapter_count() for learner in learners),
                    "init_max_abs_diff": init_gap,
                    **{f"update_norm_{t}": norms.get(t, float("nan")) for t in TASKS},
                }
            )
            ctx.log_metrics({f"{method}/{k}": v for k, v in scores.items()}, step=seed)
            if seed == p.seeds[0] and p.train.examples:
                examples = {t: v[: p.train.examples] for t, v in preds.items()}
    save_table(rows, out / "scores.parquet")
    save_table(curves, out / "curves.parquet")
    if examples:
        save_tensors(examples, out / "examples.safetensors")


def _init_gap(model: torch.nn.Module, base: MultiTaskDense, h: torch.Tensor) -> float:
    """max over tasks of |task t's prediction by the freshly attached ToRA model - the frozen model's| (each
    task through its own row of U3, on the same batch): 0 exactly when G = 0."""
    model.eval(), base.eval()
    with torch.no_grad():
        frozen = base.tokens(h)
        gaps = []
        for t, task in enumerate(TASKS):
            with use_task(model, t):
                gaps.append(float((model.decode(model.tokens(h), task) - base.decode(frozen, task)).abs().max()))
    model.train(), base.train()
    return max(gaps)


PIPELINE = Pipeline(
    paper=ABOUT, params_model=MtsamParams, stages=(scenes, encode, train), report="pipelines.mtsam.report:report"
)
