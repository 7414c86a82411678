"""BC-PMI parameters: the form, the paper-scale preset and the paper's vocabulary.

The experiment is the brief's CPU reduction of the paper's setting, in one of two environments
(``data.env``): an 11 x 11 corridor gridworld whose three experts (left, centre, right corridor) share start
and goal and differ only inside the bifurcation zone (:mod:`components.imitation.gridworld`), or MuJoCo's
``Reacher-v5`` whose two scripted experts sweep the arm counter-clockwise or clockwise to a target behind it
and share the start and the final approach (:mod:`components.imitation.reacher`); demonstrations at several
sizes, MINE for PMI(s, a; z), and style-conditioned BC with and without PMI weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from components.imitation.demos import check_demonstrations
from components.imitation.trajectories import TrajectorySpec, read_trajectories
from paperflows.params import DataFile, PipelineParams, Section, Seed

METHODS = ("bc", "bc_pmi", "bc_count_pmi", "bc_zone")
# the controls that separate PMI weighting from any reweighting: exact count PMI (tabular gridworld only) and a
# plain up-weighting of the style zone; they need an exact PMI or nothing beyond MINE's weights respectively
NEEDS_EXACT_PMI = ("bc_count_pmi",)
ENVS = ("gridworld", "reacher")
STYLES = {"gridworld": ("left", "centre", "right"), "reacher": ("counter-clockwise", "clockwise")}
LABELS = {
    "bc": "Conditional BC",
    "bc_pmi": "BC-PMI",
    "bc_count_pmi": "BC, exact count-PMI weights (control)",
    "bc_zone": "BC, zone up-weighted (control)",
    "expert": "Experts (demonstrators)",
}
# Reacher-v5 trajectories: its 10 observation floats, 2 torques in [-1, 1], styles 0 (counter-clockwise) and
# 1 (clockwise); kept here (not read from the environment module) so that checking a file imports no simulator
REACHER_TRAJECTORIES = TrajectorySpec(obs_dim=10, action_dim=2, n_styles=2, action_bounds=(-1.0, 1.0))


def check_reacher_trajectories(path: Path) -> int:
    """The ``DataFile`` check of ``data.path``: reads the file as the demos stage does; returns its number of
    trajectories."""
    return int(read_trajectories(path, REACHER_TRAJECTORIES)["episode"].max()) + 1


# The brief could not retrieve the paper's tables (its environments are games and MuJoCo control, not this
# gridworld); no published number is comparable cell for cell.
PUBLISHED: dict[str, float] = {}


class DataParams(Section):
    env: Literal[ENVS] = Field(  # type: ignore[valid-type]
        "gridworld",
        description="Environment: 'gridworld' (the brief's 11 x 11 corridors, three styles) or "
        "'reacher' (MuJoCo Reacher-v5, two sweep styles, continuous torques; needs gymnasium[mujoco]).",
    )
    path: Annotated[
        str | None, DataFile(check_reacher_trajectories, description="Reacher trajectories (.parquet or Minari .hdf5)")
    ] = Field(
        None,
        description="With env 'reacher': trajectories of your own in place of the scripted experts, a "
        "Parquet file with columns traj_id, t, obs_0 .. obs_9 (Reacher-v5's observation), action_0, action_1 "
        "(torques in [-1, 1]) and style (0 counter-clockwise, 1 clockwise sweep); or a Minari dataset's "
        "data/main_data.hdf5 recorded on Reacher-v5, each episode's style in its attribute 'style' or in "
        "infos/style; relative to the project root.",
    )
    demos_path: Annotated[
        str | None, DataFile(check_demonstrations, description="demonstration file (.jsonl or .npz)")
    ] = Field(
        None,
        description="Demonstrations of your own for the 11 x 11 corridor gridworld, in place of the generated "
        "experts: JSONL, one object per step {episode, state: [row, col], action: 0 up / 1 down / 2 left / 3 right "
        "/ 4 noop, style: 0 left / 1 centre / 2 right}, or an .npz with integer arrays state [N, 2], action, style, "
        "episode (steps of an episode in time order; relative to the project root).",
    )
    sizes: list[Annotated[int, Field(ge=1, le=10_000)]] = Field(
        default_factory=lambda: [2, 20],
        min_length=1,
        max_length=6,
        description="Training set sizes, in episodes per style (nested subsets; the smallest is the low-data "
        "regime of the claims). With data.demos_path, capped at the episodes the file holds per style.",
    )
    random_starts: bool = Field(
        True,
        description="Gridworld: every episode (demonstration and rollout) starts at a uniformly drawn cell below the "
        "zone's middle row, zone rows included, in place of the bottom centre; a start inside the zone puts the "
        "agent where the styles' paths cross, in states one style's demonstrations rarely visit (where greedy "
        "conditional BC is not already perfect).",
    )
    epsilon: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Gridworld: expert action noise of the generated "
        "demonstrations, probability of a uniformly random action.",
    )
    action_noise: float = Field(
        0.1,
        ge=0.0,
        le=2.0,
        description="Reacher: std of the Gaussian noise added to the scripted experts' torques (clipped to [-1, 1]).",
    )

    @property
    def noise(self) -> float:
        """The chosen environment's expert noise."""
        return self.epsilon if self.env == "gridworld" else self.action_noise

    @field_validator("path", "demos_path")
    @classmethod
    def _file_fits_env(cls, value: str | None, info: ValidationInfo) -> str | None:
        env, wanted = info.data.get("env"), {"path": "reacher", "demos_path": "gridworld"}[info.field_name]
        if value and env != wanted:
            raise ValueError(
                f"this file is read in the {wanted} environment: set data.env to '{wanted}' (env "
                f"{env!r} reads data.{'demos_path' if wanted == 'reacher' else 'path'})"
            )
        return value

    @field_validator("sizes")
    @classmethod
    def _increasing(cls, value: list[int], info: ValidationInfo) -> list[int]:
        if value != sorted(set(value)):
            raise ValueError(f"sizes must be distinct and increasing, got {value}")
        return value


class MineParams(Section):
    steps: int = Field(1000, ge=1, le=1_000_000, description="Adam steps of the statistics network T(s, a, z).")
    batch_size: int = Field(
        256, ge=2, le=100_000, description="Tuples per batch (marginals by shuffling z within the batch)."
    )
    lr: float = Field(1e-3, gt=0, le=1, description="Learning rate of T.")
    hidden: int = Field(64, ge=1, le=4096, description="Hidden width of T (MLP s, a, z -> hidden -> 1).")
    ema_rate: float = Field(
        0.01,
        gt=0,
        le=1,
        description="Rate of the moving average of E[e^T] that replaces "
        "the denominator of the DV gradient (MINE's bias fix).",
    )


class TrainParams(Section):
    methods: list[Literal[METHODS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(METHODS),
        min_length=1,
        description="Policies: 'bc' style-conditioned BC (every tuple weighs 1), 'bc_pmi' PMI-weighted BC "
        "(MINE's PMI), and two controls with BC-PMI's normalisation and clipping: 'bc_count_pmi' weights "
        "exp(exact count PMI) (gridworld only: drop it for the Reacher), 'bc_zone' weighs every tuple inside the "
        "style zone by MINE's mean zone / outside weight ratio and the others by 1.",
    )
    steps: int = Field(1000, ge=1, le=1_000_000, description="Adam steps per policy.")
    batch_size: int = Field(256, ge=1, le=100_000, description="Tuples per batch.")
    lr: float = Field(1e-3, gt=0, le=1, description="Learning rate.")
    hidden: int = Field(
        64, ge=1, le=4096, description="Hidden width of the policy MLP (coords + one-hot z -> hidden -> 5 actions)."
    )
    alpha: float = Field(
        1.0, ge=0.0, le=1.0, description="BC-PMI mixing: weight (1 - alpha) + alpha * w; 0 is conditional BC."
    )
    max_weight: float = Field(
        10.0, ge=1.0, le=1000.0, description="Clip of the batch-normalised weights exp(PMI) / mean."
    )

    @field_validator("methods")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value


class EvaluateParams(Section):
    rollouts: int = Field(100, ge=1, le=100_000, description="Rollouts per style and policy.")
    action: Literal["sample", "greedy"] = Field(
        "greedy",
        description="How a policy acts in the rollouts the claims are decided on: its most likely action (greedy), "
        "or a sample of pi(. | s, z); the other way is rolled out too and shown beside it in the table.",
    )
    horizon: int | None = Field(
        None,
        ge=10,
        le=10_000,
        description=(
            "Steps per rollout (default: the environment's, 40 in the gridworld, whose experts need 10 or 16, and 50 "
            "in Reacher-v5)."
        ),
    )


class ReportParams(Section):
    success_margin: float = Field(
        0.05,
        gt=0.0,
        le=1.0,
        description="Equal success: the 95% interval of BC-PMI minus BC success rate lies within +- this.",
    )


class BcPmiParams(PipelineParams):
    seeds: list[Seed] = Field(
        default_factory=lambda: list(range(8)),
        min_length=1,
        max_length=100,
        description="Seeds, the claims' independent units: each seed draws its own demonstrations, MINE and "
        "policy initialisations and rollout starts, shared by every method of that seed. A policy's greedy style "
        "accuracy from 2 episodes per style varies by about 0.12 from seed to seed, so few seeds decide nothing.",
    )
    data: DataParams = Field(default_factory=DataParams, description="Demonstrations.")
    mine: MineParams = Field(default_factory=MineParams, description="The MINE statistics network.")
    train: TrainParams = Field(default_factory=TrainParams, description="Policies.")
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams, description="Rollouts.")
    report: ReportParams = Field(default_factory=ReportParams, description="Claim thresholds.")

    @model_validator(mode="after")
    def _methods_fit_env(self) -> BcPmiParams:
        wrong = [m for m in self.train.methods if m in NEEDS_EXACT_PMI]
        if self.data.env != "gridworld" and wrong:
            raise ValueError(
                f"train.methods {wrong} need the exact count PMI of a tabular state-action space; data.env "
                f"{self.data.env!r} has none: drop them (e.g. train.methods=[bc, bc_pmi, bc_zone])"
            )
        return self

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "mine.steps": 2000,
        "train.steps": 2000,
        "data.sizes": [20, 100],
        "seeds": [0, 1, 2, 3, 4],
    }
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {"data.sizes": [2, 20], "seeds": list(range(20))}
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline (BC-PMI > conditional BC on style accuracy at the smallest size, greedy actions, random "
        "starts) with 20 seeds as the units, paired seed by seed; 2 episodes per style is where greedy "
        "conditional BC leaves headroom (style accuracy 0.78, against 0.99 at 20 episodes per style), and 20 seeds "
        "bring the interval's half-width (about 0.05) to the smallest gain of interest. The controls (exact "
        "count-PMI weights, zone up-weighting) and sampled rollouts come with it; 100 episodes per style is left "
        "to --set (greedy BC is already at the ceiling at 20)."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "1.5 min (91-92 s) with one torch thread on a busy 2-core machine (2026-12-06); 8 seeds, the first 8 "
        "of the evidence run's: the headline does not hold, -0.043 [-0.118, 0.032], every gate met",
        "evidence": (
            "5-6 min with one torch thread on a busy 2-core machine (2026-12-06: 297 s in run 20261206T161408Z, "
            "363 s in run 20261206T164555Z of the final code, 3.2 min when the other core was idle); the headline"
            " does not hold: BC-PMI - conditional BC = -0.015 [-0.069, 0.038] greedy style accuracy at 2 episodes"
            " per style, 20 paired seeds, every gate met (both above the random policy's 0.19; BC at 0.78, below "
            "the 0.95 headroom line); under sampled actions BC-PMI is ahead (+0.05), which is the demonstrators' "
            "noise it filters"
        ),
        "paper": "the brief's 2,000 steps at 20 and 100 episodes per style, 5 seeds: not run here; greedy "
        "conditional BC is at the style ceiling from 20 episodes per style on (0.99 in the evidence run), so the "
        "headroom gate would leave the headline not resolved there",
    }

    PAPER_SOURCE: ClassVar[str] = (
        "The brief's gridworld reduction (2,000 Adam steps for T and for each policy, 20 and 100 trajectories per "
        "style); the paper's own environments (games, MuJoCo control) are not reproduced here."
    )
