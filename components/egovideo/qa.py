"""The narration -> QA data engine: multiple-choice questions with evidence, by templates or by an LLM.

A clip's narrations (timestamped, parsed into events by :func:`components.egovideo.synthetic.events_of_clip`)
give questions about visual memory, each with 4 options and the timestamps / frame ids of the narrations
that justify the answer (the evidence that supervises the memory pointer):

=============  ==========================================  ======================================
qtype          question                                    answer (evidence)
=============  ==========================================  ======================================
``last_put``   Where did I last put the <obj>?             place of the last "puts <obj>" (that event)
``pick_after`` What did I pick up right after the <obj>?   object of the next "picks up" after the
                                                           only pick-up of <obj> (both events)
``count_open`` How many times did I open the <place>?      number of "opens <place>" (all of them)
=============  ==========================================  ======================================

Distractors are *plausible*: drawn from the corpus-wide distribution of answers of the same qtype
(frequency-weighted, without the answer or a noun the question names), so options look alike to a
reader who does not see the video; a small corpus with too few distinct answers tops them up with the
other places / objects its narrations name. The *question prior* of a question text is its most frequent answer
over the corpus; a question is ``biased`` when its answer equals that prior (a blind model can get it
right from the text alone). :func:`sample_questions` draws a controlled share of biased questions.

The LLM engine prompts a chat model with the timestamped narrations, parses the reply
(``Question: / A) .. D) / Answer: <letter>``), and keeps it only if the answer is grounded: a narration of
the clip names the answer and a content word of the question (their timestamps become the evidence).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from components.egovideo.synthetic import Event
from components.io import atomic_path, read_json_lines

N_OPTIONS = 4
LETTERS = "ABCD"
QA_FIELDS = (
    "video_uid",
    "clip_id",
    "start_sec",
    "end_sec",
    "question",
    "options",
    "answer_idx",
    "answer",
    "evidence_ts",
    "evidence_frames",
    "length_bucket",
    "qtype",
    "biased",
    "source",
)


class QAFormatError(ValueError):
    """A QA JSONL file or row is malformed; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Clip:
    """A clip of a video: ``n_frames`` feature frames at ``fps`` from ``start_sec``, with its events."""

    clip_id: str
    video_uid: str
    bucket: str
    start_sec: float
    n_frames: int
    fps: float
    events: tuple[Event, ...]

    @property
    def end_sec(self) -> float:
        return self.start_sec + self.n_frames / self.fps


@dataclass(frozen=True)
class Candidate:
    """A question before options are drawn: its answer, the kind of value it asks for, its evidence."""

    clip: Clip
    qtype: str
    question: str
    answer: str
    kind: str  # "place" | "object" | "count"
    evidence: tuple[Event, ...]
    mentions: tuple[str, ...]  # nouns the question names (never offered as distractors)


# --------------------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------------------
def _last_put(clip: Clip) -> list[Candidate]:
    last: dict[str, Event] = {}
    for e in clip.events:
        if e.action == "puts" and e.obj and e.loc:
            last[e.obj] = e
    return [
        Candidate(clip, "last_put", f"Where did I last put the {obj}?", e.loc, "place", (e,), (obj,))
        for obj, e in sorted(last.items())
    ]


def _pick_after(clip: Clip) -> list[Candidate]:
    picks = [e for e in clip.events if e.action == "picks up" and e.obj]
    counts = Counter(e.obj for e in picks)
    out = []
    for i, e in enumerate(picks[:-1]):
        if counts[e.obj] == 1:
            nxt = picks[i + 1]
            out.append(
                Candidate(
                    clip,
                    "pick_after",
                    f"What did I pick up right after the {e.obj}?",
                    nxt.obj,
                    "object",
                    (e, nxt),
                    (e.obj,),
                )
            )
    return out


def _count_open(clip: Clip) -> list[Candidate]:
    opens: dict[str, list[Event]] = defaultdict(list)
    for e in clip.events:
        if e.action == "opens" and e.loc:
            opens[e.loc].append(e)
    return [
        Candidate(
            clip, "count_open", f"How many times did I open the {loc}?", str(len(evs)), "count", tuple(evs), (loc,)
        )
        for loc, evs in sorted(opens.items())
    ]


TEMPLATES = {"last_put": _last_put, "pick_after": _pick_after, "count_open": _count_open}


def template_candidates(clips: Iterable[Clip], qtypes: Sequence[str] = tuple(TEMPLATES)) -> list[Candidate]:
    unknown = [q for q in qtypes if q not in TEMPLATES]
    if unknown:
        raise ValueError(f"unknown question types {unknown}; known: {list(TEMPLATES)}")
    return [c for clip in clips for q in qtypes for c in TEMPLATES[q](clip)]


# --------------------------------------------------------------------------------------------------
# priors, options, sampling
# --------------------------------------------------------------------------------------------------
def question_priors(candidates: Sequence[Candidate]) -> dict[str, str]:
    """Most frequent answer of each question text over the corpus (ties: the smallest string)."""
    by_question: dict[str, Counter] = defaultdict(Counter)
    for c in candidates:
        by_question[c.question][c.answer] += 1
    return {q: min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] for q, counts in by_question.items()}


def answer_distributions(candidates: Sequence[Candidate]) -> dict[str, Counter]:
    dist: dict[str, Counter] = defaultdict(Counter)
    for c in candidates:
        dist[c.kind][c.answer] += 1
    return dist


def narrated_values(candidates: Sequence[Candidate]) -> dict[str, set[str]]:
    """The places and objects named anywhere in the narrations of the candidates' clips, by kind."""
    clips = {c.clip.clip_id: c.clip for c in candidates}
    values: dict[str, set[str]] = {"place": set(), "object": set()}
    for clip in clips.values():
        for e in clip.events:
            if e.loc:
                values["place"].add(e.loc)
            if e.obj:
                values["object"].add(e.obj)
    return values


def _spare_values(
    answer: str, kind: str, mentions: Sequence[str], dist: dict[str, Counter], extra: dict[str, set[str]] | None
) -> tuple[dict[str, int], list[str]]:
    """The corpus answers of ``kind`` that may be distractors (with their counts), and the other narrated
    values of ``kind`` that may top them up (sorted)."""
    pool = {v: n for v, n in dist.get(kind, Counter()).items() if v != answer and v not in mentions}
    spare = sorted(v for v in (extra or {}).get(kind, ()) if v != answer and v not in mentions and v not in pool)
    return pool, spare


def can_draw_options(
    c: Candidate, dist: dict[str, Counter], extra: dict[str, set[str]] | None = None, n_options: int = N_OPTIONS
) -> bool:
    """Whether :func:`draw_options` finds ``n_options - 1`` distractors for ``c`` (counts always can)."""
    if c.kind == "count":
        return True
    pool, spare = _spare_values(c.answer, c.kind, c.mentions, dist, extra)
    return len(pool) + len(spare) >= n_options - 1


def draw_options(
    answer: str,
    kind: str,
    mentions: Sequence[str],
    dist: dict[str, Counter],
    rng: np.random.Generator,
    n_options: int = N_OPTIONS,
    extra: dict[str, set[str]] | None = None,
) -> tuple[list[str], int]:
    """``n_options`` distinct options holding ``answer`` once, shuffled; returns ``(options, answer_idx)``.

    Distractors follow the corpus answer frequencies of ``kind``. When the corpus holds too few distinct
    answers (a small narration file), they are topped up uniformly with the other values of ``kind`` in
    ``extra`` (:func:`narrated_values`), and counts with nearby integers; ``ValueError`` when that is
    still too few.
    """
    pool, spare = _spare_values(answer, kind, mentions, dist, extra)
    values = sorted(pool)
    need = n_options - 1
    if len(values) >= need:
        weights = np.asarray([pool[v] for v in values], dtype=float)
        picked = [values[i] for i in rng.choice(len(values), size=need, replace=False, p=weights / weights.sum())]
    else:
        picked = list(values)
        if spare:
            take = min(need - len(picked), len(spare))
            picked += [spare[i] for i in rng.choice(len(spare), size=take, replace=False)]
        if len(picked) < need and kind != "count":
            raise ValueError(f"only {len(picked)} distinct '{kind}' values besides {answer!r}; need {need}")
        k = 1
        while len(picked) < need:
            value = str(k)
            if value != answer and value not in picked:
                picked.append(value)
            k += 1
    options = [answer, *picked]
    order = rng.permutation(n_options)
    options = [options[i] for i in order]
    return options, options.index(answer)


def to_record(c: Candidate, options: list[str], answer_idx: int, biased: bool, source: str) -> dict[str, Any]:
    clip = c.clip
    return {
        "video_uid": clip.video_uid,
        "clip_id": clip.clip_id,
        "start_sec": clip.start_sec,
        "end_sec": clip.end_sec,
        "question": c.question,
        "options": options,
        "answer_idx": answer_idx,
        "answer": c.answer,
        "evidence_ts": [e.timestamp_sec for e in c.evidence],
        "evidence_frames": [e.frame for e in c.evidence],
        "length_bucket": clip.bucket,
        "qtype": c.qtype,
        "biased": biased,
        "source": source,
    }


@dataclass(frozen=True)
class SampleConfig:
    """How many questions per clip (at most) and the share of biased ones, per length bucket."""

    per_clip: int = 24
    biased_share: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.per_clip < 1 or not 0 <= self.biased_share <= 1:
            raise ValueError(
                f"SampleConfig needs per_clip >= 1 and biased_share in [0, 1], got {self.per_clip}, {self.biased_share}"
            )


def sample_questions(
    candidates: Sequence[Candidate],
    cfg: SampleConfig,
    source: str = "template",
    corpus: Sequence[Candidate] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Draw questions per bucket with ``biased_share`` of biased ones; options drawn per question.

    Per bucket the target is ``min(per_clip * clips, candidates)``, lowered until the biased and the
    unbiased candidates can each fill their part; ``round(share * target)`` come from the biased ones and
    the rest from the unbiased ones, so the share holds to rounding. Where that leaves no question (one
    side is empty, as in a small narration file where every question text occurs once and so is its
    own prior), the share cannot be held: ``min(per_clip * clips, candidates)`` questions are drawn with
    a share as close to ``biased_share`` as the candidates allow, and the bucket's ``share_held`` is
    false (a ``biased_share`` of 0 or 1 is kept as asked: such a bucket gives no question). Question
    priors and distractor distributions come from ``corpus`` (default: the candidates
    themselves), so a subset of the clips is judged against the whole corpus; a candidate for which
    the corpus and its narrations name too few distinct values of its kind to fill the options is left
    out and counted (``no_options``). Returns ``(records, stats)``.
    """
    rng = np.random.default_rng(cfg.seed)
    priors = question_priors(corpus if corpus is not None else candidates)
    dist = answer_distributions(corpus if corpus is not None else candidates)
    extra = narrated_values(corpus if corpus is not None else candidates)
    by_bucket: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_bucket[c.clip.bucket].append(c)
    records, stats = [], {"buckets": {}}
    for bucket in sorted(by_bucket):
        n_clips = len({c.clip.clip_id for c in by_bucket[bucket]})
        cands = [c for c in by_bucket[bucket] if can_draw_options(c, dist, extra)]
        biased = [c for c in cands if priors[c.question] == c.answer]
        unbiased = [c for c in cands if priors[c.question] != c.answer]
        most = min(cfg.per_clip * n_clips, len(cands))
        target = float(most)
        if cfg.biased_share > 0:  # shrink the target until both sides can give their share
            target = min(target, len(biased) / cfg.biased_share)
        if cfg.biased_share < 1:
            target = min(target, len(unbiased) / (1 - cfg.biased_share))
        n_b = min(len(biased), round(cfg.biased_share * target))
        n_u = min(len(unbiased), round(target) - n_b)
        held = n_b + n_u > 0 or not cands
        # the closest share the candidates allow; a share of exactly 0 or 1 is a demand, not a target: kept
        if not held and 0 < cfg.biased_share < 1:
            n_b = min(len(biased), max(round(cfg.biased_share * most), most - len(unbiased)))
            n_u = most - n_b
        chosen = [(biased[i], True) for i in rng.choice(len(biased), n_b, replace=False)]
        chosen += [(unbiased[i], False) for i in rng.choice(len(unbiased), n_u, replace=False)]
        chosen.sort(key=lambda cb: (cb[0].clip.clip_id, cb[0].qtype, cb[0].question))
        for c, is_biased in chosen:
            options, idx = draw_options(c.answer, c.kind, c.mentions, dist, rng, extra=extra)
            records.append(to_record(c, options, idx, is_biased, source))
        stats["buckets"][bucket] = {
            "clips": n_clips,
            "candidates": len(cands),
            "questions": n_b + n_u,
            "biased": n_b,
            "biased_share": n_b / max(1, n_b + n_u),
            "candidate_biased_share": len(biased) / max(1, len(cands)),
            "no_options": len(by_bucket[bucket]) - len(cands),
            "share_held": held,
        }
    return records, stats


# --------------------------------------------------------------------------------------------------
# the LLM engine
# --------------------------------------------------------------------------------------------------
class ChatModel(Protocol):
    """``chat`` formats messages with the model's chat template; ``generate`` continues prompts."""

    def chat(self, messages: list[dict[str, str]]) -> str: ...

    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        batch_size: int = 8,
    ) -> list[str]: ...


SYSTEM_PROMPT = (
    "You write multiple-choice questions that test the memory of the person who recorded a "
    "first-person video. You only see the video's timestamped narrations; 'C' is that person."
)
FORMAT = "Question: <question>\nA) <option>\nB) <option>\nC) <option>\nD) <option>\nAnswer: <letter>"
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "did",
        "do",
        "what",
        "where",
        "when",
        "how",
        "many",
        "times",
        "right",
        "after",
        "before",
        "last",
        "first",
        "of",
        "in",
        "on",
        "to",
        "from",
        "my",
        "me",
        "was",
        "were",
        "is",
        "it",
        "at",
        "which",
        "who",
    ]
)


def llm_prompt(clip: Clip, max_narrations: int, rng: np.random.Generator) -> list[dict[str, str]]:
    """Chat messages with (a window of at most ``max_narrations`` of) the clip's timestamped narrations."""
    events = list(clip.events)
    if len(events) > max_narrations:
        start = int(rng.integers(0, len(events) - max_narrations + 1))
        events = events[start : start + max_narrations]
    lines = "\n".join(f"{e.timestamp_sec - clip.start_sec:.1f}s: {e.text}" for e in events)
    user = (
        f"Narrations of a {clip.n_frames / clip.fps:.0f}-second clip:\n{lines}\n\nWrite one question about "
        f"an object, a place, a count or the order of actions in this clip, with four options of which "
        f"exactly one is right. Reply exactly in this format:\n{FORMAT}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_Q = re.compile(r"^\s*question\s*[:\-]\s*(?P<q>.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_OPT = re.compile(r"^\s*\(?(?P<l>[A-D])[\).:]\s*(?P<o>.+?)\s*$", re.MULTILINE)
_ANS = re.compile(r"^\s*(?:correct\s+)?answer\s*[:\-]\s*\(?(?P<l>[A-D])\b", re.IGNORECASE | re.MULTILINE)


def parse_llm_reply(text: str) -> tuple[str, list[str], int]:
    """``(question, 4 options, answer_idx)`` from a reply in :data:`FORMAT`; ``ValueError`` names what is wrong."""
    q = _Q.search(text)
    if q is None:
        raise ValueError("no 'Question:' line")
    options: dict[str, str] = {}
    for m in _OPT.finditer(text):
        options.setdefault(m.group("l").upper(), m.group("o").strip())
    if sorted(options) != list(LETTERS):
        raise ValueError(f"options {sorted(options)} instead of A-D")
    opts = [options[letter] for letter in LETTERS]
    if len({o.lower() for o in opts}) != N_OPTIONS or any(not o for o in opts):
        raise ValueError("options are not 4 distinct non-empty strings")
    a = _ANS.search(text)
    if a is None:
        raise ValueError("no 'Answer: <letter>' line")
    question = q.group("q").strip()
    if not question.endswith("?"):
        raise ValueError("the question does not end with '?'")
    return question, opts, LETTERS.index(a.group("l").upper())


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 1}


def ground(clip: Clip, question: str, answer: str) -> tuple[Event, ...]:
    """The events whose narration names the answer and a content word of the question (the evidence)."""
    answer_words = _words(answer)
    question_words = _words(question) - answer_words
    if not answer_words or not question_words:
        return ()
    return tuple(
        e for e in clip.events if answer_words <= _words(e.text) and question_words & (_words(e.text) - answer_words)
    )


@dataclass
class LLMStats:
    attempted: int = 0
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.attempted if self.attempted else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempted": self.attempted,
            "accepted": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "rejected": dict(self.rejected),
        }


def llm_candidates(
    clips: Sequence[Clip],
    lm: ChatModel,
    seed: int,
    max_narrations: int = 40,
    max_new_tokens: int = 96,
    temperature: float = 0.7,
    batch_size: int = 8,
) -> tuple[list[tuple[Candidate, list[str], int]], LLMStats, list[str]]:
    """One LLM-written question per clip, kept when it parses and is grounded in the clip's narrations.

    Returns ``([(candidate, options, answer_idx)], stats, the clip ids whose question was rejected)``;
    rejections are counted by reason.
    """
    rng = np.random.default_rng(seed)
    prompts = [lm.chat(llm_prompt(clip, max_narrations, rng)) for clip in clips]
    replies = (
        lm.generate(prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, batch_size=batch_size)
        if prompts
        else []
    )
    stats = LLMStats()
    out, failed = [], []
    for clip, reply in zip(clips, replies):
        stats.attempted += 1
        try:
            question, options, idx = parse_llm_reply(reply)
        except ValueError as err:
            stats.rejected[f"unparseable: {err}"] += 1
            failed.append(clip.clip_id)
            continue
        evidence = ground(clip, question, options[idx])
        if not evidence:
            stats.rejected["not grounded in the narrations"] += 1
            failed.append(clip.clip_id)
            continue
        mentions = tuple(sorted(_words(question)))
        out.append((Candidate(clip, "llm", question, options[idx], "llm", evidence, mentions), options, idx))
        stats.accepted += 1
    return out, stats, failed


class NoQuestionsError(ValueError):
    """The clips give no question: no event a template asks about, every LLM question rejected with no
    fallback, or too few distinct places / objects named to fill a question's options."""


def generate_questions(
    clips: Sequence[Clip],
    qtypes: Sequence[str],
    cfg: SampleConfig,
    lm: ChatModel | None = None,
    llm_clips: int = 16,
    llm_fallback: str = "template",
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The data engine over a corpus of clips: ``(records, stats)``.

    Without ``lm``: template questions for every clip (:func:`sample_questions`). With ``lm``: one LLM
    question for each of ``llm_clips`` clips taken evenly over the length buckets (in clip order), template
    questions for the other clips, and, with ``llm_fallback="template"``, for the clips whose LLM question
    was rejected too (``"drop"``: those clips get none). Question priors (hence ``biased``) and distractors
    come from the template candidates of the whole corpus. ``stats["llm"]`` counts the attempted, accepted
    and rejected LLM questions and lists the rejection reasons.
    """
    if llm_fallback not in ("template", "drop"):
        raise ValueError(f"llm_fallback must be 'template' or 'drop', got {llm_fallback!r}")
    corpus = template_candidates(clips, qtypes)
    if not corpus:
        raise NoQuestionsError(
            "the narrations give no template question (no 'puts', 'picks up' or 'opens' events were parsed)"
        )
    stats: dict[str, Any] = {"engine": "template" if lm is None else "llm"}
    llm_records: list[dict[str, Any]] = []
    template_clips = {c.clip_id for c in clips}
    prompted: list[Clip] = []
    if lm is not None:
        by_bucket: dict[str, list[Clip]] = defaultdict(list)
        for c in clips:
            by_bucket[c.bucket].append(c)
        per = max(1, llm_clips // len(by_bucket))
        prompted = [c for b in sorted(by_bucket) for c in by_bucket[b][:per]]
        accepted, llm_stats, failed = llm_candidates(prompted, lm, seed=cfg.seed)
        priors = question_priors(corpus)
        llm_records = [
            to_record(cand, options, idx, priors.get(cand.question) == cand.answer, "llm")
            for cand, options, idx in accepted
        ]
        template_clips -= {c.clip_id for c in prompted}
        if llm_fallback == "template":
            template_clips |= set(failed)
        # reasons are free text: a list, so that only the counts above become metric names
        stats["llm"] = {
            "attempted": llm_stats.attempted,
            "accepted": llm_stats.accepted,
            "acceptance_rate": llm_stats.acceptance_rate,
            "rejected": sum(llm_stats.rejected.values()),
            "rejections": [{"reason": r, "count": n} for r, n in sorted(llm_stats.rejected.items())],
        }
    chosen = [c for c in corpus if c.clip.clip_id in template_clips]
    records, sampled = sample_questions(chosen, cfg, corpus=corpus) if chosen else ([], {"buckets": {}})
    records += llm_records
    if not records:
        if not chosen:
            raise NoQuestionsError(
                f"no question survived: all {len(prompted)} LLM questions were rejected and "
                f"llm_fallback is 'drop' (every clip was prompted, so none has template "
                f"questions)"
            )
        short = sum(st["no_options"] for st in sampled["buckets"].values())
        raise NoQuestionsError(
            f"no question could be drawn: {short} of {len(chosen)} template questions lack "
            f"{N_OPTIONS - 1} distinct distractors (the narrations name too few places / "
            f"objects)"
        )
    counts = Counter((r["length_bucket"], r["qtype"]) for r in records)
    stats.update(
        {
            "questions": len(records),
            "biased_share": float(np.mean([r["biased"] for r in records])),
            "by_bucket_qtype": {f"{b}/{q}": n for (b, q), n in sorted(counts.items())},
            **{f"sampling/{b}/{k}": v for b, st in sampled["buckets"].items() for k, v in st.items()},
        }
    )
    return records, stats


# --------------------------------------------------------------------------------------------------
# JSONL
# --------------------------------------------------------------------------------------------------
def write_jsonl(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return Path(path)


def check_record(r: Any, where: str) -> dict[str, Any]:
    """Validate one QA row (fields, option/answer consistency); returns it."""
    if not isinstance(r, dict):
        raise QAFormatError(f"{where}: expected an object")
    missing = [f for f in QA_FIELDS if f not in r]
    if missing:
        raise QAFormatError(f"{where}: missing field(s) {missing}")
    opts = r["options"]
    if not isinstance(opts, list) or len(opts) != N_OPTIONS or len(set(opts)) != N_OPTIONS:
        raise QAFormatError(f"{where}.options: expected {N_OPTIONS} distinct options, got {opts!r}")
    idx = r["answer_idx"]
    if not isinstance(idx, int) or not 0 <= idx < N_OPTIONS or opts[idx] != r["answer"]:
        raise QAFormatError(f"{where}.answer_idx: {idx!r} does not point at the answer {r['answer']!r}")
    if not isinstance(r["evidence_frames"], list) or not r["evidence_frames"]:
        raise QAFormatError(f"{where}.evidence_frames: expected a non-empty list")
    return r


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise QAFormatError(f"{p}: QA file not found")
    rows = [
        check_record(row, f"{p}:{i}") for i, row in read_json_lines(p, lambda problem: QAFormatError(f"{p}: {problem}"))
    ]
    if not rows:
        raise QAFormatError(f"{p}: no questions")
    return rows
