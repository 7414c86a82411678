"""flat's benchmark sources (one paper's wiring, kept out of ``pipeline.py`` so that it reads like the method):
TOFU's own forget and retain files, checked to share no QA, or the synthetic fictitious authors split into forget
and retain authors; and the seeded subset of retain QAs that every evaluation scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from components.unlearning import AuthorConfig, TofuFormatError, author_rows, read_tofu_file
from components.unlearning.tofu_file import overlap_problem
from paperflows import StageInputError, derive_seed
from pipelines.flat.params import DataParams

Rows = list[dict[str, Any]]


def forget_and_retain(d: DataParams, data_path: Callable[[str], Path]) -> tuple[Rows, Rows, dict[str, Any]]:
    """The forget and retain QAs (TOFU's fields) and a description of their source for the metrics: TOFU's two
    files when ``d.tofu_path`` is given (read in full here; checked with the params before any work), else the
    synthetic authors."""
    if d.tofu_path is not None:
        try:
            forget = read_tofu_file(data_path(d.tofu_path), split="forget")
            retain = read_tofu_file(data_path(d.tofu_retain_path), split="retain")
        except (FileNotFoundError, TofuFormatError) as err:
            raise StageInputError(f"flat.data: {err}") from None
        shared = overlap_problem(d.tofu_path, d.tofu_retain_path, forget, retain)  # as the params were checked
        if shared is not None:
            raise StageInputError(f"flat.data.tofu_retain_path: {shared}")
        return forget, retain, {"source": "tofu", "forget_file": d.tofu_path, "retain_file": d.tofu_retain_path}
    rows = author_rows(
        AuthorConfig(
            n_authors=d.n_authors,
            forget_authors=d.forget_authors,
            n_perturbed=d.n_perturbed,
            attributes=tuple(d.attributes),
            seed=d.seed,
        )
    )
    forget, retain = [r for r in rows if r["split"] == "forget"], [r for r in rows if r["split"] == "retain"]
    return forget, retain, {"source": "synthetic authors", "authors": d.n_authors, "forget_authors": d.forget_authors}


def mark_evaluated(retain: Rows, d: DataParams) -> int:
    """Flag (``evaluated``) a seeded draw of ``d.retain_eval`` retain QAs among those with a perturbed answer (the
    truth ratio needs one); the number flagged."""
    scorable = [i for i, r in enumerate(retain) if r["perturbed_answer"] is not None]
    rng = np.random.default_rng(derive_seed(d.seed, "retain_eval"))
    chosen = set(rng.choice(scorable, size=min(d.retain_eval, len(scorable)), replace=False).tolist())
    for i, row in enumerate(retain):
        row["evaluated"] = i in chosen
    return len(chosen)
