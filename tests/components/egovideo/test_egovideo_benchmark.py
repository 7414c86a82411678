"""De-biasing, per-bucket accuracy and MDA against hand-computed answers; the video split; blind LLM scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.egovideo.benchmark import (
    accuracy_table,
    blind_llm_choices,
    bucket_accuracy,
    debias_mask,
    mean_over_buckets,
    split_videos,
)

BUCKETS = ["short", "short", "short", "short", "medium", "medium", "long", "long"]
MODEL = np.array([1, 1, 0, 1, 1, 0, 0, 1], dtype=bool)
BLIND_NET = np.array([1, 0, 0, 0, 1, 0, 0, 0], dtype=bool)
BLIND_LLM = np.array([0, 0, 0, 1, 0, 0, 0, 0], dtype=bool)


def test_debias_mask_drops_what_any_blind_model_gets_right() -> None:
    keep = debias_mask({"net": BLIND_NET, "llm": BLIND_LLM})
    assert keep.tolist() == [False, True, True, False, False, True, True, True]
    with pytest.raises(ValueError, match="at least one blind model"):
        debias_mask({})
    with pytest.raises(ValueError, match="different numbers of questions"):
        debias_mask({"a": np.zeros(3, bool), "b": np.zeros(4, bool)})


def test_accuracy_and_mda_known_answer() -> None:
    keep = debias_mask({"net": BLIND_NET, "llm": BLIND_LLM})
    raw = bucket_accuracy(MODEL, BUCKETS)
    assert raw == {"short": 75.0, "medium": 50.0, "long": 50.0}
    deb = bucket_accuracy(MODEL, BUCKETS, keep)
    # short keeps q1 (right), q2 (wrong); medium keeps q5 (wrong); long keeps q6 (wrong), q7 (right)
    assert deb == {"short": 50.0, "medium": 0.0, "long": 50.0}
    table = accuracy_table(MODEL, BUCKETS, keep)
    assert table["mda"] == pytest.approx(100 / 3)
    assert table["raw_mean"] == pytest.approx(175 / 3)
    assert table["inflation"] == pytest.approx(25.0)
    # a blind model that defines the mask scores 0 on what is left
    assert accuracy_table(BLIND_NET, BUCKETS, keep)["mda"] == 0.0


def test_mda_skips_emptied_buckets() -> None:
    keep = np.array([1, 1, 1, 1, 0, 0, 1, 1], dtype=bool)
    deb = bucket_accuracy(MODEL, BUCKETS, keep)
    assert math.isnan(deb["medium"])
    assert mean_over_buckets(deb) == pytest.approx((75.0 + 50.0) / 2)
    assert math.isnan(mean_over_buckets({"a": math.nan}))


def test_split_holds_out_whole_videos() -> None:
    uids = [f"v{i}" for i in range(20)] * 3
    train, test = split_videos(uids, 0.25, seed=3)
    assert len(test) == 5 and len(train) == 15 and not set(train) & set(test)
    assert split_videos(uids, 0.25, seed=3) == (train, test)
    assert split_videos(uids, 0.25, seed=4) != (train, test)
    with pytest.raises(ValueError, match="test_fraction"):
        split_videos(uids, 1.0, 0)


class PriorLM:
    """Log-probability of an option = a fixed preference table, whatever the question."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def token_logprobs(self, prompts: list[str], continuations: list[str], *, batch_size: int = 8) -> list[list[float]]:
        assert batch_size == 3
        self.calls += list(zip(prompts, continuations))
        return [[{" box": -1.0, " oven": -2.0}.get(c, -5.0)] for c in continuations]


def test_blind_llm_scores_each_pair_once_and_picks_the_best() -> None:
    lm = PriorLM()
    questions = ["Where is the cup?", "Where is the cup?", "Where is the pan?"]
    options = [["oven", "box", "jar", "lid"], ["oven", "box", "jar", "lid"], ["jar", "lid", "oven", "cup"]]
    choices, pairs = blind_llm_choices(lm, questions, options, batch=3)
    assert choices.tolist() == [1, 1, 2]
    assert pairs == 8 == len(lm.calls) == len(set(lm.calls))
    assert ("Question: Where is the cup?\nAnswer:", " box") in lm.calls


class LongOptionLM:
    """A three-token option at -1 nat per token against one-token options at -2: summed log-probability picks a
    short option for its length alone, the mean per token picks the likelier one."""

    def token_logprobs(self, prompts: list[str], continuations: list[str], *, batch_size: int = 8) -> list[list[float]]:
        return [[-1.0, -1.0, -1.0] if c == " dish washer" else [-2.0] for c in continuations]


def test_blind_llm_scores_options_by_mean_token_logprob() -> None:
    choices, _ = blind_llm_choices(LongOptionLM(), ["Where is it?"], [["oven", "dish washer", "box", "jar"]])
    assert choices.tolist() == [1]
