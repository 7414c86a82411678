"""HeartLang parameters: the form, the paper-scale preset and the paper's vocabulary.

Defaults are the brief's CPU reduction: unlabelled deepfake-ecg recordings for pretraining, a labelled neurokit2
Gaussian-wave PQRST probe set (rhythm and form tasks), sentences of 3 leads, a 64 x 16 codebook and 2-layer, d = 64
transformers. ``scale: paper`` quotes the official values (PKUDigitalHealth/HeartLang, run_vqhbr_training.py,
run_heartlang_pretraining.py and their scripts)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from components.ecg.readers import PTBXL_LAYOUT, WFDB_LAYOUT, check_ptbxl, check_wfdb, missing_leads
from paperflows.params import CheckedData, DataFile, PipelineParams, Section, Seed, distinct

METHODS = ("heartlang", "random_init", "fixed_window", "beat_count")
LABELS = {
    "heartlang": "HeartLang (QRS tokens, masked pretraining)",
    "random_init": "same transformer, random init",
    "fixed_window": "fixed-window tokens, same SSL",
    "beat_count": "beat count only (QRS sentence length)",
}
TOKENIZERS = ("qrs", "window")
LEAD_CHOICES = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
DETECTORS = ("xqrs", "neurokit")
# The paper's linear-probe macro AUC (%) at 1 / 10 / 100 % labels on PTB-XL (brief, Fig. "result.png").
PAPER_AUC: dict[str, dict[float, float]] = {
    "rhythm": {0.01: 62.08, 0.1: 76.22, 1.0: 90.34},
    "form": {0.01: 58.70, 0.1: 63.99, 1.0: 80.23},
    "super": {0.01: 78.94, 0.1: 85.59, 1.0: 87.52},
}
PAPER_BASELINE: dict[str, dict[float, float]] = {
    "rhythm": {0.01: 52.38, 0.1: 74.40, 1.0: 78.23},
    "form": {0.01: 55.71, 0.1: 63.71, 1.0: 72.65},
    "super": {0.01: 73.19, 0.1: 78.24, 1.0: 81.02},
}


class DataParams(Section):
    unlabelled: int = Field(
        600,
        ge=8,
        le=1_000_000,
        description="Unlabelled deepfake-ecg recordings (10 s, 12 "
        "leads) for VQ-HBR and masked pretraining (paper: MIMIC-IV-ECG, ~800k).",
    )
    labelled: int = Field(
        600,
        ge=16,
        le=100_000,
        description="Labelled Gaussian-wave PQRST recordings of the probe set (each has a rhythm and a form class).",
    )
    test_fraction: float = Field(
        0.4, ge=0.1, le=0.9, description="Share of the labelled set held out for the probe's test AUC."
    )
    noise: float = Field(0.03, ge=0.0, le=1.0, description="White noise (mV) added per lead to the simulated signal.")
    seed: Seed = Field(0, description="Seed of the generated recordings (the same data for every run seed).")
    path: Annotated[
        str | None, DataFile(check_ptbxl, folder=True, description="PTB-XL benchmark arrays", layout=PTBXL_LAYOUT)
    ] = Field(
        None,
        description="A folder of PTB-XL benchmark arrays ({train,val,test}_data.npy at 100 Hz, (N, 1000, 12) as "
        "the benchmark code writes them or (N, 12, 1000), *_labels.npy (N, C) multi-hot), probed in place of the "
        "generated labelled set (train -> probe training pool, test -> test; relative to the project root). "
        "They are tokenized as they are (the benchmark has already standardised them), as HeartLang does.",
    )
    wfdb_path: Annotated[
        str | None, DataFile(check_wfdb, folder=True, description="folder of WFDB records", layout=WFDB_LAYOUT)
    ] = Field(
        None,
        description="A folder of WFDB records (.hea/.dat, >= 10 s, standard lead names or PhysioNet's modified "
        "leads such as MLII), cut into 10 s windows and used for pretraining in place of deepfake-ecg; a .atr "
        "file beside a record scores the R-peak detector (sensitivity, PPV, 150 ms tolerance). Every lead of "
        "tokenize.leads must be in every record (a two-lead MIT-BIH record: tokenize.leads=[II, V1]).",
    )


class TokenizeParams(Section):
    detector: Literal[DETECTORS] = Field(
        "xqrs",
        description="R-peak detector on lead I (official: wfdb "  # type: ignore[valid-type]
        "xqrs_detect); neurokit2's ecg_peaks is the fallback below 2 peaks.",
    )
    leads: list[Literal[LEAD_CHOICES]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["I", "II", "V2"],
        min_length=1,
        max_length=12,
        description="Leads of a sentence, in this order (paper: all 12).",
    )
    max_len: int = Field(64, ge=8, le=1024, description="Tokens per sentence, padded or truncated (paper: 256).")

    @field_validator("leads")
    @classmethod
    def _unique(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return distinct(value, info)


class VqhbrParams(Section):
    num_codes: int = Field(64, ge=2, le=65_536, description="Codebook size (paper: 8192).")
    code_dim: int = Field(16, ge=2, le=1024, description="Code dimension (paper: 128).")
    dim: int = Field(64, ge=8, le=2048, description="Transformer width.")
    depth: int = Field(2, ge=1, le=24, description="Encoder layers (paper: 4).")
    decoder_depth: int = Field(2, ge=1, le=24, description="Decoder layers (paper: 2).")
    heads: int = Field(2, ge=1, le=32, description="Attention heads (paper: 2); must divide dim.")
    decay: float = Field(0.99, ge=0.0, lt=1.0, description="EMA decay of the codebook (paper: 0.99).")
    beta: float = Field(1.0, gt=0.0, le=10.0, description="Commitment weight (paper: 1).")
    content_only: bool = Field(
        True,
        description="Code each heartbeat from its content: the encoder adds no position, lead or time embedding "
        "(the official pretraining computes its targets without lead or time inputs); off, the codes follow "
        "mostly from the side inputs and the masked task is solved without reading a beat.",
    )
    steps: int = Field(120, ge=1, le=10_000_000, description="Training steps (paper: 100 epochs).")
    batch: int = Field(32, ge=1, le=4096, description="Sentences per step (paper: 64 x 8 GPUs).")
    lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate after warmup (paper: 5e-5).")
    warmup_steps: int = Field(10, ge=0, le=1_000_000, description="Linear warmup steps (paper: 10 epochs).")

    @model_validator(mode="after")
    def _heads_divide(self) -> VqhbrParams:
        if self.dim % self.heads:
            raise ValueError(f"heads {self.heads} must divide dim {self.dim}")
        return self


class PretrainParams(Section):
    tokenizers: list[Literal[TOKENIZERS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(TOKENIZERS),
        min_length=1,
        description="Tokenizers pretrained: 'qrs' (HeartLang) and 'window' (fixed 96-sample windows, the control).",
    )
    dim: int = Field(64, ge=8, le=2048, description="Backbone width (paper: 768).")
    depth: int = Field(2, ge=1, le=48, description="Backbone layers (paper: 12).")
    heads: int = Field(2, ge=1, le=32, description="Attention heads (paper: 8); must divide dim.")
    mlp: int = Field(128, ge=8, le=16_384, description="Feed-forward width (paper: 1024).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout (paper: 0.1).")
    mask_ratio: float = Field(0.5, gt=0.0, lt=1.0, description="Share of real tokens masked (paper: 0.5).")
    steps: int = Field(120, ge=1, le=10_000_000, description="Training steps (paper: 200 epochs).")
    batch: int = Field(32, ge=1, le=4096, description="Sentences per step.")
    lr: float = Field(2e-3, gt=0, le=1, description="AdamW learning rate after warmup (paper: 5e-4).")
    warmup_steps: int = Field(10, ge=0, le=1_000_000, description="Linear warmup steps (paper: 5 epochs).")

    @field_validator("tokenizers")
    @classmethod
    def _unique(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return distinct(value, info)

    @model_validator(mode="after")
    def _heads_divide(self) -> PretrainParams:
        if self.dim % self.heads:
            raise ValueError(f"heads {self.heads} must divide dim {self.dim}")
        return self


class ProbeParams(Section):
    fractions: list[Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=lambda: [0.01, 0.1, 1.0],
        min_length=1,
        max_length=10,
        description="Label fractions of the probe's training pool (paper: 0.01, 0.1, 1).",
    )
    c: float = Field(1.0, gt=0, le=1e6, description="Inverse L2 strength of the logistic regression.")

    @field_validator("fractions")
    @classmethod
    def _unique(cls, value: list[float], info: ValidationInfo) -> list[float]:
        return sorted(distinct(value, info))


class HeartlangParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Unlabelled and labelled ECGs.")
    tokenize: TokenizeParams = Field(default_factory=TokenizeParams, description="QRS and fixed-window tokens.")
    vqhbr: VqhbrParams = Field(default_factory=VqhbrParams, description="The VQ-HBR tokenizer model.")
    pretrain: PretrainParams = Field(default_factory=PretrainParams, description="Masked ECG-sentence pretraining.")
    probe: ProbeParams = Field(default_factory=ProbeParams, description="The linear probe.")

    def data_problems(self, files: dict[str, CheckedData]) -> list[str]:
        """Every lead of ``tokenize.leads`` is held by every WFDB record (a lead a record lacks would give sentences
        of all-zero beats; stage ``tokenize`` reads the leads this rule was checked with)."""
        checked = files.get("data.wfdb_path")
        if checked is None or checked.path is None:
            return []
        lacking = missing_leads(checked.summary, self.tokenize.leads)
        if not lacking:
            return []
        name, leads = next(iter(lacking.items()))
        held = ", ".join(checked.summary.leads[name]) or "none of the 12"
        return [
            f"tokenize.leads: record {name} lacks {', '.join(leads)} (it holds {held}; {len(lacking)} record(s) "
            f"lack a lead of {self.tokenize.leads}): set tokenize.leads to leads every record holds"
        ]

    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "tokenize.leads": list(LEAD_CHOICES),
        "tokenize.max_len": 256,
        "vqhbr.num_codes": 8192,
        "vqhbr.code_dim": 128,
        "vqhbr.depth": 4,
        "vqhbr.decoder_depth": 2,
        "vqhbr.heads": 2,
        "vqhbr.dim": 768,
        "vqhbr.decay": 0.99,
        "vqhbr.beta": 1.0,
        "vqhbr.lr": 5e-5,
        "vqhbr.batch": 512,
        "pretrain.dim": 768,
        "pretrain.depth": 12,
        "pretrain.heads": 8,
        "pretrain.mlp": 1024,
        "pretrain.dropout": 0.1,
        "pretrain.mask_ratio": 0.5,
        "pretrain.lr": 5e-4,
        "seeds": [0, 1, 2, 3, 4],
    }
    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {"vqhbr.steps": 600, "pretrain.steps": 600, "seeds": list(range(10))}
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline (HeartLang features > the same transformer at random init, paired by seed) at the CPU "
        "protocol with 10 seeds as the units and 5x the training of both learned parts (the audit's fix: at 120 "
        "steps the masked model predicts the codes only a little better than lead and time do, 0.33 masked "
        "accuracy against 0.21 for the most frequent code), so that every gate (codes with content beyond lead and "
        "time, a pretraining that learned its task, probes above chance, random init below the headroom) can pass "
        "with an interval over seeds. One VQ-HBR per tokenizer serves every seed, as in the paper."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "1.9 min with one torch thread on a 2-core machine shared with other training runs (2026-12-06); "
        "the headline is not resolved: -0.030 [-0.042, -0.017] over 3 seeds, random init not shown below the "
        "0.97 headroom with 3 seeds (codes 2.68 bits beyond lead and time; the masked model learned its task)",
        "evidence": "12.5 min with one torch thread on a 2-core machine shared with other training runs "
        "(2026-12-06); the headline does not hold: HeartLang - random init = -0.005 [-0.018, 0.007] macro AUC over "
        "10 paired seeds (0.873 vs 0.878), below the smallest effect of 0.03, every gate met (codes 3.02 bits and "
        "97 % of their entropy beyond lead and time; masked cross-entropy 0.96 nats below lead and time alone; "
        "probes above chance; random init 0.878, under the 0.97 headroom)",
        "paper": "12 leads, 256 tokens, d 768 / 12 layers over MIMIC-IV-ECG (~800k recordings): GPU-sized; not run",
    }
    PAPER_SOURCE: ClassVar[str] = (
        "official PKUDigitalHealth/HeartLang: QRSTokenizer.py (12 leads, max_len 256, token 96), run_vqhbr_training.py "
        "(codebook 8192 x 128, encoder depth 4 / 2 heads, decoder depth 2, EMA 0.99, beta 1, AdamW lr 5e-5, batch "
        "64 x 8) and run_heartlang_pretraining.py (depth 12, 8 heads, d 768, MLP 1024, dropout 0.1, 50% masking, lr "
        "5e-4); the epochs (100 / 200) over MIMIC-IV-ECG have no step equivalent here."
    )
