"""Pyramid Flow's scoring wiring (one paper's use): the evaluator that stands in for VBench (a pixel-MLP digit
classifier and the principal components of real frames, with their floor on real clips), the scorer of a
generated set, the sampling table's rows and the summary metrics DVC tracks."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from components.data.images import load_mnist
from components.data.moving_mnist import MovingMnistConfig, moving_mnist
from components.metrics.classification import accuracy
from components.metrics.video import ClipScorer, blockiness, fit_pixel_pca, mnist_view, motion_error
from components.models.digit_classifier import load_digit_classifier
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches
from paperflows import derive_seed
from paperflows.rows import mean
from pipelines.pyramid_flow import plots
from pipelines.pyramid_flow.params import N_CLASSES, NO_JUMP, PyramidFlowParams


def evaluator_model(p: PyramidFlowParams, seed: int = 0) -> nn.Sequential:
    """``Sequential(features, head)``: a pixel-MLP digit classifier; ``[0]`` maps frames ``[N, H, W]`` to the
    FD feature space ``[N, feature_dim]``, ``[1]`` to logits. Initialised from ``seed`` alone."""
    e = p.evaluator
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        features = nn.Sequential(
            nn.Flatten(),
            nn.Linear(p.data.canvas**2, e.hidden),
            nn.GELU(),
            nn.Linear(e.hidden, e.feature_dim),
            nn.GELU(),
        )
        return nn.Sequential(features, nn.Linear(e.feature_dim, N_CLASSES))


def make_scorer(
    p: PyramidFlowParams, reference: Tensor, reference_labels: Tensor, pca: dict[str, Tensor], clf: nn.Sequential
) -> ClipScorer:
    """Scores against ``reference``: pixel PCA, the evaluator (features, accuracy) and, class-aware, the frozen
    MNIST classifier's 128-d features of the frames placed as MNIST digits (``mnist_view``)."""
    mnist = load_digit_classifier("mnist")
    return ClipScorer(
        reference,
        pca,
        clf[0],
        clf[1],
        reference_labels=reference_labels,
        class_features=lambda frames: mnist.features(mnist_view(frames, p.data.digit_size)),
    )


def fit_evaluator(
    p: PyramidFlowParams, data: dict[str, Tensor], progress: bool = False, callback: Any = None
) -> tuple[nn.Sequential, dict[str, Tensor], dict[str, float]]:
    """Train the evaluator on real single frames (MNIST train digits at random positions), fit the pixel PCA, and
    score ``eval.n_clips`` real training clips against the test reference like a generated set (the floor)."""
    d = p.data
    images, digit_labels = load_mnist("train")
    single = MovingMnistConfig(canvas=d.canvas, digit_size=d.digit_size, n_frames=1, n_digits=1, speed=d.speed)
    made = moving_mnist(
        images, digit_labels, p.evaluator.n_frames, single, seed=derive_seed(d.seed, "evaluator frames")
    )
    frames, frame_labels = made.clips[:, 0], made.labels[:, 0]
    model = evaluator_model(p)
    fit(
        model,
        cross_entropy_loss,
        random_batches(frames, frame_labels, size=p.evaluator.batch_size),
        TrainConfig(
            steps=p.evaluator.steps,
            lr=p.evaluator.lr,
            seed=0,
            log_every=max(1, p.evaluator.steps // 20),
            progress=progress,
            desc="pyramid_flow evaluator",
        ),
        callback=callback,
    )
    pca = fit_pixel_pca(frames, p.evaluator.pca_dim)
    test_clips, test_labels = data["test/clips"], data["test/labels"]
    real = data["train/clips"][: p.eval.n_clips]  # real clips in the number a generated set has
    with torch.no_grad():
        # real clips scored exactly like a generated set (against the test reference): the estimator's floor
        floor = make_scorer(p, test_clips, test_labels, pca, model.eval()).score(
            real, data["train/labels"][: len(real)]
        )
        test_acc = accuracy(model(test_clips.flatten(0, 1)), test_labels.repeat_interleave(d.n_frames))
    summary = {
        "test_accuracy": test_acc,
        "real_fd_floor": floor["fd_classifier"],
        "real_fd_class_floor": floor["fd_class"],
        "real_fd_pixels_floor": floor["fd_pixels"],
        "real_blockiness": blockiness(test_clips),
        "real_motion_error": motion_error(test_clips),
    }
    return model, pca, summary


def sampling_row(
    p: PyramidFlowParams, method: str, variant: str, seed: int, step: int, nfe: int, flops: int
) -> dict[str, Any]:
    """One generated set's row of the sampling table: what was sampled and with which settings."""
    return {
        "method": method,
        "variant": variant,
        "seed": seed,
        "step": step,
        "nfe_per_clip": nfe,
        "nfe_per_frame": nfe / p.data.n_frames,
        "sample_flops_per_clip": flops,
        "n_clips": p.eval.n_clips,
        "n_frames": p.data.n_frames,
        "guidance": p.eval.guidance,
        "first_frame_guidance": p.eval.first_frame_guidance,
        "steps_per_stage": p.eval.steps_per_stage,
        "first_frame_steps_per_stage": p.eval.first_frame_steps_per_stage,
    }


SUMMARY_METRICS = ("fd_pixels", "fd_class", "fd_classifier", "accuracy", "blockiness", "motion_error")


def summary_metrics(rows: list[dict]) -> dict[str, float]:
    """``<method>/<variant>/step<s>/<metric>``: the mean over seeds of each scored set (``metrics/eval.json``)."""
    return {
        f"{m}/{'default' if v == NO_JUMP else v}/step{s}/{k}": mean([r[k] for r in group])
        for (m, v, s), group in plots.groups(rows).items()
        for k in SUMMARY_METRICS
    }


def score_sets(
    p: PyramidFlowParams,
    data: dict[str, Tensor],
    samples: dict[str, Tensor],
    sampling: list[dict[str, Any]],
    compute: list[dict[str, Any]],
    clf: nn.Sequential,
    pca: dict[str, Tensor],
) -> list[dict[str, Any]]:
    """Every generated set of the sampling table scored against the real test clips, with its training cost."""
    labels = torch.arange(p.eval.n_clips) % N_CLASSES
    costs = {(c["method"], c["seed"], c["step"]): c for c in compute}
    rows = []
    with torch.no_grad():
        scorer = make_scorer(p, data["test/clips"], data["test/labels"], pca, clf)
        for row in sampling:
            clips = samples[f"{row['method']}/{row['variant']}/seed{row['seed']}/step{row['step']}"]
            cost = costs[(row["method"], row["seed"], row["step"])]
            train = {"train_tokens": cost["tokens"], "train_newest_tokens": cost["newest_tokens"]}
            rows.append({**row, **train, "train_flops": cost["flops"], **scorer.score(clips, labels)})
    return rows


def final_grid(
    data: dict[str, Tensor], samples: dict[str, Tensor], sampling: list[dict[str, Any]], n: int
) -> list[tuple[str, Tensor]]:
    """Real clips, then every method / variant at its final step (first seed): the figure's rows."""
    seed, final = sampling[0]["seed"], {}
    for r in sampling:
        final[r["method"]] = max(final.get(r["method"], 0), r["step"])
    return [("real", data["test/clips"][:n])] + [
        (
            plots.variant_name(r["method"], r["variant"]),
            samples[f"{r['method']}/{r['variant']}/seed{seed}/step{r['step']}"][:n],
        )
        for r in sampling
        if r["seed"] == seed and r["step"] == final[r["method"]]
    ]
