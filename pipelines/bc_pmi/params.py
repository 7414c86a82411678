"""BC-PMI parameters: the form, the paper-scale preset and the paper's vocabulary.

The experiment is the brief's CPU reduction of the paper's setting: an 11 x 11 corridor gridworld whose three
experts (left, centre, right corridor) share start and goal and differ only inside the bifurcation zone
(:mod:`components.imitation.gridworld`), demonstrations at several sizes, MINE for PMI(s, a; z), and
style-conditioned BC with and without PMI weights.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from components.imitation.demos import check_demonstrations
from paperflows.params import DataFile, PipelineParams, Section

METHODS = ("bc", "bc_pmi")
LABELS = {"bc": "Conditional BC", "bc_pmi": "BC-PMI", "expert": "Experts (demonstrators)"}
# The brief could not retrieve the paper's tables (its environments are games and MuJoCo control, not this
# gridworld); no published number is comparable cell for cell.
PUBLISHED: dict[str, float] = {}


class DataParams(Section):
    demos_path: Annotated[str | None, DataFile(check_demonstrations, description="demonstration file (.jsonl or "
                                                                                 ".npz)")] = Field(
        None, description="Demonstrations of your own for the 11 x 11 corridor gridworld, in place of the generated "
        "experts: JSONL, one object per step {episode, state: [row, col], action: 0 up / 1 down / 2 left / 3 right "
        "/ 4 noop, style: 0 left / 1 centre / 2 right}, or an .npz with integer arrays state [N, 2], action, style, "
        "episode (steps of an episode in time order; relative to the project root).")
    sizes: list[Annotated[int, Field(ge=1, le=10_000)]] = Field(
        default_factory=lambda: [5, 20, 100], min_length=1, max_length=6,
        description="Training set sizes, in episodes per style (nested subsets; the smallest is the low-data "
                    "regime of the claims). With data.demos_path, capped at the episodes the file holds per style.")
    epsilon: float = Field(0.1, ge=0.0, le=1.0, description="Expert action noise of the generated demonstrations: "
                                                            "probability of a uniformly random action.")

    @field_validator("sizes")
    @classmethod
    def _increasing(cls, value: list[int], info: ValidationInfo) -> list[int]:
        if value != sorted(set(value)):
            raise ValueError(f"sizes must be distinct and increasing, got {value}")
        return value


class MineParams(Section):
    steps: int = Field(1000, ge=1, le=1_000_000, description="Adam steps of the statistics network T(s, a, z).")
    batch_size: int = Field(256, ge=2, le=100_000, description="Tuples per batch (marginals by shuffling z within "
                                                               "the batch).")
    lr: float = Field(1e-3, gt=0, le=1, description="Learning rate of T.")
    hidden: int = Field(64, ge=1, le=4096, description="Hidden width of T (MLP s, a, z -> hidden -> 1).")
    ema_rate: float = Field(0.01, gt=0, le=1, description="Rate of the moving average of E[e^T] that replaces "
                                                          "the denominator of the DV gradient (MINE's bias fix).")


class TrainParams(Section):
    methods: list[Literal[METHODS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(METHODS), min_length=1,
        description="Policies: 'bc' style-conditioned BC (every tuple weighs 1), 'bc_pmi' PMI-weighted BC.")
    steps: int = Field(1000, ge=1, le=1_000_000, description="Adam steps per policy.")
    batch_size: int = Field(256, ge=1, le=100_000, description="Tuples per batch.")
    lr: float = Field(1e-3, gt=0, le=1, description="Learning rate.")
    hidden: int = Field(64, ge=1, le=4096, description="Hidden width of the policy MLP (coords + one-hot z -> "
                                                       "hidden -> 5 actions).")
    alpha: float = Field(1.0, ge=0.0, le=1.0, description="BC-PMI mixing: weight (1 - alpha) + alpha * w; 0 is "
                                                          "conditional BC.")
    max_weight: float = Field(10.0, ge=1.0, le=1000.0, description="Clip of the batch-normalised weights "
                                                                   "exp(PMI) / mean.")

    @field_validator("methods")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value


class EvaluateParams(Section):
    rollouts: int = Field(100, ge=1, le=100_000, description="Rollouts per style and policy.")
    action: Literal["sample", "greedy"] = Field(
        "sample", description="How a policy acts in rollouts: sample pi(. | s, z), or take its most likely action.")
    horizon: int = Field(40, ge=10, le=10_000, description="Steps per rollout before it counts as a failure "
                                                           "(the experts need 10 or 16).")


class ReportParams(Section):
    success_margin: float = Field(0.05, gt=0.0, le=1.0, description="Equal success: the 95% interval of BC-PMI "
                                                                    "minus BC success rate lies within +- this.")


class BcPmiParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Demonstrations.")
    mine: MineParams = Field(default_factory=MineParams, description="The MINE statistics network.")
    train: TrainParams = Field(default_factory=TrainParams, description="Policies.")
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams, description="Rollouts.")
    report: ReportParams = Field(default_factory=ReportParams, description="Claim thresholds.")

    PAPER_SCALE: ClassVar[dict[str, Any]] = {"mine.steps": 2000, "train.steps": 2000, "data.sizes": [20, 100],
                                             "seeds": [0, 1, 2, 3, 4]}
    PAPER_SOURCE: ClassVar[str] = (
        "The brief's gridworld reduction (2,000 Adam steps for T and for each policy, 20 and 100 trajectories per "
        "style); the paper's own environments (games, MuJoCo control) are not reproduced here.")
