"""Training on scores: PairTokens against LocalLM's own scoring, sequence scores with gradients, reference
scores computed once, batches for the one training loop, LoRA on chosen layers trained through `fit`."""

from __future__ import annotations

import math

import pytest
import torch

from components.llm import (
    LocalLM,
    PairTokens,
    continuation_logprobs,
    frozen_copy,
    load_lm,
    pair_batches,
    precompute_scores,
    sequence_scores,
    trainable_state,
)
from components.llm.scoring import width_batches
from components.preference import ObjectiveConfig, PreferenceBatch, objective_loss
from components.training import TrainConfig, fit

PROMPTS = ["Q: 1+1=", "The capital of France is", "x"]
ANSWERS = [" 2", " Paris, of course.", " y z"]


@pytest.fixture(scope="module")
def lm() -> LocalLM:
    return load_lm("tiny", seed=0)


def test_pair_tokens_layout_known_answer(lm: LocalLM) -> None:
    t = lm.tokenize_pairs(["ab", "a"], ["c", "de"])  # byte tokens: one id per character
    assert t.ids.shape == (2, 3)
    assert t.attention_mask.tolist() == [[1, 1, 1], [1, 1, 1]]
    assert t.target_mask.tolist() == [[False, False, True], [False, True, True]]
    t = lm.tokenize_pairs(["abc", "a"], ["d", "e"])
    assert t.attention_mask.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]] and t.position_ids[1].tolist() == [0, 0, 0, 1]
    assert t.width == 1 and len(t) == 2
    one = t.rows([1])  # the all-pad leading columns are dropped
    assert one.ids.shape == (1, 2) and one.attention_mask.tolist() == [[1, 1]]
    eos = lm.tokenize_pairs(["a"], ["b"], append_eos=True)
    assert eos.ids[0, -1] == lm.tokenizer.eos_token_id and eos.target_mask.sum() == 2


def test_continuation_logprobs_equal_token_logprobs(lm: LocalLM) -> None:
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    full = continuation_logprobs(lm.model, tokens)
    expected = lm.token_logprobs(PROMPTS, ANSWERS, _share_prefix=False)
    assert full.requires_grad and full.shape == tokens.ids.shape
    for b, ref in enumerate(expected):
        assert torch.allclose(full[b][tokens.target_mask[b]], ref, atol=1e-5)
        assert (full[b][~tokens.target_mask[b]] == 0).all()


def test_sequence_scores_sum_log_probs_and_probabilities(lm: LocalLM) -> None:
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    s = sequence_scores(lm.model, tokens)
    expected = lm.token_logprobs(PROMPTS, ANSWERS)
    assert torch.allclose(s.logp, torch.stack([e.sum() for e in expected]), atol=1e-4)
    assert s.n_tokens.tolist() == [len(e) for e in expected]
    assert torch.allclose(s.prob_sum, torch.stack([e.exp().sum() for e in expected]), atol=1e-5)
    assert s.width == tokens.ids.shape[1]
    # a row scores the same alone as in the batch (left padding, per-row positions)
    alone = sequence_scores(lm.model, tokens.rows([2]))
    assert torch.allclose(alone.logp, s.logp[2:], atol=1e-5)
    s.logp.sum().backward()
    assert lm.model.model.embed_tokens.weight.grad is not None
    lm.model.zero_grad(set_to_none=True)


def test_precompute_scores_is_detached_batched_and_restores_the_mode(lm: LocalLM) -> None:
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    ref = frozen_copy(lm.model)
    assert not any(p.requires_grad for p in ref.parameters()) and not ref.training
    lm.model.train()
    once = precompute_scores(lm.model, tokens, batch_size=2)
    assert lm.model.training and not once.logp.requires_grad and once.width == 0  # two batches of different widths
    lm.model.eval()
    with torch.no_grad():
        assert torch.allclose(once.logp, sequence_scores(ref, tokens).logp, atol=1e-5)


def test_pair_batches_draw_the_same_rows_from_tokens_and_extras(lm: LocalLM) -> None:
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    ref = precompute_scores(lm.model, tokens)
    draw = pair_batches(tokens, torch.arange(3.0), ref, size=5)
    rows, labels, picked = draw(1, torch.Generator().manual_seed(0))
    assert isinstance(rows, PairTokens) and len(rows) == 3  # min(size, N)
    again = pair_batches(tokens, torch.arange(3.0), ref, size=5)(1, torch.Generator().manual_seed(0))
    assert torch.equal(again[1], labels)
    for b, i in enumerate(labels.long().tolist()):
        assert torch.equal(rows.ids[b][rows.attention_mask[b].bool()], tokens.ids[i][tokens.attention_mask[i].bool()])
        assert picked.logp[b] == ref.logp[i]
    with pytest.raises(ValueError, match="extra 0 has 2 rows, the tokens have 3"):
        pair_batches(tokens, torch.zeros(2), size=2)


def test_pair_batches_draw_a_second_token_table_with_the_same_indices(lm: LocalLM) -> None:
    """DPO pairs: the chosen and the rejected answers of a prompt come out in the same batch positions."""
    chosen, rejected = lm.tokenize_pairs(PROMPTS, ANSWERS), lm.tokenize_pairs(PROMPTS, [" no", " Lyon", " w"])
    rows_c, rows_r, labels = pair_batches(chosen, rejected, torch.arange(3.0), size=7)(
        1, torch.Generator().manual_seed(3)
    )
    assert isinstance(rows_r, PairTokens) and len(rows_r) == len(rows_c) == 3
    for b, i in enumerate(labels.long().tolist()):
        for table, rows in ((chosen, rows_c), (rejected, rows_r)):
            assert torch.equal(rows.ids[b][rows.attention_mask[b].bool()], table.ids[i][table.attention_mask[i].bool()])
            assert torch.equal(
                rows.target_mask[b][rows.attention_mask[b].bool()], table.target_mask[i][table.attention_mask[i].bool()]
            )
    with pytest.raises(ValueError, match="extra 0 has 2 rows, the tokens have 3"):
        pair_batches(chosen, lm.tokenize_pairs(PROMPTS[:2], ANSWERS[:2]), size=2)


def test_lora_on_top_layers_trains_through_fit_with_a_preference_loss(lm: LocalLM) -> None:
    """NPO on a LoRA copy adapted in the last layer only: the loop trains only the adapters, the forget
    answers lose probability, the base model is untouched."""
    with pytest.raises(ValueError, match=r"layers must be .*\[0, 2\)"):
        lm.with_lora(layers=[2])
    lora = lm.with_lora(r=4, alpha=8, layers=[1])
    names = [n for n, p in lora.model.named_parameters() if p.requires_grad]
    assert names and all(".layers.1." in n and "lora_" in n for n in names)
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    reference = precompute_scores(lm.model, tokens)
    before = {n: p.clone() for n, p in lm.model.named_parameters()}

    def loss_fn(model, batch):
        rows, ref = batch
        return objective_loss(
            "npo", PreferenceBatch(rejected=sequence_scores(model, rows), ref_rejected=ref), ObjectiveConfig(beta=0.5)
        )

    result = fit(
        lora.model,
        loss_fn,
        pair_batches(tokens, reference, size=3),
        TrainConfig(steps=15, lr=1e-2, seed=0, progress=False, log_every=5),
    )
    assert result.history[-1]["forget_log_ratio"] < -0.5  # the forget answers lost probability
    after = precompute_scores(lora.model, tokens)
    assert (after.logp < reference.logp).all()
    assert all(torch.equal(p, before[n]) for n, p in lm.model.named_parameters())
    state = trainable_state(lora.model)
    assert set(state) == set(names) and all(not t.requires_grad for t in state.values())
    assert math.isfinite(result.final_loss)


def test_width_batches_keep_a_long_row_apart_and_cover_every_row_once() -> None:
    widths = [3, 40, 2, 3, 5, 2, 4, 38]
    length = 45
    mask = torch.zeros((len(widths), length), dtype=torch.bool)
    for i, w in enumerate(widths):
        mask[i, length - w :] = True
    ids = torch.ones((len(widths), length), dtype=torch.long)
    tokens = PairTokens(ids, torch.ones_like(ids), torch.arange(length).repeat(len(widths), 1), mask)
    groups = width_batches(tokens, batch_size=3)
    assert sorted(torch.cat(groups).tolist()) == list(range(len(widths)))
    assert all(len(g) <= 3 for g in groups)
    assert [sorted(widths[i] for i in g.tolist()) for g in groups] == [[2, 2, 3], [3, 4, 5], [38, 40]]
