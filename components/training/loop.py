"""The one training loop every paper uses.

Papers differ in their model, their loss and their data; the loop around them is the same, so it
is written once here and each paper passes in three things: the ``model``, a ``loss_fn(model,
batch)`` and a ``batches(step, generator)`` function. `fit` then runs, for ``step = 1..cfg.steps``::

    batch     = batches(step, generator)  moved to the device   # generator: owned by fit, seeded by cfg.seed
    loss, ex  = loss_fn(model, batch)     under bf16 autocast on CUDA (fp32 on CPU)
    loss.backward()
    grad_norm = sqrt(sum_p ||grad_p||^2)                         # before clipping, over trained params
    grad_p   *= min(1, grad_clip / grad_norm)                    # global-norm clipping (skipped if None)
    lr_t      = lr * min(1, step / warmup_steps)                 # linear warmup, then constant
    optimiser step (AdamW, or plain SGD) with lr_t and weight_decay; gradients set to None
    every log_every steps and at the last: callback(step, means over the window since the last log)
    every checkpoint_every steps and at the last: checkpoint into checkpoint_dir (atomic)

Reproducibility. A fresh run calls `seed_everything(cfg.seed)` (python, numpy, torch) and draws its
batches from a generator seeded with ``cfg.seed``; on CPU two runs give identical weights. The
generator state, every global RNG state, the AdamW state and the weights are checkpointed, so a run
interrupted and resumed draws the same batches and dropout masks and ends with the same weights as
an uninterrupted one (on CPU: bit for bit).

Optimisers. ``cfg.optimizer`` is "adamw" (decoupled weight decay) or "sgd" (plain SGD, no momentum, with
``weight_decay`` as an L2 term added to the gradient: the optimiser of continual-learning protocols such as
mammoth's, whose hyperparameters assume it). Both step on the summed gradient of every ``backward`` since the
last step, so a ``loss_fn`` may call ``backward`` on an extra term itself (before returning the main loss).

Resuming. If ``checkpoint_dir`` already holds a checkpoint (see `components.training._checkpoint`
for the layout), `fit` loads it and continues from the step after it; if the checkpoint already has
``cfg.steps`` or more steps, `fit` only loads the weights and returns. Hyperparameters (``lr``,
``weight_decay``, ``grad_clip``, ``warmup_steps``) always come from ``cfg``, state from the checkpoint.

Devices. ``cfg.device="auto"`` trains on CUDA when present, else CPU. On CUDA, batches are copied
through pinned memory and the forward pass runs under ``torch.autocast("cuda", torch.bfloat16)``
(no grad scaler is needed for bf16); parameters and optimiser state stay fp32. When `fit` returns
(or raises) the model is back on the CPU, in the train/eval mode it had before, so callers can
save or evaluate it directly.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from components.seeding import seed_everything, torch_threads  # noqa: F401 - part of this module's API
from components.training._checkpoint import has_checkpoint, load_checkpoint, save_checkpoint

LossOutput = torch.Tensor | tuple[torch.Tensor, Mapping[str, float]]
RESERVED_METRICS = frozenset({"step", "loss", "lr", "grad_norm"})
_DEVICE_CHOICES = ("auto", "cpu", "cuda")
OPTIMIZERS = ("adamw", "sgd")
# progress as log records, for logs that are not a terminal (a Prefect run's log collects this logger)
PROGRESS_LOGGER = logging.getLogger("paperflows.progress")
PROGRESS_LOGGER.setLevel(logging.INFO)  # shown where a handler collects it; silent otherwise
PROGRESS_LOG_SECONDS = 15.0  # at most one line per this many seconds, at a 10% mark, plus the last step


class _ProgressLog:
    """``<desc>: step 1200/3000 (40%), loss 0.213, 18.0 s`` at 10% marks at most every PROGRESS_LOG_SECONDS,
    and always at the last step."""

    def __init__(self, desc: str, total: int, started: float) -> None:
        self.desc, self.total, self.started, self.last = desc, total, started, started
        self.mark = 0

    def update(self, step: int, loss: float | None) -> None:
        now = time.perf_counter()
        mark = 10 * step // max(self.total, 1)
        if step != self.total and (mark == self.mark or now - self.last < PROGRESS_LOG_SECONDS):
            return
        self.mark, self.last = mark, now
        shown = "" if loss is None else f", loss {loss:.4g}"
        PROGRESS_LOGGER.info(
            "%s: step %d/%d (%d%%)%s, %.1f s",
            self.desc,
            step,
            self.total,
            100 * step // max(self.total, 1),
            shown,
            now - self.started,
        )


def _console_loggers(logger: logging.Logger) -> list[logging.Logger]:
    """``logger`` and the loggers its records reach (up to the root, while they propagate) that write to the
    terminal: the ones whose console handlers must write through tqdm while a bar is drawn."""
    found, current = [], logger
    while current is not None:
        if any(_writes_to_console(h) for h in current.handlers):
            found.append(current)
        if not current.propagate:
            break
        current = current.parent
    return found


def _writes_to_console(handler: logging.Handler) -> bool:
    import sys

    return isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) in (sys.stdout, sys.stderr)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _valid_device(device: Any) -> bool:
    if not isinstance(device, str):
        return False
    if device in _DEVICE_CHOICES:
        return True
    kind, _, index = device.partition(":")
    return kind == "cuda" and index.isdigit()


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one `fit` call. Invalid values raise ``ValueError`` naming the field.

    Attributes:
        steps: total optimisation steps (> 0); a resumed run continues up to this many.
        lr: learning rate after warmup (> 0).
        weight_decay: weight decay (>= 0): decoupled for AdamW, an L2 gradient term for SGD.
        grad_clip: maximum global L2 norm of the gradients; ``None`` disables clipping.
        seed: seed of python/numpy/torch RNGs and of the batch generator (0 <= seed < 2**32).
        device: "auto" (CUDA if available, else CPU), "cpu", "cuda" or "cuda:<index>".
        bf16: use bf16 autocast for the forward pass; only applied on CUDA.
        log_every: call the callback (and record history) every this many steps and at the last.
        checkpoint_every: also checkpoint every this many steps; 0 = only at the end. Needs a
            ``checkpoint_dir`` in `fit` to have an effect.
        warmup_steps: linear warmup length; the LR is ``lr * step / warmup_steps`` until then.
        progress: show a tqdm progress bar.
        desc: label of the progress bar.
        optimizer: "adamw" (default) or "sgd" (plain SGD without momentum).
    """

    steps: int
    lr: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    seed: int = 0
    device: str = "auto"
    bf16: bool = True
    log_every: int = 10
    checkpoint_every: int = 0
    warmup_steps: int = 0
    progress: bool = True
    desc: str = "train"
    optimizer: str = "adamw"

    def __post_init__(self) -> None:
        checks: list[tuple[str, bool, str]] = [
            ("steps", _is_int(self.steps) and self.steps > 0, "an int > 0"),
            ("lr", _is_number(self.lr) and self.lr > 0, "a finite number > 0"),
            ("weight_decay", _is_number(self.weight_decay) and self.weight_decay >= 0, "a finite number >= 0"),
            (
                "grad_clip",
                self.grad_clip is None or (_is_number(self.grad_clip) and self.grad_clip > 0),
                "None or a finite number > 0",
            ),
            ("seed", _is_int(self.seed) and 0 <= self.seed < 2**32, "an int in [0, 2**32)"),
            ("device", _valid_device(self.device), "'auto', 'cpu', 'cuda' or 'cuda:<index>'"),
            ("bf16", isinstance(self.bf16, bool), "a bool"),
            ("log_every", _is_int(self.log_every) and self.log_every > 0, "an int > 0"),
            ("checkpoint_every", _is_int(self.checkpoint_every) and self.checkpoint_every >= 0, "an int >= 0"),
            ("warmup_steps", _is_int(self.warmup_steps) and self.warmup_steps >= 0, "an int >= 0"),
            ("progress", isinstance(self.progress, bool), "a bool"),
            ("desc", isinstance(self.desc, str), "a str"),
            ("optimizer", self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"TrainConfig.{name} must be {expected}, got {getattr(self, name)!r}")


@dataclass
class TrainResult:
    """What `fit` returns.

    Attributes:
        steps_done: completed optimisation steps (those of a resumed checkpoint included).
        final_loss: mean loss of the last logging window (``history[-1]["loss"]``); NaN if nothing
            was ever logged.
        history: one entry per logged step, oldest first, including entries logged before a resume:
            ``{"step", "loss", "lr", "grad_norm", **extras}`` (all floats).
        seconds: wall-clock seconds of this `fit` call.
        resumed_from: step of the checkpoint this call resumed from; 0 for a fresh run.
        device: device trained on, e.g. "cpu" or "cuda".
    """

    steps_done: int
    final_loss: float
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    resumed_from: int = 0
    device: str = "cpu"

    def curve(self, key: str = "loss", **labels: Any) -> list[dict[str, Any]]:
        """The logged ``key`` as table rows ``{**labels, "step", key}`` (e.g. ``curve(method="rf", seed=0)``)."""
        return [{**labels, "step": int(h["step"]), key: h[key]} for h in self.history]


def select_device(preference: str = "auto") -> torch.device:
    """Resolve a device preference to a ``torch.device``.

    Args:
        preference: "auto" (CUDA if ``torch.cuda.is_available()``, else CPU), "cpu", "cuda" or
            "cuda:<index>".

    Returns:
        The device to train on.

    Raises:
        ValueError: unknown preference.
        RuntimeError: CUDA requested but not available.
    """
    if not _valid_device(preference):
        raise ValueError(f"device must be one of {_DEVICE_CHOICES} or 'cuda:<index>', got {preference!r}")
    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if preference.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={preference!r} requested but torch.cuda.is_available() is False")
    return torch.device(preference)


def _to_device(batch: Any, device: torch.device) -> Any:
    """Move tensors inside (nested) tuples, lists, namedtuples and mappings; leave the rest as is."""
    if isinstance(batch, torch.Tensor):
        if device.type == "cuda" and batch.device.type == "cpu":
            # pinned host memory lets the copy run asynchronously to the host
            return batch.pin_memory().to(device, non_blocking=True)
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {key: _to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_to_device(value, device) for value in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(value, device) for value in batch)
    return batch


def _split_loss(output: Any, step: int) -> tuple[torch.Tensor, Mapping[str, Any]]:
    """Validate ``loss_fn``'s output: a scalar tensor, or ``(scalar tensor, metrics mapping)``."""
    loss, extras = output if isinstance(output, tuple) and len(output) == 2 else (output, {})
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"step {step}: loss_fn must return a scalar tensor or (scalar tensor, dict), got {shape}")
    if not loss.requires_grad:
        raise ValueError(f"step {step}: the loss does not require grad; is any trained parameter used?")
    if not isinstance(extras, Mapping):
        raise ValueError(f"step {step}: loss_fn's extra metrics must be a dict, got {type(extras).__name__}")
    clash = RESERVED_METRICS.intersection(extras)
    if clash:
        raise ValueError(f"step {step}: loss_fn's extra metrics use reserved names {sorted(clash)}")
    return loss, extras


def _lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of 1-based ``step``: linear warmup over ``warmup_steps``, then constant."""
    if cfg.warmup_steps == 0:
        return cfg.lr
    return cfg.lr * min(1.0, step / cfg.warmup_steps)


class _Window:
    """Per-step values since the last log; kept as tensors so logging syncs the GPU only when it logs."""

    def __init__(self, saved: Mapping[str, list[float]] | None = None) -> None:
        self.values: dict[str, list[Any]] = {k: list(v) for k, v in (saved or {}).items()}

    def add(self, metrics: Mapping[str, Any]) -> None:
        for key, value in metrics.items():
            self.values.setdefault(key, []).append(value.detach() if isinstance(value, torch.Tensor) else value)

    def floats(self) -> dict[str, list[float]]:
        return {key: [float(v) for v in values] for key, values in self.values.items()}

    def means(self) -> dict[str, float]:
        """Mean of each metric over the steps where it was reported, then empty the window."""
        means = {key: math.fsum(values) / len(values) for key, values in self.floats().items()}
        self.values = {}
        return means


def _trained_parameters(model: nn.Module, parameters: Iterable[nn.Parameter] | None) -> list[str]:
    """Names (in ``model``) of the parameters to optimise, in the caller's order."""
    names_by_id = {id(p): name for name, p in model.named_parameters()}
    if parameters is None:
        names = [name for name, p in model.named_parameters() if p.requires_grad]
    else:
        names = []
        for index, param in enumerate(parameters):
            if id(param) not in names_by_id:
                raise ValueError(
                    f"parameters[{index}] is not a parameter of the model; fit only trains "
                    "(and checkpoints) the model's own parameters"
                )
            names.append(names_by_id[id(param)])
        if len(set(names)) != len(names):
            raise ValueError("parameters contains the same parameter twice")
    if not names:
        raise ValueError("no parameters to train (none given, or none of the model's requires grad)")
    return names


_OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def fit(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], LossOutput],
    batches: Callable[[int, torch.Generator], Any],
    cfg: TrainConfig,
    *,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    parameters: Iterable[nn.Parameter] | None = None,
) -> TrainResult:
    """Train ``model`` with AdamW or SGD (``cfg.optimizer``) for ``cfg.steps`` steps (see the module docstring).

    Args:
        model: the module to train, in place. Moved to the training device and back to the CPU
            when `fit` returns or raises; its train/eval mode is restored at the end.
        loss_fn: ``loss_fn(model, batch)`` -> scalar loss tensor, or ``(loss, extras)`` with
            ``extras`` a ``{name: float or scalar tensor}`` dict that is averaged and logged
            (names "step", "loss", "lr", "grad_norm" are reserved).
        batches: ``batches(step, generator)`` -> the batch of 1-based ``step``: CPU tensors, or
            tuples/lists/dicts of them (moved to the device recursively; other values pass
            through). Draw randomness from ``generator`` so a resumed run sees the same batches.
        cfg: loop settings.
        callback: ``callback(step, metrics)`` every ``cfg.log_every`` steps and at the last;
            ``metrics = {"loss", "grad_norm", **extras}`` averaged over the steps since the last
            call, plus ``"lr"`` at ``step``.
        checkpoint_dir: folder owned by this training run. If it holds a checkpoint, training
            resumes from it; checkpoints are written every ``cfg.checkpoint_every`` steps and at
            the end. ``None``: no checkpoints.
        parameters: parameters of ``model`` to optimise (e.g. only adapters); default: those with
            ``requires_grad``. The whole ``state_dict`` is checkpointed either way.

    Returns:
        A `TrainResult`.

    Raises:
        ValueError: bad ``loss_fn`` output, parameters not in ``model``, or a checkpoint that does not
            match (message names the file and the first mismatched key).
        FloatingPointError: the mean loss of a logging window is NaN or infinite.
        RuntimeError: CUDA requested but unavailable, or bf16 requested on a GPU without bf16.
    """
    started = time.perf_counter()
    device = select_device(cfg.device)
    use_bf16 = cfg.bf16 and device.type == "cuda"
    if use_bf16 and not torch.cuda.is_bf16_supported():
        raise RuntimeError(f"{device} does not support bf16; set TrainConfig.bf16=False")
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    names = _trained_parameters(model, parameters)
    was_training = model.training
    progress = redirect = None
    try:
        model.to(device)
        # look parameters up again by name: moving may replace Parameter objects
        by_name = dict(model.named_parameters())
        params = [by_name[name] for name in names]
        optimizer = _OPTIMIZERS[cfg.optimizer](params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        generator = seed_everything(cfg.seed)
        start, history, window = 0, [], _Window()
        if ckpt_dir is not None and has_checkpoint(ckpt_dir):
            start, loop_state = load_checkpoint(
                ckpt_dir, seed=cfg.seed, model=model, optimizer=optimizer, param_names=names, generator=generator
            )
            history, window = list(loop_state["history"]), _Window(loop_state["window"])
            for group in optimizer.param_groups:  # hyperparameters come from cfg, state from the checkpoint
                group["weight_decay"] = cfg.weight_decay

        model.train()
        # bars only on a terminal (disable=None); logs get the lines of _ProgressLog instead
        progress = tqdm(
            total=cfg.steps,
            initial=min(start, cfg.steps),
            desc=cfg.desc,
            disable=None if cfg.progress else True,
            dynamic_ncols=True,
        )
        if not progress.disable:  # log lines printed while the bar is drawn go above it, not into it
            redirect = logging_redirect_tqdm(loggers=_console_loggers(PROGRESS_LOGGER))
            redirect.__enter__()
        logged, last_loss = _ProgressLog(cfg.desc, cfg.steps, started), None
        autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if use_bf16 else contextlib.nullcontext
        for step in range(start + 1, cfg.steps + 1):
            batch = _to_device(batches(step, generator), device)
            with autocast():
                loss, extras = _split_loss(loss_fn(model, batch), step)
            loss.backward()
            grads = [p.grad for p in params if p.grad is not None]
            grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=device)
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grads_with_norm_(params, cfg.grad_clip, grad_norm)
            lr = _lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            window.add({"loss": loss.float(), "grad_norm": grad_norm, **extras})

            if step % cfg.log_every == 0 or step == cfg.steps:
                means = window.means()
                if not math.isfinite(means["loss"]):
                    raise FloatingPointError(f"{cfg.desc}: mean loss over the steps up to {step} is {means['loss']}")
                metrics = {"loss": means.pop("loss"), "lr": lr, "grad_norm": means.pop("grad_norm"), **means}
                history.append({"step": float(step), **metrics})
                if callback is not None:
                    callback(step, dict(metrics))
                progress.set_postfix(loss=f"{metrics['loss']:.4g}", refresh=False)
                last_loss = metrics["loss"]
            if ckpt_dir is not None and (
                step == cfg.steps or (cfg.checkpoint_every and step % cfg.checkpoint_every == 0)
            ):
                save_checkpoint(
                    ckpt_dir,
                    step=step,
                    seed=cfg.seed,
                    model=model,
                    optimizer=optimizer,
                    param_names=names,
                    generator=generator,
                    loop_state={"history": history, "window": window.floats()},
                )
            progress.update(1)
            logged.update(step, last_loss)

        return TrainResult(
            steps_done=max(start, cfg.steps),
            final_loss=history[-1]["loss"] if history else math.nan,
            history=history,
            seconds=time.perf_counter() - started,
            resumed_from=start,
            device=str(device),
        )
    finally:
        if redirect is not None:
            redirect.__exit__(None, None, None)
        if progress is not None:
            progress.close()
        model.to("cpu")
        model.train(was_training)
