"""STAR's streams as the stages read them: the uint8 arrays of an offline dataset or of the user's archive (read
once per process), and a stream cut into the tasks that stage ``prepare`` indexed, images scaled to [0, 1]."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch

from components.continual import TaskStream, stream_from_indices
from components.data.stream_arrays import OFFLINE, fingerprint, read_stream_npz
from components.io import load_json, load_tensors
from paperflows import StageContext, StageInputError
from pipelines.star.params import CUSTOM

STREAMS = "data/streams.safetensors"
DATA_METRICS = "metrics/data.json"


@functools.lru_cache(maxsize=4)
def source(name: str, path: str | None, stamp: tuple[int, int] | None) -> tuple[dict[str, np.ndarray], str]:
    """A stream's uint8 arrays and their fingerprint, read once per process (the fan-out items of a flow or of a
    DVC stage share it); ``stamp`` (mtime, size) keys a user's file, so an edited file is read again."""
    arrays = OFFLINE[name]() if name != CUSTOM else read_stream_npz(path)
    return arrays, fingerprint(arrays)


def stream_arrays(ctx: StageContext, name: str) -> tuple[dict[str, np.ndarray], str]:
    """The uint8 arrays of a stream and their fingerprint: an offline dataset, or the user's archive (checked
    before any work)."""
    if name != CUSTOM:
        return source(name, None, None)
    path = ctx.data_path(ctx.params.data.path)
    stat = path.stat()
    return source(name, str(path), (stat.st_mtime_ns, stat.st_size))


def task_stream(ctx: StageContext, name: str) -> TaskStream:
    """Stream ``name`` with the task indices ``prepare`` wrote, images as float in [0, 1] (``x / 255``)."""
    arrays, digest = stream_arrays(ctx, name)
    if digest != load_json(ctx.path(DATA_METRICS))["streams"][name]["fingerprint"]:
        raise StageInputError(
            f"star.train: the images of stream {name!r} changed since 'prepare' indexed them; "
            f"rerun prepare (dvc repro star-prepare)"
        )
    index = load_tensors(ctx.path(STREAMS))
    n_tasks = sum(k.startswith(f"{name}/") and k.endswith("/train") for k in index)
    per_task = ctx.params.data.classes_per_task
    tasks = [
        (tuple(range(t * per_task, (t + 1) * per_task)), index[f"{name}/task{t}/train"], index[f"{name}/task{t}/test"])
        for t in range(n_tasks)
    ]
    raw = stream_from_indices(
        name, *(torch.from_numpy(arrays[k]) for k in ("x_train", "y_train", "x_test", "y_test")), tasks
    )
    return dataclasses.replace(
        raw,
        tasks=tuple(
            dataclasses.replace(t, x_train=t.x_train.float() / 255.0, x_test=t.x_test.float() / 255.0)
            for t in raw.tasks
        ),
    )
