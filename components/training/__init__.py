"""The shared training loop: `fit` trains any ``nn.Module`` from a loss function and a batch function,
with AdamW, warmup, gradient clipping, bf16 autocast on CUDA, metric callbacks, and atomic,
pickle-free checkpoints that resume bit-exactly on CPU. Every paper trains through `fit`;
see `components.training.loop` for the loop and `components.training._checkpoint` for the files."""

from components.training.batches import cross_entropy_loss, random_batches
from components.training.loop import TrainConfig, TrainResult, fit, seed_everything, select_device, torch_threads

__all__ = [
    "TrainConfig",
    "TrainResult",
    "cross_entropy_loss",
    "fit",
    "random_batches",
    "seed_everything",
    "select_device",
    "torch_threads",
]
