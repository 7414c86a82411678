"""Captions of synthetic scenes judged and measured: the judge items of a set of captions, each caption's exact
hallucination and recall (noise-free rule judge over the scene graph) beside the judge's DCScore, and their
summary (torch-free: the report reads it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from components.captions.dcscore import CaptionItem, DCScoreConfig, Judge, caption_score, score_item
from components.captions.rule_judge import RuleJudge
from components.captions.world import Scene, fact_sentence, oracle_caption, oracle_facts


def items_for(scenes: Sequence[Scene], captions: Sequence[str], start: int = 0) -> list[CaptionItem]:
    """Judge items of captions of synthetic scenes (oracle caption and fact sentences from the scene)."""
    return [
        CaptionItem(start + i, s.name, c, oracle_caption(s), tuple(fact_sentence(f) for f in oracle_facts(s)))
        for i, (s, c) in enumerate(zip(scenes, captions))
    ]


def evaluate_captions(
    scenes: Sequence[Scene], captions: Sequence[str], judge: Judge, cfg: DCScoreConfig, start: int = 0
) -> list[dict[str, Any]]:
    """Per caption: units stated (relevance 1), how many are false in the scene, oracle facts covered
    (exact, noise-free rule judge), words, and the judge's DCScore terms."""
    exact = RuleJudge({s.name: s for s in scenes})
    rows = []
    for item in items_for(scenes, captions, start):
        units, _ = exact.decompose(item)
        relevant = [u for u in units if u.relevance == 1]
        verified = exact.exact_verification(item, relevant)
        covered = {m for m in exact.exact_mapping(item, relevant) if m is not None}
        record = score_item(judge, item, cfg)
        details = record["eval_details"] if record["valid"] else {}
        rows.append(
            {
                "scene": item.image,
                "caption": item.caption,
                "words": len(item.caption.split()),
                "units": len(relevant),
                "false_units": len(relevant) - sum(verified),
                "fillers": len(units) - len(relevant),
                "n_oracle": len(item.oracle_facts),
                "recall_exact": len(covered) / len(item.oracle_facts),
                "valid": record["valid"],
                "dcscore": 100 * caption_score(details) if details else float("nan"),
                "precision_judge": details.get("precision", float("nan")),
                "recall_judge": details.get("recall", float("nan")),
            }
        )
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Hallucination rate (false units / units over all captions), mean exact recall, DCScore (valid captions)."""
    units = sum(r["units"] for r in rows)
    valid = [r["dcscore"] for r in rows if r["valid"]]
    return {
        "hallucination": sum(r["false_units"] for r in rows) / units if units else 0.0,
        "recall": float(np.mean([r["recall_exact"] for r in rows])),
        "dcscore": float(np.mean(valid)) if valid else float("nan"),
        "units_per_caption": units / len(rows),
        "words": float(np.mean([r["words"] for r in rows])),
        "fillers_per_caption": float(np.mean([r["fillers"] for r in rows])),
    }
