"""LoRA factors to and from peft adapter folders (``PeftModel.from_pretrained(base, folder)`` loads them).

A peft LoRA folder holds ``adapter_config.json`` (``peft_type: LORA``, ``r``, ``lora_alpha``, ``target_modules``,
...) and ``adapter_model.safetensors`` with, for each adapted linear ``<m>`` of the base model,
``base_model.model.<m>.lora_A.weight`` [r, in] and ``base_model.model.<m>.lora_B.weight`` [out, r] (peft drops the
adapter name ``default`` when saving). Our :class:`~components.models.lora.LoraFactors` are keyed by ``<m>`` itself,
so the two formats map one to one; the scale is ``lora_alpha / r`` (``lora_alpha / sqrt(r)`` with rsLoRA).

Reading never unpickles: only ``adapter_model.safetensors`` is read, and a folder holding only the pickled
``adapter_model.bin`` is refused. Every problem is a ``ValueError`` naming the file and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from components.io import save_tensors
from components.models.lora import LoraFactors
from components.models.peft_files import CONFIG_FILE, WEIGHTS_FILE, adapter_shapes, peft_key, read_peft_config

__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "load_peft_adapter", "peft_key", "read_peft_config", "save_peft_adapter"]


def save_peft_adapter(
    factors: Mapping[str, LoraFactors],
    folder: str | os.PathLike[str],
    *,
    dropout: float = 0.0,
    base_model_name_or_path: str | None = None,
) -> Path:
    """Write ``factors`` (one rank r and one scale for all layers) as a peft LoRA folder.

    ``target_modules`` lists the exact module names, so peft adapts those modules and no others;
    ``lora_alpha = scale * r`` gives back the scale. Returns the folder."""
    from peft import LoraConfig

    if not factors:
        raise ValueError("no LoRA factors to save")
    ranks = {int(f.A.shape[0]) for f in factors.values()}
    scales = {float(f.scale) for f in factors.values()}
    if len(ranks) != 1 or len(scales) != 1:
        raise ValueError(f"a peft folder holds one r and one alpha; got ranks {sorted(ranks)}, scales {sorted(scales)}")
    r, scale = ranks.pop(), scales.pop()
    for name, f in factors.items():
        if f.A.ndim != 2 or f.B.ndim != 2 or f.B.shape[1] != f.A.shape[0]:
            raise ValueError(f"layer {name!r}: B {tuple(f.B.shape)} @ A {tuple(f.A.shape)} is not a rank-r product")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    config = LoraConfig(
        r=r,
        lora_alpha=scale * r,
        lora_dropout=dropout,
        target_modules=sorted(factors),
        bias="none",
        inference_mode=True,
        base_model_name_or_path=base_model_name_or_path,
    )
    # peft keeps target_modules as a set, so its own save_pretrained lists them in an order that changes from one
    # process to the next: written here with sorted lists and keys, the folder is byte-identical across runs
    fields = {k: sorted(v) if isinstance(v, set) else v for k, v in config.to_dict().items()}
    (out / CONFIG_FILE).write_text(json.dumps(fields, indent=2, sort_keys=True, default=str) + "\n")
    tensors = {}
    for name in sorted(factors):
        tensors[peft_key(name, "A")] = factors[name].A.detach().cpu().contiguous()
        tensors[peft_key(name, "B")] = factors[name].B.detach().cpu().contiguous()
    save_tensors(tensors, out / WEIGHTS_FILE, metadata={"format": "pt"})
    return out


def load_peft_adapter(folder: str | os.PathLike[str], base: nn.Module | None = None) -> dict[str, LoraFactors]:
    """Read a peft LoRA folder as ``{module name: LoraFactors(B, A, scale)}`` (float32 tensors).

    Checks the config and the factor shapes from the file header first (:func:`~.peft_files.adapter_shapes`) and,
    given ``base``, that each module is an ``nn.Linear`` of ``base`` with weight [out, in]; then loads the
    tensors and checks they are finite."""
    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    _, scale, parts = adapter_shapes(folder)
    path = folder / WEIGHTS_FILE
    if base is not None:
        for module, found in sorted(parts.items()):
            _check_base(path, module, found["A"], found["B"], base)
    try:
        with safe_open(str(path), framework="pt") as handle:
            factors = {
                module: LoraFactors(
                    B=handle.get_tensor(peft_key(module, "B")).float(),
                    A=handle.get_tensor(peft_key(module, "A")).float(),
                    scale=scale,
                )
                for module in sorted(parts)
            }
    except SafetensorError as err:
        raise ValueError(f"{path}: not a readable safetensors file ({str(err)[:200]})") from None
    for module, f in factors.items():
        if not (torch.isfinite(f.A).all() and torch.isfinite(f.B).all()):
            raise ValueError(f"{path}: the factors of {module!r} are not all finite")
    return factors


def _check_base(path: Path, module: str, a: tuple[int, ...], b: tuple[int, ...], base: nn.Module) -> None:
    r = a[0]
    try:
        layer = base.get_submodule(module)
    except AttributeError:
        raise ValueError(f"{path}: target {module!r} is not a module of the base model") from None
    if not isinstance(layer, nn.Linear):
        raise ValueError(f"{path}: target {module!r} is a {type(layer).__name__}, expected a Linear")
    out_features, in_features = layer.weight.shape
    if a[1] != in_features or b[0] != out_features:
        raise ValueError(
            f"{path}: target {module!r} has A {a} and B {b}, the base layer needs "
            f"A [{r}, {in_features}] and B [{out_features}, {r}]"
        )
