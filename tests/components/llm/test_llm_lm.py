"""LocalLM on the "tiny" model: tokenizer and chat template, greedy/sampled generation against manual
decoding, batch invariance, stop strings, log-probabilities against token-by-token computation, the
fine-tuning loss and LoRA."""

from __future__ import annotations

import time

import pytest
import torch

from components.llm import LM_NAMES, LocalLM, load_lm
from components.llm.lm import _nucleus_filter

PROMPTS = [
    "The capital of France is",
    "a",
    "Once upon a time, in a land far away, there lived",
    "2 + 2 =",
    "héllo wörld",
]


@pytest.fixture(scope="module")
def lm() -> LocalLM:
    return load_lm("tiny", seed=0)


def manual_greedy(lm: LocalLM, prompt: str, n: int) -> list[int]:
    """Greedy decoding by full forward passes on the unpadded sequence (no cache, no batching)."""
    ids = lm.tokenizer(prompt)["input_ids"]
    new: list[int] = []
    with torch.no_grad():
        for _ in range(n):
            logits = lm.model(input_ids=torch.tensor([ids + new])).logits[0, -1]
            token = int(logits.argmax())
            if token == lm.tokenizer.eos_token_id:
                break
            new.append(token)
    return new


def manual_logprob(lm: LocalLM, context: list[int], continuation: list[int]) -> list[float]:
    """log p(c_i | context, c_<i), one full forward pass per token."""
    out = []
    with torch.no_grad():
        for i, token in enumerate(continuation):
            logits = lm.model(input_ids=torch.tensor([context + continuation[:i]])).logits[0, -1]
            out.append(float(torch.log_softmax(logits, -1)[token]))
    return out


# ---------------------------------------------------------------------------------------------- loading
def test_names_and_unknown_name():
    assert LM_NAMES == ("smollm2-135m", "tiny")
    with pytest.raises(ValueError, match=r"unknown LM name 'gpt-5'.*smollm2-135m.*tiny"):
        load_lm("gpt-5")


def test_bad_seed_and_device_are_rejected():
    with pytest.raises(ValueError, match="seed"):
        load_lm("tiny", seed=-1)
    with pytest.raises(ValueError, match="device"):
        load_lm("tiny", device="tpu-9")


def test_tiny_loads_fast_in_eval_mode_and_is_a_function_of_the_seed(lm):
    start = time.perf_counter()
    again = load_lm("tiny", seed=0)
    assert time.perf_counter() - start < 1.0
    other = load_lm("tiny", seed=1)
    assert not again.model.training and again.device == torch.device("cpu") and again.name == "tiny"
    assert again.model.config.model_type == "llama" and again.model.config.num_hidden_layers == 2
    for (name, a), (_, b), (_, c) in zip(
        lm.model.named_parameters(), again.model.named_parameters(), other.model.named_parameters()
    ):
        assert torch.equal(a, b), name
        if a.ndim == 2:
            assert not torch.equal(a, c), name


def test_tiny_tokenizer_is_byte_level_with_special_tokens(lm):
    tok = lm.tokenizer
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|im_start|>", "<|im_end|>", "<|im_end|>")
    assert tok.padding_side == "left"
    text = "héllo wörld, 2+2=4 ✓"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text.encode("utf-8"))
    assert tok.decode(ids) == text
    marked = tok("<|im_start|>user\nhi<|im_end|>")["input_ids"]
    assert marked[0] == tok.bos_token_id and marked[-1] == tok.eos_token_id and len(marked) == 2 + len("user\nhi")


def test_chat_template_has_role_markers(lm):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    text = lm.chat(messages)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"
    assert lm.chat(messages, add_generation_prompt=False) == text.removesuffix("<|im_start|>assistant\n")
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        lm.chat([{"role": "user", "content": "a"}, {"role": "user"}])
    with pytest.raises(ValueError, match="non-empty"):
        lm.chat([])


# ------------------------------------------------------------------------------------------- generation
def test_left_padding_mask_and_positions_known_answer(lm):
    ids, mask, positions = lm._pad_left([[5, 6, 7], [8]])
    pad = lm.tokenizer.pad_token_id
    assert ids.tolist() == [[5, 6, 7], [pad, pad, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert positions.tolist() == [[0, 1, 2], [0, 0, 0]]


def test_greedy_generation_equals_manual_decoding_and_keeps_input_order(lm):
    outputs = lm.generate(PROMPTS, max_new_tokens=12, batch_size=3)
    assert len(outputs) == len(PROMPTS)
    for prompt, text in zip(PROMPTS, outputs):
        assert text == lm.tokenizer.decode(manual_greedy(lm, prompt, 12), skip_special_tokens=True)


@pytest.mark.parametrize("batch_size", [2, 8])
def test_greedy_generation_does_not_depend_on_the_batch(lm, batch_size):
    alone = [lm.generate([p], max_new_tokens=16, batch_size=1)[0] for p in PROMPTS]
    assert lm.generate(PROMPTS, max_new_tokens=16, batch_size=batch_size) == alone
    assert lm.generate(PROMPTS[::-1], max_new_tokens=16, batch_size=batch_size) == alone[::-1]


def test_sampling_is_reproducible_from_the_seed_and_batch_independent(lm):
    a = lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=7)
    assert lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=7, batch_size=1) == a
    assert lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=8) != a
    assert a != lm.generate(PROMPTS, max_new_tokens=16)  # not greedy
    # the same prompt at two positions draws two independent samples
    twice = lm.generate([PROMPTS[0], PROMPTS[0]], max_new_tokens=16, temperature=1.0, seed=7)
    assert twice[0] != twice[1]
    # a vanishing nucleus keeps only the most probable token: sampling becomes greedy
    assert lm.generate(PROMPTS, max_new_tokens=8, temperature=1.0, top_p=1e-6, seed=3) == lm.generate(
        PROMPTS, max_new_tokens=8
    )


def test_first_sampled_token_follows_the_tempered_softmax(lm):
    """Empirical distribution of the first sampled text vs softmax(logits / T), grouped by decoded text."""
    prompt, temperature, n = "The capital of France is", 0.7, 3000
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([lm.tokenizer(prompt)["input_ids"]])).logits[0, -1]
    probs = torch.softmax(logits / temperature, -1)
    expected: dict[str, float] = {}
    for token, p in enumerate(probs.tolist()):
        text = "" if token == lm.tokenizer.eos_token_id else lm.tokenizer.decode([token], skip_special_tokens=True)
        expected[text] = expected.get(text, 0.0) + p
    samples = lm.generate([prompt] * n, max_new_tokens=1, temperature=temperature, seed=0, batch_size=500)
    observed: dict[str, float] = {}
    for text in samples:
        observed[text] = observed.get(text, 0.0) + 1 / n
    total_variation = 0.5 * sum(abs(observed.get(k, 0.0) - expected.get(k, 0.0)) for k in expected | observed)
    assert max(expected.values()) < 0.5  # a spread-out distribution, so the check has power
    assert total_variation < 0.08


def test_nucleus_filter_known_answer():
    probs = torch.tensor([[0.1, 0.5, 0.15, 0.25]])
    torch.testing.assert_close(_nucleus_filter(probs, 0.7), torch.tensor([[0.0, 0.5, 0.0, 0.25]]) / 0.75)
    torch.testing.assert_close(_nucleus_filter(probs, 0.75), torch.tensor([[0.0, 0.5, 0.0, 0.25]]) / 0.75)
    torch.testing.assert_close(_nucleus_filter(probs, 0.76), torch.tensor([[0.0, 0.5, 0.15, 0.25]]) / 0.9)
    torch.testing.assert_close(_nucleus_filter(probs, 0.2), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    assert _nucleus_filter(probs, 1.0) is probs


def test_stop_strings_cut_the_text(lm):
    full = lm.generate(PROMPTS, max_new_tokens=24)
    stops = [text[3:5] for text in full]
    assert all(len(s) == 2 for s in stops)
    for prompt, text, stop in zip(PROMPTS, full, stops):
        cut = lm.generate([prompt], max_new_tokens=24, stop=[stop, "never-generated-\x00"])[0]
        assert cut == text[: text.find(stop)]


def test_eos_ends_rows_and_generation_stops_when_all_rows_are_done():
    lm = load_lm("tiny", seed=0)
    calls = []

    def force_eos(module, args, output):
        calls.append(1)
        output = output.clone()
        output[..., lm.tokenizer.eos_token_id] = 1e4
        return output

    handle = lm.model.lm_head.register_forward_hook(force_eos)
    try:
        assert lm.generate(PROMPTS, max_new_tokens=20, batch_size=8) == [""] * len(PROMPTS)
    finally:
        handle.remove()
    assert len(calls) == 1  # one forward pass, then every row was finished


def test_generate_rejects_bad_arguments(lm):
    with pytest.raises(TypeError, match="prompts must be a list"):
        lm.generate("abc", max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate(["a"], max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate(["a"], max_new_tokens=2, temperature=-0.5)
    with pytest.raises(ValueError, match="top_p"):
        lm.generate(["a"], max_new_tokens=2, top_p=0.0)
    with pytest.raises(ValueError, match="stop strings"):
        lm.generate(["a"], max_new_tokens=2, stop=[""])
    with pytest.raises(ValueError, match="max_position_embeddings=2048"):
        lm.generate(["x" * 2040], max_new_tokens=16)
    assert lm.generate([], max_new_tokens=4) == []


# ---------------------------------------------------------------------------------------------- scoring
def test_token_logprobs_equal_a_token_by_token_computation(lm):
    prompts = ["The capital of France is", "", "ab", "Q: 2+2? A:"]
    continuations = [" Paris", "xyz", "", " 4, of course"]
    scored = lm.token_logprobs(prompts, continuations, batch_size=3)
    for prompt, continuation, got in zip(prompts, continuations, scored):
        context = lm.tokenizer(prompt)["input_ids"] or [lm.tokenizer.bos_token_id]  # empty prompt: bos
        tokens = lm.tokenizer(continuation)["input_ids"]
        assert got.shape == (len(tokens),) and got.dtype == torch.float32
        torch.testing.assert_close(got, torch.tensor(manual_logprob(lm, context, tokens)), atol=1e-4, rtol=1e-4)
    sums = lm.logprobs(prompts, continuations, batch_size=1)
    assert sums == pytest.approx([float(t.sum()) for t in scored], abs=1e-4)
    assert sums[2] == 0.0


def test_logprobs_rank_a_trained_continuation_first(lm):
    """A few LoRA steps on one (prompt, answer) pair make that answer the top-ranked option."""
    prompt, options = "Q: the capital of France? A:", [" Rome", " Paris", " Oslo", " Lima"]
    before = lm.logprobs([prompt] * 4, options)
    tuned = lm.with_lora(r=4, alpha=8)
    optimiser = torch.optim.Adam([p for p in tuned.model.parameters() if p.requires_grad], lr=3e-2)
    tuned.model.train()
    for _ in range(20):
        loss = tuned.lm_loss([prompt], [" Paris"])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    tuned.model.eval()
    after = tuned.logprobs([prompt] * 4, options)
    assert max(range(4), key=lambda i: after[i]) == 1
    assert after[1] > before[1] + 1.0
    assert lm.logprobs([prompt] * 4, options) == before  # the base model is untouched


def test_scoring_rejects_mismatched_lists(lm):
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        lm.logprobs(["a", "b"], ["c"])
    with pytest.raises(TypeError, match=r"continuations\[0\] must be a string"):
        lm.logprobs(["a"], [3])


# ------------------------------------------------------------------------------------- loss and LoRA
def test_lm_loss_is_the_mean_nll_of_target_tokens(lm):
    prompts, targets = ["The capital of France is", "hi", "x"], [" Paris", " there, friend", "y"]
    loss = lm.lm_loss(prompts, targets)
    per_token = torch.cat(lm.token_logprobs(prompts, targets))
    torch.testing.assert_close(loss.detach(), -per_token.mean(), atol=1e-5, rtol=1e-5)
    loss.backward()
    assert lm.model.model.embed_tokens.weight.grad is not None
    lm.model.zero_grad(set_to_none=True)
    with torch.no_grad():
        with_eos = lm.lm_loss(prompts, targets, append_eos=True)
        eos = lm.tokenizer.eos_token
        extra = lm.token_logprobs([p + t for p, t in zip(prompts, targets)], [eos] * 3)
    expected = -(per_token.sum() + torch.cat(extra).sum()) / (per_token.numel() + 3)
    torch.testing.assert_close(with_eos, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="non-empty target"):
        lm.lm_loss(["a"], [""])


def test_lora_starts_identical_trains_only_adapters_and_leaves_the_base_alone(lm):
    snapshot = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    tuned = lm.with_lora(r=8, alpha=16)
    config = lm.model.config
    head_dim = config.hidden_size // config.num_attention_heads
    q = 8 * (config.hidden_size + config.hidden_size)
    v = 8 * (config.hidden_size + config.num_key_value_heads * head_dim)
    assert tuned.trainable_parameters() == config.num_hidden_layers * (q + v)
    assert all(("lora_A" in n or "lora_B" in n) == p.requires_grad for n, p in tuned.model.named_parameters())
    assert lm.trainable_parameters() == sum(p.numel() for p in lm.model.parameters())

    ids = torch.tensor([lm.tokenizer("some text to score")["input_ids"]])
    with torch.no_grad():
        base_logits = lm.model(input_ids=ids).logits
        torch.testing.assert_close(tuned.model(input_ids=ids).logits, base_logits, atol=0, rtol=0)
    optimiser = torch.optim.SGD([p for p in tuned.model.parameters() if p.requires_grad], lr=0.5)
    tuned.lm_loss(["some text"], [" to score"]).backward()
    optimiser.step()
    with torch.no_grad():
        assert not torch.allclose(tuned.model(input_ids=ids).logits, base_logits, atol=1e-4)
        assert torch.equal(lm.model(input_ids=ids).logits, base_logits)
    for name, param in lm.model.named_parameters():
        assert torch.equal(param, snapshot[name]), name
    tuned_base = tuned.model.get_base_model()
    for name, param in tuned_base.named_parameters():
        if "lora_" not in name:
            assert torch.equal(param, snapshot[name.replace(".base_layer", "")]), name
    # a LoRA model still generates and scores through the same interface, and is not wrapped twice
    assert len(tuned.generate(["abc"], max_new_tokens=3)) == 1
    with pytest.raises(ValueError, match="already carries LoRA adapters"):
        tuned.with_lora()
