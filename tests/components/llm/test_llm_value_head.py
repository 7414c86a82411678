"""The value head: one value per token from the decoder's last hidden state, independent of padding; trained
through the one loop on a tiny model (all weights) and on a LoRA model (adapters + head only)."""

from __future__ import annotations

import torch

from components.llm import ValueHeadModel, load_lm
from components.training import TrainConfig, fit, random_batches


def test_values_are_the_head_of_the_last_hidden_state_and_padding_free() -> None:
    lm = load_lm("tiny", seed=0)
    model = ValueHeadModel(lm.model, seed=3)
    tokens = lm.tokenize_pairs(["3+4=", "12+30="], ["7;#7", "42"])
    values = model.token_values(tokens)
    assert values.shape == tokens.ids.shape
    out = lm.model(
        input_ids=tokens.ids,
        attention_mask=tokens.attention_mask,
        position_ids=tokens.position_ids,
        output_hidden_states=True,
    )
    assert torch.allclose(values, model.head(out.hidden_states[-1]).squeeze(-1), atol=1e-5)
    alone = model.token_values(tokens.rows([1]))
    keep = tokens.attention_mask[1].bool()
    assert torch.allclose(alone[0], values[1][keep], atol=1e-5)
    # the decoder is the backbone's own: its weights are stored once
    assert not any(k.startswith("decoder") for k in model.state_dict())
    assert ValueHeadModel(lm.model, seed=3).head.weight.equal(model.head.weight)


def test_value_regression_trains_all_of_a_tiny_model_and_only_adapters_of_a_lora_model() -> None:
    lm = load_lm("tiny", seed=0)
    tokens = lm.tokenize_pairs(["1+1=", "2+2=", "3+3=", "4+4="], ["2", "5", "6", "9"])
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])[:, None].expand(-1, tokens.ids.shape[1])

    def loss_fn(model, batch):
        ids, mask, pos, target, y = batch
        v = torch.sigmoid(model(ids, mask, pos))
        return ((v - y) ** 2)[target].mean()

    for base, expect_frozen in ((lm.model, False), (lm.with_lora(r=2, alpha=4).model, True)):
        model = ValueHeadModel(base, seed=0)
        frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
        result = fit(
            model,
            loss_fn,
            random_batches(*tokens, labels, size=4),
            TrainConfig(steps=40, lr=5e-3, seed=0, progress=False, log_every=20),
        )
        assert result.history[-1]["loss"] < 0.5 * result.history[0]["loss"]
        assert bool(frozen) == expect_frozen
        assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
