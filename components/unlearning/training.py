"""Batches and losses of fine-tuning and unlearning through `components.training.fit` and the objectives registry.

Fine-tuning (the original model on all QAs, the retain-only oracle on the retain QAs) minimises the NLL of the
answers: the registry's ``idk`` objective, which is the NLL of its ``chosen`` rows. Unlearning draws a batch of
forget rows per step and, as each objective needs them (`components.preference.OBJECTIVES`):

* ``rejected``: the forget answers y_f under the model being trained (GA, GradDiff, NPO, FLAT);
* ``chosen``: a template answer y_e for the same forget questions (IDK-SFT, FLAT), one fixed template per
  forget row, drawn by the run's seed;
* ``ref_rejected``: the frozen original model's scores of the same forget rows (NPO), computed once;
* ``retain``: an independent batch of retain QAs (GradDiff only: the one method here that uses retain data).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from components.llm.scoring import PairTokens, sequence_scores
from components.preference import OBJECTIVES, ObjectiveConfig, PreferenceBatch, SequenceScores, objective_loss

# the unlearning methods of the FLAT/TOFU comparison, each one registered objective
UNLEARNING_METHODS = ("ga", "graddiff", "npo", "idk", "flat_kl", "flat_tv", "flat_js", "flat_pearson")


class UnlearnBatch(NamedTuple):
    forget: PairTokens
    template: PairTokens | None
    ref_forget: SequenceScores | None
    retain: PairTokens | None


def sft_loss(model: nn.Module, batch: tuple[PairTokens]) -> tuple[Tensor, dict[str, Tensor]]:
    """NLL of the answers of a (prompt, answer) batch (the registry's ``idk`` objective on them)."""
    return objective_loss("idk", PreferenceBatch(chosen=sequence_scores(model, batch[0])))


def unlearn_batches(
    method: str,
    forget: PairTokens,
    template: PairTokens | None,
    ref_forget: SequenceScores | None,
    retain: PairTokens | None,
    size: int,
) -> Callable[[int, torch.Generator], UnlearnBatch]:
    """A ``batches(step, generator)``: ``size`` forget rows with replacement (with their template rows and
    reference scores), plus ``size`` retain rows when ``method`` needs retain data."""
    needs = OBJECTIVES[method].needs
    if "chosen" in needs and (template is None or len(template) != len(forget)):
        raise ValueError(f"{method} needs one template row per forget row")
    if "ref_rejected" in needs and ref_forget is None:
        raise ValueError(f"{method} needs the reference model's scores of the forget rows")
    if "retain" in needs and retain is None:
        raise ValueError(f"{method} needs retain rows")

    def draw(step: int, generator: torch.Generator) -> UnlearnBatch:
        idx = torch.randint(0, len(forget), (min(size, len(forget)),), generator=generator)
        kept = None
        if "retain" in needs:
            kept = retain.rows(torch.randint(0, len(retain), (min(size, len(retain)),), generator=generator))
        return UnlearnBatch(
            forget.rows(idx),
            template.rows(idx) if "chosen" in needs else None,
            ref_forget.select(idx) if "ref_rejected" in needs else None,
            kept,
        )

    return draw


def unlearn_loss(method: str, cfg: ObjectiveConfig) -> Callable[[nn.Module, UnlearnBatch], Any]:
    """``loss_fn(model, batch)`` of ``method``: the scores it needs under ``model``, then its objective."""
    needs = OBJECTIVES[method].needs

    def loss_fn(model: nn.Module, batch: UnlearnBatch) -> Any:
        scores = PreferenceBatch(
            chosen=sequence_scores(model, batch.template) if "chosen" in needs else None,
            rejected=sequence_scores(model, batch.forget) if "rejected" in needs else None,
            ref_rejected=batch.ref_forget,
            retain=sequence_scores(model, batch.retain) if "retain" in needs else None,
        )
        return objective_loss(method, scores, cfg)

    return loss_fn


class AdapterSession:
    """One LoRA model over a frozen trunk, reused for several runs: `reset` to fresh adapters, `load` saved ones.

    ``lm.with_lora(layers=top k)`` adapts the top ``lora_layers`` decoder layers; `FrozenTrunkLM` runs the
    layers below once per distinct token row, for every run of the session.
    """

    def __init__(self, lm: Any, *, lora_layers: int, r: int, alpha: float, target_modules: tuple[str, ...]) -> None:
        from components.llm.frozen_trunk import FrozenTrunkLM
        from components.llm.scoring import trainable_state

        total = int(lm.model.config.num_hidden_layers)
        k = min(lora_layers, total)
        self.lm = lm
        self.lora = lm.with_lora(r=r, alpha=alpha, target_modules=target_modules, layers=list(range(total - k, total)))
        self.split = total - k
        self.model = FrozenTrunkLM(self.lora.model, split=self.split, pad_id=int(lm.tokenizer.pad_token_id))
        self._initial = trainable_state(self.lora.model)

    def state(self) -> dict[str, Tensor]:
        """The adapter tensors (what a run saves)."""
        from components.llm.scoring import trainable_state

        return trainable_state(self.lora.model)

    def load(self, state: dict[str, Tensor]) -> None:
        """Set the adapters to ``state`` (names as `state` gives them); every adapter tensor must be present."""
        params = dict(self.lora.model.named_parameters())
        missing = sorted(set(self._initial) - set(state))
        if missing:
            raise ValueError(f"adapter state lacks {len(missing)} tensors, e.g. {missing[0]}")
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)

    def reset(self) -> None:
        """Fresh adapters (B = 0: the base model's outputs)."""
        self.load(self._initial)

    def parameters_to_train(self) -> list[nn.Parameter]:
        return [p for p in self.lora.model.parameters() if p.requires_grad]
