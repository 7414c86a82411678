"""What KnOTS's headline needs from its learned parts: LoRAs trained on two tasks over a frozen base carry what each
task needs, and a merge of them (TIES, KnOTS-TIES) beats no merge (the base with the frozen heads) on both tasks.

The base sees only half of the input (its projection zeroes coordinates 0-3); each task's labels depend on a
different direction inside that blind half, so a task's rank-2 LoRA must restore its own direction."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from components.merging import MergeConfig, knots_space, original_space
from components.metrics.classification import accuracy
from components.models.lora import LoraSpec, apply_deltas, attach_lora, group_factors_by_layer, lora_factors
from components.training import TrainConfig, cross_entropy_loss, fit, random_batches

DIM, CLASSES = 8, 3


class Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM, bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(torch.diag(torch.tensor([0.0] * 4 + [1.0] * 4)))

    def features(self, x: Tensor) -> Tensor:
        return self.proj(x)


class WithHead(nn.Module):
    def __init__(self, encoder: Base, head: nn.Linear) -> None:
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder.features(x))


def _task(t: int, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor, nn.Linear]:
    """Labels from x @ A_t: the seen half plus task t's own hidden coordinate pair; its frozen head is A_t^T."""
    weights = torch.zeros(DIM, CLASSES)
    weights[4:] = torch.randn(4, CLASSES, generator=torch.Generator().manual_seed(10 + t))
    weights[2 * t : 2 * t + 2] = 3 * torch.randn(2, CLASSES, generator=torch.Generator().manual_seed(20 + t))
    x = torch.randn(n, DIM, generator=gen)
    head = nn.Linear(DIM, CLASSES, bias=False)
    with torch.no_grad():
        head.weight.copy_(weights.T)
    head.requires_grad_(False)
    return x, (x @ weights).argmax(1), head


def test_a_merge_of_task_loras_beats_no_merge_on_every_task() -> None:
    gen, base = torch.Generator().manual_seed(0), Base()
    tasks = [_task(t, 600, gen) for t in (0, 1)]
    factors = []
    for t, (x, y, head) in enumerate(tasks):
        model = attach_lora(WithHead(base, head), LoraSpec(r=2, alpha=2.0, targets=("proj",)), seed=t)
        fit(
            model,
            cross_entropy_loss,
            random_batches(x, y, size=64),
            TrainConfig(steps=150, lr=0.05, seed=t, progress=False, device="cpu"),
        )
        factors.append({name.removeprefix("encoder."): f for name, f in lora_factors(model).items()})
    layers, scale = group_factors_by_layer(factors)

    def scores(encoder: nn.Module) -> list[float]:
        with torch.no_grad():
            return [100 * accuracy(head(encoder.features(x)), y) for x, y, head in tasks]

    none = scores(base)
    for space in (original_space(layers, scale), knots_space(layers, scale)):
        best = max(
            (
                scores(apply_deltas(base, space.merge("ties", MergeConfig(lam=lam, top_k=k), None)))
                for lam in (0.5, 1.0, 2.0)
                for k in (20.0, 100.0)
            ),
            key=sum,
        )
        assert all(b > n + 15 for b, n in zip(best, none)), (none, best)  # every task gains from the merge
