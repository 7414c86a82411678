"""HRF's per-model wiring (one paper's use): the targets and sources, training every depth, and the rows the
evaluation stages score (quality against NFE, the velocity law at a point, MNIST scores).

The two-moons experiment follows the official ``moon``: its level-0 source is 8 Gaussians on a circle of radius 5
(variance 0.1; :func:`components.data.toy.eight_gaussians`), not N(0, I); every other source and all the further
noise of the hierarchy are N(0, I).
"""

from __future__ import annotations

import torch

from components.data.toy import MOONS_CENTRE, eight_gaussians, gaussian_mixture_1d, two_moons
from components.generative.hierarchical import (
    HierarchicalModel,
    draw_velocities,
    hierarchical_batch,
    hierarchical_batch_loss,
    mixture_velocity_law_samples,
    sample_schedule,
)
from components.io import save_model
from components.metrics.distributions import order_flip_fraction
from components.metrics.generation import feature_scores, sample_distance, velocity_law_scores
from components.models.digit_classifier import DigitClassifier
from components.models.fourier_velocity import FourierVelocityNet
from components.training import TrainConfig, fit, random_batches
from paperflows import StageContext, derive_seed
from pipelines.hrf.params import (
    DATA_DIM,
    DataParams,
    HrfParams,
    dataset_depths,
    dataset_schedules,
    method_name,
    model_config,
    schedule_label,
)
from pipelines.hrf.plots import number

#: the datasets whose level-0 source is the official 8 Gaussians (radius 5, variance 0.1) instead of N(0, I)
EIGHT_GAUSSIAN_SOURCE = ("moons",)


def model_file(folder: str, dataset: str, depth: int, seed: int) -> str:  # one network's weights
    return f"{folder}{dataset}_D{depth}_seed{seed}.safetensors"


def rng(seed: int, *purpose: object) -> torch.Generator:
    """A generator for one purpose of one seed's run (:func:`paperflows.derive_seed`)."""
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def source_sample(dataset: str, n: int, generator: torch.Generator) -> torch.Tensor:
    """``[n, dim]`` draws of the flow's level-0 source x0: the official 8 Gaussians for the moons, else N(0, I)."""
    if dataset in EIGHT_GAUSSIAN_SOURCE:
        return eight_gaussians(n, generator)
    return torch.randn(n, DATA_DIM[dataset], generator=generator)


def velocity_point(dataset: str) -> torch.Tensor:
    """``[dim]`` where the velocity law is drawn: the origin (the Gaussian source's mode), or the centre of one of
    the 8 source Gaussians (at t = 0 the law there is the target minus that point)."""
    point = torch.zeros(DATA_DIM[dataset])
    if dataset in EIGHT_GAUSSIAN_SOURCE:
        point[0] = 5.0
    return point


def moons_target(data: DataParams, n: int, seed: int) -> torch.Tensor:
    """``[n, 2]`` two-moons points (sklearn's ``make_moons``), centred and scaled by ``data.moons_scale``."""
    return data.moons_scale * (two_moons(n, data.moons_noise, seed)[0] - torch.tensor(MOONS_CENTRE))


def exact_target(data: DataParams, dataset: str, n: int, seed: int) -> torch.Tensor:
    """``n`` fresh exact samples of a low-dim target (for its sampling floor)."""
    return (
        gaussian_mixture_1d(data.mixture_means, data.mixture_variance, n, rng(seed, "floor", dataset))
        if dataset == "mixture"
        else moons_target(data, n, derive_seed(seed, "floor", dataset))
    )


def train_flows(
    ctx: StageContext, dataset: str, x1_train: torch.Tensor, folder: str, steps: int, batch_size: int, lr: float
) -> tuple[list[dict], dict[str, float]]:
    """Fit RF (flow-matching loss) and every HRF depth (hierarchical loss) per seed from the dataset's source; save
    the weights."""
    p, curves, sizes, rows = ctx.params, [], {}, random_batches(x1_train, size=batch_size)
    source = (lambda n, gen: eight_gaussians(n, gen)) if dataset in EIGHT_GAUSSIAN_SOURCE else None
    for depth in dataset_depths(p, dataset):
        sizes[f"{dataset}/{method_name(depth)}"] = float(model_config(p, dataset, depth).n_parameters)
        for seed in p.seeds:
            model = FourierVelocityNet(model_config(p, dataset, depth), seed=seed)
            name = f"{dataset}/{method_name(depth)}/seed{seed}"
            cfg = TrainConfig(
                steps=steps,
                lr=lr,
                seed=seed,
                log_every=max(1, steps // 50),
                progress=ctx.progress,
                desc=f"hrf {name}",
                grad_clip=1.0,
            )
            result = fit(
                model,
                hierarchical_batch_loss,
                lambda step, gen, depth=depth: hierarchical_batch(rows(step, gen)[0], depth, gen, source),
                cfg,
                callback=ctx.metric_callback(f"train/{name}"),
            )
            save_model(model, ctx.path(model_file(folder, dataset, depth, seed)))
            curves += result.curve(dataset=dataset, depth=depth, seed=seed)
    return curves, sizes


def floor_row(p: HrfParams, dataset: str, seed: int, reference: torch.Tensor) -> dict:
    """The sampling floor (two exact samples of the target) and the untrained flow (its source x0 itself, the
    flows' own x0 draw) against the test ``reference``."""
    sets = {
        "floor": exact_target(p.data, dataset, p.eval.n_samples, seed),
        "source": source_sample(dataset, p.eval.n_samples, rng(seed, "x0", dataset)),
    }
    scores = {
        k: sample_distance(x, reference, p.eval.n_projections, rng(seed, "projections", dataset))
        for k, x in sets.items()
    }
    return {"dataset": dataset, "seed": seed, **scores}


def seed_means(rows: list[dict], key: str, name: str) -> dict[str, float]:
    """Mean of ``key`` over the seeds of every group of rows named ``name.format(**row)`` (DVC metrics)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(name.format(**r), []).append(number(r[key]))
    return {k: sum(v) / len(v) for k, v in groups.items()}


def quality_rows(
    p: HrfParams, model: HierarchicalModel, dataset: str, depth: int, seed: int, data: dict, examples: dict | None
) -> list[dict]:
    """Every schedule of the depth, sampled twice from independent x0 and noise: scored on the validation
    reference (``val_distance``, chooses the split) and the test reference (``distance``, reported)."""
    ev, dim, keep = p.eval, DATA_DIM[dataset], examples is not None and seed == p.seeds[0]
    x0_val = source_sample(dataset, ev.val_samples, rng(seed, "x0_val", dataset))
    x0, rows = source_sample(dataset, ev.n_samples, rng(seed, "x0", dataset)), []
    for steps in dataset_schedules(p, dataset, depth):
        val = sample_schedule(model, x0_val, steps, rng(seed, "sampler_val", dataset)).x
        result = sample_schedule(model, x0, steps, rng(seed, "sampler", dataset), return_trajectory=keep)
        x, n = result.x, ev.n_crossing
        rows.append(
            {
                "dataset": dataset,
                "method": method_name(depth),
                "depth": depth,
                "steps": schedule_label(steps),
                "nfe": result.nfe,
                "seed": seed,
                "val_distance": sample_distance(
                    val, data[f"{dataset}/val"], ev.n_projections, rng(seed, "projections_val", dataset)
                ),
                "distance": sample_distance(
                    x, data[f"{dataset}/eval"], ev.n_projections, rng(seed, "projections", dataset)
                ),
                "order_flips": order_flip_fraction(x0[:n], x[:n]) if dim == 1 else float("nan"),
            }
        )
        if keep:
            examples[(dataset, depth, schedule_label(steps))] = result.trajectory[:, : ev.n_plot]
    return rows


def velocity_rows(
    p: HrfParams,
    model: FourierVelocityNet,
    dataset: str,
    depth: int,
    seed: int,
    reference: torch.Tensor,
    examples: dict,
) -> list[dict]:
    """Velocities drawn at :func:`velocity_point` against the true law of x1 - x0 there (closed form in 1-D at the
    origin; for the moons at t = 0 only: the target minus the point)."""
    ev, dim, rows, point = p.eval, DATA_DIM[dataset], [], velocity_point(dataset)
    for t in ev.velocity_times:
        truth, modes = (
            (reference - point if t == 0.0 else None, [])
            if dim > 1
            else mixture_velocity_law_samples(
                0.0,
                t,
                p.data.mixture_means,
                p.data.mixture_variance,
                ev.velocity_samples,
                rng(seed, "true_law", dataset, t),
            )
        )
        v = draw_velocities(
            model,
            point.expand(ev.velocity_samples, dim).clone(),
            t,
            depth,
            ev.velocity_inner_steps,
            rng(seed, "velocity", dataset, t),
        )
        scores = velocity_law_scores(
            v, truth, modes, ev.mode_radius, ev.n_projections, rng(seed, "projections", dataset, t)
        )
        rows.append({"dataset": dataset, "method": method_name(depth), "depth": depth, "seed": seed, "t": t, **scores})
        if seed == p.seeds[0]:
            examples[(dataset, depth, f"v{t:g}")] = v
            if truth is not None:
                examples[(dataset, 0, f"v{t:g}")] = truth
    return rows


def digit_scores(judge: DigitClassifier, images: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Scores of images in [-1, 1] against the judge's features of the reference images."""
    with torch.no_grad():
        feats = judge.features((images.view(-1, 28, 28) + 1) / 2)
        return feature_scores(feats, judge.head(feats), reference)


def mnist_row(
    p: HrfParams,
    model: HierarchicalModel,
    judge: DigitClassifier,
    ref: dict[str, torch.Tensor],
    depth: int,
    seed: int,
    steps: list[int],
) -> tuple[dict, torch.Tensor]:
    """One MNIST model sampled with one schedule twice (validation and test draws of x0 and noise), scored against
    the judge's features of the validation / test reference: ``(row, the test images)``."""
    n = p.eval.image_samples
    x0 = {k: torch.randn(n, DATA_DIM["mnist"], generator=rng(seed, f"x0{k}", "mnist")) for k in ("", "_val")}
    result = sample_schedule(model, x0[""], steps, rng(seed, "sampler", "mnist"))
    val = sample_schedule(model, x0["_val"], steps, rng(seed, "sampler_val", "mnist")).x.clamp(-1, 1)
    images = result.x.clamp(-1, 1)
    row = {
        "dataset": "mnist",
        "method": method_name(depth),
        "depth": depth,
        "seed": seed,
        "steps": schedule_label(steps),
        "nfe": result.nfe,
        "val_fid": digit_scores(judge, val, ref["val"])["fid"],
        **digit_scores(judge, images, ref["test"]),
    }
    return row, images
