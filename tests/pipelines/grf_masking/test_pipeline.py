"""grf_masking: one tiny Prefect run end to end and the params rules (a malformed MNIST folder refused before work:
a row of tests/reliability/test_bad_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.io import load_json, load_table
from paperflows.params import ParamsError, validate
from paperflows.report import read_report
from pipelines.grf_masking.params import GrfMaskingParams
from pipelines.grf_masking.pipeline import ACCURACY, PIPELINE, SCALING_GRAPHS
from tests.components.data.test_mnist_idx import mnist_folder

TINY = {
    "seeds": [0, 1],
    "data": {"n_train": 100, "n_test": 100},
    "model": {"patch_size": 7, "d_model": 8, "n_heads": 2, "n_layers": 1},
    "grf": {"n_walks": 2, "k_max": 2},
    "train": {"steps": 3, "batch_size": 8},
    "clouds": {
        "families": ["torus", "chair"],
        "n_train": 4,
        "n_test": 3,
        "n_points": 16,
        "knn_k": 3,
        "steps": 3,
        "batch_size": 4,
    },
    "mask_error": {"grid": 4, "walks": [1, 2, 4], "repeats": 2},
    "scaling": {
        "graph": "knn",
        "knn_k": 3,
        "sizes": [16, 36, 64],
        "dense_max_n": 36,
        "fit_min_n": 16,
        "d_head": 4,
        "repeats": 1,
    },
}


def test_flow_smoke(project: Path, run_flow_and_check, tmp_path: Path) -> None:
    """The whole flow at tiny size, MNIST read from a small folder of IDX files (data.mnist_path)."""
    folder = mnist_folder(tmp_path / "mnist-idx", n_train=120, n_test=100)
    params = GrfMaskingParams.model_validate(
        {
            **TINY,
            "data": {**TINY["data"], "mnist_path": str(folder)},
            "train": {**TINY["train"], "seeds": [1]},  # the ViT and the scaling study on one of the two seeds
            "scaling": {**TINY["scaling"], "seeds": [0]},
        }
    )
    report = run_flow_and_check(PIPELINE, params, project)
    assert [r["variant"] for r in report["rows"]] == ["Linear attention (unmasked)", "Linear + GRF mask (O(N), ours)"]
    assert report["rows"][1]["paper ImageNet top-1 (%)"] == "linear + 3.7"
    assert {"point clouds test accuracy (%)", "point clouds train accuracy (%)"} <= set(report["rows"][0])
    assert [(c["id"], c["headline"]) for c in report["claims"]] == [
        ("grf_ge_unmasked_clouds", True),
        ("grf_ge_unmasked", False),
    ]
    root = next((project / "runs" / "grf_masking").iterdir())
    seeds = {(r["task"], int(r["seed"])) for r in load_table(root / ACCURACY) if r["variant"] == "linear"}
    assert seeds == {("mnist", 1), ("point_clouds", 0), ("point_clouds", 1)}
    assert {r["seed"] for r in load_table(root / SCALING_GRAPHS)} == {0}
    checks = {c["id"]: c["passed"] for c in report["checks"]}
    assert checks["modulation_nonnegative"] and "mask_error_inverse_sqrt" in checks
    # the machine's measurements (time, memory) are timed checks, apart from the tracked report.json
    whole = read_report(root / "report.json")
    timed = {c["id"] for c in whole["checks"]} - {c["id"] for c in load_json(root / "report.json")["checks"]}
    assert timed == {
        "grf_time_linear",
        "grf_memory_linear",
        "dense_time_quadratic",
        "dense_memory_quadratic",
        "peak_memory_measured",
    }
    # the dense mask stops at scaling.dense_max_n; its exponent is fitted on 2 sizes, the GRF's on 3
    dense = next(c for c in whole["checks"] if c["id"] == "dense_time_quadratic")
    assert "16..36" in dense["evidence"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"train": {"variants": ["linear", "linear"]}}, "variants repeat"),
        ({"train": {"variants": ["performer"]}}, "grf_masking.train.variants"),
        ({"model": {"d_model": 30, "n_heads": 4}}, "not divisible"),
        ({"grf": {"p_halt": 1.0}}, "grf_masking.grf.p_halt"),
        ({"scaling": {"sizes": [512, 256, 1024]}}, "sizes must increase"),
        ({"scaling": {"sizes": [512, 1024, 2048], "dense_max_n": 256}}, "dense mask would not run"),
        ({"mask_error": {"walks": [1, 1, 2]}}, "walks must increase"),
        ({"clouds": {"families": ["chair", "chair"]}}, "families repeat"),
        ({"clouds": {"families": ["sofa", "chair"]}}, "grf_masking.clouds.families"),
        ({"clouds": {"n_points": 8, "knn_k": 8}}, "needs more points"),
        ({"seeds": [0, 1], "train": {"seeds": [1, 2]}}, r"train.seeds \[2\] are not among the run's seeds \[0, 1\]"),
        ({"train": {"seeds": [0, 0]}}, "seeds repeat"),
        ({"seeds": [0, 1], "scaling": {"seeds": [3]}}, r"scaling.seeds \[3\] are not among"),
    ],
)
def test_bad_params_name_the_key(section: dict, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        validate(GrfMaskingParams, section, "grf_masking")


def test_paper_preset_reaches_32k_tokens() -> None:
    paper = GrfMaskingParams(scale="paper")
    assert paper.scaling.sizes[-1] >= 32768 and len(paper.seeds) >= 3 and paper.train.steps == 20_000


def test_evidence_preset_trains_the_two_compared_variants_to_1500_steps() -> None:
    evidence = GrfMaskingParams(scale="evidence")
    assert evidence.train.variants == ["linear", "grf_mask"] and len(evidence.seeds) == 12
    assert evidence.seeds_of("train") == evidence.seeds_of("scaling") == [0, 1, 2]
    assert GrfMaskingParams().seeds_of("scaling") == GrfMaskingParams().seeds
    assert evidence.clouds.steps == 1500 and evidence.clouds.n_train == 200
