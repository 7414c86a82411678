"""The errors a stage or a run raises (a module of its own: stage code imports it, and it imports nothing)."""

from __future__ import annotations


class StageInputError(RuntimeError):
    """A stage's declared input is missing or malformed (raised before the stage's work starts)."""


def missing_input_error(slug: str, stage: str, target: object, producer: str, producer_dvc: str) -> StageInputError:
    """The error of a stage whose input ``target`` is missing: it names the stage that writes it."""
    return StageInputError(
        f"{slug}.{stage}: input {target} is missing; it is written by stage '{producer}' (run "
        f"`paperflows stage {slug} {producer}` or `dvc repro {producer_dvc}`)"
    )


class StageOutputError(RuntimeError):
    """A stage finished without writing one of its declared outputs."""


class RunLockedError(RuntimeError):
    """Another process is writing the same output folder."""


class RunTerminated(BaseException):
    """The process was asked to stop (SIGTERM) while a run was in progress."""
