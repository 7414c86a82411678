"""OC-Flow §5.2 at CPU scale: QM9 property-guided generation in a molecular descriptor space.

The paper guides EquiFM (an equivariant flow over atom coordinates and types) toward a target property
value drawn from the data's property distribution, with the reward ``-|phi(x) - y*|`` of an EGNN property
classifier phi, and reports the MAE between phi's prediction and the target. Here each molecule is its
8-number descriptor (element counts, radius of gyration, mean and largest interatomic distance; see
:mod:`components.data.qm9`), a rectified flow is trained on the descriptors of half of a random QM9 subset,
an MLP regressor phi on the same half is the reward, and a second regressor trained on the held-out half
judges the guided samples independently. Fidelity is the sliced-Wasserstein distance of the guided
descriptors to the held-out molecules': targets are drawn from the held-out property values, so perfect
conditional sampling would reproduce the held-out descriptor distribution.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from components.data.qm9 import DESCRIPTOR_NAMES, qm9pack_files, read_qm9
from components.generative import pair_loss, sample_time
from components.generative.guidance import GuidanceConfig, guide, nearest_distance
from components.io import load_tensors, save_json, save_table, save_tensors
from components.metrics.distributions import sliced_wasserstein
from paperflows import Plot, StageContext, derive_seed, stage
from paperflows.errors import StageInputError
from paperflows.plots import plot_loss_curves
from pipelines.oc_flow.params import QM9_METHODS
from pipelines.oc_flow.pretrained import load_frozen, make_model, pretrain

MOLECULES = "data/qm9.safetensors"
QM9_PREPARED = "metrics/prepare_qm9.json"
FLOWS_QM9 = "models/qm9/"
REGRESSORS = "models/qm9_regressors/"
CURVES_QM9 = "tables/pretrain_qm9.parquet"
CURVES_REG = "tables/pretrain_qm9_regressors.parquet"
CURVES_QM9_PNG = "plots/pretrain_qm9.png"
CURVES_REG_PNG = "plots/pretrain_qm9_regressors.png"
GUIDED_QM9 = "tables/guidance_qm9.parquet"
SUMMARY_QM9 = "metrics/guidance_qm9.json"
TIMES_QM9 = "timings/guidance_qm9.json"
DIM = len(DESCRIPTOR_NAMES)


@stage(params=("data.seed", "data.qm9_path", "qm9.n_molecules"), outs=(MOLECULES,), metrics=(QM9_PREPARED,))
def prepare_qm9(ctx: StageContext) -> None:
    """Draw the QM9 subset, split it in halves (train / held out) and standardise by the train half."""
    d, q = ctx.params.data, ctx.params.qm9
    paths = [ctx.data_path(d.qm9_path)] if d.qm9_path else qm9pack_files()
    try:
        mols = read_qm9(paths, q.n_molecules, d.seed)
    except ValueError as err:
        raise StageInputError(f"oc_flow.data.qm9_path: {err}") from None
    n = len(mols["alpha"])
    half = n // 2
    x = torch.from_numpy(mols["descriptors"]).float()
    mean, std = x[:half].mean(0), x[:half].std(0).clamp_min(1e-3)  # a count absent from the subset: std 0
    tensors = {"train": (x[:half] - mean) / std, "heldout": (x[half:] - mean) / std, "mean": mean, "std": std}
    summary: dict[str, float] = {"molecules": n, "train": half, "heldout": n - half}
    for prop in ("alpha", "gap"):
        y = torch.from_numpy(mols[prop]).float()
        tensors[f"train_{prop}"], tensors[f"heldout_{prop}"] = y[:half], y[half:]
        summary[f"{prop}_mad"] = float((y - y.mean()).abs().mean())  # the paper's MAD normaliser
    save_tensors(
        tensors,
        ctx.path(MOLECULES),
        metadata={"source": "qm9pack" if not d.qm9_path else "user CSV", "descriptor": ",".join(DESCRIPTOR_NAMES)},
    )
    save_json(summary, ctx.path(QM9_PREPARED))


def _standard(y: Tensor, ref: Tensor) -> Tensor:
    return (y - ref.mean()) / ref.std()


def _flow_pairs(x1: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    return torch.randn(x1.shape, generator=gen), x1, sample_time(x1.shape[0], gen)


def _regression_loss(model: torch.nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    x, y = batch
    return F.mse_loss(model(x, torch.zeros(x.shape[0]))[:, 0], y)


def regressor(net: torch.nn.Module, mean: float, scale: float):
    """``x -> property`` in its units, from a velocity MLP read at t = 0 that predicts the standardised value."""
    return lambda x: net(x, torch.zeros(x.shape[0], dtype=x.dtype))[:, 0] * scale + mean


@stage(
    params=("seeds", "model", "qm9.flow_steps", "qm9.regressor_steps", "qm9.property", "train.batch_size", "train.lr"),
    deps=(MOLECULES,),
    outs=(FLOWS_QM9, REGRESSORS, CURVES_QM9, CURVES_REG),
    plots=(Plot(CURVES_QM9_PNG), Plot(CURVES_REG_PNG)),
    gpu=True,
    models={"qm9_flow": FLOWS_QM9, "qm9_regressors": REGRESSORS},
)
def pretrain_qm9(ctx: StageContext) -> None:
    """Train the descriptor flow (noise -> train half) and the reward and judge property regressors.

    The reward's regressor learns from the train half, the independent judge's from the held-out half."""
    p, q = ctx.params, ctx.params.qm9
    t = load_tensors(ctx.path(MOLECULES))
    pretrain(
        ctx,
        "qm9",
        t["train"],
        _flow_pairs,
        lambda: make_model(p, DIM),
        pair_loss,
        q.flow_steps,
        FLOWS_QM9,
        CURVES_QM9,
        CURVES_QM9_PNG,
    )
    rows = []
    for role, half in (("reward", "train"), ("judge", "heldout")):
        y = _standard(t[f"{half}_{q.property}"], t[f"{half}_{q.property}"])
        rows += pretrain(
            ctx,
            f"qm9 {role} regressor",
            (t[half], y),
            lambda x, y, gen: (x, y),
            lambda: make_model(p, DIM, 1),
            _regression_loss,
            q.regressor_steps,
            REGRESSORS,
            None,
            None,
            prefix=f"{role}_",
        )
    save_table(rows, ctx.path(CURVES_REG))
    plot_loss_curves(rows, ctx.path(CURVES_REG_PNG), ylabel="MSE of the standardised property")


@stage(
    params=(
        "seeds",
        "model",
        "qm9.property",
        "qm9.n_samples",
        "qm9.iterations",
        "guidance.n_steps",
        "guidance.lr",
        "guidance.clip",
        "guidance.update",
        "guidance.claim_gamma",
        "guidance.projections",
    ),
    deps=(MOLECULES, FLOWS_QM9, REGRESSORS),
    outs=(GUIDED_QM9,),
    metrics=(SUMMARY_QM9,),
    timings=(TIMES_QM9,),
)
def guide_qm9(ctx: StageContext) -> None:
    """Guide the descriptor flow toward target property values; measure the MAE and the fidelity.

    Targets are drawn per sample from the held-out property values; the MAE to the target is read by the
    reward regressor and by the independent judge, the fidelity against the held-out molecules."""
    p, q, g = ctx.params, ctx.params.qm9, ctx.params.guidance
    t = load_tensors(ctx.path(MOLECULES))
    y_train, y_held = t[f"train_{q.property}"], t[f"heldout_{q.property}"]
    rows, times = [], []
    for seed in p.seeds:
        flow = load_frozen(p, ctx.path(FLOWS_QM9) / f"seed{seed}.safetensors", DIM)
        reward_net = regressor(
            load_frozen(p, ctx.path(REGRESSORS) / f"reward_seed{seed}.safetensors", DIM, 1),
            float(y_train.mean()),
            float(y_train.std()),
        )
        judge = regressor(
            load_frozen(p, ctx.path(REGRESSORS) / f"judge_seed{seed}.safetensors", DIM, 1),
            float(y_held.mean()),
            float(y_held.std()),
        )
        gen = torch.Generator().manual_seed(derive_seed(seed, "qm9"))
        x0 = torch.randn(q.n_samples, DIM, generator=gen)
        target = y_held[torch.randint(0, len(y_held), (q.n_samples,), generator=gen)]
        scale = float(y_train.std())

        def reward(x: Tensor, target: Tensor = target, f=reward_net) -> Tensor:  # -|phi(x) - y*| (official L1)
            return -(f(x) - target).abs() / scale

        for label, method in QM9_METHODS:
            cfg = GuidanceConfig(
                n_steps=g.n_steps,
                iterations=q.iterations,
                lr=g.lr,
                clip=g.clip or None,
                gamma=g.claim_gamma if method == "ocflow" else 0.0,
                update=g.update if method == "ocflow" else "alg1",
            )
            out = guide(method, flow, x0, reward, cfg)
            with torch.no_grad():
                mae, judged = (reward_net(out.x) - target).abs(), (judge(out.x) - target).abs()
            sw = sliced_wasserstein(
                out.x, t["heldout"], g.projections, generator=torch.Generator().manual_seed(derive_seed(seed, "sw"))
            )
            rows.append(
                {
                    "method": label,
                    "seed": seed,
                    "mae": float(mae.mean()),
                    "judge_mae": float(judged.mean()),
                    "sw_to_heldout": sw,
                    "nn_to_heldout": float(nearest_distance(out.x, t["heldout"]).mean()),
                    "nfe": out.nfe,
                    "reward_history": out.reward_history,
                }
            )
            times.append({"method": label, "seed": seed, "seconds": out.seconds})
    save_table(rows, ctx.path(GUIDED_QM9))
    save_json(
        {
            f"{label}/{key}": float(np.mean([r[key] for r in rows if r["method"] == label]))
            for label, _ in QM9_METHODS
            for key in ("mae", "judge_mae", "sw_to_heldout")
        },
        ctx.path(SUMMARY_QM9),
    )
    save_json({"runs": times}, ctx.path(TIMES_QM9))
