"""CSA: canonical similarity analysis for data-efficient multimodal alignment (arXiv 2410.07610).

Two frozen unimodal encoders, trained on unpaired data, are aligned from N image-text pairs, and the alignment is
used for zero-shot classification, mislabel detection (ROC AUC) and retrieval, as in the paper's ImageNet
experiments, at CPU scale: Fashion-MNIST images with captions generated from their labels and two measured
attributes, EfficientNet-Lite0 image features and all-MiniLM-L6-v2 text features.

1. **features** (the official ``get_embeddings.py``): both encoders run once over the pool and test images and
   their captions (or a user's ``image.npy`` / ``text.npy`` / ``labels.npy`` are read and split); the result is a
   cached safetensors file that every later setting reuses;
2. **align** (§3, the ``bimodal_*`` experiment scripts): for every seed and N, N pairs are drawn from the pool;
   CSA (CCA with W_A = U^T S11^{-1/2}, similarity sum_k rho_k ah_k bh_k over s dims), CCA with plain cosine,
   ASIF (relative representations over the N anchor pairs) and a CLIP-like pair of linear maps trained with
   InfoNCE on the same N pairs are fitted on each modality's unpaired PCA features, then scored on the test set;
3. **report**: zero-shot accuracy and mislabel AUC vs N, retrieval recall@k, and the claims (few pairs: CSA over
   the contrastive model; rho-weighting over plain cosine), paired over seeds.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from components.alignment import AlignConfig, fit_cca, fit_method, fit_pca
from components.alignment.evaluate import evaluate, swap_captions
from components.data.embedding_pairs import read_embedding_pairs
from components.data.label_captions import (
    CLASS_NAMES,
    TEMPLATES,
    attribute_codes,
    caption_index,
    caption_table,
    prompts,
)
from components.io import load_tensors, save_json, save_table, save_tensors
from paperflows import Pipeline, StageContext, StageInputError, derive_seed, stage
from pipelines.csa import ABOUT
from pipelines.csa.params import CsaParams, DataParams, pool_problem, size_problems, user_test_rows

FEATURES = "data/features.safetensors"
FEATURE_METRICS = "metrics/features.json"
FEATURE_TIMES = "timings/features.json"
SCORES = "tables/scores.parquet"
RHO = "tables/canonical_correlations.parquet"
ALIGN_METRICS = "metrics/align.json"
ALIGN_TIMES = "timings/align.json"
SCALING_PNG, SCALING_CSV = "plots/scaling.png", "plots/scaling.csv"
RHO_PNG, RHO_CSV = "plots/canonical_correlations.png", "plots/canonical_correlations.csv"
REPORT = "report.json"
CHOSEN = ("lr", "weight_decay", "embed_dim", "steps")  # the CLIP-like baseline's tuned settings, per row


def _images(d: DataParams, split: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded subset of ``n`` images [n, 28, 28] in [0, 1] and labels of one split of the offline dataset."""
    from components.data.images import load_fashion_mnist, load_mnist

    images, labels = load_fashion_mnist(split) if d.dataset == "fashion" else load_mnist(split)
    if n > len(labels):
        raise StageInputError(
            f"csa.data: {n} {split} images asked for, the {d.dataset} {split} split has {len(labels)}"
        )
    index = np.random.default_rng(derive_seed(d.seed, "subset", split)).choice(len(labels), n, replace=False)
    return images[index], labels[index]


def _image_features(d: DataParams, images: torch.Tensor) -> np.ndarray:
    if d.image_encoder == "pixels":
        return images.reshape(len(images), -1).numpy()
    from components.models.efficientnet_lite import efficientnet_lite0, image_features

    return image_features(efficientnet_lite0(), images, resolution=d.resolution).numpy()


def _offline(d: DataParams) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, float]]:
    """Pool and test images with their generated captions, both encoded."""
    from components.llm.encoder import load_encoder

    (pool_x, pool_y), (test_x, test_y) = _images(d, "train", d.n_pool), _images(d, "test", d.n_test)
    images, labels = torch.cat([pool_x, test_x]), torch.cat([pool_y, test_y]).numpy()
    started = time.perf_counter()
    image = _image_features(d, images)
    image_seconds = time.perf_counter() - started
    n_classes = len(CLASS_NAMES[d.dataset])
    template = np.random.default_rng(derive_seed(d.seed, "templates")).integers(0, len(TEMPLATES), len(labels))
    row = caption_index(template, labels, attribute_codes(images.numpy()), n_classes)
    table = caption_table(d.dataset)
    started = time.perf_counter()
    encoder = load_encoder(d.text_encoder)
    table_emb, prompt_emb = encoder.encode(table), encoder.encode(prompts(d.dataset))
    text_seconds = time.perf_counter() - started
    arrays = {
        "image": image,
        "text": table_emb[row],
        "labels": labels,
        "is_test": np.arange(len(labels)) >= d.n_pool,
        "class_text": prompt_emb,
    }
    summary = {
        "source": d.dataset,
        "distinct_captions": len(table),
        "caption_examples": [table[r] for r in row[:4]],
        "prompts": prompts(d.dataset),
    }
    return arrays, summary, {"image_encoder_seconds": image_seconds, "text_encoder_seconds": text_seconds}


def _user_embeddings(ctx: StageContext) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, float]]:
    """A user's row-aligned embeddings, split into pool and test; class texts are the pool's per-class means."""
    d = ctx.params.data
    image, text, labels = read_embedding_pairs(ctx.data_path(d.embeddings_path))
    is_test = user_test_rows(len(labels), d.test_fraction, d.seed)
    problem = pool_problem(labels, is_test, d.test_fraction)  # the rule the params were checked with
    if problem:
        raise StageInputError(f"csa.{problem}")
    class_text = np.stack([text[~is_test & (labels == c)].mean(0) for c in range(labels.max() + 1)])
    arrays = {"image": image, "text": text, "labels": labels, "is_test": is_test, "class_text": class_text}
    return arrays, {"source": "embeddings_path"}, {}


# --------------------------------------------------------------------------------------------------
# 1. the frozen unimodal encoders, run once (official get_embeddings.py)
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(FEATURES,), metrics=(FEATURE_METRICS,), timings=(FEATURE_TIMES,))
def features(ctx: StageContext) -> None:
    """Encode every pool and test image and caption once; cache the features."""
    d = ctx.params.data
    arrays, summary, seconds = _user_embeddings(ctx) if d.embeddings_path else _offline(d)
    save_tensors(
        {
            "image": torch.as_tensor(arrays["image"], dtype=torch.float32),
            "text": torch.as_tensor(arrays["text"], dtype=torch.float32),
            "labels": torch.as_tensor(arrays["labels"], dtype=torch.int64),
            "is_test": torch.as_tensor(arrays["is_test"], dtype=torch.bool),
            "class_text": torch.as_tensor(arrays["class_text"], dtype=torch.float32),
        },
        ctx.path(FEATURES),
    )
    save_json(
        {
            **summary,
            "pool": int((~arrays["is_test"]).sum()),
            "test": int(arrays["is_test"].sum()),
            "image_dim": int(arrays["image"].shape[1]),
            "text_dim": int(arrays["text"].shape[1]),
            "classes": int(len(arrays["class_text"])),
        },
        ctx.path(FEATURE_METRICS),
    )
    save_json(seconds, ctx.path(FEATURE_TIMES))


# --------------------------------------------------------------------------------------------------
# 2. alignment from N pairs and its three uses (§3; the bimodal_* experiment scripts)
# --------------------------------------------------------------------------------------------------
def _config(p: CsaParams) -> AlignConfig:
    a = p.align
    return AlignConfig(
        ridge=a.ridge,
        sim_dim=a.sim_dim,
        asif_k=a.asif_k,
        asif_p=a.asif_p,
        embed_dim=a.embed_dim,
        steps=a.steps,
        lr=a.lr,
        batch_size=a.batch_size,
        contrastive_grid=tuple((lr, wd, a.embed_dim) for lr in a.tune_lrs for wd in a.tune_weight_decays)
        if a.tune
        else (),
        contrastive_checkpoints=tuple(a.tune_steps),
        contrastive_folds=a.tune_folds,
    )


@stage(
    params=("seeds", "align", "eval"),
    deps=(FEATURES,),
    outs=(SCORES, RHO),
    metrics=(ALIGN_METRICS,),
    timings=(ALIGN_TIMES,),
    gpu=True,
)
def align(ctx: StageContext) -> None:
    """Fit every method on N pairs per seed; score zero-shot accuracy, mislabel AUC and recall@k."""
    p, cfg = ctx.params, _config(ctx.params)
    f = {k: v.numpy() for k, v in load_tensors(ctx.path(FEATURES)).items()}
    pool, test = ~f["is_test"], f["is_test"]
    for problem in size_problems(p, int(pool.sum()), int(test.sum())):  # the rule the params were checked with
        raise StageInputError(f"csa.{problem}")
    # each modality is reduced on its own (unpaired) pool data, before any pairing
    pca_a, pca_b = fit_pca(f["image"][pool], p.align.image_pca), fit_pca(f["text"][pool], p.align.text_pca)
    a_pool, b_pool = pca_a.apply(f["image"][pool]), pca_b.apply(f["text"][pool])
    a_test, b_test = pca_a.apply(f["image"][test]), pca_b.apply(f["text"][test])
    class_text = pca_b.apply(f["class_text"])
    labels = f["labels"][test]
    rows, rho_rows, seconds = [], [], dict.fromkeys(p.align.methods, 0.0)
    for seed in p.seeds:
        rng = np.random.default_rng(derive_seed(seed, "swap"))
        source, swapped = swap_captions(labels, p.eval.mislabel_fraction, rng)
        for n in p.align.n_pairs:
            pairs = np.random.default_rng(derive_seed(seed, "pairs", n)).choice(len(a_pool), n, replace=False)
            rho = fit_cca(a_pool[pairs], b_pool[pairs], ridge=cfg.ridge).rho
            rho_rows += [{"seed": seed, "n_pairs": n, "k": k + 1, "rho": float(r)} for k, r in enumerate(rho)]
            for method in p.align.methods:
                started = time.perf_counter()
                fitted = fit_method(method, a_pool[pairs], b_pool[pairs], cfg, seed=derive_seed(seed, "init", n))
                scores = evaluate(fitted, a_test, b_test, labels, class_text, source, swapped, p.eval.recall_ks)
                seconds[method] += time.perf_counter() - started
                chosen = {f"chosen_{k}": float(fitted.chosen.get(k, "nan")) for k in CHOSEN}
                rows.append({"seed": seed, "n_pairs": n, "method": method, **scores, **chosen})
    save_table(rows, ctx.path(SCORES))
    save_table(rho_rows, ctx.path(RHO))
    save_json(
        {
            "image_pca_dim": int(a_pool.shape[1]),
            "text_pca_dim": int(b_pool.shape[1]),
            "test": int(test.sum()),
            "swapped": int(round(p.eval.mislabel_fraction * test.sum())),
        },
        ctx.path(ALIGN_METRICS),
    )
    save_json({f"{m}_seconds": s for m, s in seconds.items()}, ctx.path(ALIGN_TIMES))


PIPELINE = Pipeline(paper=ABOUT, params_model=CsaParams, stages=(features, align), report="pipelines.csa.report:report")
