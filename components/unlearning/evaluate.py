"""TOFU-style evaluation of one model: the per-QA values and aggregates of `tofu_metrics`, as ``TOFU_EVAL.json``.

The evaluation sets are tokenised once (`TofuEvaluator`); `TofuEvaluator.evaluate` then scores every answer
variant with one teacher-forced pass (answer / paraphrased / perturbed answers of the forget and retain QAs,
answers and perturbed answers of the world facts, the general passages) and decodes the questions greedily
once (ROUGE). Keys and value layouts follow open-unlearning's ``TOFU_EVAL.json``:
``{metric: {"agg_value": x, "value_by_index": {"0": {...}, ...}}}``; `summary` gives ``TOFU_SUMMARY.json``.

Model utility here is the harmonic mean of six values, retain and world-facts x {Q_A_Prob, ROUGE, Truth_Ratio}:
TOFU's nine less the real-authors three (no offline set of real authors). Perplexity on the general passages
is reported beside it (lower is better, so it cannot enter a harmonic mean of scores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from components.llm.frozen_trunk import FrozenTrunkLM
from components.llm.lm import LocalLM
from components.llm.scoring import scores_and_greedy_hits
from components.unlearning.tofu_metrics import (
    closer_to_1_better,
    forget_quality,
    model_utility,
    probability,
    probability_with_options,
    rouge_l_recall,
    true_better,
    truth_ratio,
)

PROMPT = "### Question: {question}\n### Answer:"  # the official FLAT template for OPT-style models
UTILITY_KEYS = (
    "retain_Q_A_Prob",
    "retain_Q_A_ROUGE",
    "retain_Truth_Ratio",
    "wf_Q_A_Prob",
    "wf_Q_A_ROUGE",
    "wf_Truth_Ratio",
)


def qa_prompt(question: str) -> str:
    return PROMPT.format(question=question)


def qa_continuation(answer: str) -> str:
    return " " + answer.strip()


@dataclass(frozen=True)
class EvalConfig:
    """Batch size of the teacher-forced passes and the greedy decoding budget of the ROUGE answers."""

    batch_size: int = 64
    max_new_tokens: int = 12


@dataclass(frozen=True)
class _Variant:
    set: str  # forget / retain / wf / text
    kind: str  # answer / para / pert / text
    row: int


class TofuEvaluator:
    """The evaluation sets of one benchmark, tokenised with ``lm``'s tokenizer.

    Args:
        lm: supplies the tokenizer (the evaluated models share it).
        forget, retain, world: TOFU rows (forget and retain rows need ``paraphrased_answer`` and
            ``perturbed_answer``; world-fact rows need ``perturbed_answer``).
        passages: general text for perplexity (scored after the bos token).
    """

    def __init__(
        self,
        lm: LocalLM,
        forget: Sequence[dict[str, Any]],
        retain: Sequence[dict[str, Any]],
        world: Sequence[dict[str, Any]],
        passages: Sequence[str],
        cfg: EvalConfig = EvalConfig(),
    ) -> None:
        self.lm, self.cfg = lm, cfg
        self.sets = {"forget": list(forget), "retain": list(retain), "wf": list(world)}
        prompts, conts, variants = [], [], []
        for name, rows in self.sets.items():
            for i, row in enumerate(rows):
                options = [("answer", row["answer"])]
                if name != "wf":
                    options.append(("para", row["paraphrased_answer"]))
                options += [("pert", p) for p in row["perturbed_answer"]]
                for kind, text in options:
                    prompts.append(qa_prompt(row["question"]))
                    conts.append(qa_continuation(text))
                    variants.append(_Variant(name, kind, i))
        for i, text in enumerate(passages):
            prompts.append("")
            conts.append(" " + text)
            variants.append(_Variant("text", "text", i))
        self.variants = variants
        self.tokens = lm.tokenize_pairs(prompts, conts)
        self.questions = [
            (name, i, row) for name in ("forget", "retain", "wf") for i, row in enumerate(self.sets[name])
        ]
        self.prompt_ids = [lm.tokenizer(qa_prompt(row["question"]))["input_ids"] for _, _, row in self.questions]

    def prime(self, model: FrozenTrunkLM) -> None:
        """Run the frozen trunk over every evaluation row once (later models reuse it)."""
        model.prime(self.tokens)

    def _decode(self, ids: list[int]) -> str:
        text = self.lm.tokenizer.decode(ids, skip_special_tokens=True)
        return text.strip().split("\n")[0].split("###")[0].strip()  # the first line of the answer

    def evaluate(self, model: FrozenTrunkLM) -> dict[str, Any]:
        """``TOFU_EVAL.json`` of ``model`` (without forget_quality, which needs the retain model:
        `add_forget_quality`)."""
        scores, hits = scores_and_greedy_hits(model, self.tokens, self.cfg.batch_size)
        logp, n, hits = scores.logp.numpy(), scores.n_tokens.numpy(), hits.numpy()
        loss = -logp / np.maximum(n, 1)
        table: dict[tuple[str, str], dict[int, list[float]]] = {}
        exact: dict[str, dict[int, tuple[float, float]]] = {}
        text_nll, text_tokens = 0.0, 0.0
        for j, v in enumerate(self.variants):
            if v.set == "text":
                text_nll, text_tokens = text_nll - float(logp[j]), text_tokens + float(n[j])
                continue
            table.setdefault((v.set, v.kind), {}).setdefault(v.row, []).append(float(loss[j]))
            if v.kind == "answer":
                exact.setdefault(v.set, {})[v.row] = (float(hits[j]), float(n[j]))
        generated = model.greedy(
            self.prompt_ids,
            max_new_tokens=self.cfg.max_new_tokens,
            eos_ids=[self.lm.tokenizer.eos_token_id],
            batch_size=self.cfg.batch_size,
        )
        gen_text = {(name, i): self._decode(ids) for (name, i, _), ids in zip(self.questions, generated)}
        out: dict[str, Any] = {}
        for name, rows in self.sets.items():
            if not rows:
                continue
            idx = range(len(rows))
            answer = np.array([table[(name, "answer")][i][0] for i in idx])
            pert = np.array([np.mean(table[(name, "pert")][i]) for i in idx])[:, None]
            gens = [gen_text[(name, i)] for i in idx]
            rouge = rouge_l_recall(gens, [r["answer"] for r in rows])
            out[f"{name}_Q_A_ROUGE"] = _metric(rouge, "rougeL_recall", generation=gens)
            em = [float(exact[name][i][0] == exact[name][i][1]) for i in idx]
            out[f"{name}_exact_match"] = _metric(em, "score")
            out[f"{name}_exact_memorization"] = _metric(
                [exact[name][i][0] / max(exact[name][i][1], 1) for i in idx], "score"
            )
            if name == "wf":
                wrong = [table[(name, "pert")][i] for i in idx]
                out["wf_Q_A_Prob"] = _metric(
                    [float(probability_with_options(np.array([answer[i]]), np.array([wrong[i]]))[0]) for i in idx],
                    "prob",
                )
                tr = truth_ratio(answer, pert)
                out["wf_Truth_Ratio"] = _metric(tr, "score", agg=true_better(tr))
                continue
            para = np.array([table[(name, "para")][i][0] for i in idx])
            out[f"{name}_Q_A_Prob"] = _metric(probability(answer), "prob")
            out[f"{name}_Q_A_PARA_Prob"] = _metric(probability(para), "prob")
            out[f"{name}_Q_A_PERT_Prob"] = _metric(probability(pert[:, 0]), "prob")
            tr = truth_ratio(para, pert)
            key = "forget_truth_ratio" if name == "forget" else "retain_Truth_Ratio"
            out[key] = _metric(tr, "score", agg=closer_to_1_better(tr) if name == "forget" else true_better(tr))
        if text_tokens:
            out["general_perplexity"] = {"agg_value": float(np.exp(text_nll / text_tokens))}
        parts = {k: out[k]["agg_value"] for k in UTILITY_KEYS if k in out}
        if len(parts) == len(UTILITY_KEYS):
            out["model_utility"] = {"agg_value": model_utility(parts)}
        return out


def _metric(
    values: Sequence[float] | np.ndarray, field: str, agg: float | None = None, generation: Sequence[str] | None = None
) -> dict[str, Any]:
    values = [float(v) for v in values]
    by_index = {
        str(i): {field: v, **({"generation": generation[i]} if generation is not None else {})}
        for i, v in enumerate(values)
    }
    return {"agg_value": float(np.mean(values)) if agg is None else float(agg), "value_by_index": by_index}


def forget_truth_ratios(tofu_eval: dict[str, Any]) -> list[float]:
    """The per-QA forget-set truth ratios of a ``TOFU_EVAL.json``."""
    values = tofu_eval["forget_truth_ratio"]["value_by_index"]
    return [values[k]["score"] for k in sorted(values, key=int)]


def add_forget_quality(tofu_eval: dict[str, Any], retain_eval: dict[str, Any]) -> dict[str, Any]:
    """``tofu_eval`` with ``forget_quality``: the KS p-value against the retain model's forget truth ratios."""
    fq = forget_quality(forget_truth_ratios(tofu_eval), forget_truth_ratios(retain_eval))
    return {**tofu_eval, "forget_quality": {"agg_value": fq}}


def summary(tofu_eval: dict[str, Any]) -> dict[str, float]:
    """``TOFU_SUMMARY.json``: each metric's aggregate value."""
    return {key: value["agg_value"] for key, value in tofu_eval.items()}
