"""Each paper's training stages for a few steps at its ``paper`` preset on CUDA (bf16 autocast), with
throughput and peak memory: the GPU path is the same code as the CPU one, with bigger parameters.

For every paper: the parameters are ``scale: paper`` with the overrides of :data:`SHORT` (few optimisation
steps, a slice of the data, one seed; model sizes stay the paper's), and the pipeline's stages run in order
into a temporary folder, untracked, up to its last training stage (``gpu=True``). Each training stage is
timed; optimiser steps are counted by a global optimiser hook (so every training loop counts, the shared
``fit`` and the papers' own); peak memory is CUDA's allocator peak (on CPU, the process's resident high-water
mark). The training loop (``components.training.fit``) picks CUDA with bf16 autocast by itself.

    python benchmarks/gpu_check.py                 # every paper, on CUDA when present
    python benchmarks/gpu_check.py knots nsot      # some papers
    python benchmarks/gpu_check.py --json out.json # also write the rows

A paper that fails is reported with its error and the others go on. The test suite runs :func:`check` on CPU
with each paper's tiny test settings.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from paperflows import registry
from paperflows.contract import StageContext
from paperflows.engine import run_stage
from paperflows.params import merge_trees, validate

#: per paper, what shortens its paper preset to a check: steps, data slices and seeds (model sizes untouched)
SHORT: dict[str, dict[str, Any]] = {
    "activity_cliff": {
        "seeds": [0],
        "data": {"targets": ["CHEMBL2835_Ki"]},
        "train": {"mlp_steps": 20, "gin_steps": 20},
    },
    "bc_pmi": {"seeds": [0], "data": {"sizes": [20]}, "mine": {"steps": 20}, "train": {"steps": 20}},
    "csa": {"seeds": [0], "align": {"n_pairs": [50]}, "data": {"n_pool": 400, "n_test": 200}},
    "decapbench": {
        "seeds": [0],
        "data": {"n_images": 16},
        "sft": {"steps": 20},
        "dpo": {"steps": 5},
        "feedquill": {"train_scenes": 64, "pref_scenes": 16, "eval_scenes": 16},
    },
    "flat": {
        "seeds": [0],
        "data": {"n_authors": 24},
        "finetune": {"steps": 10},
        "unlearn": {"steps": 5, "methods": ["ga", "flat_kl"]},
    },
    "grf_masking": {
        "seeds": [0],
        "data": {"n_train": 1024, "n_test": 256},
        "train": {"steps": 20, "warmup_steps": 5},
        "clouds": {"n_train": 64, "n_test": 32, "steps": 20},
    },
    "heartlang": {"seeds": [0]},
    "hrf": {
        "seeds": [0],
        "data": {
            "n_train": 10000,
            "n_eval": 2000,
            "n_val": 2000,
            "mnist_train": 2000,
            "mnist_eval": 500,
            "mnist_val": 500,
        },
        "train": {"steps": 20, "image_steps": 20},
    },
    "knots": {
        "seeds": [0],
        "data": {"max_train": 256, "n_val": 64, "n_test": 64},
        "lora": {"steps": 20, "head_steps": 10},
    },
    "mm_ego": {"seeds": [0]},
    "mothernet": {"seeds": [0], "prior": {"datasets": 64}, "train": {"steps": 20}},
    "mtsam": {"seeds": [0], "data": {"n_train": 16, "n_test": 8}, "train": {"steps": 20, "warmup_steps": 5}},
    "nsot": {
        "seeds": [0],
        "data": {"n_train": 64, "n_test": 32, "superset_points": 4096},
        "train": {"steps": 20, "batch_size": 32, "betas": []},
        "eval": {"n_generated": 32},
    },
    "nutribench": {"seeds": [0]},
    "oc_flow": {"seeds": [0]},
    "preferdiff": {"seeds": [0], "train": {"epochs": 1}},
    "pyramid_flow": {"seeds": [0], "train": {"steps": 20, "warmup_steps": 5}, "eval": {"n_clips": 16}},
    "star": {"seeds": [0]},
    "tvm": {"seeds": [0], "verifier": {"steps": 20}},
}


def _peak_bytes(device: str) -> int:
    if device == "cuda":
        return int(torch.cuda.max_memory_allocated())
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def check(slug: str, overrides: dict[str, Any] | None = None, paper: bool = True) -> list[dict[str, Any]]:
    """Run ``slug``'s stages up to its last training stage; one row per training stage (seconds, optimiser
    steps, steps/s, peak memory). ``overrides`` replace :data:`SHORT`; ``paper=False`` starts from the
    ``cpu`` defaults instead of the paper preset (the CPU test)."""
    pipeline = registry.get(slug)
    given = merge_trees({"scale": "paper"} if paper else {}, SHORT.get(slug, {}) if overrides is None else overrides)
    params = validate(pipeline.params_model, given, slug)
    last = max((i for i, s in enumerate(pipeline.stages) if s.gpu), default=-1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = [0]
    hook = register_optimizer_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{slug}-") as folder:
            for stage in pipeline.stages[: last + 1]:
                ctx = StageContext(
                    pipeline=pipeline, stage=stage, params=params, root=Path(folder), progress=False, project=Path.cwd()
                )
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                    torch.cuda.synchronize()
                steps[0], started = 0, time.perf_counter()
                run_stage(ctx)
                if device == "cuda":
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - started
                if stage.gpu:
                    rows.append(
                        {
                            "paper": slug,
                            "stage": stage.name,
                            "device": device,
                            "seconds": round(seconds, 2),
                            "optimiser steps": steps[0],
                            "steps/s": round(steps[0] / seconds, 2) if seconds > 0 else None,
                            "peak memory (GiB)": round(_peak_bytes(device) / 2**30, 3),
                        }
                    )
    finally:
        hook.remove()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*", help="papers to check (default: all)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for slug in args.slugs or registry.slugs():
        try:
            rows += check(slug)
        except Exception as err:  # one paper's failure is reported, the others go on
            traceback.print_exc(limit=2)
            rows.append(
                {
                    "paper": slug,
                    "stage": "FAILED",
                    "device": "",
                    "seconds": None,
                    "optimiser steps": None,
                    "steps/s": None,
                    "peak memory (GiB)": None,
                    "error": str(err)[:200],
                }
            )
        print(rows[-1], flush=True)
    columns = ["paper", "stage", "device", "seconds", "optimiser steps", "steps/s", "peak memory (GiB)"]
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join("" if row.get(c) is None else str(row[c]) for c in columns) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 1 if any(r["stage"] == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
