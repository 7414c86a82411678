"""DeCapBench / FeedQuill parameters: the form, the paper-scale preset and its source, the paper's vocabulary,
and the judge endpoint settings (environment, never parameters)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from components.captions.chat_judge import endpoint_problems
from components.captions.dcscore import DCScoreConfig
from components.captions.decapbench_files import (
    SUFFIXES,
    DecapbenchFormatError,
    check_candidate_file,
    check_image_folder,
    check_oracle_file,
    missing_images,
    read_benchmark,
)
from paperflows.params import AttentionSection, CheckedData, DataFile, PipelineParams, Section

# the meta-evaluation: DCScore and the baselines (rows of the paper's correlation table)
METRICS = ("dcscore", "bleu4", "rouge_l", "tfidf_cosine", "capture")
NGRAM_BASELINES = ("bleu4", "rouge_l", "tfidf_cosine")  # the claim: DCScore beats these
LABELS = {
    "dcscore": "DCScore",
    "bleu4": "BLEU-4",
    "rouge_l": "ROUGE-L",
    "tfidf_cosine": "TF-IDF cosine",
    "capture": "CAPTURE-style F1 (obj/attr/rel)",
    "dcscore_precision": "DCScore precision term",
    "dcscore_recall": "DCScore recall term",
}
CORRELATIONS = ("pearson", "spearman", "kendall")
SUBSETS = ("all", "long", "short")
CAPTIONERS = ("sft", "dpo")
RECALL_TOLERANCE = 0.05  # the claim: DPO keeps recall within 5 % of SFT's
MIN_SFT_PRECISION = 0.5  # precondition: the SFT captioner states more correct than false units

# the judge endpoint of real files: settings of the environment (never parameters, never written anywhere)
JUDGE_ENV = ("PAPERFLOWS_JUDGE_BASE_URL", "PAPERFLOWS_JUDGE_MODEL", "PAPERFLOWS_JUDGE_API_KEY")


def judge_endpoint_settings() -> dict[str, str | None]:
    """``{"base_url", "model", "api_key"}`` from the environment (unset: None)."""
    return {
        key: (os.environ.get(var) or "").strip() or None
        for key, var in zip(("base_url", "model", "api_key"), JUDGE_ENV)
    }


class DataParams(Section):
    oracle_path: Annotated[str | None, DataFile(check_oracle_file, description="DeCapBench oracle JSONL")] = Field(
        None,
        description="DeCapBench's oracle file (eval/human_annotated_oracle_facts.jsonl: image_name, "
        "oracle_caption, oracle_facts per line; relative to the project root). Set together with "
        "candidates_path. Empty: the synthetic scene-graph world.",
    )
    candidates_path: Annotated[str | None, DataFile(check_candidate_file, description="DeCapBench candidate JSONL")] = (
        Field(
            None,
            description="The captions to score (image_path, caption, oracle_caption per line; an optional "
            "human_score per line enables the correlation table). Scored offline by the local sentence-embedding "
            "judge, or by the chat judge with judge.backend 'chat' (then the PAPERFLOWS_JUDGE_* settings).",
        )
    )
    images_dir: Annotated[
        str | None,
        DataFile(
            check_image_folder,
            folder=True,
            description="folder of the benchmark images",
            layout=("aar_test_04746.jpg",),
        ),
    ] = Field(
        None,
        description="Folder of the benchmark's images (IIW-400, named by image_name), attached to the verify "
        "call as the official code does. Empty: verification against the reference caption only.",
    )
    n_images: int = Field(
        40,
        ge=10,
        le=100_000,
        description="Synthetic images (scenes) per seed, one candidate caption each (the brief: 300; 40 keeps the "
        "sentence-embedding judge within the CPU default's budget, the evidence preset scores 250).",
    )
    min_objects: int = Field(3, ge=1, le=9, description="Fewest objects in a synthetic scene.")
    max_objects: int = Field(
        8, ge=1, le=9, description="Most objects in a synthetic scene (3 x 3 grid, 10 categories)."
    )

    @field_validator("oracle_path", "candidates_path", "images_dir")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return None if value is not None and not value.strip() else value

    @field_validator("oracle_path", "candidates_path")
    @classmethod
    def _suffix(cls, value: str | None) -> str | None:
        if value is not None and Path(value).suffix.lower() not in SUFFIXES:
            raise ValueError(f"expected a JSON Lines file ending in one of {SUFFIXES}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> DataParams:
        if (self.oracle_path is None) != (self.candidates_path is None):
            raise ValueError(
                "decapbench.data.oracle_path and decapbench.data.candidates_path go together: the "
                "candidates are scored against the oracle facts (set both, or neither for the "
                "synthetic world)"
            )
        if self.images_dir is not None and self.candidates_path is None:
            raise ValueError(
                "decapbench.data.images_dir is only read with real files (oracle_path and candidates_path)"
            )
        if self.min_objects > self.max_objects:
            raise ValueError(f"min_objects ({self.min_objects}) must not exceed max_objects ({self.max_objects})")
        return self


class CaptionParams(Section):
    coverage: list[Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: [0.2, 1.0],
        min_length=2,
        max_length=2,
        description="Range of a simulated caption's coverage (share of the oracle facts it states), drawn "
        "uniformly per caption.",
    )
    hallucination: list[Annotated[float, Field(ge=0, lt=1)]] = Field(
        default_factory=lambda: [0.0, 0.5],
        min_length=2,
        max_length=2,
        description="Range of the share of a caption's stated facts that are false.",
    )
    max_fillers: int = Field(
        3, ge=0, le=8, description="Relevance-0 filler sentences per caption: 0 to this, uniformly."
    )
    paraphrase: float = Field(
        0.5, ge=0, le=1, description="Probability that a sentence takes a paraphrased template and a word a synonym."
    )
    typo_rate: float = Field(0.02, ge=0, le=1, description="Probability of a typo in a word of 5+ letters.")
    extra_rate: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Probability that a true relation the oracle does not list is stated (a correct new detail).",
    )
    human: Literal["raters", "f1"] = Field(
        "raters",
        description="The synthetic human score. raters: simulated annotators' 1-5 ratings of the latent quality "
        "coverage x precision ** hallucination_weight, with ordinal rater noise (not an F1: DCScore's form is not "
        "the label's); f1: the true F1 of precision and coverage plus Gaussian noise (DCScore's own form).",
    )
    raters: int = Field(3, ge=1, le=20, description="human 'raters': annotators per caption, their mean is the score.")
    rater_noise: float = Field(
        0.3,
        ge=0,
        le=5,
        description="human 'raters': std of a rater's noise on the 1-5 scale before rounding (0.3: two raters agree "
        "at Spearman 0.74, within the 0.7-0.8 of human caption ratings).",
    )
    hallucination_weight: float = Field(
        2.0,
        ge=0,
        le=10,
        description="human 'raters': exponent of precision in the latent quality (2: a false statement costs more "
        "than an omission).",
    )
    human_noise: float = Field(
        0.05, ge=0, le=1, description="human 'f1': std of the noise on the true F1 of precision and coverage."
    )

    @model_validator(mode="after")
    def _ranges(self) -> CaptionParams:
        for name in ("coverage", "hallucination"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name}: the range's low end ({low}) exceeds its high end ({high})")
        return self


class JudgeParams(Section):
    backend: Literal["auto", "embed", "rule", "chat"] = Field(
        "auto",
        description="DCScore's judge of the meta-evaluation. auto / embed: the local judge that knows no caption "
        "grammar (sentence units matched and verified by sentence-embedding cosine; offline, synthetic world and "
        "real files alike); rule: the synthetic world's rule judge (parses with the simulator's grammar, verifies "
        "on the scene graph: it shares the human score's facts, so its win is a check, not a claim); chat: an "
        "OpenAI-compatible chat-completions judge (PAPERFLOWS_JUDGE_* settings), which also scores FeedQuill's "
        "captions. FeedQuill's rewards use the rule judge otherwise.",
    )
    encoder: Literal["minilm", "tiny"] = Field(
        "minilm",
        description="Embedding judge: sentence encoder (minilm: all-MiniLM-L6-v2, offline; tiny: hashed character "
        "n-grams, no model, for smoke runs).",
    )
    match_threshold: float = Field(
        0.5, ge=-1, le=1, description="Embedding judge: least cosine of a unit with the oracle fact it maps to."
    )
    verify_threshold: float = Field(
        0.6,
        ge=-1,
        le=1,
        description="Embedding judge: least cosine of a unit with a reference sentence (oracle caption sentence or "
        "oracle fact) for the unit to be verified.",
    )
    relevance_threshold: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="Embedding judge: a unit whose best cosine with the reference is below this is an embellishment "
        "(relevance 0).",
    )
    n_match: int = Field(3, ge=1, le=10, description="Matching samples per caption (official: 3).")
    n_verify: int = Field(3, ge=1, le=10, description="Verification samples per caption (official: 3).")
    max_tries: int = Field(
        5,
        ge=1,
        le=20,
        description="Attempts per caption when a judge answer is unusable "
        "(official MAX_TRIES: 5); then the caption is reported invalid.",
    )
    relevant_credit: Literal["relevant", "all"] = Field(
        "relevant",
        description="1/c credit of the relevance-1 branch: c counts relevance-1 units (relevant) or "
        "all units, as the official code's relevant branch reads the weights of all units (all).",
    )
    flip_rate: float = Field(
        0.05,
        ge=0,
        le=0.5,
        description="Rule judge: probability that a sampled mapping "
        "drops a match and a sampled verification flips (the sampling noise of an LLM "
        "judge; 0: exact).",
    )
    fuzzy_cutoff: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Rule judge: difflib ratio at which a sentence the grammar does not cover matches an oracle fact.",
    )
    max_tokens: int = Field(
        2000, ge=64, le=32_768, description="Chat judge: completion token budget per call (official: 2000)."
    )
    timeout_s: float = Field(120.0, gt=0, le=3600, description="Chat judge: seconds to wait for one answer.")

    def meta_judge(self) -> str:
        """The judge of the meta-evaluation: embed, rule or chat."""
        return "embed" if self.backend == "auto" else self.backend

    def dcscore_config(self) -> DCScoreConfig:
        return DCScoreConfig(
            n_match=self.n_match, n_verify=self.n_verify, max_tries=self.max_tries, relevant_credit=self.relevant_credit
        )


class MetaParams(Section):
    long_share: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="Share of a seed's captions, the longest by word count, that form the 'long captions' subset.",
    )


class FeedQuillParams(Section):
    seeds: int = Field(
        3,
        ge=1,
        le=100,
        description="FeedQuill-lite runs on the first this many of the run's seeds (the meta-evaluation on all).",
    )
    min_objects: int = Field(1, ge=1, le=9, description="Fewest objects in a captioner scene.")
    max_objects: int = Field(
        3,
        ge=1,
        le=9,
        description="Most objects in a captioner scene (the brief: 3-8; fewer objects keep the CPU run short).",
    )
    train_scenes: int = Field(400, ge=4, le=100_000, description="Scenes of the SFT data.")
    per_scene: int = Field(2, ge=1, le=50, description="Simulated captions per SFT scene.")
    sft_hallucination: float = Field(
        0.3,
        ge=0,
        lt=1,
        description="The SFT captions' share of false facts is drawn from [0, this] (noisy supervision).",
    )
    pref_scenes: int = Field(60, ge=2, le=100_000, description="Scenes whose samples are judged into preference pairs.")
    samples: int = Field(4, ge=2, le=32, description="Captions sampled per preference scene (K).")
    temperature: float = Field(1.0, gt=0, le=2, description="Sampling temperature of the preference samples.")
    recall_bonus: float = Field(0.5, ge=0, le=10, description="Reward = verified precision + this x recall.")
    margin: float = Field(0.05, ge=0, le=2, description="Least reward gap of a (chosen, rejected) pair.")
    eval_scenes: int = Field(60, ge=2, le=100_000, description="Held-out scenes the SFT and DPO captioners describe.")
    eval_temperature: float = Field(
        1.0, ge=0, le=2, description="Decoding temperature of the evaluation captions (0: greedy)."
    )
    max_new_tokens: int = Field(80, ge=8, le=1024, description="Token budget of a caption.")

    @model_validator(mode="after")
    def _objects(self) -> FeedQuillParams:
        if self.min_objects > self.max_objects:
            raise ValueError(f"min_objects ({self.min_objects}) must not exceed max_objects ({self.max_objects})")
        return self


class CaptionerParams(AttentionSection):
    n_layers: int = Field(2, ge=1, le=24, description="Decoder layers of the from-scratch captioner.")
    d_model: int = Field(128, ge=16, le=2048, description="Width of the captioner (MLP 4x).")
    n_heads: int = Field(4, ge=1, le=32, description="Attention heads.")


class SFTParams(Section):
    steps: int = Field(30, ge=1, le=1_000_000, description="Supervised fine-tuning steps.")
    batch_size: int = Field(32, ge=1, le=4096, description="Captions per SFT step.")
    lr: float = Field(8e-3, gt=0, le=1, description="AdamW learning rate.")
    warmup_steps: int = Field(3, ge=0, le=100_000, description="Linear warmup steps.")


class DPOParams(Section):
    steps: int = Field(30, ge=1, le=1_000_000, description="DPO steps (the brief: 200).")
    batch_size: int = Field(16, ge=1, le=4096, description="Preference pairs per step.")
    lr: float = Field(1e-4, gt=0, le=1, description="AdamW learning rate.")
    beta: float = Field(0.1, gt=0, le=10, description="DPO inverse temperature.")
    warmup_steps: int = Field(10, ge=0, le=100_000, description="Linear warmup steps.")


class DecapbenchParams(PipelineParams):
    data: DataParams = Field(default_factory=DataParams, description="Images, oracle facts and candidates.")
    captions: CaptionParams = Field(
        default_factory=CaptionParams, description="The caption simulator of the synthetic meta-evaluation."
    )
    judge: JudgeParams = Field(default_factory=JudgeParams, description="DCScore's judge.")
    meta: MetaParams = Field(default_factory=MetaParams, description="The meta-evaluation table.")
    feedquill: FeedQuillParams = Field(
        default_factory=FeedQuillParams, description="FeedQuill-lite: scenes, sampling, rewards and pairs."
    )
    captioner: CaptionerParams = Field(default_factory=CaptionerParams, description="The tiny captioner.")
    sft: SFTParams = Field(default_factory=SFTParams, description="Supervised fine-tuning of the captioner.")
    dpo: DPOParams = Field(default_factory=DPOParams, description="DPO on the judge's preference pairs.")

    EVIDENCE_SCALE: ClassVar[dict[str, Any]] = {
        "seeds": list(range(8)),
        "data.n_images": 250,
        "feedquill.seeds": 3,
        "feedquill.max_objects": 2,
        "sft.steps": 300,
        "sft.lr": 4e-3,
        "sft.warmup_steps": 30,
        "dpo.steps": 40,
    }
    EVIDENCE_SOURCE: ClassVar[str] = (
        "The headline is decided with the grammar-free sentence-embedding judge (MiniLM) against simulated raters "
        "(not DCScore's F1 form), so it can fail: 8 seeds of 250 captions each put the t interval of the "
        "smallest Spearman gap within +-0.041 (measured), narrower than the claim's smallest effect (0.058, one "
        "standard error of a rho over 300 captions). FeedQuill-lite runs on the first 3 seeds with 1-2-object "
        "scenes and 300 SFT steps (10 % warmup), enough for the captioner to state more correct than false units "
        "(its gate); the DPO claims then rest on 3 seeds and 40 DPO steps (the brief's 200 do not fit beside the "
        "judge)."
    )
    SCALE_COST: ClassVar[dict[str, str]] = {
        "cpu": "47 s of flow with one torch thread beside one other pipeline on 2 cores (2026-12-06); 3.6 min wall "
        "at load average 6 (the rule-judge default before it took 2.7 min under like load): the judge "
        "18 s, FeedQuill-lite 120 s. The headline is not resolved there: 0.066 [-0.233, 0.365] over 3 seeds of 40 "
        "captions; the FeedQuill claims are not resolved by their gate (30 SFT steps do not teach the captioner)",
        "evidence": "7.9 min with one torch thread on a 2-core machine running other pipelines (2026-12-06, run "
        "20261206T184847Z; the judge 134 s, SFT 232 s; 9.3 min in an earlier run under more load). The headline "
        "does not hold: the smallest Spearman gap of DCScore (MiniLM judge) over BLEU-4 / ROUGE-L / TF-IDF is "
        "-0.027 [-0.068, 0.014] over 8 seeds (DCScore 0.41, BLEU-4 0.43, ROUGE-L 0.39, TF-IDF 0.21; all gates "
        "met): with a judge that knows no caption grammar DCScore ties BLEU-4. dcscore_beats_capture is not "
        "resolved (gap -0.46: the offline CAPTURE-style F1 reads the simulator's grammar). The SFT captioner "
        "learns (precision 0.65 [0.54, 0.77], blind 0.07); DPO lowers hallucination by 0.096 [0.067, 0.126], "
        "raises DCScore x1.16 [1.01, 1.33] and keeps recall (x1.15 [0.97, 1.38]) on 3 seeds, with rewards from "
        "the exact rule judge",
        "paper": "400 images with an LLM judge (API or GPU) and the 3-8-object captioner for 4000 SFT steps: not run",
    }
    PAPER_SCALE: ClassVar[dict[str, Any]] = {
        "data.n_images": 400,
        "feedquill.min_objects": 3,
        "feedquill.max_objects": 8,
        "feedquill.train_scenes": 4000,
        "feedquill.pref_scenes": 1000,
        "feedquill.eval_scenes": 400,
        "feedquill.max_new_tokens": 320,
        "sft.steps": 4000,
        "sft.batch_size": 64,
        "sft.lr": 3e-3,
        "dpo.steps": 200,
        "dpo.batch_size": 32,
    }
    PAPER_SOURCE: ClassVar[str] = (
        "DeCapBench: 400 images (IIW-400), 9 judge trials per caption (3 matchings x 3 verifications), "
        "decompose at temperature 1, verify at 0.3 (eval/evaluation_decapbench.py). The brief's FeedQuill-lite: "
        "scenes of 3-8 objects, a 2-layer width-128 captioner, K = 4 samples, DPO for 200 steps; the SFT "
        "length (4000 steps) is ours, long enough for the captioner to copy scene attributes."
    )

    def uses_real_data(self) -> bool:
        return self.data.candidates_path is not None

    def uses_chat_judge(self) -> bool:
        return self.judge.backend == "chat"

    def feedquill_seeds(self) -> list[int]:
        """The seeds FeedQuill-lite runs on: the first ``feedquill.seeds`` of the run's."""
        return list(self.seeds)[: self.feedquill.seeds]

    def feedquill_judge(self) -> str:
        """FeedQuill's judge (rewards and the captioners' DCScore): chat with the chat backend, else rule (the
        hallucination and recall it reports are exact either way)."""
        return "chat" if self.uses_chat_judge() else "rule"

    @model_validator(mode="after")
    def _judge_reads_the_data(self) -> DecapbenchParams:
        if self.uses_real_data() and self.judge.backend == "rule":
            raise ValueError(
                "decapbench.judge.backend 'rule' parses the synthetic world's captions against its scene graphs; "
                "real captions (data.candidates_path) take the 'auto' / 'embed' judge or 'chat'"
            )
        return self

    def environment_problems(self, groups: tuple[str, ...] | None = None) -> list[str]:
        """The chat judge needs an endpoint: PAPERFLOWS_JUDGE_BASE_URL and PAPERFLOWS_JUDGE_MODEL (and the key
        in PAPERFLOWS_JUDGE_API_KEY when the endpoint asks for one). The other judges run offline."""
        if not (self.judge.backend == "chat" and (groups is None or "judge" in groups)):
            return []
        settings = judge_endpoint_settings()
        missing = [var for key, var in zip(("base_url", "model"), JUDGE_ENV) if settings[key] is None]
        why = "judge.backend is 'chat'"
        if missing:
            return [
                f"{why}, which the chat-completions judge scores; set {' and '.join(missing)} (an "
                "OpenAI-compatible endpoint such as https://api.openai.com/v1 and a model such as "
                "gpt-4o-2024-05-13; the key goes in PAPERFLOWS_JUDGE_API_KEY when the endpoint needs one)"
            ]
        # the judge's own rule (ChatEndpoint), applied before any work rather than when the judge stage starts
        return [
            f"{why}; the judge endpoint settings ({' / '.join(JUDGE_ENV[:2])}) are unusable: {problem}"
            for problem in endpoint_problems(settings["base_url"] or "", settings["model"] or "")
        ]

    def data_problems(self, files: dict[str, CheckedData]) -> list[str]:
        """Every candidate names an image of the oracle file, and of ``data.images_dir`` when given: the files
        read together as stage ``world`` reads them (:func:`~components.captions.decapbench_files.read_benchmark`
        and ``missing_images``)."""
        oracle, candidates = files.get("data.oracle_path"), files.get("data.candidates_path")
        if oracle is None or candidates is None or oracle.path is None or candidates.path is None:
            return []
        try:
            _, rows = read_benchmark(oracle.path, candidates.path)
        except DecapbenchFormatError as err:
            return [f"data.candidates_path: {err}"]
        images = files.get("data.images_dir")
        if images is not None and images.path is not None and (missing := missing_images(rows, images.path)):
            return [
                f"data.images_dir: {len(missing)} image(s) named by the candidates are not in {images.path} "
                f"(the first at candidate line {missing[0]})"
            ]
        return []
