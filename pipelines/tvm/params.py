"""TVM parameters: the form, the paper-scale preset and the paper's vocabulary.

The CPU default is the brief's reduction: programmatic multi-step arithmetic word problems, a sampling policy
with carry-dependent slips (some recoverable), N sampled solutions per training question graded by their final
answer, a tiny causal transformer (2 layers, hidden 64) with a value head per label type, and the searches of
the paper's Table (single sample, majority vote, Best-of-N, step-level beam search) on held-out questions.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from components.reasoning.solutions_file import check_solutions_file
from paperflows.params import DataFile, PipelineParams, Section, Seed

KINDS = ("orm", "prm", "tvm")
KIND_LABELS = {"orm": "ORM (outcome labels)", "prm": "PRM (step labels)", "tvm": "TVM (token labels)",
               "oracle": "oracle V* (exact value)"}
METHOD_LABELS = {"single": "single sample", "majority": "majority vote", "best_of_n": "Best-of-N",
                 "beam": "step beam search"}


class DataParams(Section):
    solutions_path: Annotated[str | None, DataFile(check_solutions_file, description="sampled-solutions JSONL")] = \
        Field(None, description="Sampled solutions of your own, one JSON object per line with question, solution, "
                                "answer and correct (relative to the project root): the verifiers train on a "
                                "seeded split of its questions and re-rank the rest, in place of the synthetic "
                                "problems. Needs verifier.kinds without 'prm' (the file has no step labels); beam "
                                "search needs the policy and is not run.")
    train_questions: int = Field(400, ge=2, le=1_000_000, description="Synthetic training questions.")
    test_questions: int = Field(100, ge=1, le=1_000_000, description="Synthetic held-out questions.")
    samples: int = Field(16, ge=2, le=4096, description="N: sampled solutions per question (training labels, "
                                                        "majority vote and Best-of-N).")
    numbers: int = Field(4, ge=2, le=16, description="Amounts per problem (the start and numbers - 1 steps).")
    operand_max: int = Field(9, ge=1, le=10_000, description="Largest start amount and operand (smallest: 1).")
    cap: int = Field(30, ge=1, le=1_000_000, description="Largest amount a problem may reach.")
    test_fraction: float = Field(0.2, gt=0, lt=1, description="Share of a solutions file's questions held out.")
    seed: Seed = Field(0, description="Seed of the problems, the sampled solutions and the file's split.")

    @model_validator(mode="after")
    def _cap(self) -> "DataParams":
        if self.cap < self.operand_max:
            raise ValueError(f"cap ({self.cap}) must be >= operand_max ({self.operand_max})")
        return self

    @field_validator("solutions_path")
    @classmethod
    def _blank(cls, value: str | None) -> str | None:
        return None if value is not None and not value.strip() else value


class PolicyParams(Section):
    slip_carry: float = Field(0.25, ge=0, le=1, description="Slip probability of a step whose units column "
                                                            "carries or borrows (the brief: 0.25).")
    slip_plain: float = Field(0.05, ge=0, le=1, description="Slip probability of any other step (the brief: 0.05).")
    recover: float = Field(0.3, ge=0, le=1, description="Probability that a fresh slip is noticed on the next line "
                                                        "and rewritten correctly ('wait ...').")


class VerifierParams(Section):
    kinds: list[Literal[KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(KINDS), min_length=1,
        description="Label types, one verifier each (fan-out): outcome (ORM), step (PRM), token-level prefix "
                    "value (TVM).")
    with_question: bool = Field(False, description="Feed the question text before the solution (the paper's "
                                "input); off by default to keep CPU sequences short (the steps carry every number).")
    steps: int = Field(150, ge=1, le=1_000_000, description="Training steps per verifier and seed.")
    batch_size: int = Field(64, ge=1, le=65_536, description="Solutions per training step.")
    lr: float = Field(5e-3, gt=0, le=1, description="AdamW learning rate.")
    warmup_steps: int = Field(20, ge=0, le=100_000, description="Linear warmup steps.")

    @field_validator("kinds")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"kinds repeat: {value}")
        return value


class SearchParams(Section):
    beams: int = Field(4, ge=1, le=256, description="b: beams kept by step beam search.")
    per_beam: int = Field(4, ge=1, le=256, description="K: one-step continuations drawn per beam.")


class TvmParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Problems and sampled solutions.")
    policy: PolicyParams = Field(default_factory=PolicyParams, description="The slip policy (synthetic data).")
    verifier: VerifierParams = Field(default_factory=VerifierParams, description="The verifiers and their training.")
    search: SearchParams = Field(default_factory=SearchParams, description="Step-level beam search.")

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.samples": 100, "data.train_questions": 7473, "data.test_questions": 1319,
        "verifier.with_question": True, "verifier.steps": 20_000, "seeds": [0, 1, 2],
    }
    PAPER_SOURCE: ClassVar[str] = (
        "Sizes of the paper's GSM8K setting (arXiv 2407.12863 §4, as summarised in the brief): about 100 sampled "
        "solutions per training question, GSM8K's 7,473 training and 1,319 test questions, the question fed to "
        "the verifier; the model stays the tiny byte-level transformer and the policy the programmatic one.")

    @model_validator(mode="after")
    def _file_rules(self) -> "TvmParams":
        if self.data.solutions_path and "prm" in self.verifier.kinds:
            raise ValueError("verifier.kinds: 'prm' needs step labels, which a solutions file does not carry; "
                             "drop it when data.solutions_path is set")
        return self
