"""TOFU evaluation of a model against direct computations with LocalLM, and the unlearning batches / losses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from components.llm import load_lm
from components.preference import ObjectiveConfig
from components.training import TrainConfig, fit
from components.unlearning import AuthorConfig, author_rows
from components.unlearning.evaluate import (
    EvalConfig,
    TofuEvaluator,
    add_forget_quality,
    forget_truth_ratios,
    qa_continuation,
    qa_prompt,
    summary,
)
from components.unlearning.general_text import world_fact_rows
from components.unlearning.training import AdapterSession, unlearn_batches, unlearn_loss


@pytest.fixture(scope="module")
def setting():
    rows = author_rows(AuthorConfig(n_authors=4, forget_authors=1, n_perturbed=2, attributes=("birthplace", "genre")))
    session = AdapterSession(load_lm("tiny", seed=1), lora_layers=1, r=4, alpha=8, target_modules=("q_proj", "v_proj"))
    forget = [r for r in rows if r["split"] == "forget"]
    retain = [r for r in rows if r["split"] == "retain"][:3]
    evaluator = TofuEvaluator(
        session.lm,
        forget,
        retain,
        world_fact_rows(2, 2, seed=0),
        ["A short news passage."],
        EvalConfig(batch_size=4, max_new_tokens=5),
    )
    return session, forget, retain, evaluator


def _mean_nll(lm, question: str, answer: str) -> float:
    lp = lm.token_logprobs([qa_prompt(question)], [qa_continuation(answer)])[0]
    return float(-lp.mean())


def test_evaluation_matches_direct_scoring(setting) -> None:
    session, forget, retain, evaluator = setting
    out = evaluator.evaluate(session.model)
    lm = session.lm  # B = 0 adapters: the base model's numbers
    row = forget[0]
    para = _mean_nll(lm, row["question"], row["paraphrased_answer"])
    pert = np.mean([_mean_nll(lm, row["question"], p) for p in row["perturbed_answer"]])
    tr = math.exp(-pert) / (math.exp(-para) + 1e-10)
    assert out["forget_truth_ratio"]["value_by_index"]["0"]["score"] == pytest.approx(tr, rel=1e-4)
    assert out["forget_Q_A_Prob"]["value_by_index"]["0"]["prob"] == pytest.approx(
        math.exp(-_mean_nll(lm, row["question"], row["answer"])), rel=1e-4
    )
    generated = lm.generate([qa_prompt(r["question"]) for r in retain], max_new_tokens=5)
    gens = [g.strip().split("\n")[0].split("###")[0].strip() for g in generated]
    assert [out["retain_Q_A_ROUGE"]["value_by_index"][str(i)]["generation"] for i in range(3)] == gens
    ppl_tokens = lm.token_logprobs([""], [" A short news passage."])[0]
    assert out["general_perplexity"]["agg_value"] == pytest.approx(math.exp(-float(ppl_tokens.mean())), rel=1e-4)
    assert set(summary(out)) >= {"model_utility", "forget_exact_match", "wf_Q_A_Prob", "retain_Truth_Ratio"}
    assert 0 <= out["model_utility"]["agg_value"] <= 1
    same = add_forget_quality(out, out)
    assert same["forget_quality"]["agg_value"] == pytest.approx(1.0) and forget_truth_ratios(
        out
    ) == forget_truth_ratios(same)


def test_unlearning_moves_the_forget_answers(setting) -> None:
    """Ten steps of GA lower the forget answers' probability; FLAT batches carry template rows; NPO needs a
    reference."""
    session, forget, retain, evaluator = setting
    session.reset()
    pairs = lambda rows, answers=None: session.lm.tokenize_pairs(  # noqa: E731
        [qa_prompt(r["question"]) for r in rows], [qa_continuation(a) for a in (answers or [r["answer"] for r in rows])]
    )
    forget_tokens, retain_tokens = pairs(forget), pairs(retain)
    templates = pairs(forget, ["I don't know."] * len(forget))
    before = evaluator.evaluate(session.model)["forget_Q_A_Prob"]["agg_value"]
    fit(
        session.model,
        unlearn_loss("ga", ObjectiveConfig()),
        unlearn_batches("ga", forget_tokens, None, None, None, size=2),
        TrainConfig(steps=10, lr=1e-2, progress=False),
        parameters=session.parameters_to_train(),
    )
    after = evaluator.evaluate(session.model)["forget_Q_A_Prob"]["agg_value"]
    assert after < before
    batch = unlearn_batches("flat_kl", forget_tokens, templates, None, None, size=2)(1, torch.Generator())
    assert batch.template is not None and batch.retain is None and len(batch.forget) == 2
    graddiff = unlearn_batches("graddiff", forget_tokens, None, None, retain_tokens, size=2)(1, torch.Generator())
    assert graddiff.retain is not None and len(graddiff.retain) == 2
    with pytest.raises(ValueError, match="reference"):
        unlearn_batches("npo", forget_tokens, None, None, None, size=2)
    state = session.state()
    session.reset()
    assert all(torch.equal(v, torch.zeros_like(v)) for k, v in session.state().items() if "lora_B" in k)
    session.load(state)
    assert all(torch.equal(session.state()[k], v) for k, v in state.items())
