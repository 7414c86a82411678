"""DCScore's arithmetic against hand-computed values, the retry and invalid paths, and the rule judge."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from components.captions.dcscore import (
    CaptionItem,
    DCScoreConfig,
    JudgeError,
    OracleId,
    Unit,
    caption_score,
    combine_trials,
    dcscore,
    score_item,
    summary_line,
    trial_scores,
)
from components.captions.rule_judge import RuleJudge, RuleJudgeConfig
from components.captions.world import Scene, SceneObject, fact_sentence, make_scenes, oracle_caption, oracle_facts


def test_one_trial_by_hand() -> None:
    """4 units: u0, u1 -> oracle 0, u2 -> None, u3 -> oracle 1; verified 1, 1, 1, 0; relevance 1, 1, 0, 1; M = 3.

    All units: verified u0, u1, u2; c_0 = 2, so credit 1/2 + 1/2 + 1 (u2 is a verified new fact) = 2 over
    3 + 1 facts: P = 3/4, R = 2/4, F1 = 0.6. Relevant units u0, u1, u3: verified u0, u1 (credit 1), no new fact:
    P = 2/3, R = 1/3, F1 = 4/9.
    """
    s = trial_scores([1, 1, 0, 1], [0, 0, None, 1], [1, 1, 1, 0], 3)
    assert (s["precision"], s["recall"], s["f1_score"], s["total_atomic_facts"]) == pytest.approx((0.75, 0.5, 0.6, 4))
    assert (
        s["precision_relevant"],
        s["recall_relevant"],
        s["f1_score_relevant"],
        s["total_atomic_facts_relevant"],
    ) == pytest.approx((2 / 3, 1 / 3, 4 / 9, 3))


def test_relevant_credit_counts_relevant_units_or_all_units() -> None:
    """u0 (relevance 1) and u1 (relevance 0) both match oracle fact 0 and are verified; M = 2."""
    relevant = trial_scores([1, 0], [0, 0], [1, 1], 2, "relevant")
    official = trial_scores([1, 0], [0, 0], [1, 1], 2, "all")
    assert relevant["recall"] == official["recall"] == pytest.approx(0.5)  # 1/2 + 1/2 over 2
    assert relevant["recall_relevant"] == pytest.approx(0.5)  # c_0 = 1 among relevant units
    assert official["recall_relevant"] == pytest.approx(0.25)  # c_0 = 2 over all units


def test_empty_and_unverified_captions_score_zero() -> None:
    assert trial_scores([], [], [], 5)["f1_score"] == 0.0
    nothing_relevant = trial_scores([0, 0], [None, None], [0, 0], 5)
    assert nothing_relevant["precision_relevant"] == 0.0 and nothing_relevant["f1_score_relevant"] == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        trial_scores([1], [0, 1], [1], 2)


def test_trials_average_every_verification_with_every_mapping() -> None:
    scores = combine_trials([1, 1], [[0, 1], [0, None]], [[1, 1], [1, 0]], 2)
    assert len(scores["trials"]) == 4
    by_hand = [trial_scores([1, 1], m, v, 2) for v in ([1, 1], [1, 0]) for m in ([0, 1], [0, None])]
    assert scores["f1_score_avg"] == pytest.approx(sum(t["f1_score"] for t in by_hand) / 4)
    assert scores["trials"][1] == by_hand[1]


class ScriptedJudge:
    """Answers from a script; raises JudgeError on the first ``failures`` attempts."""

    name = "scripted"

    def __init__(self, failures: int = 0) -> None:
        self.failures, self.calls = failures, 0

    def decompose(self, item: CaptionItem) -> tuple[list[Unit], int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise JudgeError("unreadable answer")
        return [
            Unit("There is a cat.", 1, "cat_0"),
            Unit("The cat is red.", 1),
            Unit("It feels calm.", 0),
            Unit("There is a cat.", 1),
        ], 10

    def match(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[OracleId]], int]:
        return [[0, 1, None]] * n, 20

    def verify(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[int]], int]:
        return [[1, 0, 0]] * n, 30


ITEM = CaptionItem(
    7, "img_7", "A red cat. It feels calm.", "There is a blue cat.", ("There is a cat.", "The cat is blue.")
)


def test_score_item_writes_the_official_record() -> None:
    record = score_item(ScriptedJudge(), ITEM)
    assert record["valid"] and record["image_path"] == "img_7"
    details = record["eval_details"]
    assert [u["fact"] for u in details["pred_atomic_facts"]] == ["There is a cat.", "The cat is red.", "It feels calm."]
    assert details["mappings_with_human"][0] == {"There is a cat.": 0, "The cat is red.": 1, "It feels calm.": "None"}
    assert details["verified_results"][0][0] == {"fact": "There is a cat.", "identifier": "cat_0", "verification": 1}
    assert len(details["scores"]["trials"]) == 9 and details["consume_token"] == [10, 20, 30]
    # P = 1/3, R = 1/2, F1 = 0.4; relevant: P = 1/2, R = 1/2, F1 = 0.5
    assert details["f1_score"] == pytest.approx(0.4) and details["f1_score_relevant"] == pytest.approx(0.5)
    assert caption_score(details) == pytest.approx(0.45)
    assert record["human_annotated_oracle_atomic_facts"][1] == {"id": 1, "fact": "The cat is blue.", "relevance": 1}


def test_a_failed_answer_is_retried_and_then_reported_invalid() -> None:
    judge = ScriptedJudge(failures=2)
    retries: list[int] = []
    record = score_item(
        judge, ITEM, DCScoreConfig(max_tries=5), on_retry=lambda item, attempt, err: retries.append(attempt)
    )
    assert record["valid"] and record["eval_details"]["tries"] == 3 and retries == [1, 2]
    invalid = score_item(ScriptedJudge(failures=9), ITEM, DCScoreConfig(max_tries=2))
    assert not invalid["valid"] and invalid["eval_details"] == {"error": "unreadable answer", "tries": 2}
    value, valid, n_invalid = dcscore([record, invalid])
    assert (value, valid, n_invalid) == (pytest.approx(45.0), 1, 1)
    assert summary_line(value) == "DCScore: 45.00"


def _items(scenes: list[Scene], captions: list[str]) -> list[CaptionItem]:
    return [
        CaptionItem(i, s.name, c, oracle_caption(s), tuple(fact_sentence(f) for f in oracle_facts(s)))
        for i, (s, c) in enumerate(zip(scenes, captions))
    ]


def test_the_exact_rule_judge_gives_oracle_captions_100_and_false_captions_0() -> None:
    scenes = make_scenes(30, 4)
    judge = RuleJudge({s.name: s for s in scenes})
    records = [score_item(judge, item) for item in _items(scenes, [oracle_caption(s) for s in scenes])]
    assert dcscore(records) == (pytest.approx(100.0), 30, 0)
    wrong = [
        f"There is a {'yellow' if s.objects[0].colour != 'yellow' else 'red'} {s.objects[0].category}." for s in scenes
    ]
    records = [score_item(judge, item) for item in _items(scenes, wrong)]
    # exists is true and matched (credit 1 of M), the colour is false: P = 1/2, R = 1/M
    first = records[0]["eval_details"]
    m = len(oracle_facts(scenes[0]))
    assert first["precision"] == pytest.approx(0.5) and first["recall"] == pytest.approx(1 / m)


def test_a_true_detail_the_oracle_omits_enlarges_recall() -> None:
    # cat (0, 0), dog (0, 1), car (2, 2): the cat is left of the car (true, not a neighbour relation)
    scene = Scene(
        "s",
        (
            SceneObject("cat", "red", "large", 0, 0),
            SceneObject("dog", "blue", "small", 0, 1),
            SceneObject("car", "white", "small", 2, 2),
        ),
    )
    judge = RuleJudge({"s": scene})
    item = _items([scene], ["There is a cat. The cat is to the left of the car."])[0]
    details = score_item(judge, item)["eval_details"]
    m = len(oracle_facts(scene))
    assert details["mappings_with_human"][0]["The cat_0 is to the left of the car_0."] == "None"
    assert details["precision"] == 1.0 and details["recall"] == pytest.approx(2 / (m + 1))


def test_judge_noise_is_seeded_by_caption_and_averaged_over_trials() -> None:
    scenes = make_scenes(10, 2)
    items = _items(scenes, [oracle_caption(s) for s in scenes])
    noisy = RuleJudge({s.name: s for s in scenes}, RuleJudgeConfig(flip_rate=0.3, seed=1))
    first = [score_item(noisy, item) for item in items]
    again = [score_item(noisy, item) for item in reversed(items)][::-1]
    assert first == again  # independent of scoring order
    value = dcscore(first)[0]
    assert 30 < value < 100
    samples = first[0]["eval_details"]["verified_results"]
    assert len({tuple(v["verification"] for v in s) for s in samples}) > 1  # the 3 samples differ
