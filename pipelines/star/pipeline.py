"""STAR: stability-inducing weight perturbation for continual learning (arXiv 2503.01595).

Reproduces, in mammoth's seq-MNIST protocol (and on seq-Fashion-MNIST), the comparison the paper makes on
every benchmark: rehearsal methods with and without STAR at matched buffer sizes, Class-IL and Task-IL final
average accuracy and forgetting (the DER paper's table shape, rows grouped by buffer size):

1. **prepare** (§5, mammoth's ``ContinualDataset``): the class-incremental streams, 5 tasks of 2 classes in
   class order (or a user's ``.npz`` via ``data.path``): which training and test images each task holds;
2. **train** (§4, one fan-out item per method): for every stream, buffer size and seed, an MLP 784-100-100-10
   learns the tasks in order, one epoch each, with plain SGD through the one training loop; rehearsal from a
   reservoir buffer (ER, DER++, ER-ACE), STAR's term added by a wrapper (``<base>_star``): a normalised ascent
   step ``delta`` (``||delta_l|| = gamma ||theta_l||``) on buffer samples still classified correctly, then
   ``lambda * KL(f(x; theta) || f(x; theta + delta))`` with its gradient taken at ``theta + delta`` (Eq. 4-6);
   every task seen so far is evaluated after each task (Class-IL and Task-IL, one network);
3. **evaluate**: final average accuracy, forgetting and backward transfer from the accuracy matrices;
4. **invariants**: STAR's perturbation re-run on trained networks and their buffers, its invariants measured;
5. **report**: the table, the claims (STAR minus base, paired over seeds and buffer sizes) and the checks.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

from components.continual import (
    REHEARSAL,
    ContinualConfig,
    MLPClassifier,
    MLPClassifierConfig,
    ReplayWeights,
    StarConfig,
    backward_transfer,
    final_average_accuracy,
    forgetting,
    task_indices,
    train_stream,
    with_star,
)
from components.continual.invariants import measure_invariants
from components.io import load_json, load_tensors, save_json, save_model, save_table, save_tensors
from paperflows import Pipeline, Plot, StageContext, StageInputError, derive_seed, stage
from pipelines.star import ABOUT
from pipelines.star.params import BASE_OF, StarParams
from pipelines.star.plots import plot_accuracy_vs_tasks, plot_star_gain, plot_streams
from pipelines.star.streams import DATA_METRICS, STREAMS, stream_arrays, task_stream

STREAMS_PNG = "plots/streams.png"
MODELS = "models/"
BUFFERS = "buffers/"  # the first seed's final reservoir per stream and buffer size (inputs as uint8)
RESULTS, MATRICES = "tables/results.parquet", "tables/accuracy_matrices.parquet"
EVAL_METRICS = "metrics/evaluate.json"
ACC_PNG, ACC_CSV = "plots/accuracy_vs_tasks.png", "plots/accuracy_vs_tasks.csv"
GAIN_PNG, GAIN_CSV = "plots/star_gain.png", "plots/star_gain.csv"
INVARIANTS = "metrics/invariants.json"
REPORT = "report.json"
HIDDEN = (100, 100)  # mammoth's MNISTMLP


# --------------------------------------------------------------------------------------------------
# §5 the class-incremental streams (mammoth's ContinualDataset: tasks of consecutive classes)
# --------------------------------------------------------------------------------------------------
@stage(params=("data",), outs=(STREAMS,), metrics=(DATA_METRICS,), plots=(Plot(STREAMS_PNG),))
def prepare(ctx: StageContext) -> None:
    """Cut each stream into tasks by class and draw the per-task subsets; write the task indices."""
    d = ctx.params.data
    index: dict[str, torch.Tensor] = {}
    summary: dict[str, Any] = {}
    samples = {}
    for name in d.streams():
        arrays, digest = stream_arrays(ctx, name)
        try:
            tasks = task_indices(
                torch.from_numpy(arrays["y_train"]),
                torch.from_numpy(arrays["y_test"]),
                classes_per_task=d.classes_per_task,
                train_per_task=d.train_per_task,
                test_per_task=d.test_per_task,
                seed=d.seed,
                name=name,
            )
        except ValueError as err:
            raise StageInputError(f"star.data: {err} (data.classes_per_task = {d.classes_per_task})") from None
        for t, (_classes, train, test) in enumerate(tasks):
            index[f"{name}/task{t}/train"], index[f"{name}/task{t}/test"] = train, test
        summary[name] = {
            "fingerprint": digest,
            "image_shape": list(arrays["x_train"].shape[1:]),
            "tasks": len(tasks),
            "classes": [list(c) for c, _, _ in tasks],
            "train_per_task": [len(tr) for _, tr, _ in tasks],
            "test_per_task": [len(te) for _, _, te in tasks],
            "train_available": int(len(arrays["y_train"])),
            "test_available": int(len(arrays["y_test"])),
        }
        samples[name] = [(classes, arrays["x_train"][train[:6].numpy()]) for classes, train, _ in tasks]
    save_tensors(index, ctx.path(STREAMS))
    save_json(
        {"streams": summary, **{f"{n}/train_images": sum(s["train_per_task"]) for n, s in summary.items()}},
        ctx.path(DATA_METRICS),
    )
    plot_streams(samples, ctx.path(STREAMS_PNG))


# --------------------------------------------------------------------------------------------------
# §4 rehearsal with and without STAR, one item per method; one fit per task through the one loop
# --------------------------------------------------------------------------------------------------
def _method(p: StarParams, method: str, seed: int, gamma: float, lam: float) -> Any:
    base = REHEARSAL[BASE_OF.get(method, method)]
    if method not in BASE_OF:
        return base
    cfg = StarConfig(gamma=gamma, lam=lam, steps=p.star.p_steps, init=p.star.init)
    return with_star(base, cfg, seed=derive_seed(seed, "star"))


@stage(
    params=("seeds", "data", "train", "star"),
    deps=(STREAMS, DATA_METRICS),
    outs=(MODELS, BUFFERS),
    fan_out="train.methods",
    gpu=True,
    models={"continual_mlp": MODELS},
)
def train(ctx: StageContext) -> None:
    """Learn every stream with this item's method at every buffer size and seed; weights, the first seed's
    buffer, and the accuracy matrices."""
    p, method = ctx.params, ctx.item
    out, memories, runs = ctx.item_dir(MODELS), ctx.item_dir(BUFFERS), []
    buffers = [0] if method == "sgd" else p.train.buffer_sizes  # fine-tuning keeps no buffer
    for name in p.data.streams():
        stream = task_stream(ctx, name)
        features = math.prod(stream.input_shape)
        for buffer in buffers:
            s = p.run_settings(method, buffer)
            per_task = min(math.ceil(t.x_train.shape[0] / s.batch_size) for t in stream.tasks) * p.train.n_epochs
            cfg = ContinualConfig(
                lr=s.lr,
                batch_size=s.batch_size,
                minibatch_size=s.minibatch_size,
                epochs=p.train.n_epochs,
                buffer_size=max(buffer, 1),
                weights=ReplayWeights(s.alpha, s.beta),
                device="auto",
                log_every=max(1, per_task // 4),
                progress=ctx.progress,
            )
            for seed in p.seeds:
                tag = f"{name}_b{buffer}_s{seed}"
                model = MLPClassifier(
                    MLPClassifierConfig(features, HIDDEN, stream.n_classes), seed=derive_seed(seed, "init")
                )
                curve = ctx.metric_callback(f"train/{method}/{tag}")
                result = train_stream(
                    model,
                    stream,
                    _method(p, method, seed, s.p_gamma, s.p_lam),
                    cfg,
                    functools.partial(derive_seed, seed),
                    desc=f"star {method} {tag}",
                    callback=lambda task, step, metrics, log=curve: log(step, metrics),
                )
                save_model(model, out / f"{tag}.safetensors", metadata={"method": method, "stream": name})
                if seed == p.seeds[0] and buffer:
                    b, n = result.buffer, len(result.buffer)
                    save_tensors(
                        {
                            "x": (b.x[:n] * 255).round().to(torch.uint8),
                            "y": b.y[:n],
                            "task": b.task[:n],
                            "logits": b.logits[:n],
                        },
                        memories / f"{tag}.safetensors",
                    )
                runs.append(
                    {
                        "stream": name,
                        "method": method,
                        "buffer": buffer,
                        "seed": seed,
                        "settings": vars(s),
                        "class_il": result.class_il,
                        "task_il": result.task_il,
                        "steps": result.steps,
                    }
                )
    save_json({"method": method, "runs": runs}, out / "results.json")
    save_json(
        {
            "method": method,
            "buffers": sorted(f.name for f in memories.glob("*.safetensors")),
            "note": "fine-tuning keeps no buffer" if method == "sgd" else "the first seed's final reservoir",
        },
        memories / "index.json",
    )


# --------------------------------------------------------------------------------------------------
# evaluation: final average accuracy, forgetting, backward transfer (mammoth's utils/metrics.py)
# --------------------------------------------------------------------------------------------------
@stage(
    params=("seeds", "data", "train.methods", "train.buffer_sizes"),
    deps=(MODELS,),
    outs=(RESULTS, MATRICES),
    metrics=(EVAL_METRICS,),
    plots=(
        Plot(ACC_PNG),
        Plot(GAIN_PNG),
        Plot(ACC_CSV, x="tasks_seen", y="class_il", title="Class-IL accuracy on the tasks seen so far"),
        Plot(GAIN_CSV, x="unit", y="difference", title="STAR minus its base, final Class-IL accuracy"),
    ),
)
def evaluate(ctx: StageContext) -> None:
    """One row per run (final metrics) and the long accuracy matrices; the figures."""
    rows, cells = [], []
    for method in ctx.params.train.methods:
        for run in load_json(ctx.path(f"{MODELS}{method}/results.json"))["runs"]:
            key = {k: run[k] for k in ("stream", "method", "buffer", "seed")}
            row = {
                **key,
                "base": BASE_OF.get(method, method),
                "star": method in BASE_OF,
                "steps": run["steps"],
                "lr": run["settings"]["lr"],
                "batch_size": run["settings"]["batch_size"],
            }
            for setting in ("class_il", "task_il"):
                matrix = run[setting]
                row[setting] = final_average_accuracy(matrix)
                row[f"forgetting_{setting}"] = forgetting(matrix)
                row[f"bwt_{setting}"] = backward_transfer(matrix)
                cells += [
                    {**key, "setting": setting, "after_task": i, "task": j, "accuracy": acc}
                    for i, r in enumerate(matrix)
                    for j, acc in enumerate(r)
                ]
            rows.append(row)
    save_table(rows, ctx.path(RESULTS))
    save_table(cells, ctx.path(MATRICES))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(f"{r['stream']}/{r['method']}/b{r['buffer']}", []).append(r)
    summary: dict[str, Any] = {
        f"{group}/{m}": [r[m] for r in runs]
        for group, runs in groups.items()
        for m in ("class_il", "task_il", "forgetting_class_il")
    }
    for c in cells:  # mammoth's logs.pyd key accmean_task{i}: mean accuracy after task i, here also over seeds
        setting = c["setting"].replace("_", "-")
        key = f"{c['stream']}/{c['method']}/b{c['buffer']}/{setting}/accmean_task{c['after_task'] + 1}"
        summary.setdefault(key, []).append(c["accuracy"])
    summary = {k: float(np.mean(v)) for k, v in summary.items()}
    save_json({"runs": len(rows), **summary}, ctx.path(EVAL_METRICS))
    plot_accuracy_vs_tasks(cells, ctx.path(ACC_PNG), ctx.path(ACC_CSV))
    plot_star_gain(rows, ctx.path(GAIN_PNG), ctx.path(GAIN_CSV))


# --------------------------------------------------------------------------------------------------
# STAR's invariants on trained networks and their buffers (Checks in the report)
# --------------------------------------------------------------------------------------------------
@stage(params=("seeds", "data", "train", "star"), deps=(MODELS, BUFFERS), metrics=(INVARIANTS,))
def invariants(ctx: StageContext) -> None:
    """Re-run the perturbation of every STAR method on its first trained network and buffer; measure
    ||delta_l|| / (gamma ||theta_l||), untouched biases, bit-exact weights, gradients."""
    p = ctx.params
    out: dict[str, Any] = {}
    for method in (m for m in p.train.methods if m in BASE_OF):
        name, buffer, seed = p.data.streams()[0], p.train.buffer_sizes[0], p.seeds[0]
        tag = f"{name}_b{buffer}_s{seed}"
        weights = load_tensors(ctx.path(f"{MODELS}{method}/{tag}.safetensors"))
        memory = load_tensors(ctx.path(f"{BUFFERS}{method}/{tag}.safetensors"))
        n_classes = weights["classifier.weight"].shape[0]
        model = MLPClassifier(MLPClassifierConfig(weights["features.0.weight"].shape[1], HIDDEN, n_classes))
        model.load_state_dict(weights)
        s = p.run_settings(method, buffer)
        cfg = StarConfig(gamma=s.p_gamma, lam=s.p_lam, steps=p.star.p_steps, init=p.star.init)
        x, y = memory["x"][: s.minibatch_size].float() / 255.0, memory["y"][: s.minibatch_size]
        out[method] = {"run": tag, **measure_invariants(model, x, y, cfg, seed=derive_seed(seed, "invariants"))}
    save_json(out, ctx.path(INVARIANTS))


PIPELINE = Pipeline(
    paper=ABOUT,
    params_model=StarParams,
    stages=(prepare, train, evaluate, invariants),
    report="pipelines.star.report:report",
)
