"""decapbench's scoring wiring (one paper's helpers, kept out of ``pipeline.py`` so that it reads like the
method): the judge (the grammar-free sentence-embedding judge, the rule judge of the synthetic scenes, or an
OpenAI-compatible chat judge), the DCScore
table's rows, the exactness check of the rule judge on the oracle captions, the per-seed DCScore, and the
baselines' scores of every candidate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from components.captions.baselines import baseline_scores
from components.captions.chat_judge import ChatClient, ChatEndpoint, ChatJudge
from components.captions.dcscore import CaptionItem, DCScoreConfig, Judge, record_row, score_items
from components.captions.dcscore import dcscore as dcscore_of
from components.captions.embed_judge import EmbedJudge, EmbedJudgeConfig
from components.captions.rule_judge import RuleJudge, RuleJudgeConfig
from components.captions.world import Scene
from components.llm.encoder import load_encoder
from paperflows import derive_seed
from pipelines.decapbench.params import DecapbenchParams, judge_endpoint_settings

Rows = list[dict[str, Any]]
Facts = dict[str, tuple[str, ...]]


def make_judge(
    p: DecapbenchParams, data_path: Callable[[str], Path], scenes: dict[str, Scene], kind: str, seed: int
) -> Judge:
    """The judge ``kind``: ``embed`` (the grammar-free sentence-embedding judge, offline), ``rule`` (the rule judge
    of ``scenes``) or ``chat`` (endpoint from the PAPERFLOWS_JUDGE_* settings)."""
    j = p.judge
    if kind == "embed":
        encoder = load_encoder(j.encoder)
        cfg = EmbedJudgeConfig(j.match_threshold, j.verify_threshold, j.relevance_threshold)
        return EmbedJudge(lambda texts: encoder.encode(texts, batch_size=128), cfg, name=j.encoder)
    if kind == "rule":
        return RuleJudge(scenes, RuleJudgeConfig(j.flip_rate, j.fuzzy_cutoff, derive_seed(seed, "judge")))
    s = judge_endpoint_settings()
    client = ChatClient(
        ChatEndpoint(s["base_url"] or "", s["model"] or "", s["api_key"], p.judge.timeout_s),
        seed=derive_seed(seed, "judge"),
    )
    images = data_path(p.data.images_dir) if p.data.images_dir else None
    return ChatJudge(client, images_dir=images, max_tokens=p.judge.max_tokens)


def prepare_judge(judge: Judge, items: list[CaptionItem]) -> None:
    """Let a judge that can (the embedding judge) encode every sentence of ``items`` at once before scoring."""
    prepare = getattr(judge, "prepare", None)
    if prepare is not None:
        prepare(items)


def caption_items(rows: Rows, facts: Facts) -> list[CaptionItem]:
    """Every candidate caption as the judge's item: its index, image, caption, oracle caption and facts."""
    return [
        CaptionItem(i, r["image_path"], r["caption"], r["oracle_caption"], facts[r["image_path"]])
        for i, r in enumerate(rows)
    ]


def dcscore_rows(items: list[CaptionItem], rows: Rows, records: list[dict[str, Any]]) -> Rows:
    """The DCScore table: per caption its index, seed, image, length and human score beside its DCScore terms."""
    return [
        {
            "idx": item.index,
            "seed": row["seed"],
            "image": item.image,
            "words": row["words"],
            "human_score": row["human_score"],
            **record_row(record),
        }
        for item, row, record in zip(items, rows, records)
    ]


def oracle_check(rows: Rows, facts: Facts, scenes: dict[str, Scene], cfg: DCScoreConfig) -> dict[str, float]:
    """The exact rule judge on the first 50 oracle captions themselves: their DCScore (100 when the scoring is
    right) and how many were checked."""
    oracle = [
        CaptionItem(i, r["image_path"], r["oracle_caption"], r["oracle_caption"], facts[r["image_path"]])
        for i, r in enumerate(rows[:50])
    ]
    return {
        "oracle_dcscore_exact": dcscore_of(score_items(RuleJudge(scenes), oracle, cfg))[0],
        "oracle_checked": len(oracle),
    }


def per_seed_dcscore(records: list[dict[str, Any]], table: Rows) -> dict[str, float]:
    """The DCScore of each seed's captions (``seed<k>``; captions without a seed take no part)."""
    groups = sorted({r["seed"] for r in table if r["seed"] is not None})
    return {f"seed{s}": dcscore_of([rec for rec, r in zip(records, table) if r["seed"] == s])[0] for s in groups}


def baseline_table(rows: Rows, names: Sequence[str]) -> Rows:
    """Per candidate its index, seed and every baseline's score against its oracle caption (TF-IDF fitted on the
    captions of the candidate's seed)."""
    table: Rows = [{"idx": i, "seed": r["seed"]} for i, r in enumerate(rows)]
    for group in dict.fromkeys(r["seed"] for r in rows):
        index = [i for i, r in enumerate(rows) if r["seed"] == group]
        scores = baseline_scores([rows[i]["caption"] for i in index], [rows[i]["oracle_caption"] for i in index], names)
        for name in names:
            for position, i in enumerate(index):
                table[i][name] = float(scores[name][position])
    return table
