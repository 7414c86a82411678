"""FeedQuill-lite pieces on a tiny captioner: vocabulary, pairs, rewards, DPO's first loss, weights round trip,
exact evaluation of known captions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from components.captions.dcscore import DCScoreConfig
from components.captions.evaluation import evaluate_captions, summarize
from components.captions.feedquill import (
    CaptionerConfig,
    SupervisionConfig,
    build_captioner,
    load_captioner,
    policy_and_reference,
    preference_pairs,
    prompt_of,
    reward,
    sample_captions,
    save_captioner,
    split_scenes,
    supervision,
    train_dpo,
    train_sft,
)
from components.captions.rule_judge import RuleJudge
from components.captions.world import oracle_caption
from components.io import safetensors_metadata
from components.training import TrainConfig

TINY = CaptionerConfig(layers=1, hidden=32, heads=2, max_positions=256)


def test_the_vocabulary_covers_scene_words_and_supervision_captions() -> None:
    lm = build_captioner(TINY, 0)
    train, _, _ = split_scenes((30, 1, 1), 0, 1, 4, "t")
    prompts, targets = supervision(train, SupervisionConfig(per_scene=2), 0)
    assert len(prompts) == 60 and prompts[0] == prompt_of(train[0]) and prompts[0].endswith(" describe")
    assert all(t.startswith(" ") and t == t.lower() for t in targets)
    unk = lm.tokenizer.unk_token_id
    assert not any(unk in lm.tokenizer(p + t)["input_ids"] for p, t in zip(prompts, targets))


def test_pairs_keep_the_best_and_the_worst_sample_beyond_the_margin() -> None:
    """Scene 0: best b (0.9), worst a (0.2). Scene 1: a gap of 0.01 < margin. Scene 2: the best and the worst
    sample are the same text (no preference)."""
    pairs = preference_pairs(
        [["a", "b", "c"], ["d", "e", "f"], ["g", "g", "h"]],
        [[0.2, 0.9, 0.5], [0.30, 0.30, 0.31], [0.9, 0.1, 0.5]],
        margin=0.05,
    )
    assert [(p.scene, p.chosen, p.rejected, p.reward_chosen, p.reward_rejected) for p in pairs] == [
        (0, "b", "a", 0.9, 0.2)
    ]
    assert reward({"precision": 0.8, "recall": 0.4}, 0.5) == pytest.approx(1.0) and reward({}, 0.5) == 0.0


def test_dpo_starts_at_log_2_and_moves_towards_the_chosen_answers(tmp_path: Path) -> None:
    lm = build_captioner(TINY, 1)
    train, _, _ = split_scenes((6, 1, 1), 1, 1, 2, "d")
    prompts = [prompt_of(s) for s in train]
    chosen, rejected = [oracle_caption(s) for s in train], ["the scene feels calm and orderly ."] * len(train)
    train_sft(lm, prompts, [" " + c.lower() for c in chosen], TrainConfig(steps=3, lr=1e-3, progress=False), 6)
    policy, reference = policy_and_reference(lm)
    assert not any(p.requires_grad for p in reference.parameters())
    result = train_dpo(
        policy,
        reference,
        prompts,
        chosen,
        rejected,
        TrainConfig(steps=15, lr=3e-3, log_every=1, progress=False),
        beta=0.1,
        batch_size=6,
    )
    assert result.history[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)  # policy = reference at step 1
    assert result.history[-1]["loss"] < result.history[0]["loss"] and result.history[-1]["reward_margin"] > 0
    save_captioner(policy, TINY, tmp_path / "p.safetensors")
    config = json.loads(safetensors_metadata(tmp_path / "p.safetensors")["model.config"])
    back = load_captioner(tmp_path / "p.safetensors", CaptionerConfig(**config), 99)
    assert all(torch.equal(a, b) for a, b in zip(policy.model.state_dict().values(), back.model.state_dict().values()))
    with pytest.raises(ValueError, match="not a captioner of this configuration"):
        load_captioner(tmp_path / "p.safetensors", CaptionerConfig(layers=2, hidden=32, heads=2), 0)


def test_sampling_is_seeded_per_prompt() -> None:
    lm = build_captioner(TINY, 2)
    scenes, _, _ = split_scenes((3, 1, 1), 2, 1, 2, "s")
    first = sample_captions(lm, scenes, 2, temperature=1.0, max_new_tokens=8, seed=5)
    assert len(first) == 3 and all(len(s) == 2 for s in first)
    assert first == sample_captions(lm, scenes, 2, temperature=1.0, max_new_tokens=8, seed=5, batch_size=2)


def test_evaluation_of_oracle_and_empty_captions() -> None:
    _, _, scenes = split_scenes((1, 1, 5), 3, 2, 4, "e")
    judge = RuleJudge({s.name: s for s in scenes})
    perfect = evaluate_captions(scenes, [oracle_caption(s).lower() for s in scenes], judge, DCScoreConfig())
    assert summarize(perfect)["hallucination"] == 0.0 and summarize(perfect)["recall"] == 1.0
    assert all(r["dcscore"] == pytest.approx(100.0) for r in perfect)
    wrong = [f"there is a {('red', 'blue')[s.objects[0].colour == 'red']} {s.objects[0].category} ." for s in scenes]
    rows = evaluate_captions(scenes, wrong, judge, DCScoreConfig())
    assert summarize(rows)["hallucination"] == pytest.approx(0.5)  # exists true, colour false
    empty = evaluate_captions(scenes, [""] * 5, judge, DCScoreConfig())
    assert summarize(empty)["recall"] == 0.0 and summarize(empty)["hallucination"] == 0.0
    assert all(r["units"] == 0 and r["dcscore"] == 0.0 for r in empty)
