"""FLAT parameters: the form, the paper-scale preset and the paper's vocabulary (methods, headline numbers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from components.unlearning.authors import ATTRIBUTE_NAMES
from components.unlearning.tofu_file import (
    SUFFIXES,
    check_tofu_forget_file,
    check_tofu_retain_file,
    overlap_problem,
    read_tofu_file,
)
from paperflows.ownmodel import OwnModel, own_model_field
from paperflows.params import CheckedData, DataFile, PipelineParams, Section, Seed

METHODS = ("ga", "graddiff", "npo", "idk", "flat_kl", "flat_tv", "flat_js", "flat_pearson")
DEFAULT_METHODS = ("ga", "graddiff", "npo", "idk", "flat_kl", "flat_tv", "flat_js")
FLAT_METHODS = ("flat_kl", "flat_tv", "flat_js", "flat_pearson")
RETAIN_DATA_METHODS = ("graddiff",)  # the methods that read retain data (marked in the table)
LABELS = {
    "original": "Original (fine-tuned on all QAs)",
    "retain": "Retain-only oracle",
    "ga": "GA",
    "graddiff": "GradDiff †",
    "npo": "NPO",
    "idk": "IDK-SFT",
    "flat_kl": "FLAT (KL)",
    "flat_tv": "FLAT (TV)",
    "flat_js": "FLAT (JS)",
    "flat_pearson": "FLAT (Pearson)",
}
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# the brief's headline numbers (a third-party digest of the paper's HP and MUSE tables, [3p]): HP forget-quality
# gap (lower is better) and MUSE VerbMem on D_f; neither is a TOFU number, so they sit beside ours, not against
PAPER_HP_GAP = {"ga": 2.73, "npo": 1.26, "flat_kl": 1.32}
PAPER_MUSE_VERBMEM = {"graddiff": 4.9, "flat_kl": 0.0}
PAPER_HP_GA_PPL, PAPER_HP_NPO_PPL = 1e71, 19.66


def _tofu_suffix(value: str | None) -> str | None:
    if value is not None and value.strip() == "":
        return None
    if value is not None and Path(value).suffix.lower() not in SUFFIXES:
        raise ValueError(f"expected a TOFU file ending in one of {SUFFIXES}, got {value!r}")
    return value


class DataParams(Section):
    tofu_path: Annotated[str | None, DataFile(check_tofu_forget_file, description="TOFU forget file")] = Field(
        None,
        description="TOFU's forget split with perturbed answers, e.g. forget10_perturbed.json (JSON Lines rows "
        "question, answer, paraphrased_answer, perturbed_answer list; relative to the project root). "
        "Give it with tofu_retain_path. Empty: the synthetic fictitious authors.",
    )
    tofu_retain_path: Annotated[str | None, DataFile(check_tofu_retain_file, description="TOFU retain file")] = Field(
        None,
        description="TOFU's retain split, e.g. retain_perturbed.json (rows question, answer; those with "
        "paraphrased_answer and perturbed_answer are also evaluated) or retain90.json plus those "
        "fields on some rows. Given with tofu_path.",
    )
    n_authors: int = Field(16, ge=4, le=576, description="Synthetic fictitious authors (one QA per attribute each).")
    forget_authors: int = Field(
        2, ge=1, le=100, description="Authors whose QAs form the forget split (TOFU forget10: 10 % of the authors)."
    )
    attributes: list[Literal[ATTRIBUTE_NAMES]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(ATTRIBUTE_NAMES),
        min_length=1,
        description="Facts per author, one QA each: birthplace, genre, book, award, father's profession.",
    )
    n_perturbed: int = Field(2, ge=1, le=9, description="Perturbed (wrong) answers per synthetic QA (TOFU: 5).")
    retain_eval: int = Field(
        10,
        ge=2,
        le=5000,
        description="Retain QAs evaluated (a seeded subset of those with perturbed answers; TOFU evaluates 400).",
    )
    world_facts: int = Field(
        8,
        ge=2,
        le=116,
        description="World-fact questions (capitals, from gensim's questions-words.txt) in the utility.",
    )
    trained_facts: int = Field(
        20,
        ge=0,
        le=100,
        description="Other capital questions (not the evaluated world "
        "facts) added to the fine-tuning data of the original "
        "and the oracle, so the LoRA keeps answering general "
        "questions in kind; 0: author QAs only (TOFU).",
    )
    passages: int = Field(2, ge=1, le=300, description="Lee-corpus news documents for the perplexity on general text.")
    passage_words: int = Field(32, ge=8, le=2000, description="Words kept of each perplexity document.")
    seed: Seed = Field(0, description="Seed of the synthetic authors, the forget authors and the retain subset.")

    @field_validator("tofu_path", "tofu_retain_path")
    @classmethod
    def _suffix(cls, value: str | None) -> str | None:
        return _tofu_suffix(value)

    @model_validator(mode="after")
    def _consistent(self) -> DataParams:
        if (self.tofu_path is None) != (self.tofu_retain_path is None):
            raise ValueError(
                "give flat.data.tofu_path and flat.data.tofu_retain_path together (TOFU's forget and retain files)"
            )
        if self.world_facts + self.trained_facts > 116:
            raise ValueError(
                f"world_facts + trained_facts ({self.world_facts + self.trained_facts}) exceed the 116 "
                "capital questions"
            )
        if self.forget_authors >= self.n_authors:
            raise ValueError(f"forget_authors ({self.forget_authors}) must be below n_authors ({self.n_authors})")
        if len(set(self.attributes)) != len(self.attributes):
            raise ValueError(f"attributes repeat: {self.attributes}")
        return self


class ModelParams(Section):
    lm: Literal["smollm2-135m", "tiny"] = Field(
        "smollm2-135m", description="The causal LM ('tiny': a random 2-layer Llama, for tests)."
    )
    name_or_path: OwnModel = own_model_field("causal LM instead of lm")
    precision: Literal["bf16", "fp32"] = Field(
        "bf16",
        description="Weights and activations of the frozen base model: bf16 as the official trainer "
        "runs (LoRA adapters and AdamW stay fp32), or fp32. bf16 is about 2x faster on a "
        "CPU with AVX512-BF16 or AMX and slower on one without.",
    )
    lora_layers: int = Field(
        2,
        ge=1,
        le=30,
        description="LoRA adapters in this many top decoder layers; the layers "
        "below are frozen and run once per distinct token row.",
    )
    lora_r: int = Field(16, ge=1, le=256, description="LoRA rank.")
    lora_alpha: float = Field(32.0, gt=0, le=1024, description="LoRA alpha (scale alpha / r).")
    target_modules: list[Literal[TARGET_MODULES]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(TARGET_MODULES),
        min_length=1,
        description="Linear layers of each adapted decoder layer that get LoRA.",
    )

    @property
    def lm_used(self) -> str:
        """The LM the stages load: ``name_or_path`` when given, else the packaged ``lm``."""
        return self.name_or_path or self.lm


class FinetuneParams(Section):
    steps: int = Field(40, ge=1, le=100_000, description="AdamW steps of each fine-tune (original, retain oracle).")
    batch_size: int = Field(16, ge=1, le=512, description="QAs per step (drawn with replacement).")
    lr: float = Field(5e-3, gt=0, le=1.0, description="Learning rate of the LoRA adapters.")
    weight_decay: float = Field(0.0, ge=0, le=1.0, description="AdamW weight decay.")
    warmup_steps: int = Field(4, ge=0, le=10_000, description="Linear warmup steps.")


class UnlearnParams(Section):
    methods: list[Literal[METHODS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(DEFAULT_METHODS),
        min_length=1,
        description="Unlearning methods, one fan-out item each (GradDiff reads retain data; the others only the "
        "forget set, IDK-SFT and FLAT also template answers).",
    )
    steps: int = Field(8, ge=1, le=100_000, description="AdamW steps of each unlearning run.")
    batch_size: int = Field(4, ge=1, le=512, description="Forget rows per step (GradDiff: as many retain rows).")
    lr: float = Field(2e-4, gt=0, le=1.0, description="Learning rate of the unlearning runs.")
    beta: float = Field(0.1, gt=0, le=100, description="NPO inverse temperature.")
    retain_weight: float = Field(1.0, ge=0, le=100, description="GradDiff's weight of the retain NLL.")
    normalisation: Literal["answer", "padded"] = Field(
        "answer",
        description="FLAT's score h: mean token probability over each answer ('answer'), or the official "
        "code's sum over the padded batch divided by B*L ('padded').",
    )
    curve_every: int = Field(
        2,
        ge=1,
        le=10_000,
        description="Evaluate forget probability and retain exact match every this many steps (the unlearning curves).",
    )


class EvalParams(Section):
    max_new_tokens: int = Field(8, ge=1, le=512, description="Greedy tokens decoded per question (ROUGE).")
    batch_size: int = Field(64, ge=1, le=1024, description="Rows per scoring / decoding batch.")
    utility_keep: float = Field(0.9, gt=0, le=1, description="Share of the original's retain accuracy FLAT must keep.")
    destroyed_below: float = Field(
        0.5,
        gt=0,
        le=1,
        description="GA 'destroys utility' when it keeps less than this "
        "share of the original's retain accuracy at FLAT's "
        "forget level.",
    )


class FlatParams(PipelineParams):
    seeds: list[Seed] = Field(
        default_factory=lambda: [0, 1, 2],
        min_length=1,
        max_length=10,
        description="Seeds of the unlearning runs (batch draws, template answers); the "
        "original and the oracle are fine-tuned once.",
    )
    data: DataParams = Field(default_factory=DataParams, description="The QA benchmark and utility sets.")
    model: ModelParams = Field(default_factory=ModelParams, description="The LM and its LoRA adapters.")
    finetune: FinetuneParams = Field(
        default_factory=FinetuneParams, description="Fine-tuning the original and the retain-only oracle."
    )
    unlearn: UnlearnParams = Field(default_factory=UnlearnParams, description="The unlearning runs.")
    eval: EvalParams = Field(default_factory=EvalParams, description="TOFU evaluation and claim thresholds.")

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"seeds repeat: {value}")
        return value

    @model_validator(mode="after")
    def _methods(self) -> FlatParams:
        if len(set(self.unlearn.methods)) != len(self.unlearn.methods):
            raise ValueError(f"unlearn.methods repeat: {self.unlearn.methods}")
        return self

    def environment_problems(self, groups: tuple[str, ...] | None = None) -> list[str]:
        """``model.name_or_path`` must name a causal-LM checkpoint folder or an id in the local Hugging Face cache
        (`components.llm.lm_source_problem`, the rule `load_lm` applies), checked before any work."""
        value = self.model.name_or_path
        if value is None or (groups is not None and "model" not in groups):
            return []
        from components.llm import lm_source_problem
        from paperflows.settings import find_root

        problem = lm_source_problem(value, root=find_root())
        return [f"model.name_or_path: {problem}"] if problem else []

    def data_problems(self, files: dict[str, CheckedData]) -> list[str]:
        """The TOFU forget and retain files share no QA (the rule of stage ``benchmark``,
        :func:`~components.unlearning.tofu_file.overlap_problem`)."""
        forget, retain = files.get("data.tofu_path"), files.get("data.tofu_retain_path")
        if forget is None or retain is None or forget.path is None or retain.path is None:
            return []
        problem = overlap_problem(
            forget.path,
            retain.path,
            read_tofu_file(forget.path, split="forget"),
            read_tofu_file(retain.path, split="retain"),
        )
        return [] if problem is None else [f"data.tofu_retain_path: {problem}"]

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_authors": 200,
        "data.forget_authors": 20,
        "data.n_perturbed": 5,
        "data.retain_eval": 400,
        "data.world_facts": 96,
        "data.trained_facts": 20,
        "data.passages": 100,
        "data.passage_words": 400,
        "model.lora_layers": 30,
        "finetune.steps": 1125,
        "finetune.batch_size": 32,
        "finetune.lr": 1e-4,
        "unlearn.steps": 125,
        "unlearn.batch_size": 32,
        "unlearn.lr": 1e-5,
        "unlearn.methods": list(METHODS),
        "seeds": [0, 1, 2, 3, 4],
        "eval.max_new_tokens": 200,
    }
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_authors": 24,
        "data.forget_authors": 4,
        "data.retain_eval": 40,
        "finetune.steps": 200,
        "unlearn.steps": 24,
        "unlearn.methods": ["ga", "npo", "flat_kl"],
    }
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline claims need an original that has memorised the forget set (gate: its forget quality against "
        "the retain-only oracle below TOFU's 0.05; at the default's 40 fine-tuning steps it is 0.17) and "
        "unlearning long enough for the methods to part. This preset fine-tunes 5x longer (200 steps), unlearns "
        "3x longer (24 steps) and evaluates 20 forget QAs (4 of 24 authors) and 40 retain QAs, with the arms the "
        "claims compare (FLAT (KL), GA) and NPO beside them. 24 steps of 4 forget rows are about 5 passes over "
        "the 20 forget QAs, the paper's 5 epochs."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "78 s in make main (two pipelines at a time on 2 cores, 2026-12-06)",
        "evidence": "3.1 min with one torch thread on a 2-core machine running two other pipelines (2026-12-06, run "
        "20261206T165238Z); the headline does not hold: FLAT (KL)'s forget quality 0.008 [0.002, 0.043] (original "
        "0.0011, the gate passed), below TOFU's 0.05, keeping 0.94 [0.86, 1.02] of the original's retain EM. Not "
        "robust to the unlearning length: at 48 steps (twice the paper's epochs) it rises to 0.024 [0.006, 0.101], "
        "not resolved, while the retain EM falls to 0.59 [-0.06, 1.24] of the original's",
        "paper": "TOFU's 200 authors, every layer, 5 epochs of forget10: GPU-hours; not run here",
    }
    PAPER_SOURCE: ClassVar[str] = (
        "TOFU (Maini et al. 2024): 200 authors, forget10 = 20 authors, 5 perturbed answers, 400 retain QAs evaluated, "
        "greedy generation of up to 200 tokens; FLAT's TOFU config: lr 1e-5, batch 16 x grad-accum 4 ... 5 epochs "
        "(~125 steps on forget10 at batch 32), every layer trainable (here LoRA on all 30 layers); fine-tuning the "
        "original: 5 epochs of 4,000 QAs at batch 32 and lr 1e-4 (~625-1,125 steps)."
    )
