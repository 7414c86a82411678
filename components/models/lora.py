"""LoRA helpers around peft: attach adapters, read the trained factors, apply merged updates.

A LoRA-adapted linear computes y = W0 x + s B A x with B: [O, r], A: [r, I], s = alpha / r, so a task's
update of that layer is dW = s B A (O x I). Factors are keyed by the *base model's* module name
(e.g. ``blocks.0.attn.q_proj``), i.e. peft's ``base_model.model.<name>.lora_A.default.weight`` without
the wrapper prefix and adapter suffix, so the same names address ``base_model.get_submodule(name)``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor, nn

from components.io import load_tensors, save_tensors

if TYPE_CHECKING:  # peft (and transformers under it) takes seconds to import: loaded where LoRAs are built
    from peft import PeftModel


@dataclass(frozen=True)
class LoraSpec:
    """LoRA hyperparameters. Defaults: the KnOTS CPU reduction (r = alpha = 4, q/k/v/out_proj)."""

    r: int = 4
    alpha: float = 4.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "out_proj")

    @property
    def scale(self) -> float:
        """s = alpha / r, the factor peft multiplies B A by."""
        return self.alpha / self.r


class LoraFactors(NamedTuple):
    """One layer's trained LoRA: B [O, r], A [r, I] and scale s; the update is s * B @ A."""

    B: Tensor
    A: Tensor
    scale: float

    def delta(self) -> Tensor:
        return self.scale * (self.B @ self.A)


def attach_lora(model: nn.Module, spec: LoraSpec, seed: int = 0) -> PeftModel:
    """Wrap a *copy* of ``model`` with LoRA adapters on ``spec.targets`` (``model`` is left untouched).

    Only the LoRA A/B matrices are trainable afterwards. A is initialised by peft (Kaiming-uniform) under
    ``torch.manual_seed(seed)`` inside a forked RNG, B = 0, so the wrapped model starts equal to ``model``.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout, target_modules=list(spec.targets), bias="none"
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(copy.deepcopy(model), config)
    return peft_model


def lora_factors(peft_model: PeftModel, adapter: str = "default") -> dict[str, LoraFactors]:
    """{base-model layer name: LoraFactors(B [O, r], A [r, I], scale)} for every LoRA layer (copies)."""
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    inner = peft_model.base_model.model if isinstance(peft_model, PeftModel) else peft_model
    factors = {}
    for name, module in inner.named_modules():
        if isinstance(module, LoraLayer) and adapter in module.lora_A:
            factors[name] = LoraFactors(
                B=module.lora_B[adapter].weight.detach().clone(),
                A=module.lora_A[adapter].weight.detach().clone(),
                scale=float(module.scaling[adapter]),
            )
    if not factors:
        raise ValueError(f"no LoRA layers with adapter {adapter!r} found in {type(peft_model).__name__}")
    return factors


LayerFactors = dict[str, list[tuple[Tensor, Tensor]]]


def group_factors_by_layer(per_task: Sequence[Mapping[str, LoraFactors]]) -> tuple[LayerFactors, float]:
    """Turn one ``lora_factors`` dict per task into the merging input ``{layer: [(B_t, A_t)]}`` and the scale.

    All tasks must adapt the same layers with one common scale (alpha / r), which is returned so that it
    can be passed as ``scale=`` to ``knots_merge`` / ``baseline_merge``.
    """
    if not per_task:
        raise ValueError("need the LoRA factors of at least one task")
    names = list(per_task[0])
    for t, factors in enumerate(per_task):
        if set(factors) != set(names):
            raise ValueError(f"task {t} adapts layers {sorted(factors)}, task 0 adapts {sorted(names)}")
    scales = {f.scale for factors in per_task for f in factors.values()}
    if len(scales) != 1:
        raise ValueError(f"tasks/layers use different LoRA scales {sorted(scales)}; fold them into B first")
    grouped = {name: [(factors[name].B, factors[name].A) for factors in per_task] for name in names}
    return grouped, scales.pop()


def apply_deltas(base_model: nn.Module, deltas: Mapping[str, Tensor]) -> nn.Module:
    """Return a deep copy of ``base_model`` with W = W0 + dW for every ``{layer name: dW [O, I]}``."""
    if type(base_model).__name__ == "PeftModel" or hasattr(base_model, "peft_config"):
        raise TypeError("apply_deltas expects the plain base model, not a PeftModel")
    model = copy.deepcopy(base_model)
    with torch.no_grad():
        for name, delta in deltas.items():
            try:
                layer = model.get_submodule(name)
            except AttributeError:
                raise KeyError(f"model has no module named {name!r}") from None
            if not isinstance(layer, nn.Linear):
                raise TypeError(f"{name!r} is a {type(layer).__name__}, expected nn.Linear")
            if tuple(delta.shape) != tuple(layer.weight.shape):
                raise ValueError(
                    f"delta for {name!r} has shape {tuple(delta.shape)}, weight is {tuple(layer.weight.shape)}"
                )
            layer.weight.add_(delta.to(dtype=layer.weight.dtype, device=layer.weight.device))
    return model


def save_factors(factors: Mapping[str, LoraFactors], path: str | os.PathLike[str]) -> None:
    """Write factors as safetensors: ``<layer>.lora_B``, ``<layer>.lora_A`` and a 0-d ``<layer>.scale``."""
    tensors = {}
    for name, f in factors.items():
        tensors[f"{name}.lora_B"] = f.B
        tensors[f"{name}.lora_A"] = f.A
        tensors[f"{name}.scale"] = torch.tensor(f.scale, dtype=torch.float64)
    save_tensors(tensors, path, metadata={"format": "paperflows-lora-factors"})


def load_factors(path: str | os.PathLike[str]) -> dict[str, LoraFactors]:
    """Read what ``save_factors`` wrote; fails naming the file and layer when a tensor is missing."""
    tensors = load_tensors(path)
    names = sorted({key.rsplit(".", 1)[0] for key in tensors})
    factors = {}
    for name in names:
        missing = [k for k in ("lora_B", "lora_A", "scale") if f"{name}.{k}" not in tensors]
        if missing:
            raise ValueError(f"{path}: layer {name!r} lacks {missing}")
        factors[name] = LoraFactors(
            tensors[f"{name}.lora_B"], tensors[f"{name}.lora_A"], float(tensors[f"{name}.scale"])
        )
    return factors
