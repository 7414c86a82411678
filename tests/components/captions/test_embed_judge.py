"""The grammar-free embedding judge (sentence units, cosine matching and verification) on a bag-of-words encoder
whose cosines are known by hand, and the simulated raters' human score."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from components.captions.dcscore import CaptionItem, DCScoreConfig, score_item
from components.captions.embed_judge import EmbedJudge, EmbedJudgeConfig, sentences
from components.captions.simulator import SimulatorConfig, rater_scores, simulate_captions
from components.captions.world import make_scenes

WORDS = ("cat", "red", "dog", "blue", "room", "cozy", "mat")


def bag_of_words(texts: list[str]) -> np.ndarray:
    """Unit vectors of word counts over WORDS (other words ignored)."""
    rows = np.array([[re.findall(r"[a-z]+", t.lower()).count(w) for w in WORDS] for t in texts], dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1)


ITEM = CaptionItem(
    0,
    "img",
    "The red cat. The blue dog! The room is cozy.",
    "A red cat. A blue mat.",
    ("There is a cat.", "The cat is red.", "There is a mat.", "The mat is blue."),
)


def test_sentences_split_after_end_marks() -> None:
    assert sentences(" The red cat. The blue dog!  Is it cozy? ") == ["The red cat.", "The blue dog!", "Is it cozy?"]
    assert sentences("") == []


def test_units_are_sentences_matched_and_verified_by_cosine() -> None:
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return bag_of_words(texts)

    judge = EmbedJudge(encode, EmbedJudgeConfig(match_threshold=0.7, verify_threshold=0.9, relevance_threshold=0.3))
    units, tokens = judge.decompose(ITEM)
    # cosines with the reference: "red cat" = "A red cat." (1.0); "blue dog" ~ "The mat is blue." (0.5);
    # "room cozy" shares no word with any reference sentence (0.0): relevance 0
    assert [(u.fact, u.relevance) for u in units] == [
        ("The red cat.", 1),
        ("The blue dog!", 1),
        ("The room is cozy.", 0),
    ] and tokens == 0
    # "red cat" vs "The cat is red." 1.0 (fact 1); "blue dog" vs "The mat is blue." 0.5 < 0.7: unmatched
    assert judge.exact_mapping(ITEM, units) == [1, None, None]
    assert judge.exact_verification(ITEM, units) == [1, 0, 0]
    mappings, _ = judge.match(ITEM, units, 3)
    assert mappings == [[1, None, None]] * 3
    record = score_item(judge, ITEM, DCScoreConfig())
    details = record["eval_details"]
    assert details["precision"] == pytest.approx(1 / 3) and details["recall"] == pytest.approx(1 / 4)
    assert details["precision_relevant"] == pytest.approx(1 / 2)
    judge.prepare([ITEM])  # every text already encoded: each text was encoded once
    assert sum(len(c) for c in calls) == len({t for c in calls for t in c})


def test_thresholds_must_be_cosines() -> None:
    with pytest.raises(ValueError, match="verify_threshold must be a cosine"):
        EmbedJudgeConfig(verify_threshold=1.5)


def test_simulated_raters_are_ordinal_noisy_and_not_the_f1() -> None:
    scenes = make_scenes(200, 0, 3, 8)
    cfg = SimulatorConfig(human="raters")
    captions, human = simulate_captions(scenes, cfg, 1)
    assert human.min() >= 0 and human.max() <= 1
    assert np.allclose(human * 4 * cfg.raters, np.round(human * 4 * cfg.raters))  # mean of 1-5 ratings
    ratings = rater_scores(captions, SimulatorConfig(human="raters", raters=2), np.random.default_rng(0))
    agreement = spearmanr(ratings[:, 0], ratings[:, 1])[0]
    assert 0.65 < agreement < 0.85  # human caption ratings agree at 0.7-0.8
    quality = np.array([c.coverage * c.precision**2 for c in captions])
    f1 = np.array([c.true_f1 for c in captions])
    assert spearmanr(human, quality)[0] > spearmanr(human, f1)[0]  # the raters score q, not the F1
    noiseless = rater_scores(captions, SimulatorConfig(human="raters", rater_noise=0.0), np.random.default_rng(0))
    assert np.array_equal(noiseless[:, 0], np.clip(np.round(1 + 4 * quality), 1, 5))
    with pytest.raises(ValueError, match="human must be 'f1' or 'raters'"):
        SimulatorConfig(human="crowd")
