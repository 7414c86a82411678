"""Caption metrics DCScore is compared with, each scoring a candidate against its reference (oracle) caption.

* ``bleu4``: sentence BLEU-4 from sacrebleu (``effective_order=True``, its recommended sentence-level
  setting; exponential smoothing), / 100;
* ``rouge_l``: ROUGE-L F-measure from rouge-score (its default tokenizer, no stemming);
* ``tfidf_cosine``: cosine similarity of TF-IDF vectors (scikit-learn ``TfidfVectorizer`` fitted on the
  scored candidates and references together);
* ``capture``: CAPTURE-style F1 over parsed tuples. CAPTURE (arXiv 2405.19092) parses both captions into
  objects, attributes and relations and combines their F1 as (a F1_obj + b F1_attr + c F1_rel) / (a + b + c)
  with a = b = 0.5, c = 0.2 [its weights 5:5:2]; here the tuples come from the synthetic world's rule
  parser (:mod:`components.captions.parsing`) instead of its T5 scene-graph parser, and synonyms are
  resolved by that parser's lexicon instead of WordNet and sentence embeddings. A part that neither caption
  has is left out of the weighted mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from components.captions.parsing import parse_caption
from components.captions.world import ATTRIBUTES, RELATIONS

CAPTURE_WEIGHTS = {"object": 0.5, "attribute": 0.5, "relation": 0.2}
BASELINES = ("bleu4", "rouge_l", "tfidf_cosine", "capture")


def bleu4(candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
    from sacrebleu.metrics import BLEU

    metric = BLEU(effective_order=True)
    return np.array([metric.sentence_score(c, [r]).score / 100.0 for c, r in zip(candidates, references)])


def rouge_l(candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    return np.array([scorer.score(r, c)["rougeL"].fmeasure for c, r in zip(candidates, references)])


def tfidf_cosine(candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer().fit([*candidates, *references])
    a, b = vectorizer.transform(candidates), vectorizer.transform(references)  # rows are L2-normalised
    return np.asarray(a.multiply(b).sum(axis=1)).ravel()


def caption_tuples(caption: str) -> dict[str, set[tuple[str, ...]]]:
    """Objects, attributes and relations a caption mentions, as parsed tuples."""
    out: dict[str, set[tuple[str, ...]]] = {"object": set(), "attribute": set(), "relation": set()}
    for unit in parse_caption(caption):
        fact = unit.fact
        if fact is None:
            continue
        out["object"].add((fact.subject,))
        if fact.kind in ATTRIBUTES:
            out["attribute"].add((fact.subject, fact.value))
        elif fact.kind in RELATIONS:
            out["object"].add((fact.value,))
            out["relation"].add((fact.subject, fact.kind, fact.value))
    return out


def set_f1(candidate: set[tuple[str, ...]], reference: set[tuple[str, ...]]) -> float:
    hits = len(candidate & reference)
    if not hits:
        return 0.0
    precision, recall = hits / len(candidate), hits / len(reference)
    return 2 * precision * recall / (precision + recall)


def capture_parts(candidate: str, reference: str) -> dict[str, float | None]:
    """F1 of each tuple kind (None when neither caption has one) and their CAPTURE-weighted mean."""
    cand, ref = caption_tuples(candidate), caption_tuples(reference)
    parts: dict[str, float | None] = {
        k: (set_f1(cand[k], ref[k]) if cand[k] or ref[k] else None) for k in CAPTURE_WEIGHTS
    }
    present = {k: v for k, v in parts.items() if v is not None}
    weight = sum(CAPTURE_WEIGHTS[k] for k in present)
    parts["capture"] = sum(CAPTURE_WEIGHTS[k] * v for k, v in present.items()) / weight if weight else 0.0
    return parts


def capture(candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
    return np.array([capture_parts(c, r)["capture"] for c, r in zip(candidates, references)])


METRICS = {"bleu4": bleu4, "rouge_l": rouge_l, "tfidf_cosine": tfidf_cosine, "capture": capture}


def baseline_scores(
    candidates: Sequence[str], references: Sequence[str], names: Sequence[str] = BASELINES
) -> dict[str, np.ndarray]:
    """Each named baseline's score of every (candidate, reference) pair."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates for {len(references)} references")
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; expected some of {BASELINES}")
    return {n: METRICS[n](candidates, references) for n in names}
