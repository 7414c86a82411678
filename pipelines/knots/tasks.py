"""KnOTS's per-task wiring (one paper's use): the encoder, a task's frozen head and LoRA, and the scores of a
merged encoder on every task.

* :func:`make_encoder` / :data:`IMAGE_SIZE`: the small ViT pretrained on held-out classes, or the ViT-S/14;
* :func:`lora_spec`: the LoRA of ``lora`` on the attention linears of the chosen blocks;
* :func:`train_task`: one task's frozen linear head (a probe on base features, then frozen, like CLIP's text
  heads) and its LoRA, with the single-task accuracies; :func:`adapted_task`: the same with a user's LoRA read
  from a peft folder in place of the trained one;
* :func:`task_accuracies`: per-task accuracy with each task's head, and joint accuracy over all classes;
* :func:`merge_grid`: the lambda / top-K configurations searched for a method.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import torch
from torch import Tensor, nn

from components.merging import MergeConfig
from components.metrics.classification import accuracy, joint_accuracy
from components.models.lora import LoraFactors, LoraSpec, apply_deltas, attach_lora
from components.models.peft_io import load_peft_adapter
from components.models.pretrained_vit import ViTS14Config
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches, torch_threads
from paperflows import StageInputError
from pipelines.knots.encoder import IMAGE_SIZE, make_encoder  # noqa: F401 - part of this module's API
from pipelines.knots.params import KnotsParams, MergeParams

ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")


def compute_threads(device: torch.device):
    """One intra-op thread on CPU (a fixed reduction order: results independent of the thread setting)."""
    return torch_threads(1) if device.type == "cpu" else contextlib.nullcontext()


def lora_spec(p: KnotsParams) -> LoraSpec:
    """q/k/v/out_proj of every block, or of the blocks ``lora.blocks`` names (negative: from the last)."""
    n_blocks = ViTS14Config().n_layers if p.base.encoder == "vit_s14" else p.base.n_layers
    blocks = sorted({b % n_blocks for b in p.lora.blocks})
    targets = tuple(f"blocks.{b}.attn.{name}" for b in blocks for name in ATTENTION) if blocks else ATTENTION
    return LoraSpec(r=p.lora.r, alpha=p.lora.alpha, dropout=p.lora.dropout, targets=targets)


def features(encoder: nn.Module, x: Tensor, device: torch.device, batch: int = 1024) -> Tensor:
    """encoder.features over x in batches on ``device``; [N, d] on the CPU."""
    encoder = encoder.to(device)
    with torch.no_grad():
        return torch.cat([encoder.features(x[i : i + batch].to(device)).cpu() for i in range(0, len(x), batch)])


class WithHead(nn.Module):
    """Encoder features followed by a task's frozen linear head."""

    def __init__(self, encoder: nn.Module, head: nn.Linear):
        super().__init__()
        self.encoder, self.task_head = encoder, head

    def forward(self, x: Tensor) -> Tensor:
        return self.task_head(self.encoder.features(x))


def probe_head(
    p: KnotsParams, base: nn.Module, data: dict[str, Tensor], task: str, seed: int, device: torch.device
) -> nn.Linear:
    """A task's head: a linear probe on the frozen base features, then frozen (like CLIP's text heads)."""
    feats = features(base, data[f"{task}/train/x"], device)
    torch.manual_seed(seed)
    head = nn.Linear(feats.shape[1], p.data.task_classes)
    fit(
        nn.Sequential(head),
        cross_entropy_loss,
        random_batches(feats, data[f"{task}/train/y"], size=256),
        TrainConfig(steps=p.lora.head_steps, lr=p.lora.head_lr, seed=seed, progress=False, log_every=50),
    )
    return head.requires_grad_(False)


def single_task_scores(
    tuned: nn.Module, base: nn.Module, head: nn.Linear, data: dict[str, Tensor], task: str, device: torch.device
) -> dict[str, float]:
    """``val`` / ``test`` accuracies of the task's own LoRA encoder ``tuned`` and ``zero_shot_test`` of ``base``."""
    scores = {}
    for split in ("val", "test"):
        scores[split] = accuracy(head(features(tuned, data[f"{task}/{split}/x"], device)), data[f"{task}/{split}/y"])
    scores["zero_shot_test"] = accuracy(head(features(base, data[f"{task}/test/x"], device)), data[f"{task}/test/y"])
    return scores


def train_task(
    p: KnotsParams,
    base: nn.Module,
    data: dict[str, Tensor],
    task: str,
    seed: int,
    device: torch.device,
    progress: bool = False,
    callback=None,
) -> tuple[nn.Module, nn.Linear, dict[str, float]]:
    """One task's head and LoRA for one ``seed``: ``(the LoRA-wrapped model, the frozen head, accuracies)`` with
    ``val`` / ``test`` (own LoRA) and ``zero_shot_test`` (the base encoder with the head: no merge) accuracies."""
    head = probe_head(p, base, data, task, seed, device)
    model = attach_lora(WithHead(base.cpu(), head), lora_spec(p), seed=seed)
    cfg = TrainConfig(
        steps=p.lora.steps,
        lr=p.lora.lr,
        seed=seed,
        progress=progress,
        log_every=max(1, p.lora.steps // 30),
        desc=f"knots lora {task} seed {seed}",
    )
    x, y = data[f"{task}/train/x"], data[f"{task}/train/y"]
    fit(model, cross_entropy_loss, random_batches(x, y, size=p.lora.batch_size), cfg, callback=callback)
    model.eval()
    return model, head, single_task_scores(model.get_base_model().encoder, base, head, data, task, device)


def user_adapter(folder: Path, base: nn.Module) -> dict[str, LoraFactors]:
    """A task's LoRA factors from the user's peft folder ``lora.adapters_path/<task>/``, checked against ``base``."""
    try:
        return load_peft_adapter(folder, base)
    except ValueError as err:
        raise StageInputError(f"knots.lora.adapters_path: {err}") from None


def adapted_task(
    p: KnotsParams,
    base: nn.Module,
    data: dict[str, Tensor],
    task: str,
    seed: int,
    factors: dict[str, LoraFactors],
    device: torch.device,
) -> tuple[nn.Linear, dict[str, float]]:
    """A user's LoRA ``factors`` for one task in place of training: the seed's frozen head and the accuracies."""
    head = probe_head(p, base, data, task, seed, device)
    tuned = apply_deltas(base.cpu(), {name: f.delta() for name, f in factors.items()}).eval()
    return head, single_task_scores(tuned, base, head, data, task, device)


def task_accuracies(
    encoder: nn.Module,
    heads: dict[str, nn.Linear],
    data: dict[str, Tensor],
    tasks: list[str],
    split: str,
    device: torch.device,
) -> tuple[dict[str, float], float]:
    """Per-task accuracy with each task's own head, and joint accuracy over the union of all classes."""
    per_task, all_logits, ids, labels = {}, [], [], []
    with torch.no_grad():
        for t, task in enumerate(tasks):
            feats = features(encoder, data[f"{task}/{split}/x"], device)
            per_task[task] = accuracy(heads[task](feats), data[f"{task}/{split}/y"])
            all_logits.append([heads[name](feats) for name in tasks])
            ids.append(torch.full((feats.shape[0],), t))
            labels.append(data[f"{task}/{split}/y"])
    joint = joint_accuracy(
        [torch.cat([rows[h] for rows in all_logits]) for h in range(len(tasks))], torch.cat(ids), torch.cat(labels)
    )
    return per_task, joint


def merge_grid(method: str, merge: MergeParams) -> list[MergeConfig]:
    """The configurations searched on validation: lambda for TA, lambda x top-K for the TIES variants."""
    if method.endswith("ta"):
        return [MergeConfig(lam=lam, merge="sum") for lam in merge.lambdas]
    p = merge.dare_p if "dare" in method else 0.0
    return [
        MergeConfig(lam=lam, top_k=k, dare_p=p, merge="mean")
        for lam, k in itertools.product(merge.lambdas, merge.top_ks)
    ]
