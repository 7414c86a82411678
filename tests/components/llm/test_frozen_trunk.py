"""FrozenTrunkLM: the same logits, scores, gradients and greedy tokens as the wrapped model, with the trunk run
once per distinct row."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from components.llm import PairTokens, load_lm, scores_and_greedy_hits, sequence_scores
from components.llm.frozen_trunk import FrozenTrunkLM

PROMPTS = ["Q: who wrote it?\nA:", "Q: where?\nA:", "Q: a much longer question, with words\nA:"]
ANSWERS = [" Mira Hollis.", " Lisbon.", " In the year of the long winter."]


def _four_layer_lm():
    lm = load_lm("tiny", seed=3)
    config = LlamaConfig(**{**lm.model.config.to_dict(), "num_hidden_layers": 4})
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    return type(lm)(name="tiny", model=model, tokenizer=lm.tokenizer, device=lm.device, seed=3)


@pytest.fixture(scope="module")
def lora_lm():
    lm = _four_layer_lm().with_lora(r=4, alpha=8, layers=[2, 3], target_modules=("q_proj", "v_proj", "up_proj"))
    for name, p in lm.model.named_parameters():  # non-zero B so the adapters change the output
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05, generator=torch.Generator().manual_seed(len(name)))
    return lm


def test_logits_scores_and_grads_match_the_full_model(lora_lm) -> None:
    tokens = lora_lm.tokenize_pairs(PROMPTS, ANSWERS)
    wrapped = FrozenTrunkLM(lora_lm.model, split=2, pad_id=lora_lm.tokenizer.pad_token_id)
    full = lora_lm.model(
        input_ids=tokens.ids, attention_mask=tokens.attention_mask, position_ids=tokens.position_ids, use_cache=False
    ).logits
    mine = wrapped(tokens.ids, tokens.attention_mask, tokens.position_ids).logits
    real = tokens.attention_mask.bool()
    assert torch.allclose(mine[real], full[real], atol=1e-4)
    assert wrapped.memo_size == 3
    a, b = sequence_scores(lora_lm.model, tokens), sequence_scores(wrapped, tokens)
    assert torch.allclose(a.logp, b.logp, atol=1e-4) and torch.allclose(a.prob_sum, b.prob_sum, atol=1e-5)
    params = [p for p in lora_lm.model.parameters() if p.requires_grad]
    grads_full = torch.autograd.grad(a.logp.sum(), params)
    grads_mine = torch.autograd.grad(b.logp.sum(), params)
    for g1, g2 in zip(grads_full, grads_mine):
        assert torch.allclose(g1, g2, atol=1e-4)
    # a second pass over the same rows in another batch order reuses the memo and agrees
    again = sequence_scores(wrapped, tokens.rows([2, 0]))
    assert wrapped.memo_size == 3 and torch.allclose(again.logp, b.logp[[2, 0]], atol=1e-4)


def test_greedy_matches_generate(lora_lm) -> None:
    wrapped = FrozenTrunkLM(lora_lm.model, split=2, pad_id=lora_lm.tokenizer.pad_token_id)
    prompts = [lora_lm.tokenizer(p)["input_ids"] for p in PROMPTS]
    eos = [lora_lm.tokenizer.eos_token_id]
    mine = wrapped.greedy(prompts, max_new_tokens=7, eos_ids=eos)
    expected = lora_lm.generate(PROMPTS, max_new_tokens=7)
    assert [lora_lm.tokenizer.decode(m, skip_special_tokens=True) for m in mine] == expected
    assert all(len(m) <= 7 for m in mine) and any(mine)
    assert wrapped.greedy(prompts, max_new_tokens=7, eos_ids=eos) == mine  # the cached trunk prefix is reused


def test_trainable_trunk_is_refused() -> None:
    lm = _four_layer_lm().with_lora(r=2, alpha=4, layers=[1, 3])
    with pytest.raises(ValueError, match="must be frozen"):
        FrozenTrunkLM(lm.model, split=2)
    with pytest.raises(ValueError, match="split must be"):
        FrozenTrunkLM(lm.model, split=4)


def test_greedy_hits_count_exact_reproduction(lora_lm) -> None:
    """hits == n_tokens exactly for the model's own greedy continuation; changing its last token loses one hit."""
    wrapped = FrozenTrunkLM(lora_lm.model, split=2, pad_id=lora_lm.tokenizer.pad_token_id)
    prompt = lora_lm.tokenizer(PROMPTS[0])["input_ids"]
    greedy = wrapped.greedy([prompt], max_new_tokens=5, eos_ids=[])[0]
    other = greedy[:-1] + [(greedy[-1] + 1) % 250 + 3]
    rows = [prompt + greedy, prompt + other]
    ids = torch.tensor(rows)
    mask = torch.ones_like(ids)
    target = torch.zeros_like(ids, dtype=torch.bool)
    target[:, len(prompt) :] = True
    tokens = PairTokens(ids, mask, (mask.cumsum(-1) - 1), target)
    scores, hits = scores_and_greedy_hits(wrapped, tokens, batch_size=1)
    assert hits.tolist() == [5, 4] and scores.n_tokens.tolist() == [5.0, 5.0]
    plain, plain_hits = scores_and_greedy_hits(lora_lm.model, tokens)
    assert torch.equal(plain_hits, hits) and torch.allclose(plain.logp, scores.logp, atol=1e-4)


def test_bf16_base_keeps_fp32_adapters_and_agrees_with_the_full_bf16_model() -> None:
    """load_lm(precision="bf16"): bf16 weights, LoRA adapters in fp32 (mixed precision); the trunk memo holds
    bf16 states and the wrapper's scores and gradients agree with the wrapped bf16 model's."""
    with pytest.raises(ValueError, match="precision must be one of"):
        load_lm("tiny", precision="fp16")
    base = load_lm("tiny", seed=3, precision="bf16")
    assert {p.dtype for p in base.model.parameters()} == {torch.bfloat16}
    lm = base.with_lora(r=4, alpha=8, layers=[1], target_modules=("q_proj", "v_proj", "up_proj"))
    adapters = [p for p in lm.model.parameters() if p.requires_grad]
    assert adapters and {p.dtype for p in adapters} == {torch.float32}
    for name, p in lm.model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05, generator=torch.Generator().manual_seed(len(name)))
    tokens = lm.tokenize_pairs(PROMPTS, ANSWERS)
    wrapped = FrozenTrunkLM(lm.model, split=1, pad_id=lm.tokenizer.pad_token_id)
    a, b = sequence_scores(lm.model, tokens), sequence_scores(wrapped, tokens)
    assert b.logp.dtype == torch.float32 and wrapped.memo_size == 3
    assert torch.allclose(a.logp, b.logp, atol=0.05 * float(tokens.target_mask.sum(1).max()))
    grads = torch.autograd.grad(b.logp.sum(), adapters)
    assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert any(float(g.abs().max()) > 0 for g in grads)
    prompts = [lm.tokenizer(p)["input_ids"] for p in PROMPTS]
    decoded = wrapped.greedy(prompts, max_new_tokens=4, eos_ids=[lm.tokenizer.eos_token_id])
    assert len(decoded) == 3 and all(len(d) <= 4 for d in decoded)
