"""Classification metrics for merged models: accuracy, KnOTS normalised accuracy, joint accuracy.

Accuracies are fractions in [0, 1]; ``normalized_accuracy`` is a percentage (KnOTS section 4):

    norm_acc_t = 100 * acc(merged model on task t) / acc(task t's own LoRA model on task t).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor


def accuracy(logits_or_preds: Tensor, labels: Tensor) -> float:
    """Fraction of correct predictions. logits [N, C] (argmax over C) or predicted classes [N]; labels [N]."""
    preds = logits_or_preds.argmax(dim=-1) if logits_or_preds.dim() == 2 else logits_or_preds
    if preds.dim() != 1 or preds.shape != labels.shape:
        raise ValueError(
            f"predictions {tuple(logits_or_preds.shape)} do not match labels "
            f"{tuple(labels.shape)}; expected [N, C] logits or [N] classes"
        )
    if labels.numel() == 0:
        raise ValueError("accuracy of an empty set is undefined")
    return float((preds == labels).double().mean())


def normalized_accuracy(acc_merged: float, acc_single: float) -> float:
    """100 * acc_merged / acc_single (both on the same scale, e.g. fractions). acc_single must be > 0."""
    if acc_single <= 0:
        raise ValueError(f"single-task accuracy must be positive to normalise, got {acc_single}")
    return 100.0 * acc_merged / acc_single


def mean_normalized_accuracy(acc_merged: Mapping[str, float], acc_single: Mapping[str, float]) -> float:
    """Average over tasks of ``normalized_accuracy`` (the KnOTS headline number); same task keys required."""
    if set(acc_merged) != set(acc_single) or not acc_merged:
        raise ValueError(f"merged tasks {sorted(acc_merged)} and single tasks {sorted(acc_single)} differ")
    return sum(normalized_accuracy(acc_merged[t], acc_single[t]) for t in acc_merged) / len(acc_merged)


def joint_accuracy(task_logits: Sequence[Tensor], task_ids: Tensor, labels: Tensor) -> float:
    """Accuracy in the KnOTS *joint* setting: one model must pick the right class among all tasks' classes.

    task_logits: one [N, C_t] tensor per task head, all computed on the same N examples; the heads are
    concatenated into [N, sum_t C_t]. Example i belongs to task ``task_ids[i]`` with in-task label
    ``labels[i]``; it is correct when the argmax of the concatenated logits equals
    offset_{task_ids[i]} + labels[i], with offset_t = C_0 + ... + C_{t-1}.
    """
    if not task_logits:
        raise ValueError("need the logits of at least one task head")
    n = task_logits[0].shape[0]
    if any(lg.dim() != 2 or lg.shape[0] != n for lg in task_logits):
        raise ValueError(f"task logits must all be [N, C_t] with one N, got {[tuple(lg.shape) for lg in task_logits]}")
    if task_ids.shape != (n,) or labels.shape != (n,):
        raise ValueError(f"task_ids {tuple(task_ids.shape)} and labels {tuple(labels.shape)} must be [{n}]")
    widths = torch.tensor([lg.shape[1] for lg in task_logits], device=labels.device)
    offsets = torch.cumsum(widths, dim=0) - widths
    if int(task_ids.min()) < 0 or int(task_ids.max()) >= len(task_logits):
        raise ValueError(
            f"task_ids must be in [0, {len(task_logits)}), got range [{int(task_ids.min())}, {int(task_ids.max())}]"
        )
    if bool((labels < 0).any()) or bool((labels >= widths[task_ids]).any()):
        raise ValueError("a label is outside its task head's classes")
    return accuracy(torch.cat(list(task_logits), dim=1), offsets[task_ids] + labels)
