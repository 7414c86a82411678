"""Preference and unlearning objectives with one signature, in one registry (`OBJECTIVES`): GA, GradDiff,
IDK-SFT, NPO, DPO, FLAT's f-divergence losses and PreferDiff's (with its plain denoising loss), on per-row
sequence scores (`SequenceScores`)."""

from components.preference.objectives import (
    F_DIVERGENCES,
    OBJECTIVES,
    ObjectiveConfig,
    ObjectiveSpec,
    PreferenceBatch,
    SequenceScores,
    objective_loss,
)

__all__ = [
    "F_DIVERGENCES",
    "OBJECTIVES",
    "ObjectiveConfig",
    "ObjectiveSpec",
    "PreferenceBatch",
    "SequenceScores",
    "objective_loss",
]
