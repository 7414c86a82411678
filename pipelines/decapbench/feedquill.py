"""decapbench's FeedQuill-lite wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the
method): each seed's train / preference / held-out scenes, the captioner's architecture, the training settings of
the SFT and DPO runs, a seed's saved captioner, the captions sampled for evaluation, and the preference round's
summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from components.captions.dcscore import DCScoreConfig
from components.captions.evaluation import evaluate_captions, summarize
from components.captions.feedquill import (
    CaptionerConfig,
    Pair,
    SupervisionConfig,
    build_captioner,
    load_captioner,
    sample_captions,
    save_captioner,
    split_scenes,
    supervision,
    train_dpo,
)
from components.captions.rule_judge import RuleJudge
from components.captions.world import Scene
from components.training import TrainConfig
from paperflows import derive_seed
from pipelines.decapbench.params import DecapbenchParams, DPOParams, FeedQuillParams, SFTParams


def feedquill_scenes(p: DecapbenchParams, seed: int) -> tuple[list[Scene], list[Scene], list[Scene]]:
    """The seed's (SFT, preference, held-out) scenes, drawn apart from the meta-evaluation's."""
    f = p.feedquill
    return split_scenes(
        (f.train_scenes, f.pref_scenes, f.eval_scenes),
        derive_seed(seed, "feedquill"),
        f.min_objects,
        f.max_objects,
        f"fq{seed}",
    )


def captioner_config(p: DecapbenchParams) -> CaptionerConfig:
    """The from-scratch captioner's architecture (positions for a prompt and a full caption)."""
    c = p.captioner
    return CaptionerConfig(
        layers=c.n_layers, hidden=c.d_model, heads=c.n_heads, max_positions=2 * p.feedquill.max_new_tokens + 128
    )


def train_config(t: SFTParams | DPOParams, seed: int, phase: str, progress: bool) -> TrainConfig:
    """The training loop's settings of one SFT or DPO (``phase``) run of ``seed``."""
    return TrainConfig(
        steps=t.steps,
        lr=t.lr,
        warmup_steps=t.warmup_steps,
        seed=derive_seed(seed, phase),
        log_every=max(1, t.steps // 40),
        progress=progress,
        desc=f"decapbench {phase} seed {seed}",
    )


def new_captioner(p: DecapbenchParams, seed: int) -> Any:
    """A from-scratch captioner of ``seed`` (its initial weights drawn from the seed alone)."""
    return build_captioner(captioner_config(p), derive_seed(seed, "captioner"))


def seed_captioner(folder: Path, p: DecapbenchParams, seed: int) -> Any:
    """The captioner of ``seed`` saved in ``folder``."""
    return load_captioner(folder / f"seed{seed}.safetensors", captioner_config(p), derive_seed(seed, "captioner"))


def save_seed_captioner(lm: Any, folder: Path, p: DecapbenchParams, seed: int) -> None:
    """Save the captioner of ``seed`` in ``folder`` (where :func:`seed_captioner` reads it)."""
    save_captioner(lm, captioner_config(p), folder / f"seed{seed}.safetensors")


def sft_data(p: DecapbenchParams, scenes: list[Scene], seed: int) -> tuple[list[str], list[str]]:
    """The SFT (prompt, caption) pairs of the training ``scenes``: simulated captions of controlled coverage with
    a little hallucination (``feedquill.sft_hallucination``)."""
    f = p.feedquill
    return supervision(
        scenes,
        SupervisionConfig(per_scene=f.per_scene, hallucination=(0.0, f.sft_hallucination)),
        derive_seed(seed, "supervision"),
    )


def preference_samples(lm: Any, scenes: list[Scene], f: FeedQuillParams, seed: int) -> list[list[str]]:
    """K captions per preference scene, sampled at the preference temperature."""
    return sample_captions(
        lm,
        scenes,
        f.samples,
        temperature=f.temperature,
        max_new_tokens=f.max_new_tokens,
        seed=derive_seed(seed, "samples"),
    )


def dpo_on_pairs(
    policy: Any, reference: Any, pairs: list[dict[str, Any]], cfg: TrainConfig, t: DPOParams, callback: Any
) -> Any:
    """DPO of ``policy`` against the frozen ``reference`` on a seed's preference rows (prompt, chosen caption,
    rejected caption); the training result."""
    return train_dpo(
        policy,
        reference,
        [q["prompt"] for q in pairs],
        [q["chosen"] for q in pairs],
        [q["rejected"] for q in pairs],
        cfg,
        beta=t.beta,
        batch_size=t.batch_size,
        callback=callback,
    )


def eval_captions(lm: Any, scenes: list[Scene], f: FeedQuillParams, seed: int) -> list[str]:
    """One caption per held-out scene, sampled at the evaluation temperature."""
    sampled = sample_captions(
        lm, scenes, 1, temperature=f.eval_temperature, max_new_tokens=f.max_new_tokens, seed=derive_seed(seed, "eval")
    )
    return [c[0] for c in sampled]


def preference_summary(seed: int, rewards: list[list[float]], pairs: list[Pair]) -> dict[str, float]:
    """A seed's preference round: its pairs, the mean reward of its samples and the mean reward gap of its pairs."""
    return {
        f"seed{seed}/pairs": len(pairs),
        f"seed{seed}/reward_mean": float(np.mean(rewards)),
        f"seed{seed}/reward_gap": float(np.mean([q.reward_chosen - q.reward_rejected for q in pairs]))
        if pairs
        else 0.0,
    }


def blind_hallucination(scenes: list[Scene], captions: list[str]) -> float:
    """The hallucination rate of ``captions`` read against the next scene's graph instead of their own (scene i's
    caption judged on scene i + 1, cyclically): what a captioner that ignores its input would score, the trivial
    reference a captioner's precision must beat."""
    if len(scenes) < 2:
        return float("nan")
    shifted = scenes[1:] + scenes[:1]
    return summarize(evaluate_captions(shifted, captions, RuleJudge({s.name: s for s in shifted}), DCScoreConfig()))[
        "hallucination"
    ]
