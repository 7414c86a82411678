"""DCScore (DeCapBench, arXiv 2503.07906): decompose -> match -> verify, behind a :class:`Judge`.

For one candidate caption with oracle facts o_1..o_M (ids 0..M-1):

1. **decompose** the caption into primitive information units u_1..u_K, each {fact, identifier, relevance}
   (relevance 1: describes image content; 0: inference or embellishment); one sample;
2. **match** the units to the oracle facts: ``n_match`` samples, each a map u_k -> oracle id or None;
3. **verify** every unit against the image and the reference caption: ``n_verify`` samples of v_k in {0, 1};
4. for every (verification sample, mapping sample) pair (3 x 3 = 9 trials by default), with c_j = the
   number of units mapped to oracle id j in that mapping:

       precision = #{k: v_k = 1} / K
       recall    = (sum_{k: v_k = 1, m_k = j} 1 / c_j  +  #{k: v_k = 1, m_k = None})
                   / (M + #{k: v_k = 1, m_k = None})           (correct new details enlarge the truth)
       F1        = 2 P R / (P + R)

   and the same on the relevance-1 units only (P_rel, R_rel, F1_rel; every oracle fact has relevance 1);
5. the caption's score is (mean_trials F1 + mean_trials F1_rel) / 2; **DCScore** = 100 x its mean over the
   valid captions.

Edge cases the official code leaves to an exception (the caption is then marked invalid and retried): a
caption without units, or without relevance-1 units, scores P = R = F1 = 0 on that branch here.

``relevant_credit`` (``DCScoreConfig``): in the relevance-1 branch, c_j counts the relevance-1 units mapped to
j (``"relevant"``, the brief's "again on relevance = 1 facts only"), or all units as the official
``compute_precision_recall`` does (``"all"``: its relevant branch reads the weight dict of all units).

A judge answer that cannot be used (unparseable, facts missing from a mapping) raises :class:`JudgeError`;
the caption is retried up to ``max_tries`` times (the official MAX_TRIES = 5) and is then reported
invalid, never silently dropped. Per-caption details follow the official ``<idx>.json`` layout.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

OracleId = int | None


class JudgeError(ValueError):
    """A judge's answer could not be used for this caption (the caption attempt is retried)."""


@dataclass(frozen=True)
class Unit:
    """A primitive information unit as the decomposer returns it."""

    fact: str
    relevance: int
    identifier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": self.fact}
        if self.identifier is not None:
            out["identifier"] = self.identifier
        return out | {"relevance": self.relevance}


@dataclass(frozen=True)
class CaptionItem:
    """One candidate caption with its oracle annotation (a row of the candidate file joined to the oracle file)."""

    index: int
    image: str
    caption: str
    oracle_caption: str
    oracle_facts: tuple[str, ...]


class Judge(Protocol):
    """What DCScore needs from a judge; each call returns its answer and the tokens it consumed."""

    name: str

    def decompose(self, item: CaptionItem) -> tuple[list[Unit], int]: ...

    def match(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[OracleId]], int]: ...

    def verify(self, item: CaptionItem, units: Sequence[Unit], n: int) -> tuple[list[list[int]], int]: ...


@dataclass(frozen=True)
class DCScoreConfig:
    n_match: int = 3
    n_verify: int = 3
    max_tries: int = 5
    relevant_credit: Literal["relevant", "all"] = "relevant"

    def __post_init__(self) -> None:
        if min(self.n_match, self.n_verify, self.max_tries) < 1:
            raise ValueError(f"n_match, n_verify and max_tries must be >= 1, got {self}")
        if self.relevant_credit not in ("relevant", "all"):
            raise ValueError(f"relevant_credit must be 'relevant' or 'all', got {self.relevant_credit!r}")


def f1_score(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _branch(
    keep: Sequence[int],
    mapping: Sequence[OracleId],
    verification: Sequence[int],
    n_oracle: int,
    counts: Counter[OracleId],
) -> tuple[float, float, float, int]:
    """(precision, recall, F1, enlarged number of ground-truth facts) over the units at positions ``keep``."""
    verified = [k for k in keep if verification[k] == 1]
    new = sum(1 for k in verified if mapping[k] is None)
    credit = sum(1.0 / counts[mapping[k]] for k in verified if mapping[k] is not None) + new
    total = n_oracle + new
    precision = len(verified) / len(keep) if keep else 0.0
    recall = credit / total if total else 0.0
    return precision, recall, f1_score(precision, recall), total


def trial_scores(
    relevance: Sequence[int],
    mapping: Sequence[OracleId],
    verification: Sequence[int],
    n_oracle: int,
    relevant_credit: Literal["relevant", "all"] = "relevant",
) -> dict[str, float]:
    """Step 4 of the module docstring for one (verification, mapping) pair."""
    if not len(relevance) == len(mapping) == len(verification):
        raise ValueError(
            f"units, mapping and verification differ in length: {len(relevance)}, {len(mapping)}, {len(verification)}"
        )
    everything = list(range(len(relevance)))
    relevant = [k for k in everything if relevance[k] == 1]
    counts_all = Counter(m for m in mapping if m is not None)
    counts_rel = (
        counts_all if relevant_credit == "all" else Counter(mapping[k] for k in relevant if mapping[k] is not None)
    )
    p, r, f, total = _branch(everything, mapping, verification, n_oracle, counts_all)
    pr, rr, fr, total_rel = _branch(relevant, mapping, verification, n_oracle, counts_rel)
    return {
        "precision": p,
        "recall": r,
        "f1_score": f,
        "total_atomic_facts": total,
        "precision_relevant": pr,
        "recall_relevant": rr,
        "f1_score_relevant": fr,
        "total_atomic_facts_relevant": total_rel,
    }


SCORE_KEYS = ("precision", "recall", "f1_score", "precision_relevant", "recall_relevant", "f1_score_relevant")


def combine_trials(
    relevance: Sequence[int],
    mappings: Sequence[Sequence[OracleId]],
    verifications: Sequence[Sequence[int]],
    n_oracle: int,
    relevant_credit: Literal["relevant", "all"] = "relevant",
) -> dict[str, Any]:
    """Every (verification, mapping) trial and the means of its scores (the official ``scores`` dict)."""
    trials = [trial_scores(relevance, m, v, n_oracle, relevant_credit) for v in verifications for m in mappings]
    return {"trials": trials, **{f"{k}_avg": sum(t[k] for t in trials) / len(trials) for k in SCORE_KEYS}}


def caption_score(details: dict[str, Any]) -> float:
    """(F1 + F1_rel) / 2 of one caption's ``eval_details`` (compute_results.py)."""
    return (details["f1_score"] + details["f1_score_relevant"]) / 2


def _unique(units: Sequence[Unit]) -> list[Unit]:
    """Units with distinct fact texts (the official mappings are dicts keyed by the fact text)."""
    seen: set[str] = set()
    out = []
    for u in units:
        if u.fact not in seen:
            seen.add(u.fact)
            out.append(u)
    return out


def score_item(
    judge: Judge,
    item: CaptionItem,
    cfg: DCScoreConfig = DCScoreConfig(),
    on_retry: Callable[[CaptionItem, int, str], None] | None = None,
) -> dict[str, Any]:
    """Run steps 1-4 on one caption (retrying a failed attempt up to ``cfg.max_tries`` times) and return its
    record in the official ``<idx>.json`` layout: the candidate's fields, the numbered oracle facts,
    ``valid`` and ``eval_details`` (units, mappings, verifications, trial scores, averages, tokens)."""
    record: dict[str, Any] = {
        "image_path": item.image,
        "caption": item.caption,
        "oracle_caption": item.oracle_caption,
        "human_annotated_oracle_atomic_facts": [
            {"id": i, "fact": f, "relevance": 1} for i, f in enumerate(item.oracle_facts)
        ],
    }
    error = ""
    for attempt in range(1, cfg.max_tries + 1):
        details: dict[str, Any] = {"consume_token": []}
        try:
            units, tokens = judge.decompose(item)
            units = _unique(units)
            details["pred_atomic_facts"] = [u.to_dict() for u in units]
            details["consume_token"].append(tokens)
            mappings, tokens = judge.match(item, units, cfg.n_match)
            details["consume_token"].append(tokens)
            verifications, tokens = judge.verify(item, units, cfg.n_verify)
            details["consume_token"].append(tokens)
            _check_shapes(units, mappings, verifications, len(item.oracle_facts))
        except JudgeError as err:
            error = str(err)
            if on_retry is not None:
                on_retry(item, attempt, error)
            continue
        details["mappings_with_human"] = [
            {u.fact: ("None" if m is None else m) for u, m in zip(units, mapping)} for mapping in mappings
        ]
        details["verified_results"] = [
            [
                {**{k: v for k, v in u.to_dict().items() if k != "relevance"}, "verification": v}
                for u, v in zip(units, verification)
            ]
            for verification in verifications
        ]
        scores = combine_trials(
            [u.relevance for u in units], mappings, verifications, len(item.oracle_facts), cfg.relevant_credit
        )
        details["scores"] = scores
        details |= {k: scores[f"{k}_avg"] for k in SCORE_KEYS}
        details["tries"] = attempt
        return record | {"eval_details": details, "valid": True}
    return record | {"eval_details": {"error": error, "tries": cfg.max_tries}, "valid": False}


def _check_shapes(
    units: Sequence[Unit], mappings: Sequence[Sequence[OracleId]], verifications: Sequence[Sequence[int]], n_oracle: int
) -> None:
    if not mappings or not verifications:
        raise JudgeError("the judge returned no mapping or no verification sample")
    for m in mappings:
        if len(m) != len(units):
            raise JudgeError(f"a mapping covers {len(m)} of {len(units)} units")
        bad = [j for j in m if j is not None and not 0 <= j < n_oracle]
        if bad:
            raise JudgeError(f"a mapping names oracle ids outside 0..{n_oracle - 1}: {bad[:3]}")
    for v in verifications:
        if len(v) != len(units) or any(x not in (0, 1) for x in v):
            raise JudgeError(f"a verification sample is not one 0/1 per unit ({len(v)} values for {len(units)})")


def score_items(
    judge: Judge, items: Sequence[CaptionItem], cfg: DCScoreConfig = DCScoreConfig(), workers: int = 1
) -> list[dict[str, Any]]:
    """`score_item` of every item, in order; ``workers`` > 1 scores that many captions at a time (threads: for
    a judge behind a network endpoint, as the official evaluation runs 5 shards in parallel)."""
    if workers <= 1:
        return [score_item(judge, item, cfg) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda item: score_item(judge, item, cfg), items))


def record_row(record: dict[str, Any]) -> dict[str, Any]:
    """A caption's record as one table row: valid, tries, its score (F1 + F1_rel) / 2, the six terms and tokens."""
    details = record["eval_details"]
    return {
        "valid": record["valid"],
        "tries": details["tries"],
        "dcscore": caption_score(details) if record["valid"] else None,
        **{k: details.get(k) for k in SCORE_KEYS},
        "tokens": sum(details.get("consume_token", [])),
    }


def dcscore(records: Sequence[dict[str, Any]]) -> tuple[float, int, int]:
    """(DCScore = 100 x mean caption score over the valid records, valid count, invalid count)."""
    valid = [caption_score(r["eval_details"]) for r in records if r["valid"]]
    value = 100.0 * sum(valid) / len(valid) if valid else math.nan
    return value, len(valid), len(records) - len(valid)


def summary_line(value: float) -> str:
    """What the official compute_results.py prints."""
    return f"DCScore: {value:.2f}"
