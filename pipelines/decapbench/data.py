"""decapbench's benchmark sources (one paper's wiring, kept out of ``pipeline.py`` so that it reads like the
method): the real oracle and candidate JSONL files, checked against the images folder, or the synthetic
scene-graph world with its simulated captions and "human" scores, per seed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.captions.decapbench_files import DecapbenchFormatError, missing_images, read_benchmark
from components.captions.simulator import SimulatorConfig, benchmark_rows, simulate_captions
from components.captions.world import Scene, make_scenes
from paperflows import StageInputError, derive_seed
from pipelines.decapbench.params import DataParams, DecapbenchParams

Rows = list[dict[str, Any]]


def real_benchmark(d: DataParams, data_path: Callable[[str], Path]) -> tuple[Rows, Rows, list[Scene]]:
    """The user's oracle and candidate rows (and no scenes: real images have no scene graph); every image a
    candidate names must be in ``d.images_dir`` when one is given."""
    try:
        oracle, candidates = read_benchmark(data_path(d.oracle_path), data_path(d.candidates_path))
    except DecapbenchFormatError as err:
        raise StageInputError(f"decapbench.data: {err}") from None
    if d.images_dir and (missing := missing_images(candidates, data_path(d.images_dir))):
        raise StageInputError(
            f"decapbench.data.images_dir: {len(missing)} image(s) named by the candidates are "
            f"not in {data_path(d.images_dir)} (the first at candidate line {missing[0]})"
        )
    return oracle, candidates, []


def synthetic_benchmark(p: DecapbenchParams) -> tuple[Rows, Rows, list[Scene]]:
    """Per seed: scenes drawn from the scene-graph world, captions simulated at the configured coverage,
    hallucination, filler and paraphrase with their "human" scores; the oracle and candidate rows and the
    scenes."""
    d, c = p.data, p.captions
    sim = SimulatorConfig(
        coverage=tuple(c.coverage),
        hallucination=tuple(c.hallucination),
        max_fillers=c.max_fillers,
        paraphrase=c.paraphrase,
        typo_rate=c.typo_rate,
        extra_rate=c.extra_rate,
        human_noise=c.human_noise,
        human=c.human,
        raters=c.raters,
        rater_noise=c.rater_noise,
        hallucination_weight=c.hallucination_weight,
    )
    oracle: Rows = []
    candidates: Rows = []
    scenes: list[Scene] = []
    for seed in p.seeds:
        drawn = make_scenes(d.n_images, derive_seed(seed, "scenes"), d.min_objects, d.max_objects, f"s{seed}")
        captions, human = simulate_captions(drawn, sim, derive_seed(seed, "captions"))
        rows = benchmark_rows(drawn, captions, human, seed)
        oracle, candidates, scenes = oracle + rows[0], candidates + rows[1], scenes + drawn
    return oracle, candidates, scenes
