"""QA engine invariants: options, answers, evidence against the narrations, counts, biased share, LLM parsing."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from components.egovideo.narrations import Narration
from components.egovideo.qa import (
    TEMPLATES,
    Clip,
    NoQuestionsError,
    QAFormatError,
    SampleConfig,
    answer_distributions,
    draw_options,
    generate_questions,
    ground,
    llm_candidates,
    narrated_values,
    parse_llm_reply,
    question_priors,
    read_jsonl,
    sample_questions,
    template_candidates,
    write_jsonl,
)
from components.egovideo.synthetic import BUCKETS, WorldConfig, events_of_clip, generate_videos, parse_narration


def _clips(seed: int = 0, per_bucket: tuple[int, int, int] = (20, 10, 6)) -> list[Clip]:
    streams, layout = generate_videos([32, 64, 160], per_bucket, WorldConfig(habit=0.5), seed)
    return [
        Clip(uid, uid, bucket, 0.0, n, 1.0, tuple(events_of_clip(streams[uid], 0.0, n, 1.0)))
        for uid, (bucket, n) in sorted(layout.items())
    ]


@pytest.fixture(scope="module")
def sampled() -> tuple[list[Clip], list[dict]]:
    clips = _clips()
    records, _ = sample_questions(template_candidates(clips), SampleConfig(per_clip=12, biased_share=0.3, seed=1))
    return clips, records


def test_options_and_answers(sampled: tuple[list[Clip], list[dict]]) -> None:
    _, records = sampled
    assert records and {r["qtype"] for r in records} == {"last_put", "pick_after", "count_open"}
    for r in records:
        assert len(r["options"]) == 4 and len(set(r["options"])) == 4
        assert r["options"][r["answer_idx"]] == r["answer"]
    # the answer's position is not a giveaway
    positions = Counter(r["answer_idx"] for r in records)
    assert min(positions.values()) > 0.15 * len(records)


def test_evidence_lies_in_the_clip_and_justifies_the_answer(sampled: tuple[list[Clip], list[dict]]) -> None:
    clips, records = sampled
    by_id = {c.clip_id: c for c in clips}
    for r in records:
        clip = by_id[r["clip_id"]]
        at = {e.timestamp_sec: e for e in clip.events}
        assert all(r["start_sec"] <= t < r["end_sec"] for t in r["evidence_ts"])
        ev = [at[t] for t in r["evidence_ts"]]  # every evidence ts is a narration
        assert [e.frame for e in ev] == r["evidence_frames"]
        assert all(0 <= f < clip.n_frames for f in r["evidence_frames"])
        parsed = [parse_narration(e.text) for e in ev]
        noun = r["question"].rstrip("?").split()[-1]
        if r["qtype"] == "last_put":
            assert parsed == [("puts", noun, r["answer"])]
            later = [e for e in clip.events if e.frame > ev[0].frame and parse_narration(e.text)[:2] == ("puts", noun)]
            assert not later
        elif r["qtype"] == "pick_after":
            assert parsed[0] == ("picks up", noun, parsed[0][2]) and parsed[1][:2] == ("picks up", r["answer"])
            between = [e for e in clip.events if ev[0].frame < e.frame < ev[1].frame and e.action == "picks up"]
            assert not between
            assert sum(e.action == "picks up" and e.obj == noun for e in clip.events) == 1
        else:
            opens = [e for e in clip.events if parse_narration(e.text) == ("opens", None, noun)]
            assert int(r["answer"]) == len(opens) == len(ev) and ev == opens


def test_biased_share_is_controlled_and_biased_means_prior_answer(sampled: tuple[list[Clip], list[dict]]) -> None:
    clips, records = sampled
    priors = question_priors(template_candidates(clips))
    for r in records:
        assert r["biased"] == (priors[r["question"]] == r["answer"])
    for bucket in BUCKETS:
        rows = [r for r in records if r["length_bucket"] == bucket]
        n_biased = sum(r["biased"] for r in rows)
        assert n_biased == round(0.3 * len(rows)) or abs(n_biased - 0.3 * len(rows)) <= 1


def test_share_zero_and_one() -> None:
    cands = template_candidates(_clips(per_bucket=(10, 5, 3)))
    none, _ = sample_questions(cands, SampleConfig(per_clip=50, biased_share=0.0))
    only, _ = sample_questions(cands, SampleConfig(per_clip=50, biased_share=1.0))
    assert none and not any(r["biased"] for r in none)
    assert only and all(r["biased"] for r in only)


def test_question_prior_is_the_majority_answer() -> None:
    clip = Clip("c", "v", "short", 0.0, 4, 1.0, ())
    from components.egovideo.qa import Candidate

    cands = [
        Candidate(clip, "last_put", "Where did I last put the cup?", a, "place", (), ("cup",))
        for a in ("box", "oven", "box", "fridge", "oven", "box")
    ]
    assert question_priors(cands) == {"Where did I last put the cup?": "box"}


def test_draw_options_excludes_mentions_and_tops_up_counts() -> None:
    rng = np.random.default_rng(0)
    dist = {"object": Counter({"cup": 5, "knife": 3, "pan": 2, "jar": 1, "lid": 1}), "count": Counter({"1": 9})}
    for _ in range(20):
        options, idx = draw_options("pan", "object", ("knife",), dist, rng)
        assert options[idx] == "pan" and "knife" not in options and len(set(options)) == 4
    options, idx = draw_options("2", "count", (), dist, rng)
    assert options[idx] == "2" and sorted(options) == ["1", "2", "3", "4"]
    with pytest.raises(ValueError, match="only 1 distinct 'place' values"):
        draw_options("box", "place", (), {"place": Counter({"box": 3, "oven": 1})}, rng)


def test_jsonl_round_trip_and_errors(tmp_path: Path, sampled: tuple[list[Clip], list[dict]]) -> None:
    _, records = sampled
    path = write_jsonl(records, tmp_path / "qa.jsonl")
    assert read_jsonl(path) == records
    bad = dict(records[0], answer_idx=(records[0]["answer_idx"] + 1) % 4)
    write_jsonl([records[0], bad], tmp_path / "bad.jsonl")
    with pytest.raises(QAFormatError, match=r"bad.jsonl:2.answer_idx"):
        read_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"video_uid": 1}\n')
    with pytest.raises(QAFormatError, match=r"broken.jsonl:1: missing field"):
        read_jsonl(tmp_path / "broken.jsonl")


# --------------------------------------------------------------------------------------------------
# the LLM engine (scripted replies stand in for the model's text; the parsing and grounding are real)
# --------------------------------------------------------------------------------------------------
class ScriptedLM:
    def __init__(self, replies: list[str]):
        self.replies = replies
        self.prompts: list[str] = []

    def chat(self, messages: list[dict[str, str]]) -> str:
        return "\n".join(m["content"] for m in messages)

    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        batch_size: int = 8,
    ) -> list[str]:
        self.prompts += prompts
        return self.replies[: len(prompts)]


def _clip_with(texts: list[str]) -> Clip:
    narr = [Narration(float(i) + 0.5, None, t) for i, t in enumerate(texts)]
    return Clip("c1", "v1", "short", 0.0, len(texts), 1.0, tuple(events_of_clip(narr, 0.0, len(texts), 1.0)))


GOOD_REPLY = "Question: Where did I put the kettle?\nA) fridge\nB) oven\nC) drawer\nD) box\nAnswer: C"


def test_parse_llm_reply() -> None:
    assert parse_llm_reply(GOOD_REPLY) == ("Where did I put the kettle?", ["fridge", "oven", "drawer", "box"], 2)
    with pytest.raises(ValueError, match="no 'Question:' line"):
        parse_llm_reply("A) x\nB) y\nC) z\nD) w\nAnswer: A")
    with pytest.raises(ValueError, match="options"):
        parse_llm_reply("Question: what?\nA) x\nB) y\nAnswer: A")
    with pytest.raises(ValueError, match="distinct"):
        parse_llm_reply("Question: what?\nA) x\nB) x\nC) z\nD) w\nAnswer: A")
    with pytest.raises(ValueError, match="Answer"):
        parse_llm_reply("Question: what?\nA) x\nB) y\nC) z\nD) w")


def test_llm_questions_are_kept_only_when_grounded() -> None:
    clip = _clip_with(
        ["#C C picks up the kettle from the box", "#C C puts the kettle in the drawer", "#C C opens the fridge"]
    )
    assert [e.timestamp_sec for e in ground(clip, "Where did I put the kettle?", "drawer")] == [1.5]
    ungrounded = GOOD_REPLY.replace("Answer: C", "Answer: A")  # fridge is never where the kettle went
    lm = ScriptedLM([GOOD_REPLY, ungrounded, "I cannot answer that."])
    kept, stats, failed = llm_candidates([clip, clip, clip], lm, seed=0)
    assert len(lm.prompts) == 3 and "1.5s: #C C puts the kettle in the drawer" in lm.prompts[0]
    assert stats.attempted == 3 and stats.accepted == 1 and stats.acceptance_rate == pytest.approx(1 / 3)
    assert stats.to_dict()["rejected"] == {"not grounded in the narrations": 1, "unparseable: no 'Question:' line": 1}
    cand, options, idx = kept[0]
    assert options[idx] == "drawer" and [e.frame for e in cand.evidence] == [1]
    assert failed == ["c1", "c1"]


def test_generate_questions_templates_and_llm_with_fallback() -> None:
    clips = _clips(per_bucket=(6, 4, 3))
    cfg = SampleConfig(per_clip=6, biased_share=0.3, seed=2)
    records, stats = generate_questions(clips, ["last_put", "count_open"], cfg)
    assert stats["engine"] == "template" and stats["questions"] == len(records) > 0
    assert {r["qtype"] for r in records} == {"last_put", "count_open"}
    assert {r["source"] for r in records} == {"template"}
    assert sum(stats["by_bucket_qtype"].values()) == len(records)
    assert stats["biased_share"] == pytest.approx(np.mean([r["biased"] for r in records]))
    # the LLM engine prompts llm_clips clips evenly over the buckets (first ones of each, in clip order)
    lm = ScriptedLM(["I cannot answer that."] * 3)
    fallback, stats = generate_questions(clips, ["last_put"], cfg, lm=lm, llm_clips=3)
    prompted = [c.clip_id for b in sorted(BUCKETS) for c in [x for x in clips if x.bucket == b][:1]]
    assert len(lm.prompts) == 3 and stats["llm"]["attempted"] == 3 and stats["llm"]["accepted"] == 0
    assert stats["llm"]["rejected"] == 3
    assert stats["llm"]["rejections"] == [{"reason": "unparseable: no 'Question:' line", "count": 3}]
    assert {r["clip_id"] for r in fallback} & set(prompted)  # rejected clips fell back to templates
    dropped, _ = generate_questions(
        clips, ["last_put"], cfg, lm=ScriptedLM(["no"] * 3), llm_clips=3, llm_fallback="drop"
    )
    assert not {r["clip_id"] for r in dropped} & set(prompted)
    with pytest.raises(NoQuestionsError, match="no template question"):
        generate_questions([_clip_with(["#C C walks around"])], ["last_put"], cfg)
    with pytest.raises(NoQuestionsError, match="no question survived"):
        generate_questions(clips[:1], ["last_put"], cfg, lm=ScriptedLM(["no"]), llm_clips=1, llm_fallback="drop")


# --------------------------------------------------------------------------------------------------
# a small real narration file: few clips, every question text once, few distinct answers
# --------------------------------------------------------------------------------------------------
def _small_clip(cid: str, texts: list[str]) -> Clip:
    narr = [Narration(4.0 * i + 0.5, None, t) for i, t in enumerate(texts)]
    n = 4 * len(texts)
    return Clip(cid, cid, "short", 0.0, n, 1.0, tuple(events_of_clip(narr, 0.0, n, 1.0)))


SMALL = [
    _small_clip(
        "a",
        [
            "#C C picks a knife from the table",
            "#C C cuts the onion on the board",
            "#C C puts the knife on the table",
            "#C C opens the fridge",
            "#C C picks a bottle from the fridge",
        ],
    ),
    _small_clip(
        "b",
        [
            "#C C opens the drawer",
            "#C C picks a spoon from the drawer",
            "#C C places the spoon in the bowl",
            "#O man X walks into the kitchen",
        ],
    ),
    _small_clip(
        "c",
        [
            "#C C takes a cup from the shelf",
            "#C C puts the cup in the sink",
            "#C C opens the tap",
            "#C C washes the cup",
        ],
    ),
]


def test_small_corpus_where_the_share_cannot_be_held_still_gives_questions() -> None:
    """Every question text occurs once, so each is its own prior (all biased): the 30% share cannot be
    held, and the bucket's questions are drawn anyway and flagged."""
    cands = template_candidates(SMALL)
    assert len(cands) == 7 and all(question_priors(cands)[c.question] == c.answer for c in cands)
    records, stats = sample_questions(cands, SampleConfig(per_clip=24, biased_share=0.3))
    assert len(records) == 7 and all(r["biased"] for r in records)
    assert (
        stats["buckets"]["short"] | {"share_held": False, "no_options": 0, "questions": 7} == stats["buckets"]["short"]
    )
    for r in records:
        assert len(set(r["options"])) == 4 and r["options"][r["answer_idx"]] == r["answer"]
    # a share of exactly 0 (no biased question at all) is a demand: nothing is drawn rather than biased ones
    records, stats = sample_questions(cands, SampleConfig(per_clip=24, biased_share=0.0))
    assert records == [] and stats["buckets"]["short"]["share_held"] is False
    # one unbiased candidate (its question's prior is another answer) is enough for the share to be held:
    # 1 question, unbiased (the biased ones could give 0.3 of a question, which rounds to none)
    last_put = next(c for c in cands if c.qtype == "last_put")
    other = dataclasses.replace(last_put, answer="drawer")
    records, stats = sample_questions(cands, SampleConfig(per_clip=24, biased_share=0.3), corpus=[*cands, other, other])
    assert stats["buckets"]["short"]["share_held"] is True
    assert [(r["question"], r["biased"]) for r in records] == [(last_put.question, False)]


def test_distractors_are_topped_up_with_narrated_values_or_the_question_is_left_out() -> None:
    cands = template_candidates(SMALL)
    dist = answer_distributions(cands)
    assert sorted(dist["place"]) == ["bowl", "sink", "table"]  # 2 besides any answer: too few alone
    extra = narrated_values(cands)
    assert extra["place"] >= {"board", "drawer", "fridge", "shelf", "tap"} and "onion" in extra["object"]
    rng = np.random.default_rng(0)
    for _ in range(20):
        options, idx = draw_options("sink", "place", ("cup",), dist, rng, extra=extra)
        assert options[idx] == "sink" and len(set(options)) == 4 and {"bowl", "table"} <= set(options)
        assert set(options) <= extra["place"]
    with pytest.raises(ValueError, match="only 2 distinct 'place' values"):
        draw_options("sink", "place", ("cup",), dist, rng)
    # one clip alone names only two places: its 'last_put' question cannot get four options
    alone = template_candidates(SMALL[:1])
    records, stats = sample_questions(alone, SampleConfig())
    assert {r["qtype"] for r in records} == {"count_open"} and stats["buckets"]["short"]["no_options"] == 2


def test_generate_questions_on_a_small_file_and_the_errors_that_remain() -> None:
    records, stats = generate_questions(SMALL, list(TEMPLATES), SampleConfig())
    assert stats["questions"] == len(records) == 7 and stats["sampling/short/share_held"] is False
    # the LLM engine with the default fallback: rejected clips get their template questions
    fallback, stats = generate_questions(SMALL, list(TEMPLATES), SampleConfig(), lm=ScriptedLM(["no"] * 3))
    assert stats["llm"]["rejected"] == 3 and {r["source"] for r in fallback} == {"template"}
    assert len(fallback) == 7
    with pytest.raises(NoQuestionsError, match="all 3 LLM questions were rejected and llm_fallback is 'drop'"):
        generate_questions(SMALL, list(TEMPLATES), SampleConfig(), lm=ScriptedLM(["no"] * 3), llm_fallback="drop")
    with pytest.raises(
        NoQuestionsError, match="no question could be drawn: 1 of 1 template questions lack 3 distinct distractors"
    ):
        generate_questions(SMALL[:1], ["last_put"], SampleConfig())
