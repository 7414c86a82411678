"""Checkpoints of the training loop: model, AdamW state and every RNG, without pickle.

A checkpoint is a folder that `fit` owns, holding three files:

    model.safetensors       the model's ``state_dict()`` (parameters and buffers), one key per entry
    optimizer.safetensors   optimiser tensors as ``state.{param_idx}.{name}`` (AdamW: ``exp_avg``,
                            ``exp_avg_sq``, ``step``) plus RNG states as uint8 tensors:
                            ``rng.batches`` (the generator handed to ``batches``), ``rng.torch``
                            (torch's global CPU RNG) and ``rng.cuda.{device}``
    trainer_state.json      step, seed, trained parameter names and shapes, optimiser param_groups
                            and non-tensor state, python/numpy RNG states, plus whatever the loop
                            adds (its history and the half-filled logging window)

Both safetensors files carry ``{"step": "<step>"}`` metadata. All three are first written to
temporary names and renamed into place together, ``trainer_state.json`` last: it is the commit
marker, so a folder without it holds no checkpoint, and a folder whose files disagree on the step
(a crash between two renames) is reported instead of being resumed from inconsistent state.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from torch import nn

from components.io import atomic_path, load_json, load_tensors, safetensors_bytes

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
CHECKPOINT_FORMAT = "paperflows.training.checkpoint/1"


def has_checkpoint(directory: Path) -> bool:
    """True when ``directory`` holds a completed checkpoint (its commit marker exists)."""
    return (directory / STATE_FILE).is_file()


def _unshared(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detach tensors and clone the ones that share storage with an earlier entry.

    safetensors refuses tensors that share memory (tied weights such as an embedding reused as
    output layer); a clone stores the tied value twice, and ``load_state_dict`` writes it back
    into the one shared parameter twice, which is harmless.
    """
    seen: set[tuple[str, int]] = set()
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"state_dict entry {name!r} is {type(value).__name__}, not a tensor; "
                "only tensor state can be checkpointed"
            )
        value = value.detach()
        storage = (str(value.device), value.untyped_storage().data_ptr())
        if storage in seen:
            value = value.clone()
        seen.add(storage)
        out[name] = value.to("cpu").contiguous()
    return out


def _rng_json() -> dict[str, Any]:
    py_version, py_state, py_gauss = random.getstate()
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    return {
        "python": [py_version, list(py_state), py_gauss],
        "numpy": {
            "bit_generator": name,
            "keys": keys.tolist(),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
    }


def _rng_tensors(generator: torch.Generator) -> dict[str, torch.Tensor]:
    tensors = {"rng.batches": generator.get_state(), "rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{index}"] = state
    return tensors


def save_checkpoint(
    directory: Path,
    *,
    step: int,
    seed: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    param_names: Sequence[str],
    generator: torch.Generator,
    loop_state: Mapping[str, Any],
) -> None:
    """Write a checkpoint of training after ``step`` completed steps into ``directory``.

    Args:
        directory: checkpoint folder (created if missing); existing checkpoint files are replaced.
        step: number of completed optimisation steps (1-based step just finished).
        seed: ``TrainConfig.seed`` of the run, recorded to refuse resuming under another seed.
        model: module whose ``state_dict()`` is saved (any device; written as CPU tensors).
        optimizer: optimiser over the parameters named in ``param_names``, in that order.
        param_names: qualified names (in ``model``) of the optimiser's parameters, index-aligned
            with the optimiser's ``param_idx``.
        generator: the generator handed to ``batches``; its state is saved.
        loop_state: JSON-serialisable extra state of the loop (history, logging window).
    """
    sd = optimizer.state_dict()
    optimizer_tensors: dict[str, torch.Tensor] = {}
    scalar_state: dict[str, dict[str, Any]] = {}
    for param_idx, param_state in sd["state"].items():
        for name, value in param_state.items():
            if isinstance(value, torch.Tensor):
                optimizer_tensors[f"state.{param_idx}.{name}"] = value.detach().to("cpu").contiguous()
            else:
                scalar_state.setdefault(str(param_idx), {})[name] = value
    optimizer_tensors.update(_rng_tensors(generator))

    params = [p for group in optimizer.param_groups for p in group["params"]]
    trainer_state = {
        "format": CHECKPOINT_FORMAT,
        "step": step,
        "seed": seed,
        "param_names": list(param_names),
        "param_shapes": [list(p.shape) for p in params],
        "optimizer": {"param_groups": sd["param_groups"], "scalar_state": scalar_state},
        "rng": _rng_json(),
        "loop": dict(loop_state),
    }
    state_text = json.dumps(trainer_state, indent=1, sort_keys=True) + "\n"
    metadata = {"step": str(step), "format": CHECKPOINT_FORMAT}
    model_tensors = _unshared(model.state_dict())

    # Write all three to temporary names, then rename: contexts exit in reverse order, so the
    # model and optimiser files land first and trainer_state.json (the commit marker) last.
    with contextlib.ExitStack() as stack:
        state_tmp = stack.enter_context(atomic_path(directory / STATE_FILE))
        optimizer_tmp = stack.enter_context(atomic_path(directory / OPTIMIZER_FILE))
        model_tmp = stack.enter_context(atomic_path(directory / MODEL_FILE))
        model_tmp.write_bytes(safetensors_bytes(model_tensors, metadata))
        optimizer_tmp.write_bytes(safetensors_bytes(optimizer_tensors, metadata))
        state_tmp.write_text(state_text)


def _file_step(path: Path) -> int | None:
    with safe_open(str(path), framework="pt") as handle:
        step = (handle.metadata() or {}).get("step")
    return int(step) if step is not None else None


def _first_mismatch(
    saved: Mapping[str, tuple[int, ...]], current: Mapping[str, tuple[int, ...]]
) -> tuple[str, str, str] | None:
    """First key (sorted) that is missing on one side or has another shape: (key, saved, current)."""
    for key in sorted(set(saved) | set(current)):
        left = str(list(saved[key])) if key in saved else "absent"
        right = str(list(current[key])) if key in current else "absent"
        if left != right:
            return key, left, right
    return None


def _restore_types(saved_group: dict[str, Any], current_group: Mapping[str, Any]) -> dict[str, Any]:
    """JSON turns tuples (AdamW ``betas``) into lists; give them back the optimiser's own type."""
    return {
        key: tuple(value) if isinstance(current_group.get(key), tuple) and isinstance(value, list) else value
        for key, value in saved_group.items()
    }


def load_checkpoint(
    directory: Path,
    *,
    seed: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    param_names: Sequence[str],
    generator: torch.Generator,
) -> tuple[int, dict[str, Any]]:
    """Restore model weights, optimiser state and all RNG states from ``directory``.

    Args:
        directory: folder written by `save_checkpoint` (``has_checkpoint(directory)`` is True).
        seed: ``TrainConfig.seed`` of the resuming run; must equal the checkpoint's seed.
        model: module to load into, already on its training device.
        optimizer: freshly built optimiser over the parameters named in ``param_names``.
        param_names: qualified names of the optimiser's parameters, in optimiser order.
        generator: generator handed to ``batches``; its state is overwritten.

    Returns:
        ``(step, loop_state)``: completed steps in the checkpoint and the loop's extra state.

    Raises:
        ValueError: the checkpoint does not fit ``model``/``param_names`` (message names the file and
            the first mismatched key), was written with another seed, or its files disagree on
            the step (an interrupted write).
    """
    state_path, model_path, optimizer_path = (
        directory / STATE_FILE,
        directory / MODEL_FILE,
        directory / OPTIMIZER_FILE,
    )
    state = load_json(state_path)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{state_path}: not a {CHECKPOINT_FORMAT} trainer state "
            f"(key 'format' is {state.get('format') if isinstance(state, dict) else None!r})"
        )
    step = int(state["step"])
    for path in (model_path, optimizer_path):
        if not path.is_file():
            raise ValueError(f"{path}: missing, but {state_path} records a checkpoint at step {step}")
        file_step = _file_step(path)
        if file_step != step:
            raise ValueError(
                f"{path}: written at step {file_step}, but {state_path} says step {step} "
                f"(interrupted checkpoint write?); delete {directory} to start over"
            )
    if int(state["seed"]) != seed:
        raise ValueError(
            f"{state_path}: key 'seed' is {state['seed']} but TrainConfig.seed is {seed}; "
            "resuming under another seed would mix two runs"
        )

    # Model: every key and shape must match before anything is loaded.
    model_tensors = load_tensors(model_path)
    current = model.state_dict()
    mismatch = _first_mismatch(
        {k: tuple(v.shape) for k, v in model_tensors.items()}, {k: tuple(v.shape) for k, v in current.items()}
    )
    if mismatch is not None:
        key, saved, now = mismatch
        raise ValueError(
            f"{model_path}: checkpoint does not match the model; first mismatched key "
            f"{key!r} (checkpoint: {saved}, model: {now})"
        )

    # Optimiser: the trained parameters must be the same names with the same shapes, in order.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved_params = dict(zip(state["param_names"], state["param_shapes"], strict=True))
    mismatch = _first_mismatch(saved_params, {n: list(p.shape) for n, p in zip(param_names, params, strict=True)})
    if mismatch is None and list(state["param_names"]) != list(param_names):
        index = next(i for i, (a, b) in enumerate(zip(state["param_names"], param_names)) if a != b)
        mismatch = (f"param_names[{index}]", state["param_names"][index], param_names[index])
    if mismatch is not None:
        key, saved, now = mismatch
        raise ValueError(
            f"{state_path}: checkpoint's trained parameters do not match; first mismatched "
            f"key {key!r} (checkpoint: {saved}, now: {now})"
        )

    optimizer_tensors = load_tensors(optimizer_path)
    per_param: dict[int, dict[str, Any]] = {}
    for key, value in optimizer_tensors.items():
        if key.startswith("state."):
            _, param_idx, name = key.split(".", 2)
            per_param.setdefault(int(param_idx), {})[name] = value
    for param_idx, scalars in state["optimizer"]["scalar_state"].items():
        per_param.setdefault(int(param_idx), {}).update(scalars)
    for saved, now in zip(state["optimizer"]["param_groups"], optimizer.state_dict()["param_groups"], strict=True):
        if set(saved) - {"params"} != set(now) - {"params"}:
            raise ValueError(
                f"{state_path}: the checkpoint was written by another optimiser (its settings "
                f"{sorted(set(saved) - {'params'})}, now {sorted(set(now) - {'params'})}); "
                f"delete {directory} to start over"
            )
    groups = [
        _restore_types(saved, now)
        for saved, now in zip(state["optimizer"]["param_groups"], optimizer.state_dict()["param_groups"], strict=True)
    ]

    with torch.no_grad():
        model.load_state_dict(model_tensors)
    optimizer.load_state_dict({"state": per_param, "param_groups": groups})

    generator.set_state(optimizer_tensors["rng.batches"])
    torch.set_rng_state(optimizer_tensors["rng.torch"])
    cuda_states = [
        optimizer_tensors[f"rng.cuda.{i}"]
        for i in range(len(optimizer_tensors))
        if f"rng.cuda.{i}" in optimizer_tensors
    ]
    # A run resumed on another number of GPUs cannot be exact anyway; its CUDA RNG keeps its seed.
    if cuda_states and torch.cuda.is_available() and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)
    py_version, py_state, py_gauss = state["rng"]["python"]
    random.setstate((py_version, tuple(py_state), py_gauss))
    numpy_state = state["rng"]["numpy"]
    np.random.set_state(
        (
            numpy_state["bit_generator"],
            np.asarray(numpy_state["keys"], dtype=np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    return step, dict(state["loop"])
