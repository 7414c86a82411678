"""The ways to fine-tune the multi-task dense model (:mod:`components.models.multitask_dense`) that MTSAM
compares, each a list of :class:`Learner` s trained by the one training loop, and their evaluation.

=================  =====================================================  =====================================
method             models                                                 trained (besides decoders, no-mask
                                                                          rows of their tasks)
=================  =====================================================  =====================================
``decoders``       one, all tasks                                         nothing else: the encoder is frozen
``finetune``       one per task, trained on that task alone               every tail parameter
``lora_per_task``  one per task, trained on that task alone               its LoRA (q, k, v) and the tail norms
``lora_shared``    one, all tasks                                         one LoRA (q, k, v) and the tail norms
``tora``           one, all tasks (multi-task forward)                    the ToRA tensors and the tail norms,
                                                                          plus lambda R_orth in the loss
=================  =====================================================  =====================================

MTSAM trains every norm of the encoder beside the adapters (``mark_only_td_as_trainable``); the adapter
methods here do the same for the adapted tail. The trainable count of a learner is the numbers it trains
with the no-mask embedding counted for its own tasks' rows only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from components.metrics.dense import confusion_matrix, depth_errors, normal_angles, normal_errors, segmentation_scores
from components.models.lora import LoraSpec, attach_lora, lora_factors
from components.models.multitask_dense import TASKS, MultiTaskDense, base_model, predict, task_losses, weighted_loss
from components.models.tora import ToraSpec, attach_tora, orthogonality_loss, tora_deltas, tora_parameters, tora_tensors


@dataclass(frozen=True)
class MethodConfig:
    """The adapters' shapes (ToRA's task count is the number of tasks) and ToRA's regulariser weight."""

    lora: LoraSpec = LoraSpec(r=2, alpha=2.0, dropout=0.1, targets=("q_proj", "k_proj", "v_proj"))
    tora: ToraSpec = ToraSpec(ranks=(4, 4, 2), n_tasks=len(TASKS))
    tora_lambda: float = 0.1


@dataclass
class Learner:
    """One model to train: the tasks it learns, the parameters ``fit`` optimises, an extra loss term."""

    model: nn.Module
    tasks: tuple[str, ...]
    parameters: list[nn.Parameter]
    adapter: list[nn.Parameter] = field(default_factory=list)
    regulariser: Callable[[nn.Module], Tensor] | None = None

    @property
    def name(self) -> str:
        return "+".join(self.tasks)

    def trainable(self) -> int:
        """Numbers trained, with the no-mask embedding counted for this learner's tasks' rows only."""
        inner = base_model(self.model)
        embed = inner.no_mask_embed.weight
        rows = sum(inner.cfg.channels(t) for t in self.tasks) * embed.shape[1]
        return sum(p.numel() for p in self.parameters if p is not embed) + rows

    def adapter_count(self) -> int:
        return sum(p.numel() for p in self.adapter)

    def loss(self, model: nn.Module, batch: Sequence[Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """``fit``'s loss: sum_t w_t L_t / sum_t w_t over the learner's tasks (+ the regulariser)."""
        h, label, depth, normal = batch
        losses = task_losses(predict(model, h, self.tasks), {"seg": label, "depth": depth, "normal": normal})
        loss = weighted_loss(losses)
        extras = {f"{t}_loss": value.detach() for t, value in losses.items()}
        if self.regulariser is not None:
            reg = self.regulariser(model)
            loss, extras["orth_reg"] = loss + reg, reg.detach()
        return loss, extras


def _train(params: Sequence[nn.Parameter]) -> list[nn.Parameter]:
    for p in params:
        p.requires_grad_(True)
    return list(params)


def _heads(inner: MultiTaskDense, tasks: Sequence[str]) -> list[nn.Parameter]:
    return [p for t in tasks for p in inner.decoders[t].parameters()] + [inner.no_mask_embed.weight]


def _frozen_copy(base: MultiTaskDense) -> MultiTaskDense:
    model = copy.deepcopy(base)
    model.requires_grad_(False)
    return model


def _decoders(base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    model = _frozen_copy(base)
    return [Learner(model, TASKS, _train(_heads(model, TASKS)))]


def _finetune(base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    learners = []
    for task in TASKS:
        model = _frozen_copy(base)
        tail = [*model.blocks.parameters(), *model.norm.parameters()]
        learners.append(Learner(model, (task,), _train(tail + _heads(model, (task,)))))
    return learners


def _lora(base: MultiTaskDense, cfg: MethodConfig, seed: int, tasks: tuple[str, ...]) -> Learner:
    model = attach_lora(base, cfg.lora, seed=seed)  # a copy: only the LoRA factors are trainable
    inner = base_model(model)
    adapter = [p for name, p in model.named_parameters() if "lora_" in name]
    return Learner(model, tasks, _train(adapter + inner.tail_norm_parameters() + _heads(inner, tasks)), adapter)


def _lora_per_task(base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    return [_lora(base, cfg, seed * len(TASKS) + i, (task,)) for i, task in enumerate(TASKS)]


def _lora_shared(base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    return [_lora(base, cfg, seed, TASKS)]


def _tora(base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    model = attach_tora(base, cfg.tora, seed=seed)
    adapter = tora_parameters(model)
    lam = cfg.tora_lambda
    return [
        Learner(
            model,
            TASKS,
            _train(adapter + model.tail_norm_parameters() + _heads(model, TASKS)),
            adapter,
            regulariser=(lambda m: lam * orthogonality_loss(base_model(m))) if lam > 0 else None,
        )
    ]


METHOD_BUILDERS: dict[str, Callable[[MultiTaskDense, MethodConfig, int], list[Learner]]] = {
    "decoders": _decoders,
    "finetune": _finetune,
    "lora_per_task": _lora_per_task,
    "lora_shared": _lora_shared,
    "tora": _tora,
}


def build_learners(method: str, base: MultiTaskDense, cfg: MethodConfig, seed: int) -> list[Learner]:
    """The learners of ``method`` (a key of :data:`METHOD_BUILDERS`) around copies of ``base``."""
    if method not in METHOD_BUILDERS:
        raise ValueError(f"unknown method {method!r}; expected one of {sorted(METHOD_BUILDERS)}")
    return METHOD_BUILDERS[method](base, cfg, seed)


def update_norms(learners: Sequence[Learner]) -> dict[str, float]:
    """{task: ||dW_t||_F}, the Frobenius norm of the adapter's weight update for task t over every adapted linear
    (ToRA: s U2 G_t^T U1^T per fused q/k/v layer; LoRA: s B A of the learner that learned t). Learners without
    an adapter (decoders only, fine-tuning) give no entry. It is what makes adapters' step sizes comparable."""
    out: dict[str, float] = {}
    for learner in learners:
        if not learner.adapter:
            continue
        if tora_tensors(learner.model):
            for index, task in enumerate(TASKS):
                if task in learner.tasks:
                    deltas = tora_deltas(learner.model, index).values()
                    out[task] = float(torch.sqrt(sum(d.pow(2).sum() for d in deltas)))
            continue
        total = float(torch.sqrt(sum(f.delta().pow(2).sum() for f in lora_factors(learner.model).values())))
        out.update({task: total for task in learner.tasks})
    return out


def predict_all(learners: Sequence[Learner], h: Tensor, batch: int = 64) -> dict[str, Tensor]:
    """Eval-mode predictions {task: [N, C, H, W]} of every task, each from the learner that learned it."""
    out: dict[str, list[Tensor]] = {}
    for learner in learners:
        was_training = learner.model.training
        learner.model.eval()
        with torch.no_grad():
            for start in range(0, len(h), batch):
                for task, pred in predict(learner.model, h[start : start + batch], learner.tasks).items():
                    out.setdefault(task, []).append(pred)
        learner.model.train(was_training)
    return {task: torch.cat(chunks) for task, chunks in out.items()}


def dense_scores(preds: Mapping[str, Tensor], targets: Mapping[str, Tensor], n_classes: int) -> dict[str, float]:
    """The nine NYUv2 numbers (:mod:`components.metrics.dense`) of a full set of predictions."""
    scores = segmentation_scores(confusion_matrix(preds["seg"].argmax(1), targets["seg"], n_classes))
    scores.update(depth_errors(preds["depth"], targets["depth"]))
    scores.update(normal_errors(normal_angles(preds["normal"], targets["normal"])))
    return scores
