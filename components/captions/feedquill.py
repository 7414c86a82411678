"""FeedQuill-lite: preference tuning of a tiny captioner on DCScore-judge preferences (the brief's reduction).

1. **Captioner**: a 2-layer, width-128 Llama trained from scratch over the word vocabulary of the synthetic
   world (`components.llm.word_lm`); input: the scene as words (``large red cat top left ; ...``, objects in
   reading order) followed by ``describe``; output: the caption, lower-cased, ended by the eos token.
2. **SFT** on simulated captions of training scenes: high coverage but a share of hallucinated facts and some
   filler (web-style supervision is not clean), objects introduced in reading order; token-weighted NLL
   through `components.training.fit`.
3. **Sampling**: K captions per preference scene from the SFT model (temperature 1).
4. **Feedback**: every sample is decomposed, matched and verified by the judge; its reward is the verified
   precision plus ``recall_bonus`` x the recall (FeedQuill: precision is the hallucination signal, the
   number of correct units the richness signal); the best and the worst sample of a scene form a
   (chosen, rejected) pair when their rewards differ by at least ``margin``.
5. **DPO** (`components.preference`, the "dpo" objective: -log sigmoid(beta [(s_c - s_c^ref) - (s_r - s_r^ref)]))
   starting from the SFT weights, the frozen SFT model as the reference (its scores computed once).

The paper trains a reward model and runs PPO on VLMs; DPO on the judge's pairs is the brief's CPU-scale
substitute.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from components.captions.dcscore import DCScoreConfig, Judge, score_item
from components.captions.evaluation import items_for
from components.captions.simulator import CaptionSpec, simulate_caption
from components.captions.world import (
    CATEGORIES,
    COLOURS,
    FILLERS,
    SIZES,
    Scene,
    make_scenes,
    scene_tokens,
    scene_vocabulary,
)
from components.io import load_tensors, save_tensors
from components.llm import LocalLM, frozen_copy, pair_batches, precompute_scores, sequence_scores, word_lm
from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss
from components.training import TrainConfig, TrainResult, fit

SEPARATOR = "describe"
_CAPTION_WORDS = (
    "there",
    "is",
    "a",
    "an",
    "the",
    "at",
    "in",
    "on",
    "to",
    "of",
    "left",
    "right",
    "top",
    "bottom",
    "centre",
    "above",
    "and",
    ".",
    ",",
)


def caption_vocabulary() -> list[str]:
    """Every word of the captioner's inputs and of the captions it learns (canonical wording, fillers)."""
    filler_words = [w for f in FILLERS for w in re.findall(r"\w+|[^\w\s]+", f.lower())]
    words = [*scene_vocabulary(), SEPARATOR, *_CAPTION_WORDS, *CATEGORIES, *COLOURS, *SIZES, *filler_words]
    return list(dict.fromkeys(words))


def split_scenes(
    counts: tuple[int, int, int], seed: int, min_objects: int, max_objects: int, prefix: str
) -> tuple[list[Scene], list[Scene], list[Scene]]:
    """(SFT, preference, evaluation) scenes: disjoint draws of one seeded scene stream."""
    n_train, n_pref, n_eval = counts
    drawn = make_scenes(n_train + n_pref + n_eval, seed, min_objects, max_objects, prefix=prefix)
    return drawn[:n_train], drawn[n_train : n_train + n_pref], drawn[n_train + n_pref :]


def prompt_of(scene: Scene) -> str:
    return f"{scene_tokens(scene)} {SEPARATOR}"


def target_of(caption: str) -> str:
    """A caption as the captioner writes it: lower case, after a space (word_lm's continuation convention)."""
    return " " + caption.lower()


@dataclass(frozen=True)
class CaptionerConfig:
    layers: int = 2
    hidden: int = 128
    heads: int = 4
    max_positions: int = 320


def build_captioner(cfg: CaptionerConfig, seed: int) -> LocalLM:
    return word_lm(
        caption_vocabulary(),
        layers=cfg.layers,
        hidden=cfg.hidden,
        heads=cfg.heads,
        seed=seed,
        max_positions=cfg.max_positions,
        name="captioner",
    )


TIED = "lm_head.weight"  # the output layer shares the input embedding's tensor


def save_captioner(lm: LocalLM, cfg: CaptionerConfig, path: str | Path, metadata: dict[str, str] | None = None) -> Path:
    """The captioner's weights as safetensors, the tied output layer once (as the embedding); the metadata say
    how to rebuild it: ``load_captioner(path, CaptionerConfig(**model.config), seed)``."""
    state = {k: v for k, v in lm.model.state_dict().items() if k != TIED}
    meta = {
        "model.class": "components.captions.feedquill:load_captioner",
        "model.config": json.dumps(dataclasses.asdict(cfg), sort_keys=True),
        **(metadata or {}),
    }
    return save_tensors(state, path, meta)


def load_captioner(path: str | Path, cfg: CaptionerConfig, seed: int) -> LocalLM:
    lm = build_captioner(cfg, seed)
    result = lm.model.load_state_dict(load_tensors(path), strict=False)
    if result.unexpected_keys or set(result.missing_keys) - {TIED}:
        raise ValueError(
            f"{path}: not a captioner of this configuration (missing {result.missing_keys}, "
            f"unexpected {result.unexpected_keys})"
        )
    return lm


# --------------------------------------------------------------------------------------------------
# 2. supervised fine-tuning on noisy simulated captions
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SupervisionConfig:
    """The simulated captions the captioner is fine-tuned on (one spec drawn per caption)."""

    per_scene: int = 2
    coverage: tuple[float, float] = (0.7, 1.0)
    hallucination: tuple[float, float] = (0.0, 0.3)
    max_fillers: int = 1
    ordered: bool = True  # objects introduced in reading order, as the scene words list them


def supervision(scenes: Sequence[Scene], cfg: SupervisionConfig, seed: int) -> tuple[list[str], list[str]]:
    """(prompts, targets): ``per_scene`` simulated captions of every scene (canonical wording, no typos)."""
    rng = np.random.default_rng(seed)
    prompts, targets = [], []
    for scene in scenes:
        for _ in range(cfg.per_scene):
            spec = CaptionSpec(
                coverage=float(rng.uniform(*cfg.coverage)),
                hallucination=float(rng.uniform(*cfg.hallucination)),
                fillers=int(rng.integers(cfg.max_fillers + 1)),
                ordered=cfg.ordered,
            )
            prompts.append(prompt_of(scene))
            targets.append(target_of(simulate_caption(scene, spec, rng).caption))
    return prompts, targets


def nll_loss(model: nn.Module, batch: tuple[Any, ...]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Token-weighted NLL of the continuations (the registry's NLL of the chosen answer, used as plain SFT)."""
    return objective_loss("idk", PreferenceBatch(chosen=sequence_scores(model, batch[0])))


def train_sft(
    lm: LocalLM,
    prompts: Sequence[str],
    targets: Sequence[str],
    cfg: TrainConfig,
    batch_size: int,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    tokens = lm.tokenize_pairs(list(prompts), list(targets), append_eos=True)
    return fit(lm.model, nll_loss, pair_batches(tokens, size=batch_size), cfg, callback=callback)


# --------------------------------------------------------------------------------------------------
# 3.-4. sampling and judge feedback
# --------------------------------------------------------------------------------------------------
def sample_captions(
    lm: LocalLM,
    scenes: Sequence[Scene],
    k: int,
    *,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch_size: int = 64,
) -> list[list[str]]:
    """``k`` captions per scene (sampled with ``seed``; prompt i's draws depend only on (seed, i))."""
    prompts = [prompt_of(s) for s in scenes for _ in range(k)]
    lm.model.eval()
    texts = lm.generate(
        prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, batch_size=batch_size
    )
    return [[t.strip() for t in texts[i * k : (i + 1) * k]] for i in range(len(scenes))]


def reward(details: dict[str, Any], recall_bonus: float) -> float:
    """Verified precision + recall_bonus x recall of a judged caption (0 for an invalid judgement)."""
    if not details:
        return 0.0
    return float(details["precision"] + recall_bonus * details["recall"])


@dataclass(frozen=True)
class Pair:
    scene: int
    chosen: str
    rejected: str
    reward_chosen: float
    reward_rejected: float

    def to_row(self, scenes: Sequence[Scene], **labels: Any) -> dict[str, Any]:
        """The pair as a table row, with its scene's name and the captioner's prompt."""
        scene = scenes[self.scene]
        return {
            **labels,
            "scene": scene.name,
            "prompt": prompt_of(scene),
            "chosen": self.chosen,
            "rejected": self.rejected,
            "reward_chosen": self.reward_chosen,
            "reward_rejected": self.reward_rejected,
        }


def judge_samples(
    judge: Judge, scenes: Sequence[Scene], samples: Sequence[Sequence[str]], cfg: DCScoreConfig, recall_bonus: float
) -> list[list[float]]:
    """The reward of every sample (item indices: scene i, sample j -> i * k + j)."""
    k = len(samples[0]) if samples else 0
    rewards = []
    for i, (scene, texts) in enumerate(zip(scenes, samples)):
        items = items_for([scene] * len(texts), texts, start=i * k)
        records = [score_item(judge, item, cfg) for item in items]
        rewards.append([reward(r["eval_details"] if r["valid"] else {}, recall_bonus) for r in records])
    return rewards


def preference_pairs(samples: Sequence[Sequence[str]], rewards: Sequence[Sequence[float]], margin: float) -> list[Pair]:
    """Per scene, (best, worst) sample when their rewards differ by >= margin (ties: the first sample)."""
    pairs = []
    for i, (texts, values) in enumerate(zip(samples, rewards)):
        best, worst = int(np.argmax(values)), int(np.argmin(values))
        if values[best] - values[worst] >= margin and texts[best] != texts[worst]:
            pairs.append(Pair(i, texts[best], texts[worst], float(values[best]), float(values[worst])))
    return pairs


# --------------------------------------------------------------------------------------------------
# 5. DPO against the frozen SFT model
# --------------------------------------------------------------------------------------------------
def train_dpo(
    policy: LocalLM,
    reference: nn.Module,
    prompts: Sequence[str],
    chosen: Sequence[str],
    rejected: Sequence[str],
    cfg: TrainConfig,
    *,
    beta: float,
    batch_size: int,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """DPO of ``policy`` in place on (prompt, chosen, rejected) triples; the reference's scores of both
    answers are computed once before training."""
    tokens_c = policy.tokenize_pairs(list(prompts), [target_of(c) for c in chosen], append_eos=True)
    tokens_r = policy.tokenize_pairs(list(prompts), [target_of(r) for r in rejected], append_eos=True)
    ref_c, ref_r = precompute_scores(reference, tokens_c), precompute_scores(reference, tokens_r)
    objective = ObjectiveConfig(beta=beta)

    def loss_fn(model: nn.Module, batch: tuple[Any, ...]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        rows_c, rows_r, rc, rr = batch
        scores = PreferenceBatch(
            chosen=sequence_scores(model, rows_c),
            rejected=sequence_scores(model, rows_r),
            ref_chosen=rc,
            ref_rejected=rr,
        )
        return objective_loss("dpo", scores, objective)

    return fit(
        policy.model, loss_fn, pair_batches(tokens_c, tokens_r, ref_c, ref_r, size=batch_size), cfg, callback=callback
    )


def policy_and_reference(sft: LocalLM) -> tuple[LocalLM, nn.Module]:
    """A trainable copy of the SFT captioner (the DPO policy) and a frozen copy (the reference)."""
    policy = LocalLM(
        name=sft.name, model=copy.deepcopy(sft.model), tokenizer=sft.tokenizer, device=sft.device, seed=sft.seed
    )
    return policy, frozen_copy(sft.model)
