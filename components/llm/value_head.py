"""A scalar value per token on top of a causal LM: the verifier of value-guided search (ORM / PRM / TVM).

``ValueHeadModel(backbone)`` runs the backbone's decoder (a plain transformers causal LM, or its peft LoRA
wrapper) and maps the last hidden state h_t of every position to one number, v_t = w . h_t + b. The value is
returned raw; verifiers trained with a squared error on sigmoid(v_t) (OVM / TVM style) read sigmoid(v_t) as
the probability that a solution continuing this prefix ends correct.

The language-model head is not computed (only the decoder runs), so a value costs one decoder pass whatever
the vocabulary size.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from components.llm.scoring import PairTokens


def _decoder(backbone: nn.Module) -> nn.Module:
    """The decoder stack (embeddings -> layers -> final norm) of a causal LM, through a peft wrapper."""
    getter = getattr(backbone, "get_decoder", None)
    decoder = getter() if callable(getter) else None
    if decoder is None:
        raise TypeError(f"{type(backbone).__name__} has no get_decoder(); expected a transformers causal LM")
    return decoder


class ValueHeadModel(nn.Module):
    """Backbone decoder + ``Linear(hidden, 1)``: one raw value per token.

    Args:
        backbone: a transformers causal LM (e.g. ``load_lm("tiny").model``) or its peft LoRA model. Whatever of
            it requires grad trains with the head (all of a small model; only the adapters of a LoRA model).
        seed: seed of the head's initialisation (weights ~ N(0, 1/hidden), bias 0), drawn in a forked RNG.
    """

    def __init__(self, backbone: nn.Module, *, seed: int = 0) -> None:
        super().__init__()
        self.backbone = backbone
        self._decoder = (_decoder(backbone),)  # a part of the backbone: kept out of the module tree
        hidden = int(backbone.config.hidden_size)
        self.head = nn.Linear(hidden, 1)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            self.head.weight.normal_(0.0, hidden**-0.5)
            self.head.bias.zero_()

    def forward(self, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor) -> Tensor:
        """Raw values [B, L], one per position (left padding hidden by the mask, positions from 0 per row)."""
        hidden = self._decoder[0](
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        return self.head(hidden.float()).squeeze(-1)

    def token_values(self, tokens: PairTokens) -> Tensor:
        """Raw values [B, L] of a `PairTokens` table (read them where ``tokens.target_mask`` is True)."""
        return self(tokens.ids, tokens.attention_mask, tokens.position_ids)
