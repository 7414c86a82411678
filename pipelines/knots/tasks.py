"""KnOTS's per-task wiring (one paper's use): the encoder, a task's frozen head and LoRA, and the scores of a
merged encoder on every task.

* :func:`make_encoder` / :data:`IMAGE_SIZE`: the small ViT pretrained on held-out classes, or the ViT-S/14;
* :func:`lora_spec`: the LoRA of ``lora`` on the attention linears of the chosen blocks;
* :func:`train_task`: one task's frozen linear head (a probe on base features, then frozen, like CLIP's text
  heads) and its LoRA, with the single-task accuracies;
* :func:`task_accuracies`: per-task accuracy with each task's head, and joint accuracy over all classes;
* :func:`merge_grid`: the lambda / top-K configurations searched for a method.
"""

from __future__ import annotations

import contextlib
import itertools

import torch
from torch import Tensor, nn

from components.merging import MergeConfig
from components.metrics.classification import accuracy, joint_accuracy
from components.models.lora import LoraSpec, attach_lora
from components.models.pretrained_vit import ViTS14, ViTS14Config
from components.models.vit import TinyViT, TinyViTConfig
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches, torch_threads
from pipelines.knots.params import KnotsParams, MergeParams

IMAGE_SIZE = 28
ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")


def compute_threads(device: torch.device):
    """One intra-op thread on CPU (a fixed reduction order: results independent of the thread setting)."""
    return torch_threads(1) if device.type == "cpu" else contextlib.nullcontext()


def make_encoder(p: KnotsParams) -> nn.Module:
    """The encoder of ``base.encoder`` with its initial weights."""
    if p.base.encoder == "vit_s14":
        return ViTS14(ViTS14Config(input_size=p.base.input_size))
    return TinyViT(
        TinyViTConfig(
            image_size=IMAGE_SIZE,
            patch_size=7,
            d_model=p.base.d_model,
            n_heads=p.base.n_heads,
            n_layers=p.base.n_layers,
            n_classes=len(p.data.tasks) * (10 - p.data.task_classes),
        ),
        seed=p.base.seed,
    )


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
    x, y = data[f"{task}/train/x"], data[f"{task}/train/y"]
    feats = features(base, x, device)
    # the task head: a linear probe on the frozen base features, then frozen (like CLIP's text heads)
    torch.manual_seed(seed)
    head = nn.Linear(feats.shape[1], p.data.task_classes)
    fit(
        nn.Sequential(head),
        cross_entropy_loss,
        random_batches(feats, y, size=256),
        TrainConfig(steps=p.lora.head_steps, lr=p.lora.head_lr, seed=seed, progress=False, log_every=50),
    )
    head.requires_grad_(False)
    model = attach_lora(WithHead(base.cpu(), head), lora_spec(p), seed=seed)
    cfg = TrainConfig(
        steps=p.lora.steps,
        lr=p.lora.lr,
        seed=seed,
        progress=progress,
        log_every=max(1, p.lora.steps // 30),
        desc=f"knots lora {task} seed {seed}",
    )
    fit(model, cross_entropy_loss, random_batches(x, y, size=p.lora.batch_size), cfg, callback=callback)
    model.eval()
    tuned, scores = model.get_base_model().encoder, {}
    for split in ("val", "test"):
        scores[split] = accuracy(head(features(tuned, data[f"{task}/{split}/x"], device)), data[f"{task}/{split}/y"])
    scores["zero_shot_test"] = accuracy(head(features(base, data[f"{task}/test/x"], device)), data[f"{task}/test/y"])
    return model, head, scores


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
